//! Start-up, the accept loop and graceful shutdown.
//!
//! Start-up does all the filesystem work the server will ever do outside
//! reading and writing blobs: it creates the data directory, opens the
//! stores, sweeps crash leftovers ([`crate::store::recover`]) and loads the
//! credentials. Connections are HTTP/1.1 (RFC 9112) served by hyper with a
//! capped read buffer (which bounds one body chunk) and a header timeout.
//! On shutdown the server drains ([`Server::run`]): `/readyz` answers 503,
//! in-flight requests get [`crate::Limits::shutdown_grace`] to finish, and
//! new requests are answered 503 `draining` meanwhile.

use crate::auth::Auth;
use crate::config::Config;
use crate::conns::{self, Admit, ConnHandle};
use crate::handlers;
use crate::linger::Io;
use crate::state::AppState;
use crate::store::{self, lease, BlobStore, MetaStore};
use crate::workers::Workers;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// How often a drain says what it still waits for.
const DRAIN_REPORT: Duration = Duration::from_secs(5);

fn requests(n: usize) -> &'static str {
    if n == 1 {
        "request"
    } else {
        "requests"
    }
}

/// SQLite file name in the data directory.
pub const META_FILE: &str = "meta.sqlite";

/// Stops a background task when the future that started it goes away.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Crash leftovers at start. A store only this process can use (SQLite's
/// file) may be swept whole: every lease is a dead process's, and temp files
/// are removed by listing. Shared stores are left to the janitor, which
/// only takes leases whose node stopped heartbeating.
async fn start_cleanup(
    blobs: &dyn BlobStore,
    meta: &dyn MetaStore,
    node: &str,
) -> io::Result<(usize, usize)> {
    if !meta.single_process() {
        return Ok((0, 0));
    }
    let leased = lease::sweep_expired(meta, blobs, node, Duration::ZERO)
        .await
        .map_err(io::Error::other)?;
    let (temps, orphans) = store::recover(blobs, meta).await?;
    Ok((temps + leased, orphans))
}

/// A server bound to its address, stores open, not yet accepting.
pub struct Server {
    state: Arc<AppState>,
    listener: TcpListener,
    new_token: Option<String>,
    swept: (usize, usize),
}

/// The data directory, or an error naming it.
fn create_data_dir(dir: &std::path::Path) -> io::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| {
        let m = format!("cannot create the data directory {}: {e}", dir.display());
        io::Error::new(e.kind(), m)
    })
}

/// A listen error that names the address and what to do.
fn bind_error(addr: SocketAddr, e: io::Error) -> io::Error {
    let hint = match e.kind() {
        io::ErrorKind::AddrInUse => {
            let next = SocketAddr::new(addr.ip(), addr.port().wrapping_add(1).max(1));
            format!(
                "; another process listens there (another bulkwire serve?): stop it, or choose \
                 another address with --listen {next} (or `listen` in the config)"
            )
        }
        io::ErrorKind::PermissionDenied => {
            "; ports below 1024 need privileges: choose a port above 1024 with --listen".into()
        }
        io::ErrorKind::AddrNotAvailable => {
            "; no interface of this machine has that address: try 127.0.0.1 or 0.0.0.0".into()
        }
        _ => String::new(),
    };
    io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}{hint}"))
}

impl Server {
    /// Opens the stores the configuration names (`crate::stores`; the
    /// embedded ones under `config.data` by default) and binds.
    pub async fn bind(config: Config) -> io::Result<Server> {
        create_data_dir(&config.data)?;
        let (blobs, meta) = crate::stores::open(&config)
            .await
            .map_err(io::Error::other)?;
        Server::bind_with(config, blobs, meta).await
    }

