//! Storage guarantees: restart sweeps crash leftovers, a full disk (a
//! failing `BlobStore`, and a real 8 MiB tmpfs when we may mount one) leaves
//! nothing partial listed or on disk; `/readyz` reports a store that does
//! not answer.

mod common;

use bulkwire_server::store::{BlobStore, BlobWriter, BoxFut, Lease, MetaError};
use bulkwire_server::{Limits, Server};
use bytes::Bytes;
use common::*;
use serde_json::Value;
use std::io;
use std::sync::Arc;

#[tokio::test]
async fn restart_sweeps_temp_files_and_orphan_blobs_but_keeps_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = || config(dir.path(), Limits::default());
    let srv = Server::bind(cfg()).await.unwrap();
    assert_eq!(srv.swept(), (0, 0));
    let srv = srv.spawn().unwrap();
    let http = client();
    let data = payload(4000, 7);
    let r = http
        .put(srv.url("/v1/media/keep.bin"))
        .bearer_auth(TOKEN)
        .body(data.clone())
        .send()
        .await
        .unwrap();
    let j: Value = r.json().await.unwrap();
    let url = j["media"][0]["url"].as_str().unwrap().to_string();
    srv.shutdown().await.unwrap();

    // What a kill -9 can leave: a temp file mid-write, a blob whose row was
    // never committed.
    std::fs::write(
        dir.path()
            .join("tmp")
            .join("0123456789abcdef0123456789abcdef"),
        b"partial",
    )
    .unwrap();
    let orphan = dir
        .path()
        .join("blobs")
        .join("fedcba9876543210fedcba9876543210");
    std::fs::write(&orphan, b"orphan").unwrap();

    let srv = Server::bind(cfg()).await.unwrap();
    assert_eq!(srv.swept(), (1, 1));
    assert!(!orphan.exists());
    assert_eq!(count_files(&dir.path().join("tmp")), 0);
    let srv = srv.spawn().unwrap();
    // The link's path, on the restarted server (a new port) and without
    // credentials: the link key was kept in the metadata store.
    let path = &url[url.find("/v1/media/").unwrap()..];
    let got = http
        .get(srv.url(path))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(sha256(&got), sha256(&data));
    srv.shutdown().await.unwrap();
}

/// A blob store whose disk holds `cap` bytes of temp data per object.
struct FullDisk {
    cap: u64,
}

struct FullWriter {
    inner: Box<dyn BlobWriter>,
    written: u64,
    cap: u64,
}

impl BlobWriter for FullWriter {
    fn write(&mut self, chunks: Vec<Bytes>) -> BoxFut<'_, io::Result<()>> {
        Box::pin(async move {
            self.written += chunks.iter().map(|c| c.len() as u64).sum::<u64>();
            if self.written > self.cap {
                return Err(io::Error::from_raw_os_error(28));
            }
            self.inner.write(chunks).await
        })
    }

    fn commit(self: Box<Self>) -> BoxFut<'static, io::Result<()>> {
        self.inner.commit()
    }

    fn takes_aligned(&self) -> bool {
        self.inner.takes_aligned()
    }
}

impl StoreHook for FullDisk {
    fn begin<'a>(
        &'a self,
        inner: &'a dyn BlobStore,
        id: &'a str,
        lease: Arc<Lease>,
    ) -> BoxFut<'a, io::Result<Box<dyn BlobWriter>>> {
        Box::pin(async move {
            let inner = inner.begin(id, lease).await?;
            Ok(Box::new(FullWriter {
                inner,
                written: 0,
                cap: self.cap,
            }) as Box<dyn BlobWriter>)
        })
    }
}

