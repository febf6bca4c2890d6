//! Metadata in PostgreSQL ([`PgMeta`]): the [`MetaStore`] that any number
//! of bulkwire nodes share (DESIGN.md "Storage: embedded by default, real
//! engines to scale out"). Same tables and meaning as the SQLite store;
//! what differs is what many nodes at once require:
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
//! - [`LeaseStore::claim_expired`](crate::LeaseStore::claim_expired) is one `UPDATE` over
//!   `FOR UPDATE SKIP LOCKED`: two janitors never take the same lease and
//!   never wait for each other.
//! - Connections come from a deadpool pool whose wait, create and recycle
//!   timeouts are the caller's `timeout`, so a database that is down fails
//!   a request in that time instead of queueing it; connections it dropped
//!   are replaced at the next checkout. Statements are prepared once per
//!   connection (`prepare_cached`).
//!
//! Limitation: no TLS yet (`NoTls`). Passwords and metadata cross the
//! network in clear: use it on loopback, a Unix socket or a private
//! network only.

use crate::list::{self, Arg};
use crate::{
    token_id, BoxFut, CredentialStore, LeaseStore, ListQuery, MediaRecord, MediaStore, MetaCore,
    MetaError, NewMedia, Pending, Token, UploadRow, UploadStore, UserInfo, UserSet,
};
use deadpool_postgres::{
    Client, Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime, TimeoutType,
};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::config::Host;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Config, IsolationLevel, NoTls, Row};

type PgError = tokio_postgres::Error;
type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// The schema, by version (`schema_version`): each step runs once, in
/// order, in the migration transaction. The same steps as SQLite's, so
/// that a schema version means the same on both.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE media (
        seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id           TEXT NOT NULL UNIQUE,
        field        TEXT,
        filename     TEXT,
        content_type TEXT NOT NULL,
        size         BIGINT NOT NULL CHECK (size >= 0),
        sha256       TEXT NOT NULL,
        created      TIMESTAMPTZ NOT NULL DEFAULT now()
    );",
    "CREATE TABLE tokens (
        id      TEXT PRIMARY KEY,
        digest  BYTEA NOT NULL UNIQUE,
        label   TEXT NOT NULL,
        created TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    CREATE TABLE users (
        name    TEXT PRIMARY KEY,
        hash    TEXT NOT NULL,
        created TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    CREATE TABLE pending (
        id      TEXT PRIMARY KEY,
        node    TEXT NOT NULL,
        handle  TEXT,
        started TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    CREATE INDEX pending_node ON pending (node);
    CREATE TABLE nodes (
        node      TEXT PRIMARY KEY,
        heartbeat TIMESTAMPTZ NOT NULL
    );",
    "CREATE TABLE uploads (
        id      TEXT PRIMARY KEY,
        owner   TEXT NOT NULL,
        expires BIGINT NOT NULL,
        gen     BIGINT NOT NULL,
        open    BOOLEAN NOT NULL,
        state   TEXT NOT NULL
    );
    CREATE INDEX uploads_open_owner ON uploads (owner) WHERE open;
    CREATE INDEX uploads_expires ON uploads (expires);",
    "CREATE TABLE secrets (
        name    TEXT PRIMARY KEY,
        value   BYTEA NOT NULL,
        created TIMESTAMPTZ NOT NULL DEFAULT now()
    );",
    // The listing's keys (`list.rs`), filled in Rust: for the rows of
    // before, by `fill_list_keys` in the same transaction.
    "ALTER TABLE media
        ADD COLUMN IF NOT EXISTS name_fold TEXT,
        ADD COLUMN IF NOT EXISTS type_key TEXT NOT NULL DEFAULT '',
        ADD COLUMN IF NOT EXISTS type_top TEXT NOT NULL DEFAULT '';
    CREATE INDEX IF NOT EXISTS media_type_top ON media (type_top, seq);",
];

/// The version whose step added the listing's keys.
const LIST_KEYS: usize = 5;

