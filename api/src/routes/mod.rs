//! One file per resource of the contract.

pub mod auth;
pub mod health;
pub mod operations;
pub mod tenant_settings;
pub mod well_known;
