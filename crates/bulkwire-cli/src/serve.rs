//! `bulkwire serve`: flags, `BULKWIRE_*` variables and an optional TOML
//! file merged into a [`Config`]; the server itself is the
//! `bulkwire-server` library.

use bulkwire_server::{parse_listen, shutdown_signal, Config, Server, User};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// Flags win over the file; the file wins over defaults.
#[derive(clap::Args)]
pub struct Args {
    /// TOML file with any of: listen, data, tokens, users, meta, blobs,
    /// public_url, link_ttl, cors_origins, [s3], [auth], [limits].
    #[arg(long, env = "BULKWIRE_CONFIG")]
    config: Option<PathBuf>,
    /// Address to listen on: HOST:PORT (`localhost:8092`, `0.0.0.0:8080`
    /// for every interface) or a port (`8092`, on 127.0.0.1) [default:
    /// 127.0.0.1:8080].
    #[arg(long, env = "BULKWIRE_LISTEN", value_parser = parse_listen)]
    listen: Option<SocketAddr>,
    /// Not a flag: `--listen` takes a port (kept so that the error can say
    /// so).
    #[arg(long, hide = true)]
    port: Option<String>,
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
    #[command(flatten)]
    stores: StoreArgs,
    /// The server's origin as clients reach it (`https://media.example.com`
    /// behind a proxy); every URL it returns starts with it [default: the
    /// request's Host].
    #[arg(long, env = "BULKWIRE_PUBLIC_URL")]
    public_url: Option<String>,
    /// How long media links stay valid (`30d`, `12h`) [default: until the
    /// media is deleted or the link key rotated].
    #[arg(long, env = "BULKWIRE_LINK_TTL", value_parser = secs)]
    link_ttl: Option<u64>,
    /// An origin whose browser scripts may call the API (repeatable;
    /// comma-separated in the environment; `*` for any).
    #[arg(
        long = "cors-origin",
        env = "BULKWIRE_CORS_ORIGINS",
        value_delimiter = ','
    )]
    cors_origins: Vec<String>,
    /// JWK Set URL (http:// or https://) whose RS256, ES256 and EdDSA keys
    /// check JWT bearer tokens ([auth] jwt_jwks_url).
    #[arg(long, env = "BULKWIRE_JWT_JWKS_URL")]
    jwt_jwks_url: Option<String>,
    /// HS256 secret for JWT bearer tokens, at least 32 bytes ([auth]
    /// jwt_secret); prefer the variable, which `ps` does not show.
    #[arg(long, env = "BULKWIRE_JWT_SECRET", hide_env_values = true)]
    jwt_secret: Option<String>,
    /// Connect to both stores, say what they are and whether they answer,
    /// then exit: 0 when both do, 1 otherwise.
    #[arg(long)]
    check: bool,
}

/// A duration flag in whole seconds (`30d`, `3600`).
fn secs(s: &str) -> Result<u64, String> {
    Ok(bulkwire_units::parse_duration(s)?.as_secs())
}

/// Where metadata and blobs live; shared by `serve`, `token` and `user`.
#[derive(clap::Args, Clone, Default)]
pub struct StoreArgs {
    /// Metadata store: postgres://USER[:PASSWORD]@HOST:PORT/DB or
    /// sqlite:PATH [default: SQLite in the data directory].
    #[arg(long, env = "BULKWIRE_META")]
    pub meta: Option<String>,
    /// Blob store: s3://BUCKET/PREFIX (endpoint, region and credentials
    /// from AWS_* or the [s3] keys) or file:DIR [default: the data
    /// directory].
    #[arg(long, env = "BULKWIRE_BLOBS")]
    pub blobs: Option<String>,
}

impl StoreArgs {
    /// Lays these over a configuration (flags win).
    pub fn apply(&self, c: &mut Config) {
        if self.meta.is_some() {
            c.meta.clone_from(&self.meta);
        }
        if self.blobs.is_some() {
            c.blobs.clone_from(&self.blobs);
        }
    }
}

/// The configuration file, if any, with `--data` over it: what the
/// credential commands need to find the metadata store.
pub fn base_config(file: Option<&PathBuf>, data: Option<PathBuf>) -> Result<Config, String> {
    let mut c = match file {
        Some(p) => {
            let s = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            Config::from_toml_str(&s).map_err(|e| format!("{}: {e}", p.display()))?
        }
        None => Config::default(),
    };
    if let Some(d) = data {
        c.data = d;
    }
    Ok(c)
}