/// Rows read at once while filling in the listing's keys.
const FILL_BATCH: i64 = 1000;

/// The schema version this build writes.
pub const PG_SCHEMA_VERSION: usize = MIGRATIONS.len();

/// The advisory lock key that serialises media inserts ("bulkins" + 1).
const INSERT_LOCK: i64 = 0x62_75_6c_6b_69_6e_73_01;

/// The advisory lock key that serialises migrations: "bulkwire" in ASCII.
const MIGRATION_LOCK: i64 = 0x6275_6c6b_7769_7265;

/// A media row's columns, `created` as whole seconds since the epoch
/// (truncated, as SQLite's store does).
macro_rules! media_columns {
    () => {
        "seq, id, field, filename, content_type, size, sha256, \
         floor(extract(epoch FROM created))::bigint"
    };
}

const END_LEASE: &str = "DELETE FROM pending WHERE id = $1 AND node = $2";
const INSERT_MEDIA: &str = "INSERT INTO media
        (id, field, filename, content_type, size, sha256, name_fold, type_key, type_top)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     RETURNING seq, floor(extract(epoch FROM created))::bigint";
const GET_MEDIA: &str = concat!("SELECT ", media_columns!(), " FROM media WHERE id = $1");
const DELETE_MEDIA: &str = "DELETE FROM media WHERE id = $1";
/// A deletion's lease replaces any lease on the id, as SQLite's
/// `INSERT OR REPLACE` does.
const LEASE_DELETED: &str = "INSERT INTO pending (id, node) VALUES ($1, $2)
     ON CONFLICT (id) DO UPDATE SET node = excluded.node, handle = NULL, started = now()";
const LEASE: &str = "INSERT INTO pending (id, node) VALUES ($1, $2)";
const LEASE_NOTE: &str = "UPDATE pending SET handle = $3 WHERE id = $1 AND node = $2";
const HEARTBEAT: &str = "INSERT INTO nodes (node, heartbeat) VALUES ($1, now())
     ON CONFLICT (node) DO UPDATE SET heartbeat = excluded.heartbeat";
/// The claimer's own leases (a retry) and those of nodes without a recent
/// heartbeat. Liveness is a `NOT IN` over `nodes`, not a join: when a row
/// was claimed by a concurrent janitor, READ COMMITTED re-checks the new
/// row version against the *same* joined `nodes` row, which no longer
/// matches its node, so a `LEFT JOIN ... IS NULL` test would pass and the
/// lease would be claimed twice. The subquery is evaluated against the new
/// node, whose own heartbeat keeps the lease where it is.
const CLAIM: &str = "UPDATE pending SET node = $1 WHERE id IN (
        SELECT id FROM pending
        WHERE node = $1 OR node NOT IN (
            SELECT node FROM nodes
            WHERE heartbeat >= now() - make_interval(secs => $2::float8))
        ORDER BY started
        LIMIT $3
        FOR UPDATE SKIP LOCKED)
     RETURNING id, handle";
const UPLOAD_COLUMNS: &str = "id, owner, expires, gen, open, state";
const UPLOAD_GET: &str = "SELECT id, owner, expires, gen, open, state FROM uploads WHERE id = $1";
const UPLOAD_CLAIM: &str = "UPDATE uploads SET gen = gen + 1 WHERE id = $1
     RETURNING id, owner, expires, gen, open, state";
const UPLOAD_CLAIM_EXPIRED: &str = "UPDATE uploads SET gen = gen + 1
     WHERE id = $1 AND expires < extract(epoch FROM now())::bigint
     RETURNING id, owner, expires, gen, open, state";
const UPLOAD_SAVE: &str =
    "UPDATE uploads SET state = $3, expires = $4, open = $5 WHERE id = $1 AND gen = $2";
const UPLOAD_REMOVE: &str = "DELETE FROM uploads WHERE id = $1 AND gen = $2";
const UPLOAD_EXPIRED: &str = "SELECT id, owner, expires, gen, open, state FROM uploads
     WHERE expires < extract(epoch FROM now())::bigint ORDER BY expires LIMIT $1";
