//! Rulebooks: versions per tenant, drafts, and publishing. Exactly one rulebook of a
//! tenant is active at a time: publishing retires the active one and activates the new
//! one in one transaction, and a partial unique index makes two active rulebooks
//! impossible even when publishes race; the loser of a race retries.

use schemas::rulebook::{Rule, Rulebook, RulebookStatus};

use super::audit::AuditEntry;
use super::error::parsed;
use super::{Store, StoreError};
use crate::clock::{ms_to_rfc3339, now_ms};

#[derive(sqlx::FromRow)]
struct RulebookRow {
    rulebook_id: String,
    version: i64,
    name: String,
    rules: String,
    status: String,
    created_at: i64,
    published_at: Option<i64>,
}

impl TryFrom<RulebookRow> for Rulebook {
    type Error = StoreError;

    /// Rules that do not parse are an error: read as no rules, a corrupt rulebook would
    /// approve every claim.
    fn try_from(r: RulebookRow) -> Result<Self, StoreError> {
        let id = &r.rulebook_id;
        Ok(Rulebook {
            status: parsed(RulebookStatus::parse(&r.status).ok_or(&r.status), || {
                format!("rulebook {id}: status")
            })?,
            rules: parsed(serde_json::from_str::<Vec<Rule>>(&r.rules), || {
                format!("rulebook {id}: rules")
            })?,
            rulebook_id: r.rulebook_id,
            version: r.version,
            name: r.name,
            created_at: ms_to_rfc3339(r.created_at),
            published_at: r.published_at.map(ms_to_rfc3339),
        })
    }
}

const COLUMNS: &str = "rulebook_id, version, name, rules, status, created_at, published_at";

impl Store {
    /// Stores a draft with the tenant's next version number.
    pub async fn create_rulebook(
        &self,
        tenant_id: &str,
        rulebook_id: &str,
        name: &str,
        rules: &[Rule],
        actor: &str,
    ) -> Result<Rulebook, StoreError> {
        let rules_json =
            serde_json::to_string(rules).map_err(|e| StoreError::Config(e.to_string()))?;
        // Two creations may pick the same next version; the unique constraint refuses
        // the second, which then takes the following number.
        for _ in 0..20 {
            let now = now_ms();
            let entry = AuditEntry::new(
                tenant_id,
                actor,
                "rulebook.created",
                ("rulebook", rulebook_id),
                serde_json::json!({ "name": name, "rules": rules }),
            );
            let change = sqlx::query(
                "INSERT INTO rulebooks (rulebook_id, tenant_id, version, name, rules, status, created_at) \
                 SELECT $1, $2, COALESCE(MAX(version), 0) + 1, $3, $4, 'draft', $5 FROM rulebooks WHERE tenant_id = $2",
            )
            .bind(rulebook_id)
            .bind(tenant_id)
            .bind(name)
            .bind(&rules_json)
            .bind(now);
            match self.audited(change, entry).await {
                Ok(_) => {
                    return self
                        .rulebook(tenant_id, rulebook_id)
                        .await?
                        .ok_or(StoreError::NotFound)
                }
                Err(StoreError::Conflict(_)) => continue,
                Err(other) => return Err(other),
            }
        }
        Err(StoreError::Conflict(
            "could not allocate a rulebook version".into(),
        ))
    }

    pub async fn rulebook(
        &self,
        tenant_id: &str,
        rulebook_id: &str,
    ) -> Result<Option<Rulebook>, StoreError> {
        let row = sqlx::query_as::<_, RulebookRow>(&format!(
            "SELECT {COLUMNS} FROM rulebooks WHERE tenant_id = $1 AND rulebook_id = $2"
        ))
        .bind(tenant_id)
        .bind(rulebook_id)
        .fetch_optional(self.writer())
        .await?;
        row.map(Rulebook::try_from).transpose()
    }

