//! The processing side of the service. `store` is the relational state shared by every
//! role (tenants, users, sessions, keys; later the snapshots the stages write).

pub mod acknowledgments;
pub mod adjudication;
pub mod backtest;
pub mod bus;
pub mod clock;
pub mod config_cache;
pub mod cpu;
pub mod dead_letters;
pub mod group_commit;
pub mod idempotency;
pub mod intake;
pub mod model;
pub mod payments;
pub mod rebuild;
pub mod redecide;
pub mod replay;
pub mod reprocess;
pub mod retry;
pub mod rules;
pub mod stages;
pub mod store;
pub mod topics;
pub mod uploads;
pub mod varint;
pub mod webhooks;
pub mod workflow;
