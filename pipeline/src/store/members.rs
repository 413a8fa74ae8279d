//! Members (contract part 2: Plans and members): created one at a time or imported in
//! bulk, upserted in one transaction per import.

use std::collections::{HashMap, HashSet};

use schemas::member::{Coverage, Member, NewMember, PatchMember, Sex};
use schemas::Date;

use super::audit::AuditEntry;
use super::error::parsed;
use super::{values_list, Store, StoreError};
use crate::clock::{ms_to_rfc3339, now_ms};

/// Rows per upsert: 8 values each, within SQLite's limit on bound values.
const ROWS_PER_UPSERT: usize = 2000;

#[derive(sqlx::FromRow)]
struct MemberRow {
    member_id: String,
    date_of_birth: String,
    sex: String,
    plan_id: String,
    coverage: String,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<MemberRow> for Member {
    type Error = StoreError;

    /// Coverage that does not parse is an error: read as none, the member would be
    /// refused every claim; read as always, paid every one.
    fn try_from(r: MemberRow) -> Result<Self, StoreError> {
        let id = &r.member_id;
        Ok(Member {
            date_of_birth: parsed(Date::parse(&r.date_of_birth).ok_or("not a date"), || {
                format!("member {id}: date_of_birth")
            })?,
            sex: parsed(Sex::parse(&r.sex).ok_or("not F, M or U"), || {
                format!("member {id}: sex")
            })?,
            coverage: parsed(serde_json::from_str(&r.coverage), || {
                format!("member {id}: coverage")
            })?,
            member_id: r.member_id,
            plan_id: r.plan_id,
            created_at: ms_to_rfc3339(r.created_at),
            updated_at: ms_to_rfc3339(r.updated_at),
        })
    }
}

const COLUMNS: &str = "member_id, date_of_birth, sex, plan_id, coverage, created_at, updated_at";

fn coverage_json(c: &[Coverage]) -> Result<String, StoreError> {
    serde_json::to_string(c).map_err(|e| StoreError::Config(e.to_string()))
}

fn details(m: &NewMember) -> serde_json::Value {
    serde_json::json!({ "plan_id": m.plan_id, "coverage": m.coverage })
}

/// Moves the tenant's roster version (see [`Store::roster_version`]); part of every
/// transaction that changes a member.
fn roster_moved(tenant_id: &str) -> super::AnyQuery<'_> {
    sqlx::query(
        "INSERT INTO member_rosters (tenant_id, version) VALUES ($1, 1) \
         ON CONFLICT (tenant_id) DO UPDATE SET version = member_rosters.version + 1",
    )
    .bind(tenant_id)
}

/// Whether an imported member was new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upserted {
    Created,
    Updated,
}

impl Store {
    /// Creates a member; `Conflict` when the id is taken in this tenant. The plan must
    /// exist (the caller checks; see [`Store::plan_ids`]).
    pub async fn create_member(
        &self,
        tenant_id: &str,
        m: &NewMember,
        actor: &str,
    ) -> Result<Member, StoreError> {
        let now = now_ms();
        let entry = AuditEntry::new(
            tenant_id,
            actor,
            "member.created",
            ("member", m.member_id.as_str()),
            details(m),
        );
        let change = sqlx::query(
            "INSERT INTO members (tenant_id, member_id, date_of_birth, sex, plan_id, coverage, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
        )
        .bind(tenant_id)
        .bind(m.member_id.as_str())
        .bind(m.date_of_birth.to_string())
        .bind(m.sex.as_str())
        .bind(m.plan_id.as_str())
        .bind(coverage_json(&m.coverage)?)
        .bind(now);
        self.audited_also(change, Some(roster_moved(tenant_id)), entry)
            .await?;
        self.member(tenant_id, m.member_id.as_str())
            .await?
            .ok_or(StoreError::NotFound)
    }

    pub async fn member(
        &self,
        tenant_id: &str,
        member_id: &str,
    ) -> Result<Option<Member>, StoreError> {
        let row = sqlx::query_as::<_, MemberRow>(&format!(
            "SELECT {COLUMNS} FROM members WHERE tenant_id = $1 AND member_id = $2"
        ))
        .bind(tenant_id)
        .bind(member_id)
        .fetch_optional(self.reader())
        .await?;
        row.map(Member::try_from).transpose()
    }

    /// The version of the tenant's roster: it moves with every change to its members
    /// (0 before the first), so members read while it stood are still current.
    pub async fn roster_version(&self, tenant_id: &str) -> Result<i64, StoreError> {
        Ok(
            sqlx::query_scalar::<_, i64>("SELECT version FROM member_rosters WHERE tenant_id = $1")
                .bind(tenant_id)
                .fetch_optional(self.reader())
                .await?
                .unwrap_or(0),
        )
    }

    /// The members of `member_ids` on the tenant's roster (those not on it are
    /// missing from the answer), in one query per 2,000 ids: what a stage reads for a
    /// batch of claims.
    pub async fn members_of(
        &self,
        tenant_id: &str,
        member_ids: &[&str],
    ) -> Result<Vec<Member>, StoreError> {
        let mut out = Vec::with_capacity(member_ids.len());
        for chunk in member_ids.chunks(ROWS_PER_UPSERT) {
            let sql = format!(
                "SELECT {COLUMNS} FROM members WHERE tenant_id = {} AND member_id IN ({})",
                super::placeholders(self.backend(), 1, 1),
                super::placeholders(self.backend(), 2, chunk.len())
            );
            let rows = chunk
                .iter()
                .fold(
                    sqlx::query_as::<_, MemberRow>(&sql).bind(tenant_id),
                    |q, m| q.bind(*m),
                )
                .fetch_all(self.reader())
                .await?;
            for r in rows {
                out.push(Member::try_from(r)?);
            }
        }
        Ok(out)
    }