    /// The id and version of the tenant's active rulebook: what intake records on a
    /// claim. Its rules are not read here; the rules stage reads and compiles them, and
    /// parks the claims of a rulebook that cannot be (see `stages::runner`).
    pub async fn active_rulebook_version(
        &self,
        tenant_id: &str,
    ) -> Result<Option<(String, i64)>, StoreError> {
        Ok(sqlx::query_as::<_, (String, i64)>(
            "SELECT rulebook_id, version FROM rulebooks WHERE tenant_id = $1 AND status = 'active'",
        )
        .bind(tenant_id)
        .fetch_optional(self.reader())
        .await?)
    }

    pub async fn active_rulebook(&self, tenant_id: &str) -> Result<Option<Rulebook>, StoreError> {
        let row = sqlx::query_as::<_, RulebookRow>(&format!(
            "SELECT {COLUMNS} FROM rulebooks WHERE tenant_id = $1 AND status = 'active'"
        ))
        .bind(tenant_id)
        .fetch_optional(self.reader())
        .await?;
        row.map(Rulebook::try_from).transpose()
    }

    /// Rulebooks newest version first, below version `before` (exclusive).
    pub async fn rulebooks(
        &self,
        tenant_id: &str,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<Rulebook>, StoreError> {
        let rows = sqlx::query_as::<_, RulebookRow>(&format!(
            "SELECT {COLUMNS} FROM rulebooks WHERE tenant_id = $1 AND version < $2 ORDER BY version DESC LIMIT $3"
        ))
        .bind(tenant_id)
        .bind(before.unwrap_or(i64::MAX))
        .bind(limit)
        .fetch_all(self.reader())
        .await?;
        rows.into_iter().map(Rulebook::try_from).collect()
    }

    /// Makes the rulebook the tenant's only active one (publishing the active one again
    /// changes nothing; a retired one may be published again, to roll back).
    pub async fn publish_rulebook(
        &self,
        tenant_id: &str,
        rulebook_id: &str,
        actor: &str,
    ) -> Result<Rulebook, StoreError> {
        for _ in 0..50 {
            match self.try_publish(tenant_id, rulebook_id, actor).await {
                Err(StoreError::Conflict(_)) => {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    continue;
                }
                other => other?,
            }
            return self
                .rulebook(tenant_id, rulebook_id)
                .await?
                .ok_or(StoreError::NotFound);
        }
        Err(StoreError::Conflict(
            "the rulebook could not be published; try again".into(),
        ))
    }

    async fn try_publish(
        &self,
        tenant_id: &str,
        rulebook_id: &str,
        actor: &str,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let mut tx = self.writer().begin().await?;
        // Publishes of one tenant take turns on the tenant's row: without this, two
        // racing transactions each hold a row the other needs and PostgreSQL aborts one
        // as a deadlock. (SQLite has a single writer; the update is harmless there.)
        sqlx::query("UPDATE tenants SET tenant_id = tenant_id WHERE tenant_id = $1")
            .bind(tenant_id)
            .execute(&mut *tx)
            .await?;
        let status: Option<String> = sqlx::query_scalar(
            "SELECT status FROM rulebooks WHERE tenant_id = $1 AND rulebook_id = $2",
        )
        .bind(tenant_id)
        .bind(rulebook_id)
        .fetch_optional(&mut *tx)
        .await?;
        match status.as_deref() {
            None => return Err(StoreError::NotFound),
            Some("active") => return Ok(()),
            Some(_) => {}
        }
        sqlx::query(
            "UPDATE rulebooks SET status = 'retired' WHERE tenant_id = $1 AND status = 'active'",
        )
        .bind(tenant_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE rulebooks SET status = 'active', published_at = $1 WHERE tenant_id = $2 AND rulebook_id = $3")
            .bind(now)
            .bind(tenant_id)
            .bind(rulebook_id)
            .execute(&mut *tx)
            .await?;
        let entry = AuditEntry::new(
            tenant_id,
            actor,
            "rulebook.published",
            ("rulebook", rulebook_id),
            serde_json::json!({}),
        );
        self.append_audit_in(&mut tx, &[entry]).await?;
        tx.commit().await?;
        Ok(())
    }
}
