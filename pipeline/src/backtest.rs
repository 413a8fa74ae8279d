//! Backtesting (contract part 2): the tenant's decided claims in a window run through a
//! rulebook, usually a draft, on the facts they were decided with, and compared with
//! the decisions they got. Nothing is written but the caller's one audit record.
//!
//! Claims are read a page at a time, oldest first, and parsed and decided on the
//! blocking pool while the next pages are read, so a backtest neither holds the request
//! workers nor more than a few pages in memory. The candidate is evaluated with its
//! compiled plans, exactly as the rules stage would.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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

/// Workers that parse and decide pages, each a whole page at a time.
const WORKERS: usize = 2;

/// Runs the backtest to its report. The database reads the window a page at a time
/// (its own thread); [`WORKERS`] threads of the blocking pool take the pages in turn,
/// each parsing and deciding a whole page, so a claim is parsed, decided and freed by
/// one thread while it is still in that core's caches; a third puts the pages' trials
/// back in order and tallies them up to the backtest's limit.
pub async fn run(store: &Store, backtest: Backtest) -> Result<BacktestReport, StoreError> {
    let backtest = Arc::new(backtest);
    let (read_tx, read_rx) = tokio::sync::mpsc::channel::<Result<DecidedPage, StoreError>>(1);
    let read_rx = Arc::new(Mutex::new((0, read_rx)));
    let (tried_tx, tried_rx) = std::sync::mpsc::channel();
    let now = now_ms();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (bt, pages, tried) = (backtest.clone(), read_rx.clone(), tried_tx.clone());
            tokio::task::spawn_blocking(move || try_pages(&bt, &pages, &tried, now))
        })
        .collect();
    drop((read_rx, tried_tx));
    let limit = usize::try_from(backtest.limit).unwrap_or(0);
    let tallying = tokio::task::spawn_blocking(move || tally_pages(tried_rx, limit));
    let (_, tally) = tokio::join!(read_pages(store, &backtest, read_tx), tallying);
    let worker = |e: tokio::task::JoinError| StoreError::Config(format!("backtest worker: {e}"));
    for w in workers {
        w.await.map_err(worker)?;
    }
    Ok(tally.map_err(worker)??.report(&backtest.rulebook_id))
}

/// Pages read side by side: the database's reads of pages are most of a backtest's
/// wait when one page is read at a time, with the workers beside it on two cores.
const READS: usize = 2;

/// Reads the window's pages, in order, until they end or the steps after stop taking
/// them (the tally stops at the backtest's limit); a failure is passed on as the last
/// page. Each page's end is found first (on the index alone), so the next page's read
/// starts while this one's is still running.
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
    let mut reads = std::collections::VecDeque::with_capacity(READS);
    let mut ended = false;
    loop {
        while !ended && reads.len() < READS {
            let end = match store.decided_page_end(&bt.tenant_id, &window, size).await {
                Ok(end) => end,
                Err(e) => {
                    ended = true;
                    reads.push_back(tokio::spawn(async { Err(e) }));
                    break;
                }
            };
            let (store, tenant_id, this) = (store.clone(), bt.tenant_id.clone(), window.clone());
            ended = end.is_none();
            window.after.clone_from(&end);
            reads.push_back(tokio::spawn(async move {
                store.decided_page(&tenant_id, &this, end.as_ref()).await
            }));
        }
        let Some(read) = reads.pop_front() else {
            return;
        };
        let page = read
            .await
            .unwrap_or_else(|e| Err(StoreError::Config(format!("backtest read: {e}"))));
        if pages.send(page).await.is_err() {
            return;
        }
    }
}

/// The pages read, numbered in the order read; the workers share them.
type Pages = Mutex<(
    usize,
    tokio::sync::mpsc::Receiver<Result<DecidedPage, StoreError>>,
)>;

/// A page parsed and decided, with its number in the order read.
type Tried = (usize, Result<PageTrials, StoreError>);

/// One worker: takes the next page read, parses and decides it, passes its trials on;
/// until the pages end or the tally stops taking them.
fn try_pages(bt: &Backtest, pages: &Pages, tried: &std::sync::mpsc::Sender<Tried>, now: i64) {
    loop {
        let (number, page) = {
            // The lock is held while waiting for the read, so pages are numbered in
            // the order they were read.
            let mut pages = pages
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let Some(page) = pages.1.blocking_recv() else {
                return;
            };
            pages.0 += 1;
            (pages.0 - 1, page)
        };
        let trials = page.and_then(|p| try_page(bt, &p, now));
        if tried.send((number, trials)).is_err() {
            return;
        }
    }
}