    /// Binds with the given stores (other backends, test doubles).
    pub async fn bind_with(
        config: Config,
        blobs: Arc<dyn BlobStore>,
        meta: Arc<dyn MetaStore>,
    ) -> io::Result<Server> {
        config.limits.validate().map_err(io::Error::other)?;
        config.validate_urls().map_err(io::Error::other)?;
        config.validate_events().map_err(io::Error::other)?;
        create_data_dir(&config.data)?;
        // Bind first: a second server started on the same address and data
        // directory must fail before it sweeps the first one's temp files,
        // and a token stored by a start that then failed would never be
        // shown.
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|e| bind_error(config.listen, e))?;
        let node: Arc<str> = Arc::from(crate::state::node_id());
        let swept = start_cleanup(blobs.as_ref(), meta.as_ref(), &node).await?;
        // Alive before the first lease: no janitor elsewhere may see this
        // node's uploads without a heartbeat.
        lease::heartbeat(meta.as_ref(), &node)
            .await
            .map_err(|e| io::Error::other(format!("metadata store: {e}")))?;
        let (auth, new_token) = Auth::start(meta.as_ref(), &config)
            .await
            .map_err(|e| io::Error::other(format!("credentials: {e}")))?;
        let l = &config.limits;
        if l.upload_reserve_for(blobs.upload_memory()) > l.memory_budget {
            tracing::warn!(
                "limits.memory_budget is below one upload's reserve: every upload will get 503"
            );
        }
        let link_key = meta
            .secret(crate::links::KEY_NAME, crate::links::Links::fresh_key())
            .await
            .map_err(|e| io::Error::other(format!("metadata store: link key: {e}")))?;
        let hooks = crate::hooks::Hooks::new(&config.hooks).map_err(io::Error::other)?;
        let state = Arc::new(AppState::new(
            config, auth, blobs, meta, node, link_key, hooks,
        ));
        if let Some(jwt) = &state.auth.jwt {
            state.metrics.attach_jwt(jwt.stats().clone());
        }
        // Before the first request: a webhook added with this start gets
        // every event committed from now on.
        crate::events::dispatch::begin(&state)
            .await
            .map_err(|e| io::Error::other(format!("metadata store: {e}")))?;
        Ok(Server {
            state,
            listener,
            new_token,
            swept,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The token created on this first start, to show once; `None` when
    /// tokens or users were configured or one was created before.
    pub fn generated_token(&self) -> Option<&str> {
        self.new_token.as_deref()
    }

    /// (temp objects, orphan blobs) removed at start-up.
    pub fn swept(&self) -> (usize, usize) {
        self.swept
    }

    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// Serves until `shutdown` completes, then lets in-flight requests
    /// finish within the grace period.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        let limits = self.state.config.limits.clone();
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout())
            .max_buf_size(limits.read_buffer)
            // Body buffers are queued, never copied: a download's
            // placeholders must reach the I/O as themselves
            // (`crate::sendfile`).
            .writev(true);
        let (stop_tx, stop) = watch::channel(false);
        let workers = Workers::start(limits.connection_threads, limits.blocking_threads())?;
        let janitor = AbortOnDrop(self.spawn_janitor());
        let _link_key = AbortOnDrop(self.spawn_link_key_reload());
        let _parked = AbortOnDrop(self.spawn_parked_sweep());
        let _events: Vec<_> = crate::events::dispatch::start(&self.state)
            .map_err(io::Error::other)?
            .into_iter()
            .chain([tokio::spawn(crate::events::feed::watch_head(
                self.state.clone(),
            ))])
            .map(AbortOnDrop)
            .collect();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                r = self.listener.accept() => match r {
                    Ok((stream, _)) => self.accept(stream, &builder, &stop, &workers),
                    Err(e) => {
                        // Only when the descriptor budget was overrun from
                        // outside (see `conns`): back off, do not spin.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                () = &mut shutdown => break,
            }
        }
        drop(janitor);
        self.drain(&builder, stop_tx, &workers).await;
        workers.stop().await;
        Ok(())
    }

