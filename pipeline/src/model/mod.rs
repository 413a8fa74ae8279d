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
pub mod shared;
pub mod trace;

pub use claim::{claim_key, member_key, ClaimInProcess, ClaimSubmitted};
pub use decision::{Decision, Written, WRITTEN_PREFIX};
pub use event::{DomainEvent, EventKind, Json};
pub use facts::{DecidedClaim, DecisionFacts, PlanFacts};
pub use fraud::{FraudReason, FraudScore};
pub use ids::{derived_id, ordered_id, ordered_name_id};
pub use trace::Trace;
