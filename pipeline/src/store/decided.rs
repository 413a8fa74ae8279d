//! Decided claims with the facts of their decision, oldest first: what a backtest runs
//! and a reprocess decides again. Read a page at a time, so that a backtest over a
//! million claims holds one page.

use schemas::claim::ClaimSubmission;
use schemas::TenantId;

use super::error::parsed;
use super::{Backend, ClaimStanding, Store, StoreError};
use crate::model::{ClaimSubmitted, DecidedClaim, DecisionFacts, FraudScore};

/// Which decided claims: received in `[since, until)`, after `after` (the last
/// `(received_at, claim_id)` of the previous page).
#[derive(Debug, Clone, Default)]
pub struct DecidedWindow {
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub after: Option<(i64, String)>,
}

#[derive(sqlx::FromRow)]
struct Row {
    claim_id: String,
    submission: String,
    rulebook_id: String,
    rulebook_version: i64,
    received_at: i64,
    fraud: Option<String>,
    fraud_score: Option<f64>,
    facts: String,
}

/// A claim of a page of [`Store::decided_claims`], as the database writes it.
#[derive(serde::Deserialize)]
struct PageRow {
    rulebook_id: String,
    rulebook_version: i64,
    received_at: i64,
    fraud_score: Option<f64>,
    submission: ClaimSubmission,
    facts: DecisionFacts,
}

impl Row {
    fn into_claim(self, tenant_id: &TenantId) -> Result<DecidedClaim, StoreError> {
        let id = &self.claim_id;
        let claim: ClaimSubmission = parsed(serde_json::from_str(&self.submission), || {
            format!("claim {id}: submission")
        })?;
        let facts: DecisionFacts = parsed(serde_json::from_str(&self.facts), || {
            format!("claim {id}: facts")
        })?;
        let fraud = match (&self.fraud, self.fraud_score) {
            (Some(f), _) => Some(parsed(serde_json::from_str::<FraudScore>(f), || {
                format!("claim {id}: fraud")
            })?),
            (None, Some(fraud_score)) => Some(score_alone(fraud_score)),
            (None, None) => None,
        };
        Ok(DecidedClaim {
            submitted: ClaimSubmitted {
                tenant_id: tenant_id.clone(),
                claim,
                rulebook_id: self.rulebook_id,
                rulebook_version: self.rulebook_version,
                received_at_ms: self.received_at,
            },
            fraud,
            facts,
        })
    }
}

/// A fraud score without its analysis, which a decision decided again does not read.
fn score_alone(fraud_score: f64) -> FraudScore {
    FraudScore {
        fraud_score,
        model_version: String::new(),
        reasons: Vec::new(),
    }
}

/// A page of [`Store::decided_page`] as the database handed it over, not yet parsed:
/// a backtest reads the next pages while this one is parsed and decided.
#[derive(Debug)]
pub struct DecidedPage {
    text: Option<String>,
}

impl DecidedPage {
    /// A page as the database would hand it over: a claim a line (see
    /// [`Store::decided_page`]).
    #[cfg(test)]
    pub(crate) fn from_text(text: String) -> Self {
        Self { text: Some(text) }
    }

    /// Hands each of the page's claims to `each` as it is parsed, in the order the
    /// database wrote them: those decided with their facts kept among the claims the
    /// page spans, so a page may hold fewer than were asked for, or none, with more
    /// pages after it. The order is the index's as a rule (see [`DecidedPage::claims`]
    /// for the page in order whatever the database did); a claim is parsed and used
    /// while it is still in the core's caches, with no page of parsed claims between.
    pub fn each_claim(
        &self,
        tenant_id: &TenantId,
        mut each: impl FnMut(DecidedClaim),
    ) -> Result<(), StoreError> {
        let Some(text) = &self.text else {
            return Ok(());
        };
        let read = crate::model::shared::reading_shared(|| {
            for row in serde_json::Deserializer::from_str(text).into_iter::<PageRow>() {
                let r = row?;
                each(DecidedClaim {
                    submitted: ClaimSubmitted {
                        tenant_id: tenant_id.clone(),
                        claim: r.submission,
                        rulebook_id: r.rulebook_id,
                        rulebook_version: r.rulebook_version,
                        received_at_ms: r.received_at,
                    },
                    fraud: r.fraud_score.map(score_alone),
                    facts: r.facts,
                });
            }
            Ok::<_, serde_json::Error>(())
        });
        parsed(read, || "a page of decided claims".to_owned())
    }

    /// The page's claims, oldest first (by received time, then claim id). The
    /// aggregate that writes the page keeps no order of its own (ordering it costs
    /// SQLite a sort of the page's text): the page is ordered here.
    pub fn claims(&self, tenant_id: &TenantId) -> Result<Vec<DecidedClaim>, StoreError> {
        let mut claims = Vec::new();
        self.each_claim(tenant_id, |c| claims.push(c))?;
        claims.sort_unstable_by(|a, b| oldest_first(&a.submitted, &b.submitted));
        Ok(claims)
    }
}

