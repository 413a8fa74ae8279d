//! Webhook delivery. The `webhooks` stage (`crate::stages::webhooks`) consumes the
//! events topic and queues one delivery per event and matching subscription in the
//! store; the sender here makes the attempts: signed, on the durable retry schedule,
//! with bounded concurrency per endpoint and in total, and the SSRF guard on every
//! connection.

pub mod guard;
pub mod health;
pub mod retention;
pub mod schedule;
pub mod sender;
pub mod signing;

pub use sender::{Handoff, Reserved, Sender, SenderSettings};
