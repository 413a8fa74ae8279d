//! Writing decisions: the claim's snapshot, a review task for a flagged claim and the
//! decision's audit record, in one transaction per batch. Each write is idempotent: the snapshot moves only
//! to a higher `version`, the audit record and the task are keyed by ids derived from the
//! claim, so a redelivered decision changes nothing.

use schemas::claim::{ClaimStatus, Outcome};
use schemas::receipt::EligibilityStatus;
use std::borrow::Cow;

use serde::Serialize;
use serde_json::value::RawValue;

use super::audit::{self, AuditEntry, PreparedEntry};
use super::{values_list, AnyQuery, Backend, Store, StoreError};
use crate::model::{Decision, Json, WrittenParts};

impl Decision {
    /// The decision's audit record.
    pub fn audit_entry(&self) -> AuditEntry {
        DecisionTexts::of(self).entry.entry
    }

    /// [`Self::audit_entry`] with the reasons, the lines, the fraud analysis and the
    /// trace as JSON already: the store writes them with the claim and the record on
    /// `claims.decided` too, and writing them once per claim is cheaper.
    fn audit_entry_with(
        &self,
        reasons: &RawValue,
        lines: Option<&RawValue>,
        fraud: Option<&RawValue>,
        trace: &RawValue,
    ) -> AuditEntry {
        let (actor, action) = match (&self.officer, self.outcome) {
            (None, _) => ("pipeline", "claim.decided"),
            (Some(o), Outcome::Declined) => (o.as_str(), "claim.declined"),
            (Some(o), _) => (o.as_str(), "claim.approved"),
        };
        let details = DecisionDetails {
            approved_amount: self.approved_amount,
            eligibility: self.eligibility,
            fraud,
            fraud_score: self.fraud.as_ref().map(|f| f.fraud_score),
            lines,
            outcome: self.outcome,
            reasons,
            reviews: self.reviews.as_deref(),
            rulebook_id: (!self.rulebook_id.is_empty()).then_some(self.rulebook_id.as_str()),
            rulebook_version: self.rulebook_version,
            rules_evaluated: self.trace.len(),
            status: self.status,
            task_id: self.task_id.as_deref(),
            trace,
        };
        AuditEntry {
            audit_id: self.audit_id.clone(),
            tenant_id: self.tenant_id.to_string(),
            at: self.decided_at_ms,
            actor: actor.to_owned(),
            action: action.to_owned(),
            entity_type: "claim".into(),
            entity_id: self.claim_id.clone(),
            details: json(&details).unwrap_or_else(|| "{}".into()),
        }
    }
}

/// The details of a decision's audit record: everything its decision receipt shows
/// (`GET /claims/{claim_id}/decision` is read from here alone, so it reads the same
/// after a restart or a rebuild). Its members come in the order of their names, as in
/// the records written before it was a type of its own.
#[derive(Serialize)]
struct DecisionDetails<'a> {
    approved_amount: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    eligibility: Option<EligibilityStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fraud: Option<&'a RawValue>,
    fraud_score: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lines: Option<&'a RawValue>,
    outcome: Outcome,
    reasons: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    reviews: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rulebook_id: Option<&'a str>,
    rulebook_version: i64,
    rules_evaluated: usize,
    status: ClaimStatus,
    task_id: Option<&'a str>,
    /// Every rule of the rulebook in order. (Records written before receipts kept only
    /// the rules that matched or failed; the others of that rulebook version evaluated
    /// to false.) A rule that did not match is written short: see
    /// [`TraceEntry`](crate::rules::TraceEntry).
    trace: &'a RawValue,
}

/// Decisions per statement: 15 bound values a row stays well under SQLite's 32,766.
const ROWS_PER_STATEMENT: usize = 1000;

/// A decision with what the store writes of it besides its plain columns.
#[derive(Debug)]
struct Row<'a> {
    d: &'a Decision,
    t: Cow<'a, DecisionTexts>,
}

/// A batch of decisions serialised for [`Store::write_decisions_in`], before the
/// writer is taken: their reasons and fraud analyses as JSON, and their audit entries.
#[derive(Debug)]
pub struct PreparedDecisions<'a> {
    rows: Vec<Row<'a>>,
}

impl<'a> PreparedDecisions<'a> {
    pub fn new(decisions: &'a [Decision]) -> Self {
        Self::with(decisions, Vec::new())
    }

