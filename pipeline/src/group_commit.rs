//! Group commit: work that arrives while SQLite's one writer is busy shares the next
//! transaction, and so its sync, instead of taking the writer one transaction at a
//! time. Intake groups its requests' claims with it ([`crate::intake::Committer`]) and
//! idempotency keys their writes ([`crate::idempotency::KeyCommitter`]).
//!
//! Each caller is answered only once the transaction that holds its work has
//! committed, with its own share of the answer, or with the group's error when the
//! transaction failed (all or none of a group stands). A group's work is handed over in
//! the order it arrived.
//!
//! A group is closed only once its turn on the writer has begun: work that arrives
//! while the group waits for the writer (busy with a stage's transaction) joins it.
//! Closed first, a group of the one or two requests that came just after the last
//! commit waited for the writer alone, and the thirty behind it waited for the turn
//! after (docs/decisions.md, "Intake's group commit").

use std::future::Future;
use std::sync::OnceLock;

use tokio::sync::{mpsc, oneshot};

use crate::store::StoreError;

/// What one kind of grouped work does with a group.
pub trait Commit: Clone + Send + Sync + 'static {
    /// One caller's work.
    type Item: Send + 'static;
    /// One caller's answer.
    type Answer: Send + 'static;
    /// A turn on the store's writer (its transaction), taken before the group closes.
    type Turn: Send;
    /// Named in the error a caller gets when the group's task is gone.
    const NAME: &'static str;
    /// A group is closed once the weight of its items reaches this.
    const MOST_PER_GROUP: usize;

    /// How much an item counts towards [`Self::MOST_PER_GROUP`]: one each, unless said.
    fn weight(_item: &Self::Item) -> usize {
        1
    }

    /// Takes the writer for the next group.
    fn begin(&self) -> impl Future<Output = Result<Self::Turn, StoreError>> + Send;

    /// Writes `items` in `turn`'s transaction, in order, and commits it; answers one
    /// answer per item, in their order.
    fn commit(
        &self,
        turn: Self::Turn,
        items: Vec<Self::Item>,
    ) -> impl Future<Output = Result<Vec<Self::Answer>, StoreError>> + Send;
}

/// One caller's item waiting for a transaction, and where its answer goes.
type Waiting<C> = (
    <C as Commit>::Item,
    oneshot::Sender<Result<<C as Commit>::Answer, StoreError>>,
);

/// Takes items and answers each once its group has committed.
#[derive(Debug)]
pub struct GroupCommit<C: Commit> {
    commit: C,
    /// The groups' task, started by the first item (which runs on the runtime); it ends
    /// when this is dropped.
    queue: OnceLock<mpsc::Sender<Waiting<C>>>,
}

impl<C: Commit> GroupCommit<C> {
    pub fn new(commit: C) -> Self {
        Self {
            commit,
            queue: OnceLock::new(),
        }
    }

    /// What the groups are committed with.
    pub fn committer(&self) -> &C {
        &self.commit
    }

    /// `item`, in the next group; answers once that group is durable.
    pub async fn submit(&self, item: C::Item) -> Result<C::Answer, StoreError> {
        let (answer, answered) = oneshot::channel();
        let gone = || StoreError::Config(format!("the {} has stopped", C::NAME));
        self.queue()
            .send((item, answer))
            .await
            .map_err(|_| gone())?;
        answered.await.map_err(|_| gone())?
    }

    fn queue(&self) -> &mpsc::Sender<Waiting<C>> {
        self.queue.get_or_init(|| {
            let (queue, waiting) = mpsc::channel(C::MOST_PER_GROUP);
            tokio::spawn(commit_groups(self.commit.clone(), waiting));
            queue
        })
    }
}

