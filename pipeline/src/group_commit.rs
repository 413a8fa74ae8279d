//! Group commit: work that arrives while SQLite's one writer is busy shares the next
//! transaction, and so its sync, instead of taking the writer one transaction at a
//! time. Intake groups its requests' claims with it ([`crate::intake::Committer`]) and
//! idempotency keys their writes ([`crate::idempotency::KeyCommitter`]).
//!
//! Each caller is answered only once the transaction that holds its work has
//! committed, with its own share of the answer, or with the group's error when the
//! transaction failed (all or none of a group stands). A group's work is handed over in
//! the order it arrived.

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
    /// Named in the error a caller gets when the group's task is gone.
    const NAME: &'static str;
    /// A group is closed once the weight of its items reaches this.
    const MOST_PER_GROUP: usize;

    /// How much an item counts towards [`Self::MOST_PER_GROUP`]: one each, unless said.
    fn weight(_item: &Self::Item) -> usize {
        1
    }

    /// Writes `items` in one transaction, in order; answers one answer per item, in
    /// their order.
    fn commit(
        &self,
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

/// The groups' task: one transaction at a time, for everything waiting.
async fn commit_groups<C: Commit>(commit: C, mut waiting: mpsc::Receiver<Waiting<C>>) {
    while let Some(first) = waiting.recv().await {
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
        match commit.commit(items).await {
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
    }

    impl Default for Recorder {
        fn default() -> Self {
            Self {
                groups: Default::default(),
                gate: Arc::new(tokio::sync::Semaphore::new(0)),
            }
        }
    }

    impl Commit for Recorder {
        type Item = u32;
        type Answer = u32;
        const NAME: &'static str = "recorder";
        const MOST_PER_GROUP: usize = 5;

        fn weight(item: &u32) -> usize {
            *item as usize
        }

        async fn commit(&self, items: Vec<u32>) -> Result<Vec<u32>, StoreError> {
            // Held until the test lets a group through, so that the rest queue up.
            let _ = self.gate.acquire().await.map(|p| p.forget());
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
            let g = grouped.clone();
            calls.push(tokio::spawn(async move { g.submit(item).await }));
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
        let groups = recorder
            .groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
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
    async fn a_failed_group_answers_each_of_its_callers_with_the_error() {
        let recorder = Recorder::default();
        recorder.gate.add_permits(10);
        let grouped = GroupCommit::new(recorder);
        let failed = grouped.submit(0).await;
        assert!(matches!(failed, Err(StoreError::Conflict(_))), "{failed:?}");
        assert_eq!(grouped.submit(4).await.ok(), Some(40));
    }
}