fn config(a: Args) -> Result<Config, String> {
    let mut c = base_config(a.config.as_ref(), a.data)?;
    if let Some(l) = a.listen {
        c.listen = l;
    }
    a.stores.apply(&mut c);
    if a.public_url.is_some() {
        c.public_url = a.public_url;
    }
    if a.link_ttl.is_some() {
        c.link_ttl = a.link_ttl;
    }
    c.cors_origins
        .extend(a.cors_origins.into_iter().filter(|o| !o.is_empty()));
    if a.jwt_jwks_url.is_some() {
        c.auth.jwt_jwks_url = a.jwt_jwks_url;
    }
    if a.jwt_secret.is_some() {
        c.auth.jwt_secret = a.jwt_secret;
    }
    // Again with the flags over the file: a short secret from the
    // environment is as wrong as one in the file.
    c.auth.validate()?;
    c.tokens
        .extend(a.tokens.into_iter().filter(|t| !t.is_empty()));
    for u in &a.users {
        c.users.push(User::parse(u)?);
    }
    Ok(c)
}

/// The log on stderr: `BULKWIRE_LOG` (`error`, `warn`, `info` (default, with
/// one access line per request), `debug`, `trace`), `BULKWIRE_LOG_FORMAT=json`
/// for one JSON object per line; colours only when stderr is a terminal.
fn init_log() {
    use std::io::IsTerminal;
    let level = match std::env::var("BULKWIRE_LOG").as_deref() {
        Ok("trace") => tracing::Level::TRACE,
        Ok("debug") => tracing::Level::DEBUG,
        Ok("warn") => tracing::Level::WARN,
        Ok("error") => tracing::Level::ERROR,
        _ => tracing::Level::INFO,
    };
    let b = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr);
    if std::env::var("BULKWIRE_LOG_FORMAT").as_deref() == Ok("json") {
        b.json().flatten_event(true).init();
    } else {
        b.with_ansi(std::io::stderr().is_terminal()).init();
    }
}

/// `--port N` is what many servers take: answer as clap answers an
/// unknown flag, with the flag that does it.
fn port_hint(port: &str) -> clap::Error {
    use clap::CommandFactory;
    let mut cmd = crate::Cli::command();
    let serve = cmd
        .find_subcommand_mut("serve")
        .cloned()
        .unwrap_or_default();
    serve.bin_name("bulkwire serve").error(
        clap::error::ErrorKind::UnknownArgument,
        format!(
            "unexpected argument '--port'\n\n  tip: to listen on port {port}, use '--listen {port}' \
             (127.0.0.1:{port}) or '--listen 0.0.0.0:{port}' (every interface)"
        ),
    )
}

pub fn run(a: Args) -> ExitCode {
    if let Some(p) = &a.port {
        port_hint(p).exit();
    }
    init_log();
    let check = a.check;
    let c = match config(a) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(c.limits.blocking_threads())
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("tokio runtime: {e}")),
    };
    if check {
        return rt.block_on(check_stores(c));
    }
    match rt.block_on(serve(c)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e.to_string()),
    }
}

async fn serve(c: Config) -> std::io::Result<()> {
    let summary = bulkwire_server::stores::summary(&c);
    // Before the state is built: the connection cap follows the limit.
    bulkwire_server::conns::raise_descriptor_limit();
    let server = Server::bind(c).await?;
    let mut out = std::io::stdout().lock();
    if let Some(t) = server.generated_token() {
        writeln!(
            out,
            "bulkwire: no credentials yet; created an API token, stored only as its SHA-256 in the metadata store, shown this once (`bulkwire token create` makes another):\n  {t}"
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
        "bulkwire: listening on http://{} ({})",
        server.local_addr()?,
        summary
    )?;
    out.flush()?;
    drop(out);
    server.run(first_signal()).await
}

/// The first SIGTERM/SIGINT starts the drain (`Server::run`); a second one
/// (an impatient Ctrl-C) stops at once, as the drain's log line offers.
async fn first_signal() {
    shutdown_signal().await;
    tokio::spawn(async {
        shutdown_signal().await;
        eprintln!("bulkwire serve: second signal: stopping now, requests in flight are cut");
        std::process::exit(130);
    });
}

/// `--check`: one line per store; exit 1 if either fails.
async fn check_stores(c: Config) -> ExitCode {
    let mut ok = true;
    for (what, r) in bulkwire_server::stores::check(&c).await {
        match r {
            Ok(s) => println!("{what}: ok: {s}"),
            Err(e) => {
                ok = false;
                println!("{what}: FAILED: {e}");
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("bulkwire serve: {msg}");
    ExitCode::FAILURE
}