/// The groups' task: one transaction at a time, for everything waiting once the
/// writer is taken.
async fn commit_groups<C: Commit>(commit: C, mut waiting: mpsc::Receiver<Waiting<C>>) {
    while let Some(first) = waiting.recv().await {
        let turn = commit.begin().await;
        let mut weight = C::weight(&first.0);
        let mut group = vec![first];
        while weight < C::MOST_PER_GROUP {
            match waiting.try_recv() {
                Ok(w) => {
                    weight += C::weight(&w.0);
                    group.push(w);
                }
                Err(_) => break,
            }
        }
        let (items, answers): (Vec<_>, Vec<_>) = group.into_iter().unzip();
        // Without the writer the group fails whole, as a failed commit fails it: those
        // waiting are told at once rather than each after a wait of its own.
        let committed = match turn {
            Ok(turn) => commit.commit(turn, items).await,
            Err(e) => Err(e),
        };
        match committed {
            Ok(done) => {
                for (answer, done) in answers.into_iter().zip(done) {
                    // A caller that went away has nothing to be told; its work stands.
                    let _ = answer.send(Ok(done));
                }
            }
            Err(e) => {
                for answer in answers {
                    let _ = answer.send(Err(e.for_another()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Records each group it is given, once `gate` lets it; fails a group holding 0.
    #[derive(Clone)]
    struct Recorder {
        groups: Arc<Mutex<Vec<Vec<u32>>>>,
        gate: Arc<tokio::sync::Semaphore>,
        /// While set, the writer cannot be taken.
        no_writer: Arc<std::sync::atomic::AtomicBool>,
    }

    impl Default for Recorder {
        fn default() -> Self {
            Self {
                groups: Default::default(),
                gate: Arc::new(tokio::sync::Semaphore::new(0)),
                no_writer: Default::default(),
            }
        }
    }

    impl Recorder {
        /// The groups committed so far.
        fn groups(&self) -> Vec<Vec<u32>> {
            self.groups
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        }
    }

    /// Submits `item` from a task of its own.
    fn spawn_submit(
        grouped: &Arc<GroupCommit<Recorder>>,
        item: u32,
    ) -> tokio::task::JoinHandle<Result<u32, StoreError>> {
        let g = grouped.clone();
        tokio::spawn(async move { g.submit(item).await })
    }

    impl Commit for Recorder {
        type Item = u32;
        type Answer = u32;
        type Turn = ();
        const NAME: &'static str = "recorder";
        const MOST_PER_GROUP: usize = 5;

        fn weight(item: &u32) -> usize {
            *item as usize
        }

        async fn begin(&self) -> Result<(), StoreError> {
            // Held until the test lets a group through, so that the rest queue up.
            let _ = self.gate.acquire().await.map(|p| p.forget());
            if self.no_writer.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(StoreError::Conflict("no writer".into()));
            }
            Ok(())
        }

        async fn commit(&self, _turn: (), items: Vec<u32>) -> Result<Vec<u32>, StoreError> {
            self.groups
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(items.clone());
            if items.contains(&0) {
                return Err(StoreError::Conflict("zero".into()));
            }
            Ok(items.iter().map(|i| i * 10).collect())
        }
    }

    #[tokio::test]
    async fn work_waiting_shares_a_group_by_weight_and_each_gets_its_own_answer() {
        let recorder = Recorder::default();
        let grouped = Arc::new(GroupCommit::new(recorder.clone()));
        let mut calls = Vec::new();
        for item in [1, 1, 2, 3, 1] {
            calls.push(spawn_submit(&grouped, item));
            // Each is queued before the next, so the order is known.
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        recorder.gate.add_permits(10);
        let mut answers = Vec::new();
        for call in calls {
            answers.push(call.await.unwrap_or_else(|e| panic!("{e}")).ok());
        }
        assert_eq!(answers, [10, 10, 20, 30, 10].map(Some));
        let groups = recorder.groups();
        assert_eq!(groups.concat(), [1, 1, 2, 3, 1], "in the order they came");
        assert!(
            groups.len() < 5,
            "work that waited shared a group: {groups:?}"
        );
        for g in &groups {
            let before_last: u32 = g[..g.len() - 1].iter().sum();
            assert!(
                before_last < 5,
                "a group closes at a weight of 5: {groups:?}"
            );
        }
    }

    #[tokio::test]
    async fn work_that_arrives_while_a_group_waits_for_the_writer_joins_it() {
        let recorder = Recorder::default();
        let grouped = Arc::new(GroupCommit::new(recorder.clone()));
        let first = spawn_submit(&grouped, 1);
        // The first item's group is waiting for its turn when the others come.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let rest: Vec<_> = (0..3).map(|_| spawn_submit(&grouped, 1)).collect();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        recorder.gate.add_permits(10);
        for call in std::iter::once(first).chain(rest) {
            assert_eq!(call.await.unwrap_or_else(|e| panic!("{e}")).ok(), Some(10));
        }
        let groups = recorder.groups();
        assert_eq!(
            groups,
            [vec![1, 1, 1, 1]],
            "one group, closed once its turn began"
        );
    }

    #[tokio::test]
    async fn without_the_writer_every_caller_waiting_is_told_at_once() {
        let recorder = Recorder::default();
        recorder
            .no_writer
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let grouped = Arc::new(GroupCommit::new(recorder.clone()));
        let calls: Vec<_> = (0..4).map(|_| spawn_submit(&grouped, 1)).collect();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        // One turn refused: it answers everyone who waited for it.
        recorder.gate.add_permits(1);
        for call in calls {
            let answer = call.await.unwrap_or_else(|e| panic!("{e}"));
            assert!(matches!(answer, Err(StoreError::Conflict(_))), "{answer:?}");
        }
        recorder
            .no_writer
            .store(false, std::sync::atomic::Ordering::SeqCst);
        recorder.gate.add_permits(1);
        assert_eq!(grouped.submit(2).await.ok(), Some(20));
        let groups = recorder.groups();
        assert_eq!(groups, [vec![2]], "nothing of the failed group was written");
    }

    #[tokio::test]
    async fn a_failed_group_answers_each_of_its_callers_with_the_error() {
        let recorder = Recorder::default();
        recorder.gate.add_permits(10);
        let grouped = GroupCommit::new(recorder);
        let failed = grouped.submit(0).await;
        assert!(matches!(failed, Err(StoreError::Conflict(_))), "{failed:?}");
        assert_eq!(grouped.submit(4).await.ok(), Some(40));
    }
}