/// Tallies the pages' trials in the order the pages were read, up to `limit` claims.
fn tally_pages(tried: std::sync::mpsc::Receiver<Tried>, limit: usize) -> Result<Tally, StoreError> {
    let mut tally = Tally::default();
    let mut left = limit;
    let mut early: HashMap<usize, PageTrials> = HashMap::new();
    let mut next = 0;
    for (number, trials) in tried {
        early.insert(number, trials?);
        while let Some(page) = early.remove(&next) {
            next += 1;
            left -= tally.add_page(page, left);
            if left == 0 {
                return Ok(tally);
            }
        }
    }
    Ok(tally)
}

/// A page's claims decided with the candidate: each claim's trial, in the page's
/// order, and the samples of the first changed ones.
#[derive(Debug, Default)]
struct PageTrials {
    trials: Vec<Trial>,
    /// The first [`SAMPLES`] changed claims' samples, each with its place in `trials`.
    samples: Vec<(usize, BacktestSample)>,
}

/// One claim: the rulebook that decided it, its decision then and the candidate's.
#[derive(Debug)]
struct Trial {
    baseline_rulebook: String,
    baseline: SampleDecision,
    candidate: SampleDecision,
}

/// The pure core: one page decided with the candidate, each claim as it is parsed.
/// The trials are in the page's order, oldest first: the order the database wrote the
/// page in as a rule; a page it wrote otherwise is decided again from its claims put
/// in order.
fn try_page(bt: &Backtest, page: &DecidedPage, now: i64) -> Result<PageTrials, StoreError> {
    let candidate = Candidate {
        rulebook_id: &bt.rulebook_id,
        version: bt.version,
        compiled: &bt.compiled,
    };
    let mut tried = PageTrials {
        trials: Vec::with_capacity(usize::try_from(PAGE).unwrap_or(0)),
        samples: Vec::new(),
    };
    // The last claim decided: (received time, claim id).
    let mut last: Option<(i64, String)> = None;
    let mut in_order = true;
    page.each_claim(&bt.tenant_id, |claim| {
        let at = claim.submitted.received_at_ms;
        let id = claim.submitted.claim.claim_id.as_str();
        in_order = in_order
            && last
                .as_ref()
                .is_none_or(|(l_at, l_id)| (*l_at, l_id.as_str()) < (at, id));
        if in_order {
            let claim_id = try_claim(&mut tried, claim, candidate, now);
            last = Some((at, claim_id));
        }
    })?;
    if !in_order {
        tried = PageTrials::default();
        for claim in page.claims(&bt.tenant_id)? {
            try_claim(&mut tried, claim, candidate, now);
        }
    }
    Ok(tried)
}

