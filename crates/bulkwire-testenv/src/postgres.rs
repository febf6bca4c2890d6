//! A throwaway PostgreSQL server: its own data directory, loopback port and process.
//!
//! Why `postgres` is run directly and not through `pg_ctl`: pg_ctl daemonizes, so the server
//! would not be our child, could not be tied to the test process by the parent-death signal,
//! and could not be waited for.
//!
//! Why the `postgres` user: initdb and postgres refuse to run as root, and tests here run as
//! root. The scratch directory is handed to `postgres` and both programs run with its uid/gid.
//!
//! TLS is on by default, as managed PostgreSQL services have it: `openssl` makes a CA, a server
//! certificate for `localhost` and `127.0.0.1` and a client certificate for the role `certuser`
//! (`hostssl … cert` in `pg_hba.conf`), and [`Postgres::url`] asks for `sslmode=verify-full`
//! against that CA, so every suite that uses it runs over verified TLS.

use std::env;
use std::fs::{self, OpenOptions};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Once, OnceLock};
use std::time::Duration;

use rustix::process::Signal;

use crate::proc::{
    file_len, free_ports, kill_child, log_tail, read_from, run, stop_child, wait_ready, NotReady,
};
use crate::scratch::{self, Scratch};
use crate::spawn::spawn;

/// The database every server starts with; tests wanting isolation make their own.
const DATABASE: &str = "bulkwire";
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a fast shutdown (SIGINT) may take before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(30);
/// Another process may grab the port between our probe and the server's bind.
const PORT_TRIES: usize = 3;

/// A running (or stopped) PostgreSQL server owned by this test process.
pub struct Postgres {
    bin: PathBuf,
    /// uid/gid to run as when we are root.
    run_as: Option<(u32, u32)>,
    port: u16,
    child: Option<Child>,
    scratch: Scratch,
    tls: Option<Certs>,
}

/// The files [`Postgres::start`] made for TLS, all PEM.
#[derive(Debug, Clone)]
pub struct Certs {
    /// The CA that signed the server's and the client's certificates.
    pub ca: PathBuf,
    /// Another CA, which signed nothing the server shows.
    pub other_ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// A client certificate for [`CERT_USER`], and its key.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// The role that logs in with a client certificate only (`hostssl … cert`).
pub const CERT_USER: &str = "certuser";

/// One server per test process, started by the first caller. It is never dropped: the
/// parent-death signal stops it, and the next test run sweeps its directory.
pub fn shared_postgres() -> Result<&'static Postgres, String> {
    static SHARED: OnceLock<Result<Postgres, String>> = OnceLock::new();
    SHARED
        .get_or_init(Postgres::start)
        .as_ref()
        .map_err(Clone::clone)
}

/// A start that failed, and whether another process took our port (worth a retry).
struct StartError {
    port_taken: bool,
    message: String,
}

impl Postgres {
    /// Initialises a fresh cluster with TLS, starts it on a free loopback port and creates
    /// `bulkwire`.
    pub fn start() -> Result<Postgres, String> {
        Postgres::start_with(true)
    }

    /// As [`Postgres::start`], without TLS when `tls` is false (a server that offers none).
    pub fn start_with(tls: bool) -> Result<Postgres, String> {
        let bin = pg_bindir()?;
        let run_as = run_as()?;
        let server_uid = run_as.map_or_else(|| rustix::process::getuid().as_raw(), |(uid, _)| uid);
        sweep_shared_memory_once(server_uid);
        let scratch = Scratch::new("pg-")?;
        init_cluster(&bin, run_as, scratch.path())?;
        let tls = match tls {
            true => Some(make_certs(scratch.path(), run_as)?),
            false => None,
        };
        let mut pg = Postgres {
            bin,
            run_as,
            port: 0,
            child: None,
            scratch,
            tls,
        };
        pg.start_on_free_port()?;
        pg.create_database(DATABASE)?;
        if pg.tls.is_some() {
            pg.psql(
                "postgres",
                &format!("CREATE ROLE {CERT_USER} LOGIN SUPERUSER"),
            )?;
        }
        Ok(pg)
    }

    /// `postgres://postgres@127.0.0.1:PORT/bulkwire?sslmode=verify-full&sslrootcert=CA` (with
    /// TLS), else without the query.
    pub fn url(&self) -> String {
        self.url_for(DATABASE)
    }

    pub fn url_for(&self, database: &str) -> String {
        let plain = self.plain_url_for(database);
        match &self.tls {
            Some(c) => format!("{plain}?sslmode=verify-full&sslrootcert={}", c.ca.display()),
            None => plain,
        }
    }

