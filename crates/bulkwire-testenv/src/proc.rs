//! Small helpers around child processes, ports and logs, shared by both servers.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command};
use std::thread::sleep;
use std::time::{Duration, Instant};

use rustix::process::Signal;
use rustix::process::{kill_process, Pid};

/// Runs the `openssl` command in `dir` (test certificates for PostgreSQL
/// and the STS stand-in).
pub(crate) fn openssl(dir: &std::path::Path, args: &[&str]) -> Result<(), String> {
    run(Command::new("openssl").args(args).current_dir(dir))
        .map(drop)
        .map_err(|e| format!("making test certificates (needs the openssl command): {e}"))
}

/// `openssl req` arguments for a new P-256 key, unencrypted.
pub(crate) const EC_KEY: [&str; 5] = [
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
];

/// Runs a command to completion; its stdout on success, otherwise a message with stderr.
pub(crate) fn run(cmd: &mut Command) -> Result<String, String> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        return Ok(stdout);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(format!(
        "{program} failed ({}): {stderr}{stdout}",
        out.status
    ))
}

/// `n` distinct loopback ports that were free a moment ago. All listeners are held together
/// so the kernel cannot hand out the same port twice; a race with another process remains,
/// which the callers handle by retrying a start that failed to bind.
pub(crate) fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cannot bind a loopback port: {e}"))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot read a bound port: {e}"))
}

/// The last lines of a server log, for error messages.
pub(crate) fn log_tail(path: &Path) -> String {
    const TAIL_BYTES: u64 = 4096;
    let text = read_from(path, file_len(path).saturating_sub(TAIL_BYTES));
    format!("--- tail of {} ---\n{}", path.display(), text.trim_end())
}

/// The length of a file, 0 if it does not exist yet: where the next start's log lines begin.
pub(crate) fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// A file's text from `offset` on (lossy: logs are for people).
pub(crate) fn read_from(path: &Path, offset: u64) -> String {
    let mut bytes = Vec::new();
    if let Ok(mut file) = File::open(path) {
        let _ = file.seek(SeekFrom::Start(offset));
        let _ = file.read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Why a server did not become ready.
pub(crate) enum NotReady {
    Exited(String),
    TimedOut,
}

/// Polls `ready` until it answers true, the child exits, or `timeout` passes.
pub(crate) fn wait_ready(
    child: &mut Child,
    timeout: Duration,
    mut ready: impl FnMut() -> bool,
) -> Result<(), NotReady> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(NotReady::Exited(status.to_string()));
        }
        if ready() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(NotReady::TimedOut);
        }
        sleep(Duration::from_millis(50));
    }
}

/// Sends `signal` and waits up to `grace` for the child to exit, then kills it outright.
pub(crate) fn stop_child(mut child: Child, signal: Signal, grace: Duration) {
    let _ = kill_process(Pid::from_child(&child), signal);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        sleep(Duration::from_millis(20));
    }
    kill_child(child);
}

/// SIGKILL and reap, so no zombie and no port is left behind.
pub(crate) fn kill_child(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}