    /// As [`Self::new`], with the texts of some decisions made ahead: `texts[i]`, when
    /// there is one, was made of `decisions[i]` as it is now (see [`DecisionTexts`]).
    pub fn with(decisions: &'a [Decision], texts: Vec<Option<DecisionTexts>>) -> Self {
        let mut texts = texts.into_iter();
        let rows = decisions
            .iter()
            .map(|d| Row {
                d,
                t: Cow::Owned(
                    texts
                        .next()
                        .flatten()
                        .unwrap_or_else(|| DecisionTexts::of(d)),
                ),
            })
            .collect();
        Self { rows }
    }

    /// As [`Self::new`], with the texts of every decision made ahead and kept by the
    /// caller: `texts[i]` made of `decisions[i]` as it is now.
    pub fn borrowing(decisions: &'a [Decision], texts: &'a [DecisionTexts]) -> Self {
        let rows = decisions
            .iter()
            .zip(texts)
            .map(|(d, t)| Row {
                d,
                t: Cow::Borrowed(t),
            })
            .collect();
        Self { rows }
    }
}

/// What the store writes of a decision besides its plain columns: its reasons, fraud
/// analysis, lines, pricing, visits and facts as JSON, and its audit entry. Made from
/// the decision as it is; a caller that makes them ahead of the write (a rebuild,
/// while the page before is written) must not change the decision between.
#[derive(Debug, Clone)]
pub struct DecisionTexts {
    reasons: Json,
    fraud: Option<Json>,
    /// None for a decision that leaves the claim's lines as they are.
    lines: Option<Json>,
    pricing: Option<Json>,
    /// The visits of the claim's count in its member's year, when it counts.
    visits: Option<String>,
    facts: Option<Json>,
    /// Written into the audit entry, and into the decision's record on `claims.decided`
    /// (see [`Self::parts`]).
    trace: Json,
    entry: PreparedEntry,
}

impl DecisionTexts {
    pub fn of(d: &Decision) -> Self {
        let reasons = Json::of(&d.reasons);
        let fraud = d.fraud.as_ref().map(Json::of);
        let lines = (!d.lines.is_empty()).then(|| match &d.lines_json {
            Some(told) => told.clone(),
            None => Json::of(&d.lines),
        });
        let trace = Json::of(&d.trace);
        let entry = d
            .audit_entry_with(
                reasons.raw(),
                lines.as_ref().map(Json::raw),
                fraud.as_ref().map(Json::raw),
                trace.raw(),
            )
            .into();
        Self {
            reasons,
            fraud,
            lines,
            // Kept for an officer's approval: only a claim under review needs it.
            pricing: d
                .pricing
                .as_ref()
                .filter(|_| d.status == ClaimStatus::PendingReview)
                .map(Json::of),
            visits: d.counted.as_ref().and_then(|(_, u)| json(&u.visits)),
            facts: d.facts.as_ref().map(Json::of),
            trace,
            entry,
        }
    }

    /// The decision's members as JSON, for its [`Written`](crate::model::Written) record.
    pub fn parts(&self) -> WrittenParts<'_> {
        WrittenParts {
            fraud: self.fraud.as_ref().map(Json::raw),
            reasons: self.reasons.raw(),
            trace: self.trace.raw(),
            lines: self.lines.as_ref().map(Json::raw),
            pricing: self.pricing.as_ref().map(Json::raw),
            facts: self.facts.as_ref().map(Json::raw),
        }
    }
}

fn json<T: serde::Serialize + ?Sized>(v: &T) -> Option<String> {
    serde_json::to_string(v).ok()
}

/// Which rows of a batch a write updates and which open a review task, and the text of
/// its statements, a chunk of rows each: updates first, then tasks.
#[derive(Debug)]
struct Writes {
    /// Per round, the rows whose claims it updates (see [`Writes::new`]).
    updates: Vec<Vec<usize>>,
    tasks: Vec<usize>,
    /// Held rows that count in their member's year.
    counts: Vec<usize>,
    /// Held automatic decisions on replacements and voids: the claim they replace
    /// leaves the member's accumulators.
    reversals: Vec<usize>,
    /// Held reprocess decisions that complete their claim: its review task closes.
    closures: Vec<usize>,
    sql: Vec<String>,
}

