//! The `claims` binary: parse the command line, hand over to [`claims::run`].

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = claims::cli::Cli::parse();
    claims::run(cli)
}
