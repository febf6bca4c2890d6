//! Threads that serve connections, each with an event loop of its own, as
//! nginx's worker processes do.
//!
//! Why: on tokio's work-stealing runtime, a connection's task moves
//! between threads, and an idle thread is woken to look for work each time
//! the reactor finds some. With downloads of 1 MiB over 16 connections
//! (`bench/download/run`), that was 4× the context switches of nginx and
//! cores 87 % busy against nginx's 97 %, for the same system calls per
//! request (docs/src/performance/server.md). Here a connection is
//! handed, once, at its accept, to the worker serving the fewest
//! connections, registered with that worker's reactor, and served there
//! until it closes: its requests, its `sendfile`s, its timers and its
//! blocking-pool work. Nothing of one connection waits on another thread.
//!
//! The accept loop, the drain and the background tasks (janitor, events,
//! reloads) stay on the runtime the server runs on. A worker that has
//! been asked to stop drops its connections: the server stops the workers
//! after its drain, when no connection should be left.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// Most worker threads (`limits.connection_threads`).
pub const MAX_WORKERS: usize = 1024;

/// How long a stopping worker waits for its blocking-pool tasks (a write
/// or a sync in flight) before it lets them finish on their own.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// The connection threads; none when `limits.connection_threads` is 0.
pub(crate) struct Workers {
    workers: Vec<Worker>,
}

struct Worker {
    handle: Handle,
    live: Arc<AtomicUsize>,
    /// Dropped or sent: the worker stops.
    _stop: oneshot::Sender<()>,
    /// Sent once the worker's runtime is shut down.
    done: oneshot::Receiver<()>,
}

/// One connection on a worker, counted until dropped.
pub(crate) struct Live(Arc<AtomicUsize>);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl Workers {
    /// Starts `n` workers, each with up to `blocking` blocking-pool threads.
    pub fn start(n: usize, blocking: usize) -> io::Result<Workers> {
        let workers = (0..n)
            .map(|i| Worker::start(i, blocking))
            .collect::<io::Result<_>>()?;
        Ok(Workers { workers })
    }

    /// The worker serving the fewest connections, and the new connection's
    /// place in its count; `None` without workers (serve on the caller's
    /// runtime).
    pub fn place(&self) -> Option<(&Handle, Live)> {
        let w = self.workers.iter().min_by_key(|w| w.live.load(Relaxed))?;
        w.live.fetch_add(1, Relaxed);
        Some((&w.handle, Live(w.live.clone())))
    }

    /// Stops every worker (dropping what connections are left) and waits
    /// until their runtimes are shut down.
    pub async fn stop(self) {
        let done: Vec<_> = self.workers.into_iter().map(|w| w.done).collect();
        for d in done {
            let _ = d.await;
        }
    }
}

impl Worker {
    fn start(i: usize, blocking: usize) -> io::Result<Worker> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .max_blocking_threads(blocking)
            .thread_name("bulkwire-blocking")
            .build()?;
        let handle = rt.handle().clone();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let (done_tx, done) = oneshot::channel();
        std::thread::Builder::new()
            .name(format!("bulkwire-conn-{i}"))
            .spawn(move || {
                // Ends when the sender is sent on or dropped.
                rt.block_on(async {
                    let _ = stop_rx.await;
                });
                rt.shutdown_timeout(STOP_WAIT);
                let _ = done_tx.send(());
            })?;
        Ok(Worker {
            handle,
            live: Arc::new(AtomicUsize::new(0)),
            _stop: stop_tx,
            done,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connections_go_to_the_least_busy_worker_and_stop_ends_them() {
        let w = Workers::start(2, 4).unwrap();
        let (h0, a) = w.place().unwrap();
        let h0 = h0.clone();
        let (h1, b) = w.place().unwrap();
        let h1 = h1.clone();
        // Two different threads.
        let t0 = h0
            .spawn(async { std::thread::current().id() })
            .await
            .unwrap();
        let t1 = h1
            .spawn(async { std::thread::current().id() })
            .await
            .unwrap();
        assert_ne!(t0, t1);
        assert_ne!(t0, std::thread::current().id());
        // The first one freed is the next one chosen.
        drop(a);
        let (h, _c) = w.place().unwrap();
        let t = h
            .spawn(async { std::thread::current().id() })
            .await
            .unwrap();
        assert_eq!(t, t0);
        drop(b);
        // A task still running on a worker is dropped by stop.
        let (tx, rx) = oneshot::channel::<()>();
        h1.spawn(async move {
            let _tx = tx;
            std::future::pending::<()>().await
        });
        w.stop().await;
        assert!(rx.await.is_err(), "the worker's task was dropped");
    }

    #[test]
    fn no_workers_means_the_callers_runtime() {
        let w = Workers::start(0, 4).unwrap();
        assert!(w.place().is_none());
    }
}