impl Writes {
    /// The writes of the `held` rows: each claim's held versions, oldest first, in
    /// rounds of one version per claim (an UPDATE … FROM whose source matches a row
    /// twice applies either one; and a later version, an officer's, leaves the lines,
    /// pricing and facts of the automatic one as they are, so the automatic one must be
    /// written too when both are in one batch); and the held rows pending review with a
    /// task.
    fn new(rows: &[Row<'_>], held: &[bool], backend: Backend) -> Self {
        let mut by_claim: std::collections::HashMap<(&str, &str), Vec<usize>> = Default::default();
        for (i, Row { d, .. }) in rows.iter().enumerate().filter(|(i, _)| held[*i]) {
            by_claim
                .entry((d.tenant_id.as_str(), d.claim_id.as_str()))
                .or_default()
                .push(i);
        }
        let mut updates: Vec<Vec<usize>> = Vec::new();
        for mut versions in by_claim.into_values() {
            versions.sort_by_key(|i| rows[*i].d.version);
            for (round, i) in versions.into_iter().enumerate() {
                if updates.len() <= round {
                    updates.push(Vec::new());
                }
                updates[round].push(i);
            }
        }
        updates.iter_mut().for_each(|r| r.sort_unstable());
        let tasks: Vec<usize> = (0..rows.len())
            .filter(|i| {
                let d = rows[*i].d;
                held[*i] && d.status == ClaimStatus::PendingReview && d.task_id.is_some()
            })
            .collect();
        let counts: Vec<usize> = (0..rows.len())
            .filter(|i| held[*i] && rows[*i].d.counted.is_some())
            .collect();
        let reversals: Vec<usize> = (0..rows.len())
            .filter(|i| {
                let d = rows[*i].d;
                held[*i] && d.version == 1 && d.replaces_claim_id.is_some()
            })
            .collect();
        let closures: Vec<usize> = (0..rows.len())
            .filter(|i| {
                let d = rows[*i].d;
                held[*i]
                    && d.version > 1
                    && d.officer.is_none()
                    && d.status == ClaimStatus::Completed
            })
            .collect();
        let sql = updates
            .iter()
            .flat_map(|round| round.chunks(ROWS_PER_STATEMENT))
            .map(|c| update_sql(backend, c.len()))
            .chain(
                tasks
                    .chunks(ROWS_PER_STATEMENT)
                    .map(|c| task_sql(backend, c.len())),
            )
            .chain(
                counts
                    .chunks(ROWS_PER_STATEMENT)
                    .map(|c| count_sql(backend, c.len())),
            )
            .chain(reversals.iter().map(|_| REVERSAL_SQL.to_owned()))
            .chain(closures.iter().map(|_| CLOSURE_SQL.to_owned()))
            .collect();
        Self {
            updates,
            tasks,
            counts,
            reversals,
            closures,
            sql,
        }
    }

    /// The statements, bound to `rows`: those the writes were planned on.
    fn bind<'q>(&'q self, rows: &'q [Row<'q>]) -> Vec<AnyQuery<'q>> {
        let updates = self
            .updates
            .iter()
            .flat_map(|round| round.chunks(ROWS_PER_STATEMENT));
        let tasks = self.tasks.chunks(ROWS_PER_STATEMENT);
        let mut sql = self.sql.iter();
        let mut bound = Vec::with_capacity(self.sql.len());
        for (chunk, sql) in updates.zip(sql.by_ref()) {
            bound.push(bind_updates(sqlx::query(sql), rows, chunk));
        }
        for (chunk, sql) in tasks.zip(sql.by_ref()) {
            bound.push(bind_tasks(sqlx::query(sql), rows, chunk));
        }
        for (chunk, sql) in self.counts.chunks(ROWS_PER_STATEMENT).zip(sql.by_ref()) {
            bound.push(bind_counts(sqlx::query(sql), rows, chunk));
        }
        for (i, sql) in self.reversals.iter().zip(sql.by_ref()) {
            let d = rows[*i].d;
            bound.push(
                sqlx::query(sql)
                    .bind(d.tenant_id.as_str())
                    .bind(d.member_id.as_str())
                    .bind(d.replaces_claim_id.as_deref()),
            );
        }
        for (i, sql) in self.closures.iter().zip(sql) {
            let d = rows[*i].d;
            bound.push(
                sqlx::query(sql)
                    .bind(d.decided_at_ms)
                    .bind(d.tenant_id.as_str())
                    .bind(d.claim_id.as_str()),
            );
        }
        bound
    }
}

