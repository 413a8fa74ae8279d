//! The HTTP suite: every test spawns the real service on port 0 with a fresh database,
//! and runs once on SQLite and once on PostgreSQL (`sqlite::…` and `postgres::…` in
//! the output).

// A test reports failure by panicking; unwrapping is the idiom here.
#![allow(clippy::unwrap_used)]

mod support;

mod admin_cli;
mod analyst;
mod auth_login;
mod auth_session;
mod backtests;
mod benefits;
mod claims;
mod config_cache;
mod connections;
mod console;
mod corrections;
mod dead_letters;
mod errors;
mod fhir;
mod forged_tokens;
mod fused;
mod health;
mod idempotency;
mod kafka_intake;
mod member_history;
mod members;
mod multi_process;
mod openapi;
mod payments;
mod pipeline;
mod providers;
mod rate_limits;
mod rebuild;
mod receipts;
mod reprocess;
mod rulebooks;
mod signing_keys;
mod tenant_settings;
mod upload_processing;
mod uploads;
mod users;
mod webhooks;
mod workflow;
mod x12;
