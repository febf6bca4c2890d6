//! `bulkwire serve`: flags, `BULKWIRE_*` variables and an optional TOML
//! file merged into a [`Config`]; the server itself is the
//! `bulkwire-server` library.

use bulkwire_server::{shutdown_signal, Config, Server, User};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// Flags win over the file; the file wins over defaults.
#[derive(clap::Args)]
pub struct Args {
    /// TOML file with any of: listen, data, tokens, users, [limits].
    #[arg(long, env = "BULKWIRE_CONFIG")]
    config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, env = "BULKWIRE_LISTEN")]
    listen: Option<SocketAddr>,
    /// Data directory [default: ./bulkwire-data].
    #[arg(long, env = "BULKWIRE_DATA")]
    data: Option<PathBuf>,
    /// Bearer token accepted on /v1 (repeatable; comma-separated in the
    /// environment).
    #[arg(long = "token", env = "BULKWIRE_TOKEN", value_delimiter = ',')]
    tokens: Vec<String>,
    /// NAME:PASSWORD accepted with HTTP Basic (repeatable).
    #[arg(long = "user", env = "BULKWIRE_USER")]
    users: Vec<String>,
}

fn config(a: Args) -> Result<Config, String> {
    let mut c = match &a.config {
        Some(p) => {
            let s = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            Config::from_toml_str(&s).map_err(|e| format!("{}: {e}", p.display()))?
        }
        None => Config::default(),
    };
    if let Some(l) = a.listen {
        c.listen = l;
    }
    if let Some(d) = a.data {
        c.data = d;
    }
    c.tokens
        .extend(a.tokens.into_iter().filter(|t| !t.is_empty()));
    for u in &a.users {
        c.users.push(User::parse(u)?);
    }
    Ok(c)
}

pub fn run(a: Args) -> ExitCode {
    let level = match std::env::var("BULKWIRE_LOG").as_deref() {
        Ok("debug") => tracing::Level::DEBUG,
        Ok("warn") => tracing::Level::WARN,
        _ => tracing::Level::INFO,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .init();
    let c = match config(a) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("tokio runtime: {e}")),
    };
    match rt.block_on(serve(c)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e.to_string()),
    }
}

async fn serve(c: Config) -> std::io::Result<()> {
    let data = c.data.clone();
    // Before the state is built: the connection cap follows the limit.
    bulkwire_server::conns::raise_descriptor_limit();
    let server = Server::bind(c).await?;
    let mut out = std::io::stdout().lock();
    if let Some(t) = server.generated_token() {
        writeln!(
            out,
            "bulkwire: no --token or --user given; created an API token, stored only as its SHA-256 in {}, shown this once:\n  {t}",
            data.join(bulkwire_server::auth::TOKEN_FILE).display()
        )?;
    }
    let (temps, orphans) = server.swept();
    if temps + orphans > 0 {
        writeln!(
            out,
            "bulkwire: removed {temps} temp file(s) and {orphans} orphan blob(s) left by a crash"
        )?;
    }
    writeln!(
        out,
        "bulkwire: listening on http://{} (data: {})",
        server.local_addr()?,
        data.display()
    )?;
    out.flush()?;
    drop(out);
    server.run(shutdown_signal()).await
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("bulkwire serve: {msg}");
    ExitCode::FAILURE
}
