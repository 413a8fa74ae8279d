//! Webhook delivery. The dispatcher stage consumes the events topic and queues one
//! delivery per event and matching subscription in the store; the sender makes the
//! attempts, signed, with the durable retry schedule, bounded concurrency per endpoint
//! and in total, and the SSRF guard on every connection.

pub mod dispatch;
pub mod guard;
pub mod schedule;
pub mod sender;
pub mod signing;

pub use dispatch::Dispatch;
pub use sender::{Sender, SenderSettings};
