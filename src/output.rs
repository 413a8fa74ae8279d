//! What the CLI prints: JSON on stdout for results, JSON on stderr for failures, so
//! that scripts can parse both.
#![allow(clippy::print_stdout)] // printing is this module's job

use std::process::ExitCode;

use serde::Serialize;

/// Prints one result document.
pub fn print_json(value: &impl Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(s) => println!("{s}"),
        Err(e) => eprintln!("cannot render output: {e}"),
    }
}

/// Prints one document on a line of its own (JSON lines, for streams of records).
pub fn print_json_line(value: &impl Serialize) {
    match serde_json::to_string(value) {
        Ok(s) => println!("{s}"),
        Err(e) => eprintln!("cannot render output: {e}"),
    }
}

/// A failure the operator can act on, with a stable code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    pub code: &'static str,
    pub message: String,
}

impl CliError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

pub fn fail(code: &str, message: &str) -> ExitCode {
    let body = serde_json::json!({ "error": { "code": code, "message": message } });
    eprintln!("{body}");
    ExitCode::FAILURE
}

pub fn fail_with(e: &anyhow::Error) -> ExitCode {
    match e.downcast_ref::<CliError>() {
        Some(c) => fail(c.code, &c.message),
        None => fail("ERROR", &format!("{e:#}")),
    }
}