async fn execute_all(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    statements: Vec<AnyQuery<'_>>,
) -> Result<(), StoreError> {
    for q in statements {
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

fn update_sql(backend: Backend, rows: usize) -> String {
    // VALUES columns are column1… on both backends.
    format!(
        "UPDATE claims SET status = v.column3, outcome = v.column4, approved_amount = v.column5, \
         fraud_score = v.column6, fraud = v.column7, audit_id = v.column8, reasons = v.column9, \
         task_id = v.column10, updated_at = v.column11, version = v.column12, \
         lines = COALESCE(v.column13, claims.lines), pricing = COALESCE(v.column14, claims.pricing), \
         facts = COALESCE(v.column15, claims.facts) \
         FROM (VALUES {}) AS v \
         WHERE claims.tenant_id = v.column1 AND claims.claim_id = v.column2 AND claims.version < v.column12",
        values_list(backend, rows, 15)
    )
}

/// The claim a replacement or a void replaces leaves its member's accumulators.
const REVERSAL_SQL: &str =
    "DELETE FROM member_accumulators WHERE tenant_id = $1 AND member_id = $2 AND claim_id = $3";

/// A claim decided again and no longer flagged: its review task is closed, with a
/// note that says why (the task's `decision` stays empty: no officer decided).
const CLOSURE_SQL: &str = "UPDATE review_tasks SET status = 'done', decided_at = $1, \
     note = 'closed: the claim was decided again and no longer needs review' \
     WHERE tenant_id = $2 AND claim_id = $3 AND status <> 'done'";

fn count_sql(backend: Backend, rows: usize) -> String {
    format!(
        "INSERT INTO member_accumulators \
         (tenant_id, member_id, year, claim_id, deductible, out_of_pocket, paid, visits, seq) \
         VALUES {} ON CONFLICT DO NOTHING",
        values_list(backend, rows, 9)
    )
}

fn bind_counts<'q>(mut q: AnyQuery<'q>, rows: &'q [Row<'q>], chunk: &[usize]) -> AnyQuery<'q> {
    for row in chunk.iter().map(|i| &rows[*i]) {
        let d = row.d;
        let Some((year, usage)) = &d.counted else {
            continue;
        };
        q = q
            .bind(d.tenant_id.as_str())
            .bind(d.member_id.as_str())
            .bind(i64::from(*year))
            .bind(d.claim_id.as_str())
            .bind(usage.deductible)
            .bind(usage.out_of_pocket)
            .bind(usage.paid)
            .bind(row.t.visits.as_deref().unwrap_or("{}"))
            .bind(seq_column(d.counted_seq));
    }
    q
}

/// A `seq` as the store's BIGINT holds it: places are counted from 0 one claim at a
/// time, so one past `i64::MAX` is never reached.
fn seq_column(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

fn task_sql(backend: Backend, rows: usize) -> String {
    format!(
        "INSERT INTO review_tasks (task_id, tenant_id, claim_id, status, priority, reasons, created_at) \
         VALUES {} ON CONFLICT DO NOTHING",
        values_list(backend, rows, 7)
    )
}

fn bind_updates<'q>(mut q: AnyQuery<'q>, rows: &'q [Row<'q>], chunk: &[usize]) -> AnyQuery<'q> {
    for row in chunk.iter().map(|i| &rows[*i]) {
        let d = row.d;
        q = q
            .bind(d.tenant_id.as_str())
            .bind(d.claim_id.as_str())
            .bind(d.status.as_str())
            .bind(d.outcome.as_str())
            .bind(d.approved_amount)
            .bind(d.fraud.as_ref().map(|f| f.fraud_score))
            .bind(row.t.fraud.as_ref().map(Json::get))
            .bind(d.audit_id.as_str())
            .bind(row.t.reasons.get())
            .bind(d.task_id.as_deref())
            .bind(d.decided_at_ms)
            .bind(d.version)
            .bind(row.t.lines.as_ref().map(Json::get))
            .bind(row.t.pricing.as_ref().map(Json::get))
            .bind(row.t.facts.as_ref().map(Json::get));
    }
    q
}

fn bind_tasks<'q>(mut q: AnyQuery<'q>, rows: &'q [Row<'q>], chunk: &[usize]) -> AnyQuery<'q> {
    for row in chunk.iter().map(|i| &rows[*i]) {
        let d = row.d;
        q = q
            .bind(d.task_id.as_deref())
            .bind(d.tenant_id.as_str())
            .bind(d.claim_id.as_str())
            .bind("open")
            .bind(d.priority)
            .bind(row.t.reasons.get())
            .bind(d.decided_at_ms);
    }
    q
}

