//! Backtesting (contract part 2): the tenant's decided claims in a window run through a
//! rulebook, usually a draft, on the facts they were decided with, and compared with
//! the decisions they got. Nothing is written but the caller's one audit record.
//!
//! Claims are read a page at a time, oldest first, and parsed and decided on the
//! blocking pool while the next pages are read, so a backtest neither holds the request
//! workers nor more than a few pages in memory. The candidate is evaluated with its
//! compiled plans, exactly as the rules stage would.

use std::collections::HashMap;
use std::sync::Arc;

use schemas::backtest::{AmountTotals, BacktestReport, BacktestSample, SampleDecision};
use schemas::claim::Outcome;
use schemas::TenantId;

use crate::clock::now_ms;
use crate::model::DecidedClaim;
use crate::redecide::{priced, redecide, Candidate};
use crate::rules::CompiledRulebook;
use crate::stages::decide::Pass;
use crate::store::{DecidedPage, DecidedWindow, Store, StoreError};

/// Claims per page read: small enough that a page parsed is still in the caches when
/// it is decided (at 2,000 a backtest took an eighth more CPU per claim; at 250 the
/// reads' own cost shows).
const PAGE: i64 = 500;

/// Changed claims a report shows.
const SAMPLES: usize = 20;

/// What to backtest.
#[derive(Debug, Clone)]
pub struct Backtest {
    pub tenant_id: TenantId,
    pub rulebook_id: String,
    pub version: i64,
    pub compiled: Arc<CompiledRulebook>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub limit: i64,
}

/// Runs the backtest to its report: three steps, each on its own thread, one page
/// apart. The database reads a page (its thread) while the one before is parsed and
/// the one before that decided (the blocking pool): together the parse and the
/// decisions were the larger half of a backtest, and one after the other they left a
/// core idle half the time.
pub async fn run(store: &Store, backtest: Backtest) -> Result<BacktestReport, StoreError> {
    let backtest = Arc::new(backtest);
    let (read_tx, read_rx) = tokio::sync::mpsc::channel::<Result<DecidedPage, StoreError>>(1);
    let (parsed_tx, parsed_rx) = std::sync::mpsc::sync_channel(1);
    let tenant_id = backtest.tenant_id.clone();
    let parsing = tokio::task::spawn_blocking(move || parse_pages(&tenant_id, read_rx, parsed_tx));
    let bt = backtest.clone();
    let now = now_ms();
    let deciding = tokio::task::spawn_blocking(move || decide_pages(&bt, parsed_rx, now));
    let (_, decided) = tokio::join!(read_pages(store, &backtest, read_tx), deciding);
    let worker = |e: tokio::task::JoinError| StoreError::Config(format!("backtest worker: {e}"));
    parsing.await.map_err(worker)?;
    Ok(decided.map_err(worker)??.report(&backtest.rulebook_id))
}

/// Reads the window's pages until they end or the steps after stop taking them (the
/// deciding step stops at the backtest's limit); a failure is passed on as the last
/// page.
async fn read_pages(
    store: &Store,
    bt: &Backtest,
    pages: tokio::sync::mpsc::Sender<Result<DecidedPage, StoreError>>,
) {
    let mut window = DecidedWindow {
        since_ms: bt.since_ms,
        until_ms: bt.until_ms,
        after: None,
    };
    let size = PAGE.min(bt.limit.max(1));
    loop {
        let page = store.decided_claims(&bt.tenant_id, &window, size).await;
        let next = match &page {
            Ok(p) => p.next().cloned(),
            Err(_) => None,
        };
        if pages.send(page).await.is_err() {
            return;
        }
        match next {
            Some(next) => window.after = Some(next),
            None => return,
        }
    }
}

/// Parses the pages read, in order, until they end or the deciding step stops.
fn parse_pages(
    tenant_id: &TenantId,
    mut read: tokio::sync::mpsc::Receiver<Result<DecidedPage, StoreError>>,
    parsed: std::sync::mpsc::SyncSender<Result<Vec<DecidedClaim>, StoreError>>,
) {
    while let Some(page) = read.blocking_recv() {
        if parsed.send(page.and_then(|p| p.claims(tenant_id))).is_err() {
            return;
        }
    }
}

