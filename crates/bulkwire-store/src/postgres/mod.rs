//! Metadata in PostgreSQL ([`PgMeta`]): the
//! [`MetaStore`](crate::MetaStore) that any number of bulkwire nodes share
//! (DESIGN.md "Storage: embedded by default, real engines to scale out").
//! Same tables and meaning as the SQLite store; what differs is what many
//! nodes at once require:
//!
//! - Migrations run at connect in one transaction holding
//!   `pg_advisory_xact_lock`: nodes starting together queue on the lock,
//!   the first migrates and the others find the schema current. The lock
//!   ends with the transaction, so a node killed mid-migration leaves
//!   neither half a schema nor a stuck lock.
//! - Every time (created, lease start, heartbeat) is the database server's
//!   `now()`. The lease expiry compares heartbeats that different nodes
//!   wrote; with node clocks, a node running behind would see a live
//!   node's lease as expired and remove an upload in flight.
//! - [`claim_expired`](crate::LeaseStore::claim_expired) is one `UPDATE`
//!   over `FOR UPDATE SKIP LOCKED`: two janitors never take the same lease
//!   and never wait for each other.
//! - Connections come from a deadpool pool whose wait, create and recycle
//!   timeouts are the caller's `timeout`, so a database that is down fails
//!   a request in that time instead of queueing it; connections it dropped
//!   are replaced at the next checkout. Statements are prepared once per
//!   connection (`prepare_cached`).
//!
//! - TLS with libpq's URL parameters (`sslmode`, `sslrootcert`, `sslcert`,
//!   `sslkey`; module `tls`), on rustls: `prefer` by default, as libpq.
//!
//! This module holds the pool, the statement helpers ([`PgMeta::execute`],
//! `query`, `query_opt`, `value`) and [`MetaCore`]; each concern's trait
//! is implemented, with its statements as constants, in a module of its
//! own: `media`, `credentials`, `leases`, `uploads`; `schema` runs the
//! migrations, `error` classifies PostgreSQL's errors and `tls` reads
//! libpq's TLS parameters.

mod credentials;
mod error;
mod events;
mod leases;
mod media;
mod schema;
mod tls;
mod uploads;

use tls::{Mode as SslMode, Tls as PgTls};

pub use schema::PG_SCHEMA_VERSION;

use crate::{BoxFut, MetaCore, MetaError};
use deadpool_postgres::{Client, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use error::{chain, db, disk_full, error, no_connection};
use schema::{migrate, SCHEMA};
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::config::Host;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Config, Row};

type PgError = tokio_postgres::Error;
type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// PostgreSQL metadata store: a connection pool; clones share it.
#[derive(Clone)]
pub struct PgMeta {
    pool: Pool,
    /// `host:port/database`, for messages (never the password).
    at: Arc<str>,
    timeout: Duration,
    /// The URL's TLS parameters, for `--check`.
    tls: Arc<PgTls>,
}

impl PgMeta {
    /// The schema version this build writes ([`PG_SCHEMA_VERSION`]).
    pub const SCHEMA_VERSION: usize = PG_SCHEMA_VERSION;

    /// Connects to `url` (`postgres://user[:password]@host:port/database`)
    /// with up to `pool_size` connections, and brings the schema up to
    /// date. `timeout` bounds each wait for a connection: a database that
    /// is away fails requests in that time rather than holding them.
    pub async fn connect(
        url: &str,
        pool_size: usize,
        timeout: Duration,
    ) -> Result<PgMeta, MetaError> {
        let (url, tls) = PgTls::split(url)
            .map_err(|e| MetaError::new(format!("PostgreSQL: invalid URL: {e}")))?;
        let cfg = config(&url, timeout, tls.mode)?;
        let at = address(&cfg);
        let fail = |why: String, full: bool| error(format!("PostgreSQL at {at}: {why}"), full);
        if pool_size == 0 || timeout.is_zero() {
            let why = "the pool needs at least one connection and a timeout above zero";
            return Err(fail(why.into(), false));
        }
        let connector = tls.connector().map_err(|e| fail(e, false))?;
        let pool =
            pool(cfg, connector, pool_size, timeout).map_err(|e| fail(e.to_string(), false))?;
        let mut c = pool.get().await.map_err(|e| {
            let (why, full) = no_connection(&e, pool_size, timeout);
            fail(tls_hint(why, &tls), full)
        })?;
        let found = migrate(&mut c)
            .await
            .map_err(|e| fail(format!("migrating: {}", chain(&e)), disk_full(&e)))?;
        if found > PG_SCHEMA_VERSION {
            let why = format!(
                "schema version {found} is newer than this build's {PG_SCHEMA_VERSION}: \
                 a newer bulkwire migrated this database"
            );
            return Err(fail(why, false));
        }
        Ok(PgMeta {
            pool,
            at: at.into(),
            timeout,
            tls: Arc::new(tls),
        })
    }

    /// A pooled connection; a dead one was replaced on the way.
    async fn client(&self) -> Result<Client, MetaError> {
        self.pool.get().await.map_err(|e| {
            let (why, full) = no_connection(&e, self.pool.status().max_size, self.timeout);
            let mut m = error(format!("PostgreSQL: {why} (at {})", self.at), full);
            // No connection within the timeout, or none could be made.
            m.unavailable = !full;
            m
        })
    }

    /// Runs one statement; the number of rows it changed.
    async fn execute(&self, sql: &str, params: Params<'_>) -> Result<u64, MetaError> {
        let c = self.client().await?;
        let st = c.prepare_cached(sql).await.map_err(db)?;
        c.execute(&st, params).await.map_err(db)
    }