/// The advisory lock key space of per-owner upload counts ("bulkupl").
const OWNER_LOCK: i32 = 0x62_75_6c_75;
const TOKEN_ADD: &str = "INSERT INTO tokens (id, digest, label) VALUES ($1, $2, $3)
     RETURNING floor(extract(epoch FROM created))::bigint";
const SECRET_INIT: &str =
    "INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING";
const SECRET_GET: &str = "SELECT value FROM secrets WHERE name = $1";
const SECRET_SET: &str = "INSERT INTO secrets (name, value) VALUES ($1, $2)
     ON CONFLICT (name) DO UPDATE SET value = excluded.value, created = now()";
const TOKEN_KNOWN: &str = "SELECT EXISTS (SELECT 1 FROM tokens WHERE digest = $1)";
const TOKENS: &str = "SELECT id, label, floor(extract(epoch FROM created))::bigint
     FROM tokens ORDER BY created, id";
const TOKEN_REVOKE: &str = "DELETE FROM tokens WHERE id = $1";
const USER_CREATE: &str =
    "INSERT INTO users (name, hash) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING";
const USER_UPDATE: &str = "UPDATE users SET hash = $2 WHERE name = $1";
const USER_UPSERT: &str = "INSERT INTO users (name, hash) VALUES ($1, $2)
     ON CONFLICT (name) DO UPDATE SET hash = excluded.hash";
const USER_HASH: &str = "SELECT hash FROM users WHERE name = $1";
const USER_REMOVE: &str = "DELETE FROM users WHERE name = $1";
const USERS: &str =
    "SELECT name, floor(extract(epoch FROM created))::bigint FROM users ORDER BY name";
const SCHEMA: &str = "SELECT coalesce(max(version), 0) FROM schema_version";

/// PostgreSQL metadata store: a connection pool; clones share it.
#[derive(Clone)]
pub struct PgMeta {
    pool: Pool,
    /// `host:port/database`, for messages (never the password).
    at: Arc<str>,
    timeout: Duration,
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
        let cfg = config(url, timeout)?;
        let at = address(&cfg);
        let fail = |why: String, full: bool| error(format!("PostgreSQL at {at}: {why}"), full);
        if pool_size == 0 || timeout.is_zero() {
            let why = "the pool needs at least one connection and a timeout above zero";
            return Err(fail(why.into(), false));
        }
        let pool = pool(cfg, pool_size, timeout).map_err(|e| fail(e.to_string(), false))?;
        let mut c = pool.get().await.map_err(|e| {
            let (why, full) = no_connection(&e, pool_size, timeout);
            fail(why, full)
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

    /// Ends each row's lease, then inserts the rows, in one transaction.
    async fn insert_all(
        &self,
        rows: Vec<NewMedia>,
        node: &str,
    ) -> Result<Vec<MediaRecord>, MetaError> {
        let sizes = rows
            .iter()
            .map(|m| i64::try_from(m.size).map_err(|_| too_big(m)))
            .collect::<Result<Vec<i64>, _>>()?;
        let mut c = self.client().await?;
        // Dropped before commit (an early return), the transaction rolls back.
        let tx = c.transaction().await.map_err(db)?;
        // Inserts commit one at a time, so that `seq` order is commit
        // order: otherwise seq 11 could commit before seq 10, and a reader
        // paging with `after=11` would never see 10. The lock is held
        // only for the few statements of this transaction.
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&INSERT_LOCK])
            .await
            .map_err(db)?;
        let end = tx.prepare_cached(END_LEASE).await.map_err(db)?;
        for m in &rows {
            if tx.execute(&end, &[&m.id, &node]).await.map_err(db)? != 1 {
                return Err(lease_lost(&m.id, node));
            }
        }
        let put = tx.prepare_cached(INSERT_MEDIA).await.map_err(db)?;
        let mut out = Vec::with_capacity(rows.len());
        for (m, size) in rows.into_iter().zip(sizes) {
            let r = insert_media(&tx, &put, &m, size).await.map_err(db)?;
            out.push(inserted(m, &r).map_err(db)?);
        }
        tx.commit().await.map_err(db)?;
        Ok(out)
    }

