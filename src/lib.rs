//! Wires the libraries into the `claims` binary: configuration, the command line, and
//! the roles a process can take (`serve`, `migrate`, `replay`, `admin …`).

pub mod admin;
pub mod cli;
pub mod config;
pub mod dead_letters;
pub mod demo;
pub mod open;
pub mod output;
pub mod replay;
pub mod server;
pub mod telemetry;
pub mod topics;

use std::process::ExitCode;

use cli::{AdminCommand, Cli, Command, SnapshotCommand, TopicsCommand};

/// Runs one command to completion on a fresh runtime.
pub fn run(cli: Cli) -> ExitCode {
    let config = match config::Config::load(cli.config.as_deref()) {
        Ok(c) => c,
        Err(e) => return output::fail("CONFIG_ERROR", &format!("{e:#}")),
    };
    telemetry::init(&config.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return output::fail("INTERNAL_ERROR", &format!("cannot start the runtime: {e}")),
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => server::serve(&config, args).await,
            Command::Migrate => admin::migrate(&config).await,
            Command::Topics { command } => match command {
                None => topics::list(&config).await,
                Some(TopicsCommand::Tail(args)) => topics::tail(&config, args).await,
            },
            Command::DeadLetters { command } => dead_letters::run(&config, command).await,
            Command::Replay(args) => replay::replay(&config, args).await,
            Command::Snapshot { command } => match command {
                SnapshotCommand::Checksum(args) => replay::checksum(&config, args).await,
            },
            Command::Admin { command } => match command {
                AdminCommand::CreateTenant(args) => admin::create_tenant(&config, args).await,
                AdminCommand::CreateUser(args) => admin::create_user(&config, args).await,
                AdminCommand::VerifyAudit(args) => admin::verify_audit(&config, args).await,
                AdminCommand::ListKeys => admin::list_keys(&config).await,
                AdminCommand::RetireKey(args) => admin::retire_key(&config, args).await,
            },
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => output::fail_with(&e),
    }
}