/// The order of a window's claims: by received time, then by claim id.
fn oldest_first(a: &ClaimSubmitted, b: &ClaimSubmitted) -> std::cmp::Ordering {
    (a.received_at_ms, a.claim.claim_id.as_str())
        .cmp(&(b.received_at_ms, b.claim.claim_id.as_str()))
}

/// Which claims: the window after the last page, by the index alone. Whether a claim
/// has facts is asked of its row, which the search for a page's end need not visit: a
/// page holds the decided claims of the claims it spans.
const WINDOW: &str = "FROM claims WHERE tenant_id = $1 \
     AND received_at >= $2 AND received_at < $3 \
     AND (received_at > $4 OR (received_at = $4 AND claim_id > $5))";

impl DecidedWindow {
    fn bounds(&self) -> (i64, i64, i64, &str) {
        let (after_at, after_id) = self
            .after
            .as_ref()
            .map_or((i64::MIN, ""), |(at, id)| (*at, id.as_str()));
        (
            self.since_ms.unwrap_or(i64::MIN),
            self.until_ms.unwrap_or(i64::MAX),
            after_at,
            after_id,
        )
    }
}

impl Store {
    /// Where a page of the next `limit` claims in `window` ends: the
    /// `(received_at, claim_id)` of its last claim, to pass to [`Store::decided_page`]
    /// and to start the next page after; none when the window ends before, and the
    /// page runs to its end. One read of the index alone, so that a backtest finds
    /// the next pages' ends first and reads the pages themselves side by side.
    pub async fn decided_page_end(
        &self,
        tenant_id: &TenantId,
        window: &DecidedWindow,
        limit: i64,
    ) -> Result<Option<(i64, String)>, StoreError> {
        let (since, until, after_at, after_id) = window.bounds();
        Ok(sqlx::query_as(&format!(
            "SELECT received_at, claim_id {WINDOW} ORDER BY received_at, claim_id LIMIT 1 OFFSET $6"
        ))
        .bind(tenant_id.as_str())
        .bind(since)
        .bind(until)
        .bind(after_at)
        .bind(after_id)
        .bind((limit - 1).max(0))
        .fetch_optional(self.reader())
        .await?)
    }

    /// The tenant's decided claims in `window` up to `end` (from
    /// [`Store::decided_page_end`]; none for the window's end), oldest first, for a
    /// backtest: with their fraud score alone, whose reasons a backtest does not read
    /// (parsing them would be a third of the page's work). Claims decided before their
    /// decisions kept their facts are not among them.
    ///
    /// The database hands the page over as one text, a JSON document a line, its rows'
    /// stored JSON (submission, facts) pasted in as it is: row by row, each value was
    /// copied out of SQLite, each row crossed from SQLite's thread to the caller's on
    /// its own, and the hand-offs, not the reading, were most of a backtest's time.
    pub async fn decided_page(
        &self,
        tenant_id: &TenantId,
        window: &DecidedWindow,
        end: Option<&(i64, String)>,
    ) -> Result<DecidedPage, StoreError> {
        let (since, until, after_at, after_id) = window.bounds();
        let (quote, real, aggregate) = match self.backend() {
            Backend::Sqlite => ("json_quote({})", "printf('%!.17g', {})", "group_concat"),
            Backend::Postgres => ("to_json({})::text", "{}::text", "string_agg"),
        };
        let quote = |column: &str| quote.replace("{}", column);
        let (last_at, last_id) = end.map_or((i64::MAX, ""), |(at, id)| (*at, id.as_str()));
        // Those claims in one text: `concat` writes each claim's line in one pass (a
        // chain of `||` copies the line so far at every step), and the lines are joined
        // with newlines, which a stream of JSON values reads as the space between them.
        // The claims are taken by their keys rather than from a subquery with a limit,
        // which SQLite copied, whole rows, into a table of its own first.
        let sql = format!(
            "SELECT {aggregate}(concat('{{\"rulebook_id\":', {rulebook_id}, \
             ',\"rulebook_version\":', rulebook_version, ',\"received_at\":', received_at, \
             ',\"fraud_score\":', coalesce({fraud_score}, 'null'), \
             ',\"submission\":', submission, ',\"facts\":', facts, '}}'), '\n') \
             {WINDOW} AND (received_at < $6 OR (received_at = $6 AND claim_id <= $7)) \
             AND facts IS NOT NULL",
            rulebook_id = quote("rulebook_id"),
            fraud_score = real.replace("{}", "fraud_score"),
        );
        let text: Option<String> = sqlx::query_scalar(&sql)
            .bind(tenant_id.as_str())
            .bind(since)
            .bind(until)
            .bind(after_at)
            .bind(after_id)
            .bind(last_at)
            .bind(last_id)
            .fetch_one(self.reader())
            .await?;
        Ok(DecidedPage { text })
    }

