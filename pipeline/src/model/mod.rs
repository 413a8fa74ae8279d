//! The domain model the stages, the store and the bus all speak: the claim as it moves
//! through the pipeline, the decision on it, the domain events it causes, its fraud
//! score, and the ids derived from it. It imports none of them, so each can depend on it
//! without depending on the others.

pub mod claim;
pub mod decision;
pub mod event;
pub mod facts;
pub mod fraud;
pub mod ids;
pub mod kept;
pub mod shared;
pub mod trace;

pub use claim::{claim_key, member_key, ClaimInProcess, ClaimSubmitted};
pub use decision::{Decision, Written, WrittenParts, WRITTEN_PREFIX};
pub use event::{DomainEvent, EventKind, Json};
pub use facts::{DecidedClaim, DecisionFacts, PlanFacts};
pub use fraud::{FraudReason, FraudScore};
pub use ids::{derived_id, ordered_id, ordered_name_id};
pub use kept::Kept;
pub use trace::Trace;

thread_local! {
    /// Whether traces and [`Kept`] members read on this thread are kept as text: see
    /// [`reading_as_text`].
    static AS_TEXT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `read`, in which every [`Trace`] read is kept as the JSON text it was written
/// as, with the number of its entries, and so is every [`Kept`] member. `read` must
/// read JSON with `serde_json` (whose values can be taken as raw text); the text it
/// keeps is written out unchanged, so it is byte for byte what the writer of the record
/// wrote.
pub fn reading_as_text<R>(read: impl FnOnce() -> R) -> R {
    with_flag(&AS_TEXT, read)
}

/// Whether this thread reads inside [`reading_as_text`].
fn as_text() -> bool {
    AS_TEXT.with(std::cell::Cell::get)
}

/// Runs `read` with the thread's `flag` set, then puts it back as it was (even should
/// `read` panic): how a reader asks the model to read some field its own way.
fn with_flag<R>(
    flag: &'static std::thread::LocalKey<std::cell::Cell<bool>>,
    read: impl FnOnce() -> R,
) -> R {
    struct Restore(&'static std::thread::LocalKey<std::cell::Cell<bool>>, bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            self.0.with(|f| f.set(self.1));
        }
    }
    let _restore = Restore(flag, flag.with(|f| f.replace(true)));
    read()
}