    /// The drain after the first signal: `/readyz` turns 503 at once (a
    /// load balancer stops sending), connections with nothing in flight
    /// close, those with a request finish it, and new requests still get
    /// an answer, 503 `draining` (`handlers::handle`), until every
    /// connection open at the signal has closed or the grace period is
    /// over. The log says what it waits for, and every few seconds how
    /// much is left.
    async fn drain(
        &self,
        builder: &http1::Builder,
        stop_tx: watch::Sender<bool>,
        workers: &Workers,
    ) {
        let grace = self.state.config.limits.shutdown_grace();
        self.state.draining.store(true, Relaxed);
        let open = self.state.conns.open_ids();
        let _ = stop_tx.send(true);
        let n = self.state.conns.in_flight();
        tracing::info!(
            "draining: {n} {} in flight, up to {} s",
            requests(n),
            grace.as_secs_f64()
        );
        // Connections accepted from now on answer one request, 503 with
        // `Connection: close`: they are not told to stop before it.
        let (_keep, never) = watch::channel(false);
        let deadline = tokio::time::Instant::now() + grace;
        let drained = self.state.conns.wait_closed(open);
        tokio::pin!(drained);
        let start = tokio::time::Instant::now();
        let mut report = tokio::time::interval_at(start + DRAIN_REPORT, DRAIN_REPORT);
        loop {
            tokio::select! {
                () = &mut drained => {
                    tracing::info!("drained: every request answered; all connections closed");
                    return;
                }
                () = tokio::time::sleep_until(deadline) => {
                    let n = self.state.conns.in_flight();
                    tracing::warn!(
                        "shutdown grace period over; dropping {n} {} still in flight",
                        requests(n)
                    );
                    return;
                }
                _ = report.tick() => {
                    let n = self.state.conns.in_flight();
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    tracing::info!(
                        "draining: {n} {} still in flight, {} s left",
                        requests(n),
                        left.as_secs()
                    );
                }
                r = self.listener.accept() => {
                    if let Ok((stream, _)) = r {
                        self.accept(stream, builder, &never, workers);
                    }
                }
            }
        }
    }

    /// Reloads the link key every `auth_cache_ms`, so that a rotation on
    /// any node (`bulkwire link rotate`) reaches this one as a revoked token
    /// does. A store that cannot be reached keeps the key in hand.
    fn spawn_link_key_reload(&self) -> JoinHandle<()> {
        let st = self.state.clone();
        let every = Duration::from_millis(st.config.limits.auth_cache_ms.max(1000));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let fresh = crate::links::Links::fresh_key();
                match st.meta.secret(crate::links::KEY_NAME, fresh).await {
                    Ok(k) => st.links.set_key(k),
                    Err(e) => tracing::warn!(error = %e, "link key reload failed"),
                }
            }
        })
    }

    /// Closes the resumable writers parked for longer than their time
    /// (`handlers::tus::lock`), so that an upload abandoned after a
    /// request keeps no descriptor (nor, if it expires and is removed, its
    /// deleted file's blocks) beyond `idle_timeout_ms` and a tick.
    fn spawn_parked_sweep(&self) -> JoinHandle<()> {
        let st = self.state.clone();
        let every = st
            .config
            .limits
            .idle_timeout()
            .max(Duration::from_millis(100));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every / 2).await;
                st.writers.sweep();
            }
        })
    }

    /// Heartbeats this node and cleans up after dead ones, while serving.
    fn spawn_janitor(&self) -> JoinHandle<()> {
        let st = &self.state;
        let l = &st.config.limits;
        let times = lease::JanitorTimes {
            expiry: Duration::from_millis(l.lease_ms),
            interval: Duration::from_millis(l.janitor_interval_ms),
        };
        tokio::spawn(lease::janitor(st.leases.clone(), times))
    }

    /// Serves a new connection within the budget ([`crate::conns`]): shed
    /// another at the cap, or answer 503. Served on a worker
    /// ([`crate::workers`]) when there are any.
    fn accept(
        &self,
        stream: TcpStream,
        builder: &http1::Builder,
        stop: &watch::Receiver<bool>,
        workers: &Workers,
    ) {
        // Answers go out whole at once: Nagle's algorithm would only hold
        // a short one back for the ACK of the last.
        let _ = stream.set_nodelay(true);
        let state = self.state.clone();
        let (handle, shed) = match state.conns.admit() {
            Admit::Serve {
                handle,
                shed,
                shed_other,
            } => {
                if shed_other {
                    state.metrics.connections_shed.fetch_add(1, Relaxed);
                }
                (handle, shed)
            }
            Admit::Refuse(permit) => {
                state.metrics.connections_refused.fetch_add(1, Relaxed);
                let max = state.conns.max();
                tokio::spawn(async move {
                    conns::refuse(stream, state, max).await;
                    drop(permit);
                });
                return;
            }
            Admit::Close => {
                state.metrics.connections_refused.fetch_add(1, Relaxed);
                return;
            }
        };
        let peer = stream.peer_addr().ok();
        let (stream, worker) = match workers.place() {
            None => (stream, None),
            // Registered with the worker's reactor, so that its readiness
            // wakes the worker's thread and no other.
            Some((rt, live)) => match stream.into_std().and_then(|s| {
                let _in = rt.enter();
                TcpStream::from_std(s)
            }) {
                Ok(s) => (s, Some((rt.clone(), live))),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot hand a connection to a worker");
                    return;
                }
            },
        };
        // Whatever the connection makes (hyper's timers) is the worker's.
        let _in = worker.as_ref().map(|(rt, _)| rt.enter());
        let io = Io::new(stream, state.clone(), Some(handle.clone()));
        let slot = io.file_slot();
        let io = TokioIo::new(io);
        let svc_handle = handle.clone();
        let svc = service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(slot.clone());
            let busy = svc_handle.busy();
            handlers::handle(state.clone(), req, busy, peer)
        });
        let conn = builder.serve_connection(io, svc);
        let serve = serve(conn, handle, shed, stop.clone());
        match worker {
            None => drop(tokio::spawn(serve)),
            Some((rt, live)) => drop(rt.spawn(async move {
                serve.await;
                drop(live);
            })),
        }
    }

    /// Runs on the current runtime in the background; for tests and
    /// embedding.
    pub fn spawn(self) -> io::Result<RunningServer> {
        let addr = self.local_addr()?;
        let state = self.state.clone();
        let (tx, rx) = oneshot::channel::<()>();
        let join = tokio::spawn(self.run(async move {
            let _ = rx.await;
        }));
        Ok(RunningServer {
            addr,
            state,
            stop: Some(tx),
            join,
        })
    }
}

