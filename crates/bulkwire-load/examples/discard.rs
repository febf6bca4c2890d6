//! A discard sink for load benchmarks: accepts HTTP/1.1 on 127.0.0.1, reads
//! and drops every request body, answers `200` with an empty body.
//!
//! `cargo run --release -p bulkwire-load --example discard [-- PORT [THREADS]]`
//! prints `listening on 127.0.0.1:PORT` once ready (PORT 0: any free port).

use http_body_util::{BodyExt, Empty};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::io::Write;

async fn discard(req: Request<Incoming>) -> Result<Response<Empty<Bytes>>, Infallible> {
    let mut body = req.into_body();
    // Each frame is dropped as soon as it is read: constant memory.
    while let Some(frame) = body.frame().await {
        if frame.is_err() {
            break;
        }
    }
    Ok(Response::new(Empty::new()))
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let port: u16 = args
        .next()
        .map_or(Ok(0), |p| p.parse())
        .map_err(std::io::Error::other)?;
    let threads: usize = args
        .next()
        .map_or(Ok(1), |t| t.parse())
        .map_err(std::io::Error::other)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        println!("listening on {}", listener.local_addr()?);
        std::io::stdout().flush()?;
        loop {
            let (tcp, _) = listener.accept().await?;
            let _ = tcp.set_nodelay(true);
            tokio::spawn(async move {
                let conn =
                    http1::Builder::new().serve_connection(TokioIo::new(tcp), service_fn(discard));
                let _ = conn.await;
            });
        }
    })
}