    /// Changes a member's plan or coverage (`NotFound` when the member does not exist).
    pub async fn update_member(
        &self,
        tenant_id: &str,
        member_id: &str,
        patch: &PatchMember,
        actor: &str,
    ) -> Result<Member, StoreError> {
        let current = self
            .member(tenant_id, member_id)
            .await?
            .ok_or(StoreError::NotFound)?;
        let plan_id = patch
            .plan_id
            .as_ref()
            .map_or(current.plan_id.as_str(), |p| p.as_str());
        let coverage = patch.coverage.as_ref().unwrap_or(&current.coverage);
        let entry = AuditEntry::new(
            tenant_id,
            actor,
            "member.updated",
            ("member", member_id),
            serde_json::json!({ "plan_id": plan_id, "coverage": coverage }),
        );
        let change = sqlx::query(
            "UPDATE members SET plan_id = $1, coverage = $2, updated_at = $3 WHERE tenant_id = $4 AND member_id = $5",
        )
        .bind(plan_id)
        .bind(coverage_json(coverage)?)
        .bind(now_ms())
        .bind(tenant_id)
        .bind(member_id);
        self.audited_also(change, Some(roster_moved(tenant_id)), entry)
            .await?;
        self.member(tenant_id, member_id)
            .await?
            .ok_or(StoreError::NotFound)
    }

    /// The tenant's plan ids: what an import checks its members' plans against.
    pub async fn plan_ids(&self, tenant_id: &str) -> Result<HashSet<String>, StoreError> {
        let rows: Vec<(String,)> = sqlx::query_as("SELECT plan_id FROM plans WHERE tenant_id = $1")
            .bind(tenant_id)
            .fetch_all(self.reader())
            .await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    /// Upserts `members` in one transaction, in order: a member named twice ends as its
    /// last item says. Answers, per item, whether it created the member or updated it.
    pub async fn import_members(
        &self,
        tenant_id: &str,
        members: &[&NewMember],
        actor: &str,
    ) -> Result<Vec<Upserted>, StoreError> {
        if members.is_empty() {
            return Ok(Vec::new());
        }
        // The last item of each member is the one written.
        let mut last: HashMap<&str, usize> = HashMap::with_capacity(members.len());
        for (i, m) in members.iter().enumerate() {
            last.insert(m.member_id.as_str(), i);
        }
        let mut writes: Vec<usize> = last.values().copied().collect();
        writes.sort_unstable();
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        let mut stored: HashSet<String> = HashSet::new();
        for chunk in writes.chunks(ROWS_PER_UPSERT) {
            let read = format!(
                "SELECT member_id FROM members WHERE tenant_id = $1 AND member_id IN ({})",
                super::placeholders(self.backend(), 2, chunk.len())
            );
            let found: Vec<(String,)> = chunk
                .iter()
                .fold(sqlx::query_as(&read).bind(tenant_id), |q, &i| {
                    q.bind(members[i].member_id.as_str())
                })
                .fetch_all(&mut *tx)
                .await?;
            stored.extend(found.into_iter().map(|(id,)| id));
            let sql = format!(
                "INSERT INTO members (tenant_id, member_id, date_of_birth, sex, plan_id, coverage, created_at, updated_at) \
                 VALUES {} ON CONFLICT (tenant_id, member_id) DO UPDATE SET date_of_birth = excluded.date_of_birth, \
                 sex = excluded.sex, plan_id = excluded.plan_id, coverage = excluded.coverage, updated_at = excluded.updated_at",
                values_list(self.backend(), chunk.len(), 8)
            );
            let coverages = chunk
                .iter()
                .map(|&i| coverage_json(&members[i].coverage))
                .collect::<Result<Vec<_>, _>>()?;
            chunk
                .iter()
                .zip(&coverages)
                .fold(sqlx::query(&sql), |q, (&i, coverage)| {
                    let m = members[i];
                    q.bind(tenant_id)
                        .bind(m.member_id.as_str())
                        .bind(m.date_of_birth.to_string())
                        .bind(m.sex.as_str())
                        .bind(m.plan_id.as_str())
                        .bind(coverage.as_str())
                        .bind(now)
                        .bind(now)
                })
                .execute(&mut *tx)
                .await?;
        }
        // Items in input order: the first of a member new to the store created it.
        let mut seen: HashSet<&str> = HashSet::new();
        let outcomes: Vec<Upserted> = members
            .iter()
            .map(|m| {
                let id = m.member_id.as_str();
                if seen.insert(id) && !stored.contains(id) {
                    Upserted::Created
                } else {
                    Upserted::Updated
                }
            })
            .collect();
        let created = outcomes.iter().filter(|o| **o == Upserted::Created).count();
        let entry = AuditEntry::new(
            tenant_id,
            actor,
            "members.imported",
            ("member", "import"),
            serde_json::json!({ "items": members.len(), "created": created, "updated": members.len() - created }),
        );
        roster_moved(tenant_id).execute(&mut *tx).await?;
        self.append_audit_in(&mut tx, &[entry]).await?;
        tx.commit().await?;
        Ok(outcomes)
    }
}