    /// The URL without TLS parameters (tokio-postgres's own parser refuses libpq's).
    pub fn plain_url_for(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// The certificates, when started with TLS.
    pub fn certs(&self) -> Option<&Certs> {
        self.tls.as_ref()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's stdout/stderr, appended across restarts.
    pub fn log_path(&self) -> PathBuf {
        self.scratch.path().join("postgres.log")
    }

    /// Creates a database (names: lowercase ASCII letters, digits, `_`) and returns its URL,
    /// so a test can isolate itself inside a shared server.
    pub fn create_database(&self, name: &str) -> Result<String, String> {
        check_identifier(name)?;
        self.psql("postgres", &format!("CREATE DATABASE {name}"))
            .map_err(|e| format!("cannot create database {name}: {e}"))?;
        Ok(self.url_for(name))
    }

    /// Runs one SQL command with `psql` and returns its unaligned, tuples-only output.
    pub fn psql(&self, database: &str, sql: &str) -> Result<String, String> {
        self.psql_args(database, &["-c", sql])
    }

    /// Runs a file of SQL (a `pg_dump`, with its `COPY … FROM stdin` blocks) with `psql`.
    pub fn psql_file(&self, database: &str, file: &std::path::Path) -> Result<String, String> {
        let f = file.to_str().ok_or("a file name that is not UTF-8")?;
        self.psql_args(database, &["-f", f])
    }

    fn psql_args(&self, database: &str, last: &[&str]) -> Result<String, String> {
        run(Command::new(self.bin.join("psql"))
            .args([
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
                "-U",
            ])
            .args(["postgres", "-p", &self.port.to_string(), "-d", database])
            .args(last))
    }

    /// Fast shutdown (SIGINT): clients are disconnected and the server exits cleanly, so a
    /// later [`Postgres::start_again`] needs no crash recovery. No-op when already stopped.
    pub fn stop(&mut self) {
        if let Some(child) = self.child.take() {
            stop_child(child, Signal::INT, STOP_GRACE);
        }
    }

    /// Starts the stopped server again on the same port and data directory.
    pub fn start_again(&mut self) -> Result<(), String> {
        if self.child.is_some() {
            return Err("start_again: PostgreSQL is still running".into());
        }
        self.launch().map_err(|e| e.message)
    }

    fn start_on_free_port(&mut self) -> Result<(), String> {
        let mut last = String::new();
        for _ in 0..PORT_TRIES {
            self.port = free_ports(1)?[0];
            match self.launch() {
                Ok(()) => return Ok(()),
                Err(e) if e.port_taken => last = e.message,
                Err(e) => return Err(e.message),
            }
        }
        Err(last)
    }

    /// Spawns the server and waits until it accepts connections.
    fn launch(&mut self) -> Result<(), StartError> {
        let log = self.log_path();
        let from = file_len(&log);
        let mut child = self.spawn_server(&log).map_err(|message| StartError {
            port_taken: false,
            message,
        })?;
        match wait_ready(&mut child, START_TIMEOUT, || self.is_ready()) {
            Ok(()) => {
                self.child = Some(child);
                Ok(())
            }
            Err(why) => {
                kill_child(child);
                Err(self.start_error(why, &log, from))
            }
        }
    }

    fn spawn_server(&self, log: &Path) -> Result<Child, String> {
        let dir = self.scratch.path();
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("cannot clone log fd: {e}"))?;
        let mut cmd = Command::new(self.bin.join("postgres"));
        cmd.arg("-D").arg(dir.join("data")).arg("-k").arg(dir);
        cmd.args([
            "-p",
            &self.port.to_string(),
            "-c",
            "listen_addresses=127.0.0.1",
        ]);
        cmd.args(["-c", "fsync=off", "-c", "max_connections=200"]);
        if let Some(c) = &self.tls {
            let set = |k: &str, p: &Path| format!("{k}={}", p.display());
            cmd.args(["-c", "ssl=on", "-c"])
                .arg(set("ssl_cert_file", &c.server_cert));
            cmd.arg("-c").arg(set("ssl_key_file", &c.server_key));
            cmd.arg("-c").arg(set("ssl_ca_file", &c.ca));
        }
        cmd.current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        as_owner(&mut cmd, self.run_as);
        spawn(cmd).map_err(|e| format!("cannot start {}: {e}", self.bin.join("postgres").display()))
    }

    fn is_ready(&self) -> bool {
        Command::new(self.bin.join("pg_isready"))
            .args([
                "-q",
                "-h",
                "127.0.0.1",
                "-t",
                "1",
                "-p",
                &self.port.to_string(),
            ])
            .status()
            .is_ok_and(|s| s.success())
    }

    fn start_error(&self, why: NotReady, log: &Path, from: u64) -> StartError {
        let what = match why {
            NotReady::Exited(status) => format!("exited ({status})"),
            NotReady::TimedOut => format!("did not accept connections within {START_TIMEOUT:?}"),
        };
        StartError {
            port_taken: read_from(log, from).contains("Address already in use"),
            message: format!("PostgreSQL on port {} {what}\n{}", self.port, log_tail(log)),
        }
    }
}

impl Drop for Postgres {
    /// A fast shutdown rather than SIGKILL: a killed postmaster leaves its System V shared
    /// memory segment behind (see `sweep_shared_memory`). The scratch directory goes after.
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            stop_child(child, Signal::INT, Duration::from_secs(5));
        }
    }
}