    async fn query(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, MetaError> {
        let c = self.client().await?;
        let st = c.prepare_cached(sql).await.map_err(db)?;
        c.query(&st, params).await.map_err(db)
    }

    async fn query_opt(&self, sql: &str, params: Params<'_>) -> Result<Option<Row>, MetaError> {
        let c = self.client().await?;
        let st = c.prepare_cached(sql).await.map_err(db)?;
        c.query_opt(&st, params).await.map_err(db)
    }

    /// The first column of the one row `sql` returns.
    async fn value<T>(&self, sql: &str, params: Params<'_>) -> Result<T, MetaError>
    where
        T: for<'r> tokio_postgres::types::FromSql<'r>,
    {
        let c = self.client().await?;
        let st = c.prepare_cached(sql).await.map_err(db)?;
        c.query_one(&st, params)
            .await
            .and_then(|r| r.try_get(0))
            .map_err(db)
    }

    async fn describe_now(&self) -> Result<String, MetaError> {
        let version: String = self
            .value("SELECT current_setting('server_version')", &[])
            .await?;
        let schema: i32 = self.value(SCHEMA, &[]).await?;
        // "15.18 (Debian 15.18-1.pgdg120+1)": the number is enough.
        let version = version.split_whitespace().next().unwrap_or("?");
        // The server's view of this very connection.
        let ssl: Option<String> = self
            .value(
                "SELECT CASE WHEN ssl THEN version END FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .await?;
        let tls = match ssl {
            Some(v) => format!("{v} ({}), {}", self.tls.mode, self.tls.verified()),
            None => format!("no TLS (sslmode={})", self.tls.mode),
        };
        Ok(format!(
            "PostgreSQL {version} at {}, schema version {schema}, {tls}",
            self.at
        ))
    }
}

/// Says what a failed handshake means in libpq's words: the server
/// offers no TLS, or its certificate failed the mode's check.
fn tls_hint(why: String, tls: &PgTls) -> String {
    if why.contains("server does not support TLS") {
        return format!(
            "the server does not offer TLS, and sslmode={} requires it",
            tls.mode
        );
    }
    if why.contains("invalid peer certificate") {
        let cause = why.rsplit(": ").next().unwrap_or(&why);
        return format!(
            "the server's certificate failed sslmode={} ({cause}; {})",
            tls.mode,
            match &tls.rootcert {
                Some(tls::RootCert::File(p)) => format!("sslrootcert={}", p.display()),
                Some(tls::RootCert::System) => "sslrootcert=system".into(),
                None => "no sslrootcert".into(),
            }
        );
    }
    why
}

/// Parses the URL and adds the timeouts that keep a lost server from
/// hanging a connection: `connect_timeout` for the handshake, and
/// `TCP_USER_TIMEOUT` for a query sent to a server that vanished without
/// a reset (TCP would otherwise retransmit for ~15 minutes).
fn config(url: &str, timeout: Duration, mode: SslMode) -> Result<Config, MetaError> {
    let mut cfg: Config = url
        .parse()
        .map_err(|e: PgError| MetaError::new(format!("PostgreSQL: invalid URL: {}", chain(&e))))?;
    cfg.ssl_mode(mode.ssl_mode());
    cfg.connect_timeout(timeout);
    cfg.tcp_user_timeout(timeout);
    if cfg.get_application_name().is_none() {
        cfg.application_name("bulkwire");
    }
    Ok(cfg)
}

fn pool(
    cfg: Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    size: usize,
    timeout: Duration,
) -> Result<Pool, deadpool_postgres::BuildError> {
    // `Fast` recycling checks only that the connection task is alive: a
    // server that went away closed it, and the pool connects anew.
    let manager = ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    };
    Pool::builder(Manager::from_config(cfg, tls, manager))
        .max_size(size)
        .wait_timeout(Some(timeout))
        .create_timeout(Some(timeout))
        .recycle_timeout(Some(timeout))
        .runtime(Runtime::Tokio1)
        .build()
}

/// `host:port/database` (every host, if several), for messages.
fn address(cfg: &Config) -> String {
    let ports = cfg.get_ports();
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let mut hosts: Vec<String> = cfg
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| match h {
            Host::Tcp(name) if name.contains(':') => format!("[{name}]:{}", port(i)),
            Host::Tcp(name) => format!("{name}:{}", port(i)),
            #[cfg(unix)]
            Host::Unix(dir) => format!("{}:{}", dir.display(), port(i)),
        })
        .collect();
    if hosts.is_empty() {
        hosts = cfg
            .get_hostaddrs()
            .iter()
            .enumerate()
            .map(|(i, a)| std::net::SocketAddr::new(*a, port(i)).to_string())
            .collect();
    }
    let db = cfg.get_dbname().or(cfg.get_user()).unwrap_or("");
    format!("{}/{db}", hosts.join(","))
}

/// The insert found the upload's lease gone or taken over by a janitor.
fn lease_lost(id: &str, node: &str) -> MetaError {
    MetaError::new(format!(
        "PostgreSQL: the lease on upload {id} is no longer node {node}'s \
         (taken over by a janitor, or never taken)"
    ))
}

fn rows<T>(rows: Vec<Row>, f: impl Fn(&Row) -> Result<T, PgError>) -> Result<Vec<T>, MetaError> {
    rows.iter().map(|r| f(r).map_err(db)).collect()
}

impl MetaCore for PgMeta {
    fn ready(&self) -> BoxFut<'_, Result<(), MetaError>> {
        Box::pin(async move { self.value::<i32>("SELECT 1", &[]).await.map(drop) })
    }

    fn describe(&self) -> BoxFut<'_, Result<String, MetaError>> {
        Box::pin(self.describe_now())
    }

    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn single_process(&self) -> bool {
        // Any number of nodes share the database.
        false
    }
}
