//! The `claims` binary: parse the command line, hand over to [`claims::run`].

use clap::Parser;

// glibc's allocator spent a fifth of the service's time under load in its free-list
// upkeep (`malloc_consolidate`, `unlink_chunk`): the stages allocate and drop many
// short-lived buffers of every size per batch.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let cli = claims::cli::Cli::parse();
    claims::run(cli)
}