    /// Counts the owner's open uploads and inserts, under a per-owner
    /// advisory lock: two creations at once cannot both pass the count.
    async fn create_upload(
        &self,
        row: UploadRow,
        max_open: usize,
        lease: Option<&str>,
    ) -> Result<bool, MetaError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(db)?;
        if let Some(node) = lease {
            if tx.execute(END_LEASE, &[&row.id, &node]).await.map_err(db)? != 1 {
                return Err(lease_lost(&row.id, node));
            }
        }
        tx.execute(
            "SELECT pg_advisory_xact_lock($1, hashtext($2))",
            &[&OWNER_LOCK, &row.owner],
        )
        .await
        .map_err(db)?;
        let open: i64 = tx
            .query_one(
                "SELECT count(*) FROM uploads WHERE owner = $1 AND open",
                &[&row.owner],
            )
            .await
            .and_then(|r| r.try_get(0))
            .map_err(db)?;
        if open as usize >= max_open {
            return Ok(false);
        }
        let sql = format!("INSERT INTO uploads ({UPLOAD_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)");
        let p: Params<'_> = &[
            &row.id,
            &row.owner,
            &row.expires,
            &row.gen,
            &row.open,
            &row.state,
        ];
        tx.execute(&sql, p).await.map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(true)
    }

    /// A fenced save and, with `media`, its row, in one transaction.
    async fn save_upload(
        &self,
        row: &UploadRow,
        media: Option<NewMedia>,
    ) -> Result<Option<Option<MediaRecord>>, MetaError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(db)?;
        if media.is_some() {
            // As in `insert_all`: seq order is commit order.
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&INSERT_LOCK])
                .await
                .map_err(db)?;
        }
        let p: Params<'_> = &[&row.id, &row.gen, &row.state, &row.expires, &row.open];
        if tx.execute(UPLOAD_SAVE, p).await.map_err(db)? != 1 {
            return Ok(None);
        }
        let rec = match media {
            None => None,
            Some(m) => {
                let size = i64::try_from(m.size).map_err(|_| too_big(&m))?;
                let put = tx.prepare_cached(INSERT_MEDIA).await.map_err(db)?;
                let r = insert_media(&tx, &put, &m, size).await.map_err(db)?;
                Some(inserted(m, &r).map_err(db)?)
            }
        };
        tx.commit().await.map_err(db)?;
        Ok(Some(rec))
    }

    /// Removes the row and leases the id, in one transaction.
    async fn delete_leased(&self, id: &str, node: &str) -> Result<bool, MetaError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(db)?;
        let del = tx.prepare_cached(DELETE_MEDIA).await.map_err(db)?;
        let gone = tx.execute(&del, &[&id]).await.map_err(db)? > 0;
        if gone {
            let lease = tx.prepare_cached(LEASE_DELETED).await.map_err(db)?;
            tx.execute(&lease, &[&id, &node]).await.map_err(db)?;
        }
        tx.commit().await.map_err(db)?;
        Ok(gone)
    }

    async fn describe_now(&self) -> Result<String, MetaError> {
        let version: String = self
            .value("SELECT current_setting('server_version')", &[])
            .await?;
        let schema: i32 = self.value(SCHEMA, &[]).await?;
        // "15.18 (Debian 15.18-1.pgdg120+1)": the number is enough.
        let version = version.split_whitespace().next().unwrap_or("?");
        Ok(format!(
            "PostgreSQL {version} at {}, schema version {schema}",
            self.at
        ))
    }
}