    /// One claim for a reprocess, in one read: its standing, and the claim with the
    /// facts of its decision (none when its decision kept none); none when the claim
    /// does not exist.
    pub async fn decided_claim(
        &self,
        tenant_id: &TenantId,
        claim_id: &str,
    ) -> Result<Option<(ClaimStanding, Option<DecidedClaim>)>, StoreError> {
        #[derive(sqlx::FromRow)]
        struct WithStanding {
            #[sqlx(flatten)]
            standing: ClaimStanding,
            claim_id: String,
            submission: String,
            rulebook_id: String,
            rulebook_version: i64,
            received_at: i64,
            fraud: Option<String>,
            fraud_score: Option<f64>,
            facts: Option<String>,
        }
        let row: Option<WithStanding> = sqlx::query_as(
            "SELECT status, version, audit_id, claim_id, submission, rulebook_id, rulebook_version, \
             received_at, fraud, fraud_score, facts FROM claims WHERE tenant_id = $1 AND claim_id = $2",
        )
        .bind(tenant_id.as_str())
        .bind(claim_id)
        .fetch_optional(self.reader())
        .await?;
        row.map(|r| {
            let claim = match r.facts {
                None => None,
                Some(facts) => Some(
                    Row {
                        claim_id: r.claim_id,
                        submission: r.submission,
                        rulebook_id: r.rulebook_id,
                        rulebook_version: r.rulebook_version,
                        received_at: r.received_at,
                        fraud: r.fraud,
                        fraud_score: r.fraud_score,
                        facts,
                    }
                    .into_claim(tenant_id)?,
                ),
            };
            Ok((r.standing, claim))
        })
        .transpose()
    }
}

#[cfg(test)]
mod tests {
    use schemas::TenantId;

    use super::DecidedWindow;
    use crate::model::ClaimSubmitted;
    use crate::store::NewClaim;

    /// Pages in (received, claim id) order, each claim once, the fraud score exact:
    /// the order is the database's, inside one aggregated document.
    #[tokio::test]
    async fn pages_of_decided_claims_follow_each_other_in_order() {
        let (store, path) = crate::store::temp("decided").await;
        let tenant = TenantId::parse("acme").unwrap();
        // Two claims share each moment; ids are given out of order.
        let commands: Vec<ClaimSubmitted> = [5, 2, 9, 1, 7, 3, 8]
            .iter()
            .enumerate()
            .map(|(i, n)| ClaimSubmitted {
                tenant_id: tenant.clone(),
                claim: serde_json::from_value(serde_json::json!({
                    "claim_id": format!("C-{n}"), "member_id": "M-1", "provider_id": "P-1",
                    "claim_amount": 100, "service_date": "2026-01-05",
                }))
                .unwrap(),
                rulebook_id: "rb".into(),
                rulebook_version: 1,
                received_at_ms: 1_000 + (i as i64 / 2),
            })
            .collect();
        let submissions: Vec<String> = commands
            .iter()
            .map(|c| serde_json::to_string(&c.claim).unwrap())
            .collect();
        let rows = NewClaim::all(&commands, &submissions);
        let mut tx = store.begin_write().await.unwrap();
        store.ensure_tenants_in(&mut tx, &["acme"]).await.unwrap();
        store.insert_claims_in(&mut tx, &rows, 0).await.unwrap();
        tx.commit().await.unwrap();
        let score = 0.1 + 0.2;
        sqlx::query("UPDATE claims SET facts = '{\"fraud_flag_threshold\":0.7}', fraud_score = $1")
            .bind(score)
            .execute(store.reader())
            .await
            .unwrap();
        // A claim not decided yet: passed over, its page shorter by one.
        sqlx::query("UPDATE claims SET facts = NULL WHERE claim_id = 'C-9'")
            .execute(store.reader())
            .await
            .unwrap();

        let mut window = DecidedWindow::default();
        let mut seen = Vec::new();
        loop {
            let next = store.decided_page_end(&tenant, &window, 3).await.unwrap();
            let page = store.decided_page(&tenant, &window, next.as_ref()).await;
            for c in page.unwrap().claims(&tenant).unwrap() {
                assert_eq!(c.fraud.as_ref().unwrap().fraud_score, score);
                assert_eq!(c.facts.fraud_flag_threshold, 0.7);
                seen.push(c.submitted.claim.claim_id.as_str().to_owned());
            }
            let Some(next) = next else { break };
            window.after = Some(next);
        }
        crate::store::remove_temp(store, &path).await;
        assert_eq!(seen, ["C-2", "C-5", "C-1", "C-3", "C-7", "C-8"]);
    }
}