/// Whether two audit details of a flagged claim's decision differ in its estimate alone:
/// the lines priced against its member's year as it stood when it was written, and
/// their approved amount. A batch redelivered after a restart finds the year with the
/// batch's later claims counted already, and prices the estimate again against more;
/// the decision is the same (its events carry no estimate), so its events are
/// published, and the store keeps the first estimate.
fn same_but_estimate(recorded: &str, again: &str) -> bool {
    let without_estimate = |text: &str| {
        let mut details: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).ok()?;
        details.remove("lines");
        details.remove("approved_amount");
        Some(details)
    };
    match (without_estimate(recorded), without_estimate(again)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// What [`Store::check_decisions_in`] found: per decision, whether it is the one the
/// store holds for its claim and version; and which decisions' audit records are new.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionCheck {
    pub held: Vec<bool>,
    fresh: Vec<usize>,
}

impl Store {
    /// Writes a batch of decisions with a few multi-row statements per chunk rather than
    /// a few statements per claim.
    ///
    /// Answers, for each decision, whether it is the one the store holds for its claim
    /// and version: its audit record is new, or was written before by this same decision
    /// (a redelivery). A decision that differs from the one already recorded for its
    /// version, in what it says or when it was made, writes nothing, and its events
    /// must not be published: it comes from a redelivered input decided again (on
    /// Kafka, by a stage that crashed before committing its offset), against state that
    /// had moved on (the fraud stage scoring a claim after later claims of its batch)
    /// or only later, and the first one stands.
    ///
    /// `texts`: per decision, what the store writes of it, when it was made ahead (see
    /// [`PreparedDecisions::with`]); empty when none was.
    pub async fn write_decisions(
        &self,
        decisions: &[Decision],
        texts: Vec<Option<DecisionTexts>>,
    ) -> Result<Vec<bool>, StoreError> {
        if decisions.is_empty() {
            return Ok(Vec::new());
        }
        // Everything that costs CPU happens before the transaction: SQLite has one
        // writer, and every stage and intake request waits while it is held.
        let prepared = PreparedDecisions::with(decisions, texts);
        let mut tx = self.begin_write().await?;
        let check = self.check_decisions_in(&mut tx, &prepared).await?;
        self.write_checked_decisions_in(&mut tx, &prepared, &check)
            .await?;
        tx.commit().await?;
        Ok(check.held)
    }

    /// The first half of [`Self::write_decisions`] inside the caller's transaction: which
    /// decisions the store holds (or will hold once written) and which are new. Only
    /// reads, so that the caller may take other locks before the second half.
    pub async fn check_decisions_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        prepared: &PreparedDecisions<'_>,
    ) -> Result<DecisionCheck, StoreError> {
        let entries: Vec<&PreparedEntry> = prepared.rows.iter().map(|r| &r.t.entry).collect();
        let ids: Vec<&str> = entries.iter().map(|e| e.entry.audit_id.as_str()).collect();
        let mut recorded = if ids.is_empty() {
            Default::default()
        } else {
            audit::recorded_details(tx, self.backend(), &ids).await?
        };
        let mut check = DecisionCheck {
            held: Vec::with_capacity(entries.len()),
            fresh: Vec::new(),
        };
        for (i, e) in entries.iter().map(|e| &e.entry).enumerate() {
            match recorded.get(&e.audit_id) {
                // The time too: a decision made again later, even alike, is not the one
                // recorded. Its events would carry the ids of the first one's with
                // another time, and a receiver would be told the claim twice.
                Some((at, details)) => check.held.push(
                    *at == e.at
                        && (*details == e.details
                            || (prepared.rows[i].d.status == ClaimStatus::PendingReview
                                && same_but_estimate(details, &e.details))),
                ),
                None => {
                    recorded.insert(e.audit_id.clone(), (e.at, e.details.clone()));
                    check.held.push(true);
                    check.fresh.push(i);
                }
            }
        }
        Ok(check)
    }

    /// The second half: writes the held decisions' snapshots, tasks and new audit
    /// records. It locks the audit chain's head, so it comes last in the transaction.
    pub async fn write_checked_decisions_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        prepared: &PreparedDecisions<'_>,
        check: &DecisionCheck,
    ) -> Result<(), StoreError> {
        let writes = Writes::new(&prepared.rows, &check.held, self.backend());
        execute_all(tx, writes.bind(&prepared.rows)).await?;
        // Last: the chain head is the last lock a transaction takes (see `audit`).
        let fresh: Vec<&PreparedEntry> = check
            .fresh
            .iter()
            .map(|i| &prepared.rows[*i].t.entry)
            .collect();
        self.append_new_audit_in(tx, &fresh).await
    }

    /// The fraud analysis stored with a claim, as JSON.
    pub async fn claim_fraud(
        &self,
        tenant_id: &str,
        claim_id: &str,
    ) -> Result<Option<Option<String>>, StoreError> {
        Ok(sqlx::query_scalar::<_, Option<String>>(
            "SELECT fraud FROM claims WHERE tenant_id = $1 AND claim_id = $2",
        )
        .bind(tenant_id)
        .bind(claim_id)
        .fetch_optional(self.reader())
        .await?)
    }
}