/// Parses the URL and adds the timeouts that keep a lost server from
/// hanging a connection: `connect_timeout` for the handshake, and
/// `TCP_USER_TIMEOUT` for a query sent to a server that vanished without
/// a reset (TCP would otherwise retransmit for ~15 minutes).
fn config(url: &str, timeout: Duration) -> Result<Config, MetaError> {
    let mut cfg: Config = url
        .parse()
        .map_err(|e: PgError| MetaError::new(format!("PostgreSQL: invalid URL: {}", chain(&e))))?;
    cfg.connect_timeout(timeout);
    cfg.tcp_user_timeout(timeout);
    if cfg.get_application_name().is_none() {
        cfg.application_name("bulkwire");
    }
    Ok(cfg)
}

fn pool(
    cfg: Config,
    size: usize,
    timeout: Duration,
) -> Result<Pool, deadpool_postgres::BuildError> {
    // `Fast` recycling checks only that the connection task is alive: a
    // server that went away closed it, and the pool connects anew.
    let manager = ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    };
    Pool::builder(Manager::from_config(cfg, NoTls, manager))
        .max_size(size)
        .wait_timeout(Some(timeout))
        .create_timeout(Some(timeout))
        .recycle_timeout(Some(timeout))
        .runtime(Runtime::Tokio1)
        .build()
}

/// Brings the schema up to date; returns the version found. READ
/// COMMITTED whatever the server's default: each statement after the lock
/// must see what the node that held it before committed.
async fn migrate(c: &mut Client) -> Result<usize, PgError> {
    let tx = c
        .build_transaction()
        .isolation_level(IsolationLevel::ReadCommitted)
        .start()
        .await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    let exists: bool = tx
        .query_one("SELECT to_regclass('schema_version') IS NOT NULL", &[])
        .await?
        .try_get(0)?;
    if !exists {
        tx.batch_execute(
            "CREATE TABLE schema_version (
                version INTEGER PRIMARY KEY,
                applied TIMESTAMPTZ NOT NULL DEFAULT now()
            )",
        )
        .await?;
    }
    let found: i32 = tx.query_one(SCHEMA, &[]).await?.try_get(0)?;
    let found = usize::try_from(found).unwrap_or(0);
    for (i, step) in MIGRATIONS.iter().enumerate().skip(found) {
        tx.batch_execute(step).await?;
        let version = i32::try_from(i + 1).unwrap_or(i32::MAX);
        tx.execute(
            "INSERT INTO schema_version (version) VALUES ($1)",
            &[&version],
        )
        .await?;
    }
    if found < LIST_KEYS {
        fill_list_keys(&tx).await?;
    }
    tx.commit().await?;
    Ok(found)
}

/// Computes the listing's keys of rows that have none (rows older than
/// the columns), a batch at a time in `seq` order.
async fn fill_list_keys(tx: &tokio_postgres::Transaction<'_>) -> Result<(), PgError> {
    let read = tx
        .prepare(
            "SELECT seq, filename, content_type FROM media
             WHERE seq > $1 AND type_key = '' ORDER BY seq LIMIT $2",
        )
        .await?;
    let set = tx
        .prepare("UPDATE media SET name_fold = $2, type_key = $3, type_top = $4 WHERE seq = $1")
        .await?;
    let mut after = 0i64;
    loop {
        let batch = tx.query(&read, &[&after, &FILL_BATCH]).await?;
        let Some(last) = batch.last() else {
            return Ok(());
        };
        after = last.try_get(0)?;
        for r in &batch {
            let seq: i64 = r.try_get(0)?;
            let name: Option<String> = r.try_get(1)?;
            let (key, top) = list::type_keys(r.try_get(2)?);
            let fold = name.as_deref().map(list::fold_name);
            tx.execute(&set, &[&seq, &fold, &key, &top]).await?;
        }
    }
}

/// Inserts one media row with its listing keys (`RETURNING seq, created`).
async fn insert_media(
    tx: &tokio_postgres::Transaction<'_>,
    put: &tokio_postgres::Statement,
    m: &NewMedia,
    size: i64,
) -> Result<Row, PgError> {
    let (key, top) = list::type_keys(&m.content_type);
    let fold = m.filename.as_deref().map(list::fold_name);
    let p: Params<'_> = &[
        &m.id,
        &m.field,
        &m.filename,
        &m.content_type,
        &size,
        &m.sha256,
        &fold,
        &key,
        &top,
    ];
    tx.query_one(put, p).await
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

