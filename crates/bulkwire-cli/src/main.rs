//! The `bulkwire` command. Thin: argument parsing here, the work in the
//! library crates.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// The static (musl) binary's allocator: see Cargo.toml's note and
/// README "A binary that runs anywhere".
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bench;
mod build;
mod creds;
mod events;
mod health;
mod load;
mod parse;
mod parse_xml;
#[cfg(test)]
mod reference;
mod serve;

/// Large binary payloads over HTTP, at memory speed and in constant memory.
#[derive(Parser)]
#[command(name = "bulkwire", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse a body (multipart/form-data, MTOM/XOP, XML-RPC); one JSON
    /// object per part or value on stdout.
    Parse(parse::Args),
    /// Build a multipart/form-data body from fields and files; prints its
    /// Content-Type line.
    Build(build::Args),
    /// Run the upload/media server (the book: docs/src/getting-started.md).
    Serve(serve::Args),
    /// Manage API tokens in the metadata store (every node accepts them).
    #[command(subcommand)]
    Token(creds::TokenCmd),
    /// Manage users (HTTP Basic, XML-RPC and SOAP logins) in the metadata
    /// store.
    #[command(subcommand)]
    User(creds::UserCmd),
    /// Manage media links (capability URLs) in the metadata store.
    #[command(subcommand)]
    Link(creds::LinkCmd),
    /// Events in the outbox: list them, retry failed webhook deliveries,
    /// make a signing secret (the book: docs/src/events.md).
    #[command(subcommand)]
    Events(events::EventsCmd),
    /// Load-test an upload endpoint (the book: docs/src/load.md).
    Load(Box<load::Args>),
    /// Measure a server: memory and time against size, latency at a fixed
    /// rate (the book: docs/src/load.md, "bulkwire bench").
    #[command(subcommand)]
    Bench(bench::Command),
    /// Ask a running server's /healthz (exit 0 when it answers 2xx): a
    /// container's HEALTHCHECK where there is no curl.
    Healthcheck(health::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Parse(a) => parse::run(a),
        Command::Build(a) => build::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Token(c) => creds::token(c),
        Command::User(c) => creds::user(c),
        Command::Link(c) => creds::link(c),
        Command::Events(c) => events::events(c),
        Command::Load(a) => load::run(*a),
        Command::Bench(c) => bench::run(c),
        Command::Healthcheck(a) => health::run(a),
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// `--help` describes every command and every option (clap's own
    /// `--help`/`--version` aside).
    #[test]
    fn every_command_and_option_has_a_description() {
        let mut missing = Vec::new();
        walk(&Cli::command(), "bulkwire", &mut missing);
        assert!(missing.is_empty(), "undescribed: {missing:#?}");
    }

    fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        if cmd.get_about().is_none() {
            missing.push(path.to_string());
        }
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if id != "help" && id != "version" && arg.get_help().is_none() {
                missing.push(format!("{path} {id}"));
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, &format!("{path} {}", sub.get_name()), missing);
        }
    }
}
