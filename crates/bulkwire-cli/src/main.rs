//! The `bulkwire` command. Thin: argument parsing here, the work in the
//! library crates.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod bench;
mod build;
mod creds;
mod load;
mod parse;
mod parse_xml;
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
    /// Parse a multipart body; one JSON object per part on stdout.
    Parse(parse::Args),
    /// Build a multipart/form-data body; prints its Content-Type line.
    Build(build::Args),
    /// Run the upload/media server (see the README's "Server" section).
    Serve(serve::Args),
    /// Manage API tokens in the metadata store (every node accepts them).
    #[command(subcommand)]
    Token(creds::TokenCmd),
    /// Manage users (HTTP Basic, XML-RPC and SOAP logins) in the metadata
    /// store.
    #[command(subcommand)]
    User(creds::UserCmd),
    /// Load-test an upload endpoint (see the README's "Load tool" section).
    Load(Box<load::Args>),
    /// Measure a server: memory and time against size, latency at a fixed
    /// rate (see the README's "Benchmarks" section).
    #[command(subcommand)]
    Bench(bench::Command),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Parse(a) => parse::run(a),
        Command::Build(a) => build::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Token(c) => creds::token(c),
        Command::User(c) => creds::user(c),
        Command::Load(a) => load::run(*a),
        Command::Bench(c) => bench::run(c),
    }
}