/// Drives one connection until it ends, is shed, or the server stops: a
/// connection that has no answer in flight is closed at once, any other
/// through hyper's graceful shutdown (which finishes the request and the
/// answer in progress, then closes).
///
/// A connection that ends by itself is closed through [`Io`]'s lingering
/// close even when hyper did not shut it down: hyper skips the shutdown
/// of a connection whose request carried `Upgrade` (Java's HttpClient,
/// under Apache CXF, sends `Upgrade: h2c` on every request), and without
/// a linger an answer sent before the body was read would be destroyed by
/// the reset of the unread bytes.
async fn serve<C>(
    mut conn: C,
    handle: Arc<ConnHandle>,
    mut shed: oneshot::Receiver<conns::Shed>,
    mut stop: watch::Receiver<bool>,
) where
    C: Future<Output = Result<(), hyper::Error>> + GracefulConn + Unpin,
{
    let (mut shed_seen, mut stop_seen) = (false, *stop.borrow());
    if stop_seen {
        Pin::new(&mut conn).shutdown_gracefully();
    }
    loop {
        tokio::select! {
            r = &mut conn => {
                match r {
                    // A no-op when hyper has shut it down already.
                    Ok(()) => {
                        let mut io = conn.into_io();
                        let _ = tokio::io::AsyncWriteExt::shutdown(&mut io).await;
                    }
                    Err(e) => tracing::debug!(error = %e, "connection ended with an error"),
                }
                break;
            }
            how = &mut shed, if !shed_seen => {
                shed_seen = true;
                let Ok(how) = how else { continue };
                if how == conns::Shed::Close && handle.may_close_now() {
                    tracing::debug!("connection shed at max_connections");
                    break;
                }
                Pin::new(&mut conn).shutdown_gracefully();
            }
            r = stop.changed(), if !stop_seen => {
                stop_seen = true;
                if r.is_ok() && handle.is_fresh() {
                    break;
                }
                Pin::new(&mut conn).shutdown_gracefully();
            }
        }
    }
}

/// hyper's `graceful_shutdown` on a pinned connection, and its socket
/// once it has ended.
trait GracefulConn {
    fn shutdown_gracefully(self: Pin<&mut Self>);
    fn into_io(self) -> Io;
}

impl<S> GracefulConn for http1::Connection<TokioIo<Io>, S>
where
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::ResBody: 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn shutdown_gracefully(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }

    fn into_io(self) -> Io {
        self.into_parts().io.into_inner()
    }
}

/// A server running in the background.
pub struct RunningServer {
    pub addr: SocketAddr,
    pub state: Arc<AppState>,
    stop: Option<oneshot::Sender<()>>,
    join: JoinHandle<io::Result<()>>,
}

impl RunningServer {
    /// Stops accepting and waits for in-flight requests (within the grace).
    pub async fn shutdown(mut self) -> io::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        (&mut self.join).await.map_err(io::Error::other)?
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// Completes on SIGTERM or SIGINT (Ctrl-C).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
