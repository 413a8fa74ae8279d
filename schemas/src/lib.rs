//! The wire contract of the claims service: every type that crosses a process boundary
//! (HTTP bodies, bus records, events) is defined here, so that the front end, the
//! pipeline and outside readers agree on one shape.

pub mod adjudication;
pub mod auth;
pub mod avro;
pub mod backtest;
pub mod claim;
pub mod date;
pub mod error;
pub mod fhir;
pub mod id;
pub mod job;
pub mod member;
pub mod page;
pub mod payment;
pub mod plan;
pub mod provider;
pub mod receipt;
pub mod rulebook;
pub mod scope;
pub mod tenant;
pub mod upload;
pub mod user;
pub mod webhook;
pub mod workflow;
pub mod x12;

pub use date::Date;
pub use error::{ErrorBody, ErrorDetail};
pub use id::{ClientId, IdError, TenantId, CLIENT_ID_PATTERN};
pub use page::Page;
pub use scope::{Scope, ScopeSet};
