//! Local stand-ins for the cloud's credential endpoints, on a loopback port: the EC2 instance
//! metadata service (IMDSv2: a session token by `PUT /latest/api/token`, then the role's keys
//! under `/latest/meta-data/iam/security-credentials/`, each read needing that token) and the
//! ECS/EKS container credentials endpoint (`GET` with the `Authorization` token).
//!
//! Both serve short-lived keys that SeaweedFS accepts: every `period` the stand-in mints a new
//! set (a key id, a secret and a session token) with a [`Mint`] — in the tests, SeaweedFS's own
//! STS `AssumeRole` ([`crate::Seaweed::assume_role`]), whose session tokens SeaweedFS checks on
//! every request — and serves it with an `Expiration` at the end of that period, so the client
//! must come back for the next set while an upload runs.
//!
//! Why not a mock inside the client: the client's own cache, refresh and IMDSv2 token dance are
//! what is under test; only the address is local.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Makes a new set of temporary keys.
pub type Mint = Box<dyn Fn() -> Result<crate::TempKeys, String> + Send + Sync>;

/// The token an ECS/EKS container is handed (`AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`).
pub const CONTAINER_TOKEN: &str = "bulkwire-container-token";

/// The IAM role the fake instance has.
const ROLE: &str = "bulkwire-role";

/// A running stand-in; it stops when dropped.
pub struct CredsServer {
    port: u16,
    stop: Arc<AtomicBool>,
    state: Arc<State>,
}

struct State {
    keys: Rotation,
    /// Requests refused for a missing or wrong token.
    refused: AtomicUsize,
}

/// Keys that change every `period`, each set minted when first asked for: what every stand-in
/// here hands out (the STS one too, `crate::sts`).
pub(crate) struct Rotation {
    start: SystemTime,
    period: Duration,
    /// The keys of each period, in order.
    minted: Mutex<Vec<(usize, crate::TempKeys)>>,
    mint: Mint,
}

impl Rotation {
    pub(crate) fn new(period: Duration, mint: Mint) -> Rotation {
        Rotation {
            start: SystemTime::now(),
            period,
            minted: Mutex::new(Vec::new()),
            mint,
        }
    }

    /// The current period's keys, and the end of that period (their `Expiration`).
    pub(crate) fn current(&self) -> Result<(crate::TempKeys, SystemTime), String> {
        let since = SystemTime::now()
            .duration_since(self.start)
            .unwrap_or_default();
        let n = (since.as_nanos() / self.period.as_nanos().max(1)) as usize;
        let expires = self.start + self.period * (n as u32 + 1);
        let mut minted = self.minted.lock().unwrap();
        match minted.last() {
            Some((m, k)) if *m == n => Ok((k.clone(), expires)),
            _ => {
                let k = (self.mint)()?;
                minted.push((n, k.clone()));
                Ok((k, expires))
            }
        }
    }

    /// The key ids handed out so far, each once, in order.
    pub(crate) fn served(&self) -> Vec<String> {
        let m = self.minted.lock().unwrap();
        m.iter().map(|(_, k)| k.key_id.clone()).collect()
    }
}

impl CredsServer {
    /// Starts serving keys that change every `period`, each set made by `mint`.
    pub fn start(period: Duration, mint: Mint) -> Result<CredsServer, String> {
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(|e| format!("fake credentials: {e}"))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(State {
            keys: Rotation::new(period, mint),
            refused: AtomicUsize::new(0),
        });
        let (s, st) = (stop.clone(), state.clone());
        thread::spawn(move || serve(listener, s, st));
        Ok(CredsServer { port, stop, state })
    }

    /// `http://127.0.0.1:PORT`: `AWS_EC2_METADATA_SERVICE_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `AWS_CONTAINER_CREDENTIALS_FULL_URI`.
    pub fn container_uri(&self) -> String {
        format!("{}/v2/credentials/bulkwire", self.endpoint())
    }

    /// The key ids handed out so far, each once, in order.
    pub fn served(&self) -> Vec<String> {
        self.state.keys.served()
    }

    /// Requests refused for want of the right token.
    pub fn refused(&self) -> usize {
        self.state.refused.load(Ordering::Relaxed)
    }
}

impl Drop for CredsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve(listener: TcpListener, stop: Arc<AtomicBool>, state: Arc<State>) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => {
                let st = state.clone();
                thread::spawn(move || {
                    let _ = answer(conn, &st);
                });
            }
            Err(_) => thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// One request per connection (`Connection: close`).
fn answer(conn: TcpStream, state: &State) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    let head = read_head(&mut BufReader::new(conn.try_clone()?))?;
    let (status, body) = route(&head, state);
    if status == 401 {
        state.refused.fetch_add(1, Ordering::Relaxed);
    }
    let mut conn = conn;
    write!(
        conn,
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    conn.flush()
}

/// A request's line and headers.
pub(crate) struct Head {
    pub(crate) method: String,
    /// The path and query, as sent.
    pub(crate) target: String,
    /// Names in lowercase.
    pub(crate) headers: Vec<(String, String)>,
}

impl Head {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads a request's line and headers, up to the blank line.
pub(crate) fn read_head(reader: &mut impl BufRead) -> std::io::Result<Head> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, target) = (
        parts.next().unwrap_or("").to_string(),
        parts.next().unwrap_or("").to_string(),
    );
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    Ok(Head {
        method,
        target,
        headers,
    })
}

const IMDS_TOKEN: &str = "bulkwire-imds-session";

fn route(head: &Head, state: &State) -> (u16, String) {
    let header = |name: &str| head.header(name);
    const CREDS: &str = "/latest/meta-data/iam/security-credentials/";
    match (head.method.as_str(), head.target.as_str()) {
        ("PUT", "/latest/api/token") => match header("x-aws-ec2-metadata-token-ttl-seconds") {
            Some(_) => (200, IMDS_TOKEN.into()),
            None => (400, "missing TTL".into()),
        },
        ("GET", p) if p.starts_with(CREDS) => {
            // IMDSv2 only: every read needs the session token.
            if header("x-aws-ec2-metadata-token") != Some(IMDS_TOKEN) {
                return (401, String::new());
            }
            match &p[CREDS.len()..] {
                "" => (200, ROLE.into()),
                ROLE => answer_keys(state, true),
                _ => (404, String::new()),
            }
        }
        ("GET", "/v2/credentials/bulkwire") => match header("authorization") {
            Some(CONTAINER_TOKEN) => answer_keys(state, false),
            _ => (401, String::new()),
        },
        _ => (404, String::new()),
    }
}

fn answer_keys(state: &State, imds: bool) -> (u16, String) {
    match keys(state, imds) {
        Ok(body) => (200, body),
        Err(e) => (500, e),
    }
}

/// The current period's keys as the metadata services write them.
fn keys(state: &State, imds: bool) -> Result<String, String> {
    let (k, expires) = state.keys.current()?;
    let code = if imds {
        r#""Code":"Success","Type":"AWS-HMAC","#
    } else {
        ""
    };
    Ok(format!(
        r#"{{{code}"AccessKeyId":"{}","SecretAccessKey":"{}","Token":"{}","Expiration":"{}","RoleArn":"arn:aws:iam::000000000000:role/{ROLE}"}}"#,
        k.key_id,
        k.secret,
        k.token,
        rfc3339(expires)
    ))
}

/// `YYYY-MM-DDTHH:MM:SSZ` (UTC), without a date crate.
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_709_251_199); // leap year's Feb 29
        assert_eq!(rfc3339(t), "2024-02-29T23:59:59Z");
    }
}