impl Store {
    /// Decision records per claim of a tenant: for checks that nothing was doubled.
    pub async fn audit_counts(
        &self,
        tenant_id: &str,
    ) -> Result<std::collections::HashMap<String, i64>, StoreError> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT entity_id, COUNT(*) FROM audit_records WHERE tenant_id = $1 AND action = 'claim.decided' GROUP BY entity_id",
        )
        .bind(tenant_id)
        .fetch_all(self.reader())
        .await?;
        Ok(rows.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use schemas::claim::{ClaimStatus, Outcome};
    use schemas::receipt::EligibilityStatus;
    use serde::Serialize;

    use super::DecisionTexts;
    use crate::adjudication::{Pricing, Usage};
    use crate::model::{Decision, DecisionFacts, DomainEvent, EventKind, FraudScore, Written};

    /// What a decision's `Written` record has always been: `"written":true`, then the
    /// decision as its own `Serialize` writes it.
    #[derive(Serialize)]
    struct Flattened<'a> {
        written: bool,
        #[serde(flatten)]
        decision: &'a Decision,
    }

    fn value<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A flagged claim's decision with every member the record can carry set.
    fn everything() -> Decision {
        let mut d = Decision::sample("C-1", "M-1", 1);
        d.status = ClaimStatus::PendingReview;
        d.outcome = Outcome::Flagged;
        d.fraud = Some(FraudScore {
            fraud_score: 0.82,
            model_version: "fraud-v1".into(),
            reasons: Vec::new(),
        });
        d.reasons = value(serde_json::json!([
            {"source": "rule", "code": "R", "rule_id": "r1", "message": "a \"quoted\" reason"}
        ]));
        d.trace = value(serde_json::json!([
            {"rule_id": "r1", "action": "flag", "matched": true, "detail": "true"},
            {"rule_id": "r2", "action": "flag", "matched": false}
        ]));
        d.task_id = Some("task_C-1".into());
        d.events = vec![DomainEvent::new(
            EventKind::ClaimFlagged,
            &d.tenant_id,
            "C-1",
            "2026-01-01T00:00:00Z".into(),
            serde_json::json!({"claim_id": "C-1"}),
        )];
        d.lines = vec![value(serde_json::json!({
            "line_no": 1, "procedure_code": "99213", "units": 1, "amount": 12_000,
            "modifiers": [], "adjudication": null,
        }))];
        d.eligibility = Some(EligibilityStatus::Covered);
        d.reviews = Some("aud_C-0".into());
        d.officer = Some("usr_1".into());
        d.pricing = Some(Pricing::sample().into());
        d.officer_amount = Some(9_000);
        d.replaces_claim_id = Some("C-0".into());
        d.facts = Some(Box::new(DecisionFacts::default()).into());
        d.counted = Some((
            2026,
            Usage {
                deductible: 1,
                out_of_pocket: 2,
                paid: 3,
                ..Default::default()
            },
        ));
        d
    }

    /// The chain writes a decision's record from the texts the store made of it: the
    /// record must be, byte for byte, the one serialising the decision makes, which
    /// `claims replay` and the snapshot stage read.
    #[test]
    fn a_written_record_made_from_the_stores_texts_is_the_decisions_own() {
        // Lines told in `claim.completed` already, whose text the store takes as told.
        let mut approved = Decision::sample("C-2", "M-1", 1);
        approved.lines = everything().lines;
        approved.completed_data(true);
        assert!(approved.lines_json.is_some());
        for d in [everything(), approved, Decision::sample("C-3", "M-2", 2)] {
            let own = serde_json::to_string(&Flattened {
                written: true,
                decision: &d,
            })
            .unwrap_or_else(|e| panic!("{e}"));
            let texts = DecisionTexts::of(&d);
            let from_texts = serde_json::to_string(&Written::with(&d, texts.parts()))
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(from_texts, own);
            let alone = serde_json::to_string(&Written::new(&d)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(alone, own);
        }
    }
}
