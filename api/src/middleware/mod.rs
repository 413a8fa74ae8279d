//! The layers every request passes through, outermost first: [`request_context`]
//! (request id, error bodies, metrics), [`rate_limit`] (which authenticates, as the
//! limit is the tenant's), [`idempotency`]. They sit above the application state they
//! read; the handlers sit above them.

pub mod authenticate;
pub mod idempotency;
pub mod rate_limit;
pub mod request_context;
