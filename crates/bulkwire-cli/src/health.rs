//! `bulkwire healthcheck [URL]`: one `GET` of a plain-HTTP URL (default
//! `http://127.0.0.1:8080/healthz`), exit 0 on a 2xx answer. For a
//! container built `FROM scratch`, where there is no curl for Docker's
//! `HEALTHCHECK` to run: the binary checks itself.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// The URL to ask (plain `http://HOST:PORT/PATH`).
    #[arg(default_value = "http://127.0.0.1:8080/healthz")]
    url: String,
    /// Longest wait for the answer, in seconds.
    #[arg(long, default_value_t = 5)]
    timeout: u64,
}

pub fn run(a: Args) -> ExitCode {
    match check(&a.url, Duration::from_secs(a.timeout.max(1))) {
        Ok(status) if (200..300).contains(&status) => ExitCode::SUCCESS,
        Ok(status) => {
            eprintln!("bulkwire healthcheck: {} answered {status}", a.url);
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("bulkwire healthcheck: {}: {e}", a.url);
            ExitCode::FAILURE
        }
    }
}

fn check(url: &str, timeout: Duration) -> Result<u16, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or("only http:// URLs (the server's own port, inside its container)")?;
    let (host, path) = match rest.split_once('/') {
        Some((h, p)) => (h, format!("/{p}")),
        None => (rest, "/".to_string()),
    };
    let addr = host
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("no address")?;
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut head = [0u8; 64];
    let n = s.read(&mut head).map_err(|e| e.to_string())?;
    let line = String::from_utf8_lossy(&head[..n]);
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {line:?}"))
}
