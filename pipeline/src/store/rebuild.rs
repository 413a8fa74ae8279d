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

/// The snapshot tables whose secondary indexes a rebuild builds once at its end.
const SNAPSHOT_TABLES: &str = "'claims', 'audit_records', 'review_tasks', 'member_accumulators'";

impl Store {
    /// Drops the snapshot tables' indexes that no write of a rebuild reads and that
    /// enforce nothing (not unique), and answers the statements that make them again:
    /// built once from the rows, an index costs a sort, where kept up to date it costs
    /// every insert and update a descent (see [`Self::remake_indexes`]).
    pub async fn drop_secondary_indexes(&self) -> Result<Vec<String>, StoreError> {
        let sql = match self.backend() {
            super::Backend::Sqlite => format!(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL \
                 AND tbl_name IN ({SNAPSHOT_TABLES}) AND sql NOT LIKE 'CREATE UNIQUE%' ORDER BY name"
            ),
            super::Backend::Postgres => format!(
                "SELECT indexname::TEXT, indexdef::TEXT FROM pg_indexes WHERE schemaname = current_schema() \
                 AND tablename IN ({SNAPSHOT_TABLES}) AND indexdef NOT LIKE 'CREATE UNIQUE%' ORDER BY indexname"
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

    /// Makes the indexes [`Self::drop_secondary_indexes`] dropped.
    pub async fn remake_indexes(&self, statements: &[String]) -> Result<(), StoreError> {
        for sql in statements {
            sqlx::query(sql).execute(self.writer()).await?;
        }
        Ok(())
    }
}
