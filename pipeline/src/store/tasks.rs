//! Review tasks: created by the snapshot writer for flagged claims, held and decided by
//! officers. Who holds a task is settled here, by conditional updates, so that of two
//! officers racing for one task exactly one wins and the other hears 409 at once.

use schemas::claim::Reason;
use schemas::workflow::{Task, TaskAction, TaskStatus};

use super::audit::AuditEntry;
use super::error::parsed;
use super::{Store, StoreError};
use crate::clock::ms_to_rfc3339;

#[derive(sqlx::FromRow)]
struct TaskRow {
    task_id: String,
    claim_id: String,
    status: String,
    assignee: Option<String>,
    priority: i64,
    reasons: String,
    created_at: i64,
    decision: Option<String>,
    decided_at: Option<i64>,
    approved_amount: Option<i64>,
    note: Option<String>,
}

impl TryFrom<TaskRow> for Task {
    type Error = StoreError;

    fn try_from(r: TaskRow) -> Result<Self, StoreError> {
        let id = &r.task_id;
        let decision = match r.decision.as_deref() {
            Some(d) => Some(parsed(TaskAction::parse(d).ok_or(d), || {
                format!("task {id}: decision")
            })?),
            None => None,
        };
        Ok(Task {
            status: parsed(TaskStatus::parse(&r.status).ok_or(&r.status), || {
                format!("task {id}: status")
            })?,
            reasons: parsed(serde_json::from_str::<Vec<Reason>>(&r.reasons), || {
                format!("task {id}: reasons")
            })?,
            task_id: r.task_id,
            claim_id: r.claim_id,
            assignee: r.assignee,
            priority: r.priority,
            created_at: ms_to_rfc3339(r.created_at),
            decision,
            decided_at: r.decided_at.map(ms_to_rfc3339),
            approved_amount: r.approved_amount,
            note: r.note,
        })
    }
}

const COLUMNS: &str =
    "task_id, claim_id, status, assignee, priority, reasons, created_at, decision, decided_at, \
                       approved_amount, note";

/// The queue's order: priority, highest first, then oldest, then id.
fn task_cursor(t: &Task, created_at_ms: i64) -> String {
    format!("{}|{}|{}", t.priority, created_at_ms, t.task_id)
}

/// Why a task could not change as asked.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskRefusal {
    NotFound,
    /// The contract's 409 `CONFLICT`, with a message for the officer.
    Conflict(String),
}

/// An officer's decision on a task, as applied to its row.
#[derive(Debug, Clone)]
pub struct TaskDecision<'a> {
    pub action: TaskAction,
    pub note: Option<&'a str>,
    pub approved_amount: Option<i64>,
    pub at: i64,
}