/// An error and its causes, "kind: cause: ...": tokio-postgres puts the
/// server's message in the cause.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// Out of disk space (SQLSTATE 53100, `disk_full`): the store is full
/// (507), not broken. The other "insufficient resources" codes (memory,
/// connections, configuration limits) are not out of room.
fn disk_full(e: &PgError) -> bool {
    e.code() == Some(&SqlState::DISK_FULL)
}

fn error(message: String, full: bool) -> MetaError {
    match full {
        true => MetaError::full(message),
        false => MetaError::new(message),
    }
}

/// The database could not be reached or went away (a closed connection, a
/// connection exception, SQLSTATE class 08, or a server shutting down or
/// starting, 57P01–57P03): the request may succeed once it is back, so
/// the client gets 503 with `Retry-After`, not 500.
fn unreachable(e: &PgError) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        Some(c) => {
            let c = c.code();
            c.starts_with("08") || matches!(c, "57P01" | "57P02" | "57P03")
        }
        // No SQLSTATE: the failure was on the wire, not in a statement.
        None => e.as_db_error().is_none(),
    }
}

/// A statement's failure, as the request path reports it.
fn db(e: PgError) -> MetaError {
    let mut m = error(format!("PostgreSQL: {}", chain(&e)), disk_full(&e));
    m.unavailable = unreachable(&e);
    m
}

/// Why the pool handed out no connection, and whether for want of space.
fn no_connection(e: &PoolError, size: usize, timeout: Duration) -> (String, bool) {
    match e {
        PoolError::Backend(e) => (chain(e), disk_full(e)),
        PoolError::Timeout(TimeoutType::Wait) => (
            format!("all {size} connections stayed busy for {timeout:?}"),
            false,
        ),
        PoolError::Timeout(TimeoutType::Create) => {
            (format!("no connection within {timeout:?}"), false)
        }
        PoolError::Timeout(TimeoutType::Recycle) => (
            format!("checking a pooled connection took over {timeout:?}"),
            false,
        ),
        e => (e.to_string(), false),
    }
}

/// The insert found the upload's lease gone or taken over by a janitor.
fn lease_lost(id: &str, node: &str) -> MetaError {
    MetaError::new(format!(
        "PostgreSQL: the lease on upload {id} is no longer node {node}'s \
         (taken over by a janitor, or never taken)"
    ))
}

fn too_big(m: &NewMedia) -> MetaError {
    MetaError::new(format!(
        "PostgreSQL: {}: size {} is beyond a BIGINT",
        m.id, m.size
    ))
}

fn record(r: &Row) -> Result<MediaRecord, PgError> {
    Ok(MediaRecord {
        seq: r.try_get(0)?,
        id: r.try_get(1)?,
        field: r.try_get(2)?,
        filename: r.try_get(3)?,
        content_type: r.try_get(4)?,
        size: r.try_get::<_, i64>(5)?.max(0) as u64,
        sha256: r.try_get(6)?,
        created: r.try_get(7)?,
    })
}

