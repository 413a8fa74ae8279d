//! The writes of `claims replay` (contract part 2: Operations and analysts) that the
//! live service makes elsewhere: the tenants a rebuilt claim belongs to, the marks a
//! replacement leaves on the claim it replaces, and the officers' decisions on review
//! tasks. Each is unconditional where the live write is guarded, because the topics
//! hold only what the guard let through.

use super::TaskDecision;
use super::{Store, StoreError};
use crate::clock::now_ms;

impl Store {
    /// Whether the store holds no claim and no decision: `claims replay` builds into an
    /// empty database only, so that nothing of another history mixes in.
    pub async fn holds_no_claims(&self) -> Result<bool, StoreError> {
        let claims: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM claims")
            .fetch_one(self.reader())
            .await?;
        let decided: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM audit_records WHERE action = 'claim.decided'")
                .fetch_one(self.reader())
                .await?;
        Ok(claims == 0 && decided == 0)
    }

    /// Tenants by id alone, for claims rebuilt from the topics: a tenant's name,
    /// settings, users and keys are configuration, not on any topic, and stay as the
    /// operator sets them (see docs/decisions.md, "Rebuilding from the topics").
    pub async fn ensure_tenants_in(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        tenant_ids: &[&str],
    ) -> Result<(), StoreError> {
        for id in tenant_ids {
            sqlx::query(
                "INSERT INTO tenants (tenant_id, name, settings, created_at) VALUES ($1, $2, '{}', $3) \
                 ON CONFLICT (tenant_id) DO NOTHING",
            )
            .bind(id)
            .bind(id)
            .bind(now_ms())
            .execute(&mut **tx)
            .await?;
        }
        Ok(())
    }

    /// Marks `replaced` superseded by `by`: every replacement on the intake topic was
    /// admitted only once it superseded the claim it names.
    pub async fn supersede_replayed(
        &self,
        tenant_id: &str,
        replaced: &str,
        by: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE claims SET superseded_by = $1 WHERE tenant_id = $2 AND claim_id = $3")
            .bind(by)
            .bind(tenant_id)
            .bind(replaced)
            .execute(self.writer())
            .await?;
        Ok(())
    }

    /// An officer's decision on its review task, as `claims.workflow` carries it.
    pub async fn complete_task_replayed(
        &self,
        tenant_id: &str,
        task_id: &str,
        officer: &str,
        d: &TaskDecision<'_>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE review_tasks SET status = 'done', assignee = $1, decision = $2, decided_at = $3, \
             note = $4, approved_amount = $5, updated_at = $6 WHERE tenant_id = $7 AND task_id = $8",
        )
        .bind(officer)
        .bind(d.action.as_str())
        .bind(d.at)
        .bind(d.note)
        .bind(d.approved_amount)
        .bind(d.at)
        .bind(tenant_id)
        .bind(task_id)
        .execute(self.writer())
        .await?;
        Ok(())
    }
}

/// The snapshot indexes a rebuild builds once at its end: the one keyed by member. A
/// rebuild writes claims and decisions in about the order they were made (see
/// [`Bus::pages`](crate::bus::Bus::pages)), so the keys of the other indexes (by time
/// received, by status then time, by claim id, by task status and priority then
/// time) grow with its writes, and each write lands in a few of their last pages. A
/// member's claims are spread over the whole history: kept up to date, an index by
/// member costs every insert a descent to a page anywhere. At a million claims,
/// making all five non-unique indexes again at the end took 7 s, the one by member
/// alone 1.4 s, and the four others kept up to date cost the load nothing measurable.
const REBUILT_AT_END: &str = "'claims_by_member_amount'";

impl Store {
    /// Drops the snapshot indexes of [`REBUILT_AT_END`] (none of them is unique, and no
    /// write of a rebuild reads them), and answers the statements that make them again
    /// (see [`Self::remake_indexes`]): built once from the rows, an index costs a sort.
    pub async fn drop_indexes_made_at_end(&self) -> Result<Vec<String>, StoreError> {
        let sql = match self.backend() {
            super::Backend::Sqlite => format!(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL \
                 AND name IN ({REBUILT_AT_END}) AND sql NOT LIKE 'CREATE UNIQUE%' ORDER BY name"
            ),
            super::Backend::Postgres => format!(
                "SELECT indexname::TEXT, indexdef::TEXT FROM pg_indexes WHERE schemaname = current_schema() \
                 AND indexname IN ({REBUILT_AT_END}) AND indexdef NOT LIKE 'CREATE UNIQUE%' ORDER BY indexname"
            ),
        };
        let found: Vec<(String, String)> = sqlx::query_as(&sql).fetch_all(self.reader()).await?;
        for (name, _) in &found {
            sqlx::query(&format!("DROP INDEX {name}"))
                .execute(self.writer())
                .await?;
        }
        Ok(found.into_iter().map(|(_, sql)| sql).collect())
    }

    /// Makes the indexes [`Self::drop_indexes_made_at_end`] dropped.
    pub async fn remake_indexes(&self, statements: &[String]) -> Result<(), StoreError> {
        for sql in statements {
            sqlx::query(sql).execute(self.writer()).await?;
        }
        Ok(())
    }
}