impl Store {
    pub async fn task(&self, tenant_id: &str, task_id: &str) -> Result<Option<Task>, StoreError> {
        let row: Option<TaskRow> = sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM review_tasks WHERE tenant_id = $1 AND task_id = $2"
        ))
        .bind(tenant_id)
        .bind(task_id)
        .fetch_optional(self.reader())
        .await?;
        row.map(Task::try_from).transpose()
    }

    /// A page of the queue, highest priority first, then oldest. `after` is the cursor
    /// of the last task of the previous page ([`task_cursor`]).
    pub async fn tasks(
        &self,
        tenant_id: &str,
        status: Option<TaskStatus>,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<(Task, String)>, StoreError> {
        let after = match after {
            None => None,
            Some(c) => Some(parse_cursor(c).ok_or(StoreError::NotFound)?),
        };
        let mut sql = format!("SELECT {COLUMNS} FROM review_tasks WHERE tenant_id = $1");
        let mut n = 1;
        if status.is_some() {
            n += 1;
            sql.push_str(&format!(" AND status = ${n}"));
        }
        if after.is_some() {
            sql.push_str(&format!(
                " AND (priority < ${a} OR (priority = ${a} AND (created_at > ${b} OR (created_at = ${b} AND task_id > ${c}))))",
                a = n + 1,
                b = n + 2,
                c = n + 3
            ));
            n += 3;
        }
        sql.push_str(&format!(
            " ORDER BY priority DESC, created_at, task_id LIMIT ${}",
            n + 1
        ));
        let mut q = sqlx::query_as::<_, TaskRow>(&sql).bind(tenant_id);
        if let Some(s) = status {
            q = q.bind(s.as_str());
        }
        if let Some((p, c, t)) = &after {
            q = q.bind(*p).bind(*c).bind(t.clone());
        }
        let rows = q.bind(limit).fetch_all(self.reader()).await?;
        rows.into_iter()
            .map(|r| {
                let created = r.created_at;
                let t = Task::try_from(r)?;
                let cursor = task_cursor(&t, created);
                Ok((t, cursor))
            })
            .collect()
    }

    /// Gives the task to `user` if it is open (or already theirs).
    pub async fn claim_task(
        &self,
        tenant_id: &str,
        task_id: &str,
        user: &str,
        at: i64,
    ) -> Result<Result<Task, TaskRefusal>, StoreError> {
        let change = sqlx::query(
            "UPDATE review_tasks SET status = 'claimed', assignee = $1, updated_at = $2 \
             WHERE tenant_id = $3 AND task_id = $4 AND status = 'open'",
        )
        .bind(user)
        .bind(at)
        .bind(tenant_id)
        .bind(task_id);
        let entry = AuditEntry::new(
            tenant_id,
            user,
            "task.claimed",
            ("task", task_id),
            serde_json::json!({}),
        );
        if self.audited(change, entry).await? == 0 {
            return self.refusal(tenant_id, task_id, user, None).await;
        }
        self.read_back(tenant_id, task_id).await
    }

    /// Puts a task its holder no longer wants back in the queue.
    pub async fn release_task(
        &self,
        tenant_id: &str,
        task_id: &str,
        user: &str,
        note: Option<&str>,
        at: i64,
    ) -> Result<Result<Task, TaskRefusal>, StoreError> {
        let change = sqlx::query(
            "UPDATE review_tasks SET status = 'open', assignee = NULL, updated_at = $1 \
             WHERE tenant_id = $2 AND task_id = $3 AND status = 'claimed' AND assignee = $4",
        )
        .bind(at)
        .bind(tenant_id)
        .bind(task_id)
        .bind(user);
        let entry = AuditEntry::new(
            tenant_id,
            user,
            "task.released",
            ("task", task_id),
            serde_json::json!({ "note": note }),
        );
        if self.audited(change, entry).await? == 0 {
            return self
                .refusal(tenant_id, task_id, user, Some(TaskAction::Release))
                .await;
        }
        self.read_back(tenant_id, task_id).await
    }

    /// Marks a task held by `user` done with their decision, inside `tx`; the caller
    /// publishes the decision in the same transaction. Answers the task's claim id.
    pub(crate) async fn decide_task_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        tenant_id: &str,
        task_id: &str,
        user: &str,
        d: &TaskDecision<'_>,
    ) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "UPDATE review_tasks SET status = 'done', decision = $1, decided_at = $2, note = $3, \
             approved_amount = $4, updated_at = $2 \
             WHERE tenant_id = $5 AND task_id = $6 AND status = 'claimed' AND assignee = $7",
        )
        .bind(d.action.as_str())
        .bind(d.at)
        .bind(d.note)
        .bind(d.approved_amount)
        .bind(tenant_id)
        .bind(task_id)
        .bind(user)
        .execute(&mut **tx)
        .await?
        .rows_affected()
            == 1)
    }

    /// Why `user` could not claim the task (`action` None) or act on it, read after the
    /// conditional update missed.
    pub(crate) async fn refusal(
        &self,
        tenant_id: &str,
        task_id: &str,
        user: &str,
        action: Option<TaskAction>,
    ) -> Result<Result<Task, TaskRefusal>, StoreError> {
        let Some(task) = self.task(tenant_id, task_id).await? else {
            return Ok(Err(TaskRefusal::NotFound));
        };
        let why = match (task.status, task.assignee.as_deref()) {
            (TaskStatus::Done, _) => "the task is already done".to_owned(),
            (TaskStatus::Claimed, Some(a)) if a == user && action.is_none() => {
                // Claiming a task one already holds changes nothing.
                return Ok(Ok(task));
            }
            (TaskStatus::Claimed, Some(a)) if a != user => {
                "another officer holds the task".to_owned()
            }
            (TaskStatus::Open, _) if action.is_some() => format!(
                "claim the task before you {} it",
                action.map_or("", TaskAction::as_str)
            ),
            _ => "the task changed meanwhile; read it and try again".to_owned(),
        };
        Ok(Err(TaskRefusal::Conflict(why)))
    }

    async fn read_back(
        &self,
        tenant_id: &str,
        task_id: &str,
    ) -> Result<Result<Task, TaskRefusal>, StoreError> {
        Ok(self
            .task(tenant_id, task_id)
            .await?
            .ok_or(TaskRefusal::NotFound))
    }
}

fn parse_cursor(c: &str) -> Option<(i64, i64, String)> {
    let mut parts = c.splitn(3, '|');
    let p = parts.next()?.parse().ok()?;
    let created = parts.next()?.parse().ok()?;
    let id = parts.next()?.to_owned();
    Some((p, created, id))
}