/// The record of a row just inserted (`RETURNING seq, created`).
fn inserted(m: NewMedia, r: &Row) -> Result<MediaRecord, PgError> {
    Ok(MediaRecord {
        seq: r.try_get(0)?,
        created: r.try_get(1)?,
        id: m.id,
        field: m.field,
        filename: m.filename,
        content_type: m.content_type,
        size: m.size,
        sha256: m.sha256,
    })
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

impl MediaStore for PgMeta {
    fn insert<'a>(
        &'a self,
        rows: Vec<NewMedia>,
        node: &'a str,
    ) -> BoxFut<'a, Result<Vec<MediaRecord>, MetaError>> {
        Box::pin(self.insert_all(rows, node))
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<MediaRecord>, MetaError>> {
        Box::pin(async move {
            let row = self.query_opt(GET_MEDIA, &[&id]).await?;
            row.map(|r| record(&r)).transpose().map_err(db)
        })
    }

    fn list(&self, q: ListQuery) -> BoxFut<'_, Result<Vec<MediaRecord>, MetaError>> {
        Box::pin(async move {
            let (tail, args) = list::where_order_limit(&q, '$');
            let sql = format!("SELECT {} FROM media {tail}", media_columns!());
            let params: Vec<&(dyn ToSql + Sync)> = args
                .iter()
                .map(|a| match a {
                    Arg::Int(i) => i as &(dyn ToSql + Sync),
                    Arg::Text(t) => t,
                })
                .collect();
            rows(self.query(&sql, &params).await?, record)
        })
    }

    fn delete<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(self.delete_leased(id, node))
    }

    fn all_ids(&self) -> BoxFut<'_, Result<HashSet<String>, MetaError>> {
        Box::pin(async move {
            let sql = "SELECT id FROM media UNION SELECT id FROM uploads";
            let ids = self.query(sql, &[]).await?;
            ids.iter().map(|r| r.try_get(0).map_err(db)).collect()
        })
    }
}

impl CredentialStore for PgMeta {
    fn token_add(&self, digest: [u8; 32], label: String) -> BoxFut<'_, Result<Token, MetaError>> {
        Box::pin(async move {
            let id = token_id(&digest);
            let created = self.value(TOKEN_ADD, &[&id, &&digest[..], &label]).await?;
            Ok(Token { id, label, created })
        })
    }

    fn token_known(&self, digest: [u8; 32]) -> BoxFut<'_, Result<bool, MetaError>> {
        Box::pin(async move { self.value(TOKEN_KNOWN, &[&&digest[..]]).await })
    }

    fn tokens(&self) -> BoxFut<'_, Result<Vec<Token>, MetaError>> {
        Box::pin(async move {
            rows(self.query(TOKENS, &[]).await?, |r| {
                Ok(Token {
                    id: r.try_get(0)?,
                    label: r.try_get(1)?,
                    created: r.try_get(2)?,
                })
            })
        })
    }

    fn token_revoke<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(async move { Ok(self.execute(TOKEN_REVOKE, &[&id]).await? > 0) })
    }

    fn user_set<'a>(
        &'a self,
        name: &'a str,
        hash: &'a str,
        mode: UserSet,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        let sql = match mode {
            UserSet::Create => USER_CREATE,
            UserSet::Update => USER_UPDATE,
            UserSet::Upsert => USER_UPSERT,
        };
        Box::pin(async move { Ok(self.execute(sql, &[&name, &hash]).await? > 0) })
    }

    fn user_hash<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<Option<String>, MetaError>> {
        Box::pin(async move {
            let row = self.query_opt(USER_HASH, &[&name]).await?;
            row.map(|r| r.try_get(0)).transpose().map_err(db)
        })
    }

    fn user_remove<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(async move { Ok(self.execute(USER_REMOVE, &[&name]).await? > 0) })
    }

    fn users(&self) -> BoxFut<'_, Result<Vec<UserInfo>, MetaError>> {
        Box::pin(async move {
            rows(self.query(USERS, &[]).await?, |r| {
                Ok(UserInfo {
                    name: r.try_get(0)?,
                    created: r.try_get(1)?,
                })
            })
        })
    }

    fn secret<'a>(
        &'a self,
        name: &'a str,
        fresh: Vec<u8>,
    ) -> BoxFut<'a, Result<Vec<u8>, MetaError>> {
        Box::pin(async move {
            // Two nodes starting at once both insert; the first wins and
            // both read its value.
            self.execute(SECRET_INIT, &[&name, &fresh]).await?;
            self.value(SECRET_GET, &[&name]).await
        })
    }

    fn secret_set<'a>(
        &'a self,
        name: &'a str,
        value: Vec<u8>,
    ) -> BoxFut<'a, Result<(), MetaError>> {
        Box::pin(async move { self.execute(SECRET_SET, &[&name, &value]).await.map(drop) })
    }
}

