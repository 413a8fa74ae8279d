//! What every request passes through, whatever its route.

pub mod connections;
pub mod delivery_metrics;
pub mod error;
pub mod fallback;
pub mod items;
pub mod json;
pub mod list;
pub mod metrics;
pub mod rate_limit;