/// Database names go into SQL unquoted, so only plain identifiers are accepted.
fn check_identifier(name: &str) -> Result<(), String> {
    let plain = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    let starts_ok = name.bytes().next().is_some_and(|b| !b.is_ascii_digit());
    if plain && starts_ok && name.len() <= 63 {
        Ok(())
    } else {
        Err(format!(
            "database name {name:?}: use [a-z_][a-z0-9_]{{0,62}}"
        ))
    }
}

/// Runs initdb into `<dir>/data`: trust auth for a `postgres` superuser, no fsync (the cluster
/// is thrown away), C locale so a missing system locale cannot fail it.
fn init_cluster(bin: &Path, run_as: Option<(u32, u32)>, dir: &Path) -> Result<(), String> {
    if let Some((uid, gid)) = run_as {
        std::os::unix::fs::chown(dir, Some(uid), Some(gid))
            .map_err(|e| format!("cannot chown {} to postgres: {e}", dir.display()))?;
    }
    let mut cmd = Command::new(bin.join("initdb"));
    cmd.arg("-D").arg(dir.join("data"));
    cmd.args([
        "-A",
        "trust",
        "-U",
        "postgres",
        "--no-sync",
        "-E",
        "UTF8",
        "--no-locale",
    ]);
    cmd.current_dir(dir);
    as_owner(&mut cmd, run_as);
    run(&mut cmd).map(drop).map_err(|e| format!("initdb: {e}"))
}

/// `pg_hba.conf` for a TLS server: `certuser` only over TLS with a client certificate signed by
/// the CA, everyone else trusted on loopback (TLS or not: the client's `sslmode` decides).
const HBA: &str = "local all all trust
hostssl all certuser 127.0.0.1/32 cert
host all certuser 127.0.0.1/32 reject
host all all 127.0.0.1/32 trust
host all all ::1/128 trust
";

/// Makes the CA, the server's and the client's certificates with `openssl` (P-256 keys, two
/// days), hands them to the server's user (it refuses a key others can read) and writes
/// `pg_hba.conf`.
fn make_certs(dir: &Path, run_as: Option<(u32, u32)>) -> Result<Certs, String> {
    let tls = dir.join("tls");
    fs::create_dir_all(&tls).map_err(|e| format!("{}: {e}", tls.display()))?;
    let f = |name: &str| tls.join(name);
    let openssl = |args: &[&str]| crate::proc::openssl(&tls, args);
    let key = crate::proc::EC_KEY;
    for ca in ["ca", "other-ca"] {
        let (k, c, subj) = (
            format!("{ca}.key"),
            format!("{ca}.crt"),
            format!("/CN=bulkwire test {ca}"),
        );
        let mut a = vec![
            "req", "-x509", "-days", "2", "-subj", &subj, "-keyout", &k, "-out", &c,
        ];
        a.extend(key);
        a.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
        a.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
        openssl(&a)?;
    }
    for (name, cn, ext) in [
        (
            "server",
            "localhost",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        ),
        ("client", CERT_USER, "extendedKeyUsage=clientAuth\n"),
    ] {
        let (k, csr, c, x) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.crt"),
            format!("{name}.ext"),
        );
        fs::write(f(&x), ext).map_err(|e| e.to_string())?;
        let subj = format!("/CN={cn}");
        let mut a = vec!["req", "-subj", &subj, "-keyout", &k, "-out", &csr];
        a.extend(key);
        openssl(&a)?;
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &x,
            "-out",
            &c,
        ])?;
    }
    for entry in fs::read_dir(&tls).map_err(|e| e.to_string())?.flatten() {
        let p = entry.path();
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&p, Some(uid), Some(gid))
                .map_err(|e| format!("chown {}: {e}", p.display()))?;
        }
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).map_err(|e| e.to_string())?;
    }
    fs::write(dir.join("data/pg_hba.conf"), HBA).map_err(|e| format!("pg_hba.conf: {e}"))?;
    Ok(Certs {
        ca: f("ca.crt"),
        other_ca: f("other-ca.crt"),
        server_cert: f("server.crt"),
        server_key: f("server.key"),
        client_cert: f("client.crt"),
        client_key: f("client.key"),
    })
}

fn as_owner(cmd: &mut Command, run_as: Option<(u32, u32)>) {
    if let Some((uid, gid)) = run_as {
        cmd.uid(uid).gid(gid);
    }
}