/// One claim decided with the candidate, its trial (and its sample, while the page has
/// room for one) added to `tried`; answers its claim id.
fn try_claim(
    tried: &mut PageTrials,
    mut claim: DecidedClaim,
    candidate: Candidate<'_>,
    now: i64,
) -> String {
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
    if baseline != candidate && tried.samples.len() < SAMPLES {
        let sample = BacktestSample {
            claim_id: decision.claim_id.clone(),
            baseline,
            candidate,
            rules_matched: decision
                .trace
                .entries()
                .into_iter()
                .flatten()
                .filter(|t| t.matched)
                .map(|t| t.rule_id.to_string())
                .collect(),
        };
        tried.samples.push((tried.trials.len(), sample));
    }
    tried.trials.push(Trial {
        baseline_rulebook,
        baseline,
        candidate,
    });
    std::mem::take(&mut decision.claim_id)
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
    /// Adds a page's first `left` trials, with the samples among them while there is
    /// room; answers how many it added.
    fn add_page(&mut self, page: PageTrials, left: usize) -> usize {
        let taken = page.trials.len().min(left);
        for trial in page.trials.into_iter().take(taken) {
            self.claims += 1;
            *self
                .transitions
                .entry((trial.baseline.outcome, trial.candidate.outcome))
                .or_default() += 1;
            self.amounts.baseline += trial.baseline.approved_amount;
            self.amounts.candidate += trial.candidate.approved_amount;
            if let Some(n) = self.baselines.get_mut(&trial.baseline_rulebook) {
                *n += 1;
            } else {
                self.baselines.insert(trial.baseline_rulebook, 1);
            }
            if trial.baseline != trial.candidate {
                self.changed += 1;
            }
        }
        let room = SAMPLES.saturating_sub(self.samples.len());
        self.samples.extend(
            page.samples
                .into_iter()
                .filter(|(at, _)| *at < taken)
                .map(|(_, sample)| sample)
                .take(room),
        );
        taken
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

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(outcome: Outcome, approved_amount: i64) -> SampleDecision {
        SampleDecision {
            outcome,
            approved_amount,
        }
    }

    /// A page of `n` trials whose claims named in `changed` (by place) the candidate
    /// declines; the others it approves as they were.
    fn page(first: usize, n: usize, changed: &[usize]) -> PageTrials {
        let approved = decision(Outcome::Approved, 100);
        let declined = decision(Outcome::Declined, 0);
        let mut page = PageTrials::default();
        for at in 0..n {
            let candidate = if changed.contains(&at) {
                page.samples.push((
                    at,
                    BacktestSample {
                        claim_id: format!("CLM-{}", first + at),
                        baseline: approved,
                        candidate: declined,
                        rules_matched: Vec::new(),
                    },
                ));
                declined
            } else {
                approved
            };
            page.trials.push(Trial {
                baseline_rulebook: "rb_live".to_owned(),
                baseline: approved,
                candidate,
            });
        }
        page
    }

    /// Pages finish out of order on the workers: the tally takes them in the order read,
    /// stops at the limit within a page, and shows the samples of the claims it took.
    #[test]
    fn pages_are_tallied_in_the_order_read_up_to_the_limit() {
        let (tx, rx) = std::sync::mpsc::channel();
        tx.send((2, Ok(page(8, 4, &[0])))).unwrap();
        tx.send((1, Ok(page(4, 4, &[1, 3])))).unwrap();
        tx.send((0, Ok(page(0, 4, &[2])))).unwrap();
        drop(tx);
        let tally = tally_pages(rx, 6).unwrap();
        assert_eq!(tally.claims, 6);
        assert_eq!(tally.changed, 2, "CLM-2 and CLM-5; CLM-7 is past the limit");
        let samples: Vec<_> = tally.samples.iter().map(|s| s.claim_id.as_str()).collect();
        assert_eq!(samples, ["CLM-2", "CLM-5"]);
        assert_eq!(tally.amounts.baseline, 600);
        assert_eq!(tally.amounts.candidate, 400);
        let report = tally.report("rb_draft");
        assert_eq!(report.transitions["APPROVED->DECLINED"], 2);
        assert_eq!(report.transitions["APPROVED->APPROVED"], 4);
        assert_eq!(report.baseline_rulebook_id.as_deref(), Some("rb_live"));
    }

    /// A page that failed to read or parse fails the backtest.
    #[test]
    fn a_failed_page_fails_the_backtest() {
        let (tx, rx) = std::sync::mpsc::channel();
        tx.send((0, Ok(page(0, 2, &[])))).unwrap();
        tx.send((1, Err(StoreError::Config("broken page".into()))))
            .unwrap();
        drop(tx);
        assert!(tally_pages(rx, 10).is_err());
    }

    /// A page the database wrote out of order is decided in order all the same: the
    /// trials and samples follow received time, then claim id.
    #[test]
    fn a_page_written_out_of_order_is_tried_in_order() {
        let line = |id: &str, at: i64| {
            serde_json::json!({
                "rulebook_id": "rb_live", "rulebook_version": 1, "received_at": at, "fraud_score": null,
                "submission": {"claim_id": id, "member_id": "M-1", "provider_id": "P-1",
                               "claim_amount": 100, "service_date": "2026-01-05"},
                "facts": {"fraud_flag_threshold": 0.7, "outcome": "APPROVED", "approved_amount": 100}
            })
            .to_string()
        };
        let compiled = crate::rules::compile(&[schemas::rulebook::Rule {
            rule_id: "none".into(),
            description: String::new(),
            when: "true".into(),
            action: schemas::rulebook::RuleAction::Decline,
            reason_code: "NO".into(),
            approved_amount: None,
            carc: None,
            rarc: None,
        }])
        .unwrap();
        let bt = Backtest {
            tenant_id: TenantId::parse("acme").unwrap(),
            rulebook_id: "rb_draft".into(),
            version: 1,
            compiled: Arc::new(compiled),
            since_ms: None,
            until_ms: None,
            limit: 10,
        };
        let tried_ids = |lines: &[String]| {
            let page = DecidedPage::from_text(lines.join("\n"));
            let tried = try_page(&bt, &page, 0).unwrap();
            assert_eq!(tried.trials.len(), lines.len());
            assert!(tried
                .trials
                .iter()
                .all(|t| t.candidate.outcome == Outcome::Declined));
            let ids: Vec<String> = tried
                .samples
                .into_iter()
                .map(|(at, s)| format!("{at}:{}", s.claim_id))
                .collect();
            ids
        };
        let ordered = ["0:C-1", "1:C-2", "2:C-0"];
        assert_eq!(
            tried_ids(&[line("C-1", 1), line("C-2", 1), line("C-0", 2)]),
            ordered
        );
        assert_eq!(
            tried_ids(&[line("C-2", 1), line("C-0", 2), line("C-1", 1)]),
            ordered
        );
    }
}
