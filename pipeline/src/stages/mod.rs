//! The processing stages. Each has the same shape: its input topic, a pure `process`
//! function from an input record and the stage's state to its outputs, the state, and
//! its tests. [`runner`] drives any stage on the bus: poll a batch, gather the state the
//! batch needs, process, publish every output, then commit.
//!
//! The chain: `claims.intake` → validate → `claims.validated` → rules →
//! `claims.evaluated` → fraud → `claims.scored` → decide → `claims.decided` (+ domain
//! events on `claims.events`) → snapshot (the queryable claim, its audit record, its
//! review task).

pub mod decide;
pub mod fraud;
pub mod record;
pub mod rules;
pub mod runner;
pub mod validate;

pub use record::ClaimInProcess;
pub use runner::{run, Stage, StageError};
