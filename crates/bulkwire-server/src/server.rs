//! Start-up, the accept loop and graceful shutdown.
//!
//! Start-up does all the filesystem work the server will ever do outside
//! reading and writing blobs: it creates the data directory, opens the
//! stores, sweeps crash leftovers ([`crate::store::recover`]) and loads the
//! credentials. Connections are HTTP/1.1 (RFC 9112) served by hyper with a
//! capped read buffer (which bounds one body chunk) and a header timeout.
//! On shutdown the listener closes first, then in-flight requests get
//! [`crate::Limits::shutdown_grace`] to finish.

use crate::auth::Auth;
use crate::config::Config;
use crate::conns::{self, Admit, Io};
use crate::handlers;
use crate::state::AppState;
use crate::store::{self, BlobStore, FsBlobStore, MetaStore, SqliteMeta};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// SQLite file name in the data directory.
pub const META_FILE: &str = "meta.sqlite";

/// A server bound to its address, stores open, not yet accepting.
pub struct Server {
    state: Arc<AppState>,
    listener: TcpListener,
    new_token: Option<String>,
    swept: (usize, usize),
}

impl Server {
    /// Opens the embedded stores under `config.data` and binds.
    pub async fn bind(config: Config) -> io::Result<Server> {
        std::fs::create_dir_all(&config.data)?;
        let blobs = FsBlobStore::open(&config.data)?;
        let meta = SqliteMeta::open(&config.data.join(META_FILE)).map_err(io::Error::other)?;
        Server::bind_with(config, Arc::new(blobs), Arc::new(meta)).await
    }

    /// Binds with the given stores (other backends, test doubles).
    pub async fn bind_with(
        config: Config,
        blobs: Arc<dyn BlobStore>,
        meta: Arc<dyn MetaStore>,
    ) -> io::Result<Server> {
        config.limits.validate().map_err(io::Error::other)?;
        std::fs::create_dir_all(&config.data)?;
        // Bind first: a second server started on the same address and data
        // directory must fail before it sweeps the first one's temp files,
        // and a token stored by a start that then failed would never be
        // shown.
        let listener = TcpListener::bind(config.listen).await?;
        let swept = store::recover(blobs.as_ref(), meta.as_ref()).await?;
        let (auth, new_token) = Auth::load_or_create(&config.data, &config.tokens, &config.users)?;
        if config.limits.upload_reserve() > config.limits.memory_budget {
            tracing::warn!(
                "limits.memory_budget is below one upload's reserve: every upload will get 503"
            );
        }
        let state = Arc::new(AppState::new(config, auth, blobs, meta));
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
            .max_buf_size(limits.read_buffer);
        let graceful = GracefulShutdown::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                r = self.listener.accept() => match r {
                    Ok((stream, _)) => self.accept(stream, &builder, &graceful),
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
        drop(self.listener);
        tokio::select! {
            () = graceful.shutdown() => tracing::info!("all connections closed"),
            () = tokio::time::sleep(limits.shutdown_grace()) => {
                tracing::warn!("shutdown grace period over; dropping remaining connections");
            }
        }
        Ok(())
    }

    /// Serves a new connection within the budget ([`crate::conns`]): shed
    /// the longest idle one at the cap, or answer 503.
    fn accept(&self, stream: TcpStream, builder: &http1::Builder, graceful: &GracefulShutdown) {
        let state = self.state.clone();
        let (admit, shed) = state.conns.admit();
        if shed {
            state.metrics.connections_shed.fetch_add(1, Relaxed);
        }
        let (handle, shed_rx) = match admit {
            Admit::Serve(h, rx) => (h, rx),
            Admit::Refuse(permit) => {
                state.metrics.connections_refused.fetch_add(1, Relaxed);
                let max = state.conns.max();
                tokio::spawn(async move {
                    conns::refuse(stream, state, max).await;
                    drop(permit);
                });
                return;
            }
            Admit::Drop => {
                state.metrics.connections_refused.fetch_add(1, Relaxed);
                return;
            }
        };
        state.metrics.connections.fetch_add(1, Relaxed);
        let io = TokioIo::new(Io::new(stream, state.clone()));
        let svc_state = state.clone();
        let svc_handle = handle.clone();
        let svc = service_fn(move |req| {
            let busy = svc_handle.busy();
            handlers::handle(svc_state.clone(), req, busy)
        });
        let conn = graceful.watch(builder.serve_connection(io, svc));
        tokio::spawn(async move {
            tokio::select! {
                r = conn => if let Err(e) = r {
                    tracing::debug!(error = %e, "connection ended with an error");
                },
                Ok(()) = shed_rx => tracing::debug!("idle connection shed at max_connections"),
            }
            drop(handle);
            state.metrics.connections.fetch_sub(1, Relaxed);
        });
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