/// Decides the parsed pages, up to the backtest's limit, into one tally.
fn decide_pages(
    bt: &Backtest,
    pages: std::sync::mpsc::Receiver<Result<Vec<DecidedClaim>, StoreError>>,
    now: i64,
) -> Result<Tally, StoreError> {
    let mut tally = Tally::default();
    let mut left = usize::try_from(bt.limit).unwrap_or(0);
    for page in pages {
        let mut page = page?;
        // The backtest's limit: pages span `PAGE` claims, decided or not.
        page.truncate(left);
        left -= page.len();
        tally.merge(decide_page(bt, page, now));
        if left == 0 {
            break;
        }
    }
    Ok(tally)
}

/// The pure core: one page decided with the candidate, tallied.
fn decide_page(bt: &Backtest, page: Vec<DecidedClaim>, now: i64) -> Tally {
    let candidate = Candidate {
        rulebook_id: &bt.rulebook_id,
        version: bt.version,
        compiled: &bt.compiled,
    };
    let mut tally = Tally::default();
    for mut claim in page {
        let baseline = SampleDecision {
            outcome: claim.facts.outcome.unwrap_or(Outcome::Declined),
            approved_amount: claim.facts.approved_amount,
        };
        let baseline_rulebook = std::mem::take(&mut claim.submitted.rulebook_id);
        let mut decision = redecide(claim, candidate, now, Pass::Trial);
        let candidate = SampleDecision {
            outcome: decision.outcome,
            approved_amount: priced(&mut decision),
        };
        tally.add(&baseline_rulebook, baseline, candidate, || BacktestSample {
            claim_id: decision.claim_id.clone(),
            baseline,
            candidate,
            rules_matched: decision
                .trace
                .iter()
                .filter(|t| t.matched)
                .map(|t| t.rule_id.to_string())
                .collect(),
        });
    }
    tally
}

#[derive(Debug, Default)]
struct Tally {
    claims: u64,
    changed: u64,
    transitions: HashMap<(Outcome, Outcome), u64>,
    amounts: AmountTotals,
    samples: Vec<BacktestSample>,
    baselines: HashMap<String, u64>,
}

impl Tally {
    fn add(
        &mut self,
        baseline_rulebook: &str,
        baseline: SampleDecision,
        candidate: SampleDecision,
        sample: impl FnOnce() -> BacktestSample,
    ) {
        self.claims += 1;
        *self
            .transitions
            .entry((baseline.outcome, candidate.outcome))
            .or_default() += 1;
        self.amounts.baseline += baseline.approved_amount;
        self.amounts.candidate += candidate.approved_amount;
        if let Some(n) = self.baselines.get_mut(baseline_rulebook) {
            *n += 1;
        } else {
            self.baselines.insert(baseline_rulebook.to_owned(), 1);
        }
        if baseline != candidate {
            self.changed += 1;
            if self.samples.len() < SAMPLES {
                self.samples.push(sample());
            }
        }
    }

    /// Adds a later page's tally.
    fn merge(&mut self, later: Tally) {
        self.claims += later.claims;
        self.changed += later.changed;
        for (k, n) in later.transitions {
            *self.transitions.entry(k).or_default() += n;
        }
        self.amounts.baseline += later.amounts.baseline;
        self.amounts.candidate += later.amounts.candidate;
        let room = SAMPLES.saturating_sub(self.samples.len());
        self.samples.extend(later.samples.into_iter().take(room));
        for (k, n) in later.baselines {
            *self.baselines.entry(k).or_default() += n;
        }
    }

    fn report(self, rulebook_id: &str) -> BacktestReport {
        BacktestReport {
            rulebook_id: rulebook_id.to_owned(),
            baseline_rulebook_id: self
                .baselines
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
                .map(|(id, _)| id),
            claims: self.claims,
            changed: self.changed,
            transitions: self
                .transitions
                .into_iter()
                .map(|((from, to), n)| (format!("{}->{}", from.as_str(), to.as_str()), n))
                .collect(),
            approved_amount: self.amounts,
            samples: self.samples,
        }
    }
}