#[tokio::test]
async fn enospc_from_the_blob_store_is_507_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = Hooked {
        inner: common::blob_store(dir.path()),
        hook: FullDisk { cap: 100_000 },
    };
    let meta = common::meta_store(dir.path()).await;
    let h = start_with(dir, Limits::default(), Arc::new(blobs), meta).await;
    // The first file fits and is committed; the second fills the disk: the
    // request fails whole.
    let form = reqwest::multipart::Form::new()
        .part(
            "a",
            reqwest::multipart::Part::bytes(payload(50_000, 1)).file_name("a"),
        )
        .part(
            "b",
            reqwest::multipart::Part::bytes(payload(500_000, 2)).file_name("b"),
        );
    let r = h.post_form(form).await;
    assert_eq!(r.status(), 507);
    assert_eq!(r.json::<Value>().await.unwrap()["error"], "storage_full");
    h.assert_empty().await;
    assert!(h
        .metric("bulkwire_uploads_total{format=\"multipart\",outcome=\"failed\"}")
        .ends_with(" 1"));
    // Small uploads still work.
    assert_eq!(
        h.put("small", "text/plain", b"ok".to_vec()).await.status(),
        201
    );
}

/// Mounts an 8 MiB tmpfs; fails the test without root and mount rights.
fn mount_tmpfs(dir: &std::path::Path) {
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8m", "tmpfs"])
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        bulkwire_runtimes::missing(
            "the right to mount a tmpfs",
            "root with mount rights (in a container: CAP_SYS_ADMIN)",
        );
    }
}

struct Unmount(std::path::PathBuf);
impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[cfg_attr(
    missing_root,
    ignore = "needs root to mount a tmpfs (not root when this test was built; with CI set it fails instead)"
)]
#[tokio::test]
async fn real_full_disk_on_tmpfs_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    mount_tmpfs(dir.path());
    let _unmount = Unmount(dir.path().to_path_buf());
    let srv = Server::bind(config(dir.path(), Limits::default()))
        .await
        .unwrap()
        .spawn()
        .unwrap();
    let http = client();
    let r = http
        .put(srv.url("/v1/media/huge.bin"))
        .bearer_auth(TOKEN)
        .body(payload(16 * 1024 * 1024, 3))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 507);
    let j: Value = http
        .get(srv.url("/v1/media"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(j["media"], serde_json::json!([]));
    wait_until("temp file removed", || {
        count_files(&dir.path().join("tmp")) == 0
    })
    .await;
    assert_eq!(count_files(&dir.path().join("blobs")), 0);
    // The space came back: a file that fits is stored.
    let data = payload(1024 * 1024, 4);
    let r = http
        .put(srv.url("/v1/media/fits.bin"))
        .bearer_auth(TOKEN)
        .body(data.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let j: Value = r.json().await.unwrap();
    assert_eq!(j["media"][0]["sha256"], sha256(&data));
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn readyz_says_whether_both_stores_answer_healthz_stays_liveness() {
    let h = start(Limits::default()).await;
    let r = h.http.get(h.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "ready\n");

    let dir = tempfile::tempdir().unwrap();
    let meta = FailingMeta {
        ready: Some(MetaError::new("connection refused")),
        ..FailingMeta::on(common::meta_store(dir.path()).await)
    };
    let blobs = common::blob_store(dir.path());
    let h = start_with(dir, Limits::default(), blobs, Arc::new(meta)).await;
    let r = h.http.get(h.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "1");
    let j: Value = r.json().await.unwrap();
    let msg = j["message"].as_str().unwrap();
    assert!(
        msg.contains("metadata store: metadata: connection refused"),
        "{msg}"
    );
    assert!(!msg.contains("blob store"), "{msg}");
    let r = h.http.get(h.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

#[test]
fn rerun_on_shared_stores() {
    // Both excluded tests are about the embedded store's own files: the
    // start-up sweep of data/tmp and data/blobs, and a real full tmpfs.
    // Shared stores' crash cleanup is the lease janitor's, tested in
    // bulkwire-store and tests/cluster.rs.
    common::rerun_on_shared_stores(&[
        "restart_sweeps_temp_files_and_orphan_blobs_but_keeps_uploads",
        "real_full_disk_on_tmpfs_leaves_nothing",
    ]);
}
