//! One file per resource of the contract.

pub mod audit;
pub mod auth;
pub mod backtests;
pub mod claims;
pub mod console;
pub mod decisions;
pub mod fhir;
pub mod health;
pub mod jobs;
pub mod members;
pub mod operations;
pub mod payments;
pub mod plans;
pub mod providers;
pub mod rulebooks;
pub mod tenant_settings;
pub mod uploads;
pub mod users;
pub mod webhooks;
pub mod well_known;
pub mod workflow;
pub mod x12;
