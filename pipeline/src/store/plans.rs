//! Benefit plans (contract part 2: Plans and members). A change applies to the claims
//! processed after it: the adjudicating stage reads the plan when it decides a claim.

use schemas::plan::{Benefits, CreatePlan, PatchPlan, Plan};

use super::audit::AuditEntry;
use super::error::parsed;
use super::{Store, StoreError};
use crate::clock::{ms_to_rfc3339, now_ms};

#[derive(sqlx::FromRow)]
struct PlanRow {
    plan_id: String,
    name: String,
    benefits: String,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<PlanRow> for Plan {
    type Error = StoreError;

    /// Benefits that do not parse are an error: read as none, the plan would pay
    /// every claim in full.
    fn try_from(r: PlanRow) -> Result<Self, StoreError> {
        let id = &r.plan_id;
        Ok(Plan {
            benefits: parsed(serde_json::from_str(&r.benefits), || {
                format!("plan {id}: benefits")
            })?,
            plan_id: r.plan_id,
            name: r.name,
            created_at: ms_to_rfc3339(r.created_at),
            updated_at: ms_to_rfc3339(r.updated_at),
        })
    }
}

const COLUMNS: &str = "plan_id, name, benefits, created_at, updated_at";

fn json(b: &Benefits) -> Result<String, StoreError> {
    serde_json::to_string(b).map_err(|e| StoreError::Config(e.to_string()))
}

impl Store {
    /// Creates a plan; `Conflict` when the id is taken in this tenant.
    pub async fn create_plan(
        &self,
        tenant_id: &str,
        p: &CreatePlan,
        actor: &str,
    ) -> Result<Plan, StoreError> {
        let now = now_ms();
        let benefits = json(&p.benefits)?;
        let entry = AuditEntry::new(
            tenant_id,
            actor,
            "plan.created",
            ("plan", p.plan_id.as_str()),
            serde_json::json!({ "name": p.name, "benefits": p.benefits }),
        );
        let change = sqlx::query(
            "INSERT INTO plans (tenant_id, plan_id, name, benefits, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $5)",
        )
        .bind(tenant_id)
        .bind(p.plan_id.as_str())
        .bind(&p.name)
        .bind(&benefits)
        .bind(now);
        self.audited(change, entry).await?;
        Ok(Plan {
            plan_id: p.plan_id.to_string(),
            name: p.name.clone(),
            benefits: p.benefits.clone(),
            created_at: ms_to_rfc3339(now),
            updated_at: ms_to_rfc3339(now),
        })
    }

    pub async fn plan(&self, tenant_id: &str, plan_id: &str) -> Result<Option<Plan>, StoreError> {
        let row = sqlx::query_as::<_, PlanRow>(&format!(
            "SELECT {COLUMNS} FROM plans WHERE tenant_id = $1 AND plan_id = $2"
        ))
        .bind(tenant_id)
        .bind(plan_id)
        .fetch_optional(self.reader())
        .await?;
        row.map(Plan::try_from).transpose()
    }

    /// Plans ordered by id, after `after` (exclusive), at most `limit`.
    pub async fn plans(
        &self,
        tenant_id: &str,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Plan>, StoreError> {
        let rows = sqlx::query_as::<_, PlanRow>(&format!(
            "SELECT {COLUMNS} FROM plans WHERE tenant_id = $1 AND plan_id > $2 ORDER BY plan_id LIMIT $3"
        ))
        .bind(tenant_id)
        .bind(after.unwrap_or(""))
        .bind(limit)
        .fetch_all(self.reader())
        .await?;
        rows.into_iter().map(Plan::try_from).collect()
    }

    /// Changes a plan's name or benefits (`NotFound` when it does not exist).
    pub async fn update_plan(
        &self,
        tenant_id: &str,
        plan_id: &str,
        patch: &PatchPlan,
        actor: &str,
    ) -> Result<Plan, StoreError> {
        let current = self
            .plan(tenant_id, plan_id)
            .await?
            .ok_or(StoreError::NotFound)?;
        let name = patch.name.as_ref().unwrap_or(&current.name);
        let benefits = patch.benefits.as_ref().unwrap_or(&current.benefits);
        let entry = AuditEntry::new(
            tenant_id,
            actor,
            "plan.updated",
            ("plan", plan_id),
            serde_json::json!({ "name": name, "benefits": benefits }),
        );
        let change = sqlx::query(
            "UPDATE plans SET name = $1, benefits = $2, updated_at = $3 WHERE tenant_id = $4 AND plan_id = $5",
        )
        .bind(name)
        .bind(json(benefits)?)
        .bind(now_ms())
        .bind(tenant_id)
        .bind(plan_id);
        self.audited(change, entry).await?;
        self.plan(tenant_id, plan_id)
            .await?
            .ok_or(StoreError::NotFound)
    }
}
