//! The command line (contract: Running; Tenants and users).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "claims",
    version,
    about = "Multi-tenant health-claims processing service"
)]
pub struct Cli {
    /// A TOML configuration file; `CLAIMS_*` environment variables override it.
    #[arg(long, global = true, env = "CLAIMS_CONFIG")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the API and the pipeline stages.
    Serve(ServeArgs),
    /// Apply pending database migrations, then exit.
    Migrate,
    /// List the bus's topics with their size and each consumer group's lag, or print a
    /// topic's latest records (`topics tail TOPIC`).
    Topics {
        #[command(subcommand)]
        command: Option<TopicsCommand>,
    },
    /// Records the stages parked because they cannot be processed as they are: list
    /// them, show one, or put them back on their topics once the cause is fixed.
    DeadLetters {
        #[command(subcommand)]
        command: DeadLettersCommand,
    },
    /// Rebuild the queryable snapshots (claims, decisions, tasks, accumulators) in an
    /// empty database from the topics of record alone.
    Replay(ReplayArgs),
    /// The store's snapshots: `snapshot checksum` prints a digest per table that is the
    /// same for the live store and one rebuilt by `replay`.
    Snapshot {
        #[command(subcommand)]
        command: SnapshotCommand,
    },
    /// Operator commands; they print JSON and work while `serve` runs.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Roles this process runs, comma-separated; all of them by default.
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(
        std::iter::once("api").chain(pipeline::stages::NAMES)
    ))]
    pub stages: Option<Vec<String>>,
    /// Create a demo tenant and a user holding every scope, and print how to log in.
    #[arg(long)]
    pub demo: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// The database to build into (`sqlite://PATH` or `postgres://…`), migrated and
    /// without claims; the topics are those the configuration names.
    #[arg(long, value_name = "DATABASE_URL")]
    pub into: String,
}

#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// Print, per snapshot table, its rows and a digest of them that does not depend on
    /// row order or on what each write stamps.
    Checksum(ChecksumArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ChecksumArgs {
    /// The database to read (default: the configured one).
    #[arg(long, value_name = "DATABASE_URL")]
    pub database: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum TopicsCommand {
    /// Print a topic's latest records, oldest first, one JSON document per line.
    Tail(TailArgs),
}

#[derive(Debug, Clone, Args)]
pub struct TailArgs {
    /// The topic's full name, as `claims topics` lists it (e.g. `claims.events`).
    pub topic: String,
    /// How many of the latest records (1-10,000).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=10_000))]
    pub limit: u16,
}

#[derive(Debug, Subcommand)]
pub enum DeadLettersCommand {
    /// The parked records not yet redriven (`--all`: those too), oldest first.
    List(ListDeadLettersArgs),
    /// One parked record with its value.
    Show(ShowDeadLetterArgs),
    /// Put every parked record not yet redriven back on its source topic, in order.
    Redrive,
}

#[derive(Debug, Clone, Args)]
pub struct ListDeadLettersArgs {
    /// Include the records already redriven.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ShowDeadLetterArgs {
    /// The record's id, as `list` prints it.
    pub id: i64,
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Create a tenant, or report the existing one.
    CreateTenant(CreateTenantArgs),
    /// Create a user, or bring an existing one to the given password and scopes.
    CreateUser(CreateUserArgs),
    /// Walk a tenant's audit hash chain; exits non-zero naming the first broken record.
    VerifyAudit(VerifyAuditArgs),
    /// List the access-token signing keys, retired ones included.
    ListKeys,
    /// Retire an access-token signing key: every process stops taking the tokens it
    /// signed within 10 s, and a process that signs with it moves to a new key.
    RetireKey(RetireKeyArgs),
}

#[derive(Debug, Clone, Args)]
pub struct RetireKeyArgs {
    /// The key's `kid`, as the JWKS and `list-keys` show it. A thumbprint in base64url
    /// begins with `-` once in 64 keys, so a value may begin with one.
    #[arg(long, allow_hyphen_values = true)]
    pub kid: String,
}

#[derive(Debug, Clone, Args)]
pub struct VerifyAuditArgs {
    #[arg(long)]
    pub tenant_id: String,
}

#[derive(Debug, Clone, Args)]
pub struct CreateTenantArgs {
    #[arg(long)]
    pub tenant_id: String,
    #[arg(long)]
    pub name: String,
}

#[derive(Debug, Clone, Args)]
pub struct CreateUserArgs {
    #[arg(long)]
    pub tenant_id: String,
    #[arg(long)]
    pub email: String,
    /// The password; or set CLAIMS_ADMIN_PASSWORD to keep it out of the process list.
    /// It may begin with `-`.
    #[arg(
        long,
        env = "CLAIMS_ADMIN_PASSWORD",
        hide_env_values = true,
        allow_hyphen_values = true
    )]
    pub password: String,
    /// Space-separated scopes, e.g. "claims:write claims:read".
    #[arg(long)]
    pub scopes: String,
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{AdminCommand, Cli, Command};

    fn admin(args: &[&str]) -> AdminCommand {
        let argv = ["claims", "admin"].iter().chain(args);
        match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(Command::Admin { command }) => command,
            other => panic!("not an admin command: {other:?}"),
        }
    }

    #[test]
    fn a_kid_or_a_password_may_begin_with_a_hyphen() {
        match admin(&["retire-key", "--kid", "-2Xq9"]) {
            AdminCommand::RetireKey(a) => assert_eq!(a.kid, "-2Xq9"),
            other => panic!("{other:?}"),
        }
        let user = [
            "create-user",
            "--tenant-id",
            "t1",
            "--email",
            "a@x.example",
            "--password",
            "-s3cret",
            "--scopes",
            "claims:read",
        ];
        match admin(&user) {
            AdminCommand::CreateUser(a) => assert_eq!(a.password, "-s3cret"),
            other => panic!("{other:?}"),
        }
    }
}