impl LeaseStore for PgMeta {
    fn lease<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        Box::pin(async move { self.execute(LEASE, &[&id, &node]).await.map(drop) })
    }

    fn lease_note<'a>(
        &'a self,
        id: &'a str,
        node: &'a str,
        handle: &'a str,
    ) -> BoxFut<'a, Result<(), MetaError>> {
        Box::pin(async move {
            let params: Params<'_> = &[&id, &node, &handle];
            match self.execute(LEASE_NOTE, params).await? {
                1 => Ok(()),
                _ => Err(lease_lost(id, node)),
            }
        })
    }

    fn lease_move<'a>(
        &'a self,
        id: &'a str,
        from: &'a str,
        to: &'a str,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(async move {
            let sql = "UPDATE pending SET node = $3 WHERE id = $1 AND node = $2";
            Ok(self.execute(sql, &[&id, &from, &to]).await? == 1)
        })
    }

    fn release<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        Box::pin(async move { self.execute(END_LEASE, &[&id, &node]).await.map(drop) })
    }

    fn heartbeat<'a>(&'a self, node: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        Box::pin(async move { self.execute(HEARTBEAT, &[&node]).await.map(drop) })
    }

    fn claim_expired<'a>(
        &'a self,
        node: &'a str,
        expiry: Duration,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<Pending>, MetaError>> {
        let (expiry, limit) = (
            expiry.as_secs_f64(),
            i64::try_from(limit).unwrap_or(i64::MAX),
        );
        Box::pin(async move {
            let params: Params<'_> = &[&node, &expiry, &limit];
            rows(self.query(CLAIM, params).await?, |r| {
                Ok(Pending {
                    id: r.try_get(0)?,
                    handle: r.try_get(1)?,
                })
            })
        })
    }
}

impl UploadStore for PgMeta {
    fn upload_create<'a>(
        &'a self,
        row: UploadRow,
        max_open: usize,
        lease: Option<&'a str>,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(self.create_upload(row, max_open, lease))
    }

    fn upload_get<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>> {
        Box::pin(async move {
            let row = self.query_opt(UPLOAD_GET, &[&id]).await?;
            row.map(|r| upload_row(&r)).transpose().map_err(db)
        })
    }

    fn upload_claim<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>> {
        Box::pin(async move {
            let row = self.query_opt(UPLOAD_CLAIM, &[&id]).await?;
            row.map(|r| upload_row(&r)).transpose().map_err(db)
        })
    }

    fn upload_claim_expired<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>> {
        Box::pin(async move {
            let row = self.query_opt(UPLOAD_CLAIM_EXPIRED, &[&id]).await?;
            row.map(|r| upload_row(&r)).transpose().map_err(db)
        })
    }

    fn upload_save<'a>(
        &'a self,
        row: &'a UploadRow,
        media: Option<NewMedia>,
    ) -> BoxFut<'a, Result<Option<Option<MediaRecord>>, MetaError>> {
        Box::pin(self.save_upload(row, media))
    }

    fn upload_remove<'a>(&'a self, id: &'a str, gen: i64) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(async move { Ok(self.execute(UPLOAD_REMOVE, &[&id, &gen]).await? == 1) })
    }

    fn upload_expired(&self, limit: usize) -> BoxFut<'_, Result<Vec<UploadRow>, MetaError>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Box::pin(async move { rows(self.query(UPLOAD_EXPIRED, &[&limit]).await?, upload_row) })
    }
}

fn upload_row(r: &Row) -> Result<UploadRow, PgError> {
    Ok(UploadRow {
        id: r.try_get(0)?,
        owner: r.try_get(1)?,
        expires: r.try_get(2)?,
        gen: r.try_get(3)?,
        open: r.try_get(4)?,
        state: r.try_get(5)?,
    })
}
