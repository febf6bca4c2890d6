//! The address `bulkwire serve` announces on stdout once it listens
//! ("bulkwire: listening on http://ADDR (...)"), for tests that run the binary.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::ChildStdout;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

const PREFIX: &str = "bulkwire: listening on http://";

/// The address a banner line announces, if `line` is that line.
pub fn listening_addr(line: &str) -> Option<SocketAddr> {
    line.strip_prefix(PREFIX)?
        .split(|c: char| c.is_whitespace())
        .next()?
        .parse()
        .ok()
}

/// Waits up to `within` for the banner on a server's stdout: its address and the lines printed
/// before it (a first start prints its new API token there). A thread goes on draining stdout
/// afterwards, so the server never blocks on a full pipe. `Err` carries the lines seen when the
/// server exited or the time ran out.
pub fn await_banner(
    out: ChildStdout,
    within: Duration,
) -> Result<(SocketAddr, Vec<String>), String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut before = Vec::new();
    let end = std::time::Instant::now() + within;
    loop {
        let left = end.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => match listening_addr(&line) {
                Some(addr) => return Ok((addr, before)),
                None => before.push(line),
            },
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(format!("no banner within {within:?}; stdout: {before:?}"))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(format!(
                    "the server exited before its banner; stdout: {before:?}"
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banner_line_gives_its_address_and_others_none() {
        let a = listening_addr("bulkwire: listening on http://127.0.0.1:8080 (files)");
        assert_eq!(a, Some("127.0.0.1:8080".parse().unwrap()));
        let a = listening_addr("bulkwire: listening on http://[::1]:9\n");
        assert_eq!(a, Some("[::1]:9".parse().unwrap()));
        assert_eq!(listening_addr("bulkwire: created an API token"), None);
        assert_eq!(listening_addr("bulkwire: listening on http://nohost"), None);
    }
}