/// When root: the `postgres` user's uid and gid (the package creates that user).
fn run_as() -> Result<Option<(u32, u32)>, String> {
    if !rustix::process::getuid().is_root() {
        return Ok(None);
    }
    let id = |flag: &str| -> Result<u32, String> {
        let out = run(Command::new("id").args([flag, "postgres"]))
            .map_err(|e| format!("running as root, PostgreSQL refuses root, and: {e}"))?;
        out.trim()
            .parse()
            .map_err(|_| format!("id {flag} postgres printed {out:?}"))
    };
    Ok(Some((id("-u")?, id("-g")?)))
}

/// The directory holding `postgres`, `initdb`, `psql` and `pg_isready`.
fn pg_bindir() -> Result<PathBuf, String> {
    if let Some(dir) = env::var_os("BULKWIRE_PG_BIN") {
        let dir = PathBuf::from(dir);
        if !has_server(&dir) {
            let missing = "missing postgres, initdb, psql or pg_isready";
            return Err(format!("BULKWIRE_PG_BIN={}: {missing}", dir.display()));
        }
        return Ok(dir);
    }
    if let Some(dir) = find_bindir() {
        return Ok(dir);
    }
    install_postgres()?;
    find_bindir().ok_or_else(|| "installed postgresql but found no server binaries".into())
}

fn find_bindir() -> Option<PathBuf> {
    let from_pg_config = run(Command::new("pg_config").arg("--bindir"))
        .ok()
        .map(|out| PathBuf::from(out.trim()))
        .filter(|dir| has_server(dir));
    from_pg_config.or_else(highest_packaged)
}

/// Debian installs each major version under `/usr/lib/postgresql/<version>/bin`, off PATH.
fn highest_packaged() -> Option<PathBuf> {
    let version = |name: &str| -> Option<Vec<u32>> {
        name.split('.').map(|part| part.parse().ok()).collect()
    };
    fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| Some((version(e.file_name().to_str()?)?, e.path().join("bin"))))
        .filter(|(_, bin)| has_server(bin))
        .max()
        .map(|(_, bin)| bin)
}

fn has_server(dir: &Path) -> bool {
    ["postgres", "initdb", "psql", "pg_isready"]
        .iter()
        .all(|b| dir.join(b).is_file())
}

/// `apt-get install postgresql`, once across concurrent test processes; `apt-get update`
/// first only when the package lists do not know it yet (a fresh machine).
fn install_postgres() -> Result<(), String> {
    let missing = "PostgreSQL server binaries not found (set BULKWIRE_PG_BIN)";
    if !rustix::process::getuid().is_root() {
        return Err(format!(
            "{missing}, and not root, so cannot apt-get install postgresql"
        ));
    }
    if run(Command::new("apt-get").arg("--version")).is_err() {
        return Err(format!(
            "{missing}, and there is no apt-get to install postgresql"
        ));
    }
    let _lock = scratch::exclusive_lock(&scratch::root()?.join("apt.lock"))?;
    if find_bindir().is_some() {
        return Ok(()); // another test process installed it while we waited
    }
    let install = || {
        run(Command::new("apt-get")
            .args(["install", "-y", "-q", "postgresql"])
            .env("DEBIAN_FRONTEND", "noninteractive"))
    };
    install()
        .or_else(|_| run(Command::new("apt-get").args(["update", "-q"])).and_then(|_| install()))
        .map(drop)
        .map_err(|e| format!("{missing}; apt-get install postgresql failed: {e}"))
}

fn sweep_shared_memory_once(uid: u32) {
    static SWEPT: Once = Once::new();
    SWEPT.call_once(|| sweep_shared_memory(uid));
}

/// A postmaster killed by SIGKILL (our parent-death signal) leaves its small System V segment
/// behind. After enough test runs they would reach the kernel's limit (shmmni) and PostgreSQL
/// would stop starting, so remove segments of the server's user that nobody is attached to and
/// whose creator is dead. PostgreSQL itself would discard such a segment on its next start.
fn sweep_shared_memory(uid: u32) {
    const INTERLOCK_MAX: u64 = 4096; // only the tiny interlock segments, never real data
    let Ok(table) = fs::read_to_string("/proc/sysvipc/shm") else {
        return;
    };
    // Columns: key shmid perms size cpid lpid nattch uid ...
    for row in table.lines().skip(1) {
        let f: Vec<&str> = row.split_whitespace().collect();
        let [_, shmid, _, size, cpid, _, nattch, owner, ..] = f[..] else {
            continue;
        };
        let orphan = nattch == "0"
            && owner.parse() == Ok(uid)
            && size.parse::<u64>().is_ok_and(|s| s <= INTERLOCK_MAX)
            && !Path::new("/proc").join(cpid).exists();
        if orphan {
            let _ = Command::new("ipcrm").args(["-m", shmid]).output();
        }
    }
}
