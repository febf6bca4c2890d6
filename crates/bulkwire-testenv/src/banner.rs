//! The address `bulkwire serve` announces on stdout once it listens
//! ("bulkwire: listening on http://ADDR (...)"), for tests that run the binary.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::Child;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

const PREFIX: &str = "bulkwire: listening on http://";

/// The address a banner line announces, if `line` is that line.
pub fn listening_addr(line: &str) -> Option<SocketAddr> {
    line.strip_prefix(PREFIX)?
        .split(|c: char| c.is_whitespace())
        .next()?
        .parse()
        .ok()
}

/// Waits up to `within` for the banner on the server's piped stdout: its address and the lines
/// printed before it (a first start prints its new API token there). A thread goes on draining
/// stdout afterwards, so the server never blocks on a full pipe. When the server exits first or
/// the time runs out, the server is killed (no test leaves one behind) and `Err` carries the
/// lines it printed.
pub fn await_banner(
    child: &mut Child,
    within: Duration,
) -> Result<(SocketAddr, Vec<String>), String> {
    let out = child
        .stdout
        .take()
        .ok_or("the server's stdout is not piped")?;
    let lines = drain(out);
    let mut before = Vec::new();
    let end = Instant::now() + within;
    let why = loop {
        match lines.recv_timeout(end.saturating_duration_since(Instant::now())) {
            Ok(line) => match listening_addr(&line) {
                Some(addr) => return Ok((addr, before)),
                None => before.push(line),
            },
            Err(mpsc::RecvTimeoutError::Timeout) => break format!("no banner within {within:?}"),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break "the server closed stdout before its banner".to_string()
            }
        }
    };
    let _ = child.kill();
    let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
    Err(format!("{why} ({status}); stdout: {before:?}"))
}

/// Sends `out`'s lines (lossily decoded: a stray byte ends no line early) until it closes.
fn drain(out: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut out = BufReader::new(out);
        let mut buf = Vec::new();
        while matches!(out.read_until(b'\n', &mut buf), Ok(n) if n > 0) {
            // A receiver gone (banner seen, caller done) is fine: keep draining.
            let _ = tx.send(String::from_utf8_lossy(&buf).trim_end().to_string());
            buf.clear();
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn the_banner_line_gives_its_address_and_others_none() {
        let a = listening_addr("bulkwire: listening on http://127.0.0.1:8080 (files)");
        assert_eq!(a, Some("127.0.0.1:8080".parse().unwrap()));
        let a = listening_addr("bulkwire: listening on http://[::1]:9\n");
        assert_eq!(a, Some("[::1]:9".parse().unwrap()));
        assert_eq!(listening_addr("bulkwire: created an API token"), None);
        assert_eq!(listening_addr("bulkwire: listening on http://nohost"), None);
    }

    fn sh(script: &str) -> Child {
        Command::new("sh")
            .args(["-c", script])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    }

    #[test]
    fn lines_before_the_banner_come_back_even_with_stray_bytes() {
        let mut c = sh(
            r"printf 'token\n\377 odd\nbulkwire: listening on http://127.0.0.1:9 (x)\n'; sleep 5",
        );
        let (addr, before) = await_banner(&mut c, Duration::from_secs(10)).unwrap();
        assert_eq!(addr, "127.0.0.1:9".parse().unwrap());
        assert_eq!(before, ["token", "\u{fffd} odd"]);
        let _ = c.kill();
    }

    #[test]
    fn a_server_without_banner_is_killed_and_says_why() {
        let mut c = sh("echo starting; sleep 30");
        let e = await_banner(&mut c, Duration::from_millis(300)).unwrap_err();
        assert!(e.starts_with("no banner within"), "{e}");
        assert!(e.contains("starting"), "{e}");
        assert!(c.try_wait().unwrap().is_some(), "killed and reaped");
        let mut c = sh("echo bye");
        let e = await_banner(&mut c, Duration::from_secs(10)).unwrap_err();
        assert!(e.contains("closed stdout before its banner"), "{e}");
    }
}
