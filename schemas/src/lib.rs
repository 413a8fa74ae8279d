//! The wire contract of the claims service: every type that crosses a process boundary
//! (HTTP bodies, bus records, events) is defined here, so that the front end, the
//! pipeline and outside readers agree on one shape.

pub mod auth;
pub mod error;
pub mod id;
pub mod scope;
pub mod tenant;

pub use error::{ErrorBody, ErrorDetail};
pub use id::{ClientId, IdError};
pub use scope::{Scope, ScopeSet};
