//! `S3BlobStore` against a real SeaweedFS (started by `bulkwire-testenv`;
//! a test that cannot start it fails, it never skips): the shared
//! conformance checks, abandoned multipart uploads, the two-part memory
//! bound, and a server that dies in the middle of an upload. Each test
//! uses a bucket of its own.

use bulkwire_store::{
    conformance, new_id, BlobStore, Lease, Leases, S3BlobStore, S3Config, SqliteMeta,
};
use bulkwire_testenv::{default_cache, must, shared_seaweed, Seaweed};
use bytes::Bytes;
use futures_util::StreamExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// S3's minimum, so that `12 MiB` is three parts, the last one short.
const PART: usize = S3Config::MIN_PART_SIZE;
/// How long a test waits for an answer that must come: a hang guard,
/// not a timing.
const GUARD: Duration = Duration::from_secs(120);

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn new_bucket(sw: &Seaweed) -> String {
    let name = format!("bw-{}", &new_id()[..16]);
    must(sw.create_bucket(&name));
    name
}

fn config(sw: &Seaweed, bucket: &str, prefix: &str) -> S3Config {
    let mut c = S3Config::from_url(&format!("s3://{bucket}/{prefix}")).unwrap();
    c.endpoint = Some(sw.endpoint());
    c.access_key_id = Some(sw.access_key().into());
    c.secret_access_key = Some(sw.secret_key().into());
    c.region = sw.region().into();
    c.allow_http = true;
    c.part_size = PART;
    c
}

/// A signed GET that must answer 200; its XML body.
fn s3_get(sw: &Seaweed, path_and_query: &str) -> String {
    match must(sw.s3_curl("GET", path_and_query, &[])) {
        (200, body) => body,
        (status, body) => panic!("GET {path_and_query}: HTTP {status}: {body}"),
    }
}

/// Multipart uploads in progress in `bucket`.
fn uploads(sw: &Seaweed, bucket: &str) -> usize {
    s3_get(sw, &format!("/{bucket}?uploads"))
        .matches("<Upload>")
        .count()
}

/// Objects in `bucket`.
fn objects(sw: &Seaweed, bucket: &str) -> Vec<String> {
    let body = s3_get(sw, &format!("/{bucket}?list-type=2"));
    body.split("<Key>")
        .skip(1)
        .filter_map(|s| s.split_once("</Key>").map(|(k, _)| k.to_string()))
        .collect()
}

fn bytes_of(n: usize, seed: usize) -> Bytes {
    (0..n)
        .map(|i| ((i + seed) % 251) as u8)
        .collect::<Vec<u8>>()
        .into()
}

async fn read_all(s: &dyn BlobStore, id: &str, len: u64) -> Vec<u8> {
    let mut st = s.open(id, 0, len).await.unwrap();
    let mut v = Vec::new();
    while let Some(c) = st.next().await {
        v.extend_from_slice(&c.unwrap());
    }
    v
}

#[test]
fn conformance_with_several_parts_and_the_janitor() {
    let sw = must(shared_seaweed());
    let bucket = new_bucket(sw);
    rt().block_on(async {
        let s = S3BlobStore::new(config(sw, &bucket, "c/p")).unwrap();
        let about = s.describe().await.unwrap();
        let want = format!(
            "S3 bucket {bucket} at {} (prefix c/p/), part size 5 MiB, credentials: static keys \
             from [s3] (key id bulkwire-test), read/write probe ok",
            sw.endpoint()
        );
        assert_eq!(about, want);
        let s: Arc<dyn BlobStore> = Arc::new(s);
        assert_eq!(s.upload_memory(), 2 * PART as u64);
        conformance::blob_store(s.clone(), 12 << 20).await;
        conformance::spools(s.clone(), PART).await;
        conformance::spool_notes(s.clone()).await;
        let d = tempfile::tempdir().unwrap();
        let m = SqliteMeta::open(&d.path().join("m.sqlite")).unwrap();
        conformance::janitor(Arc::new(m), s).await;
    });
    assert_eq!(uploads(sw, &bucket), 0, "no multipart upload left");
    let left = objects(sw, &bucket);
    // The live node's blob, and the one whose row committed although its
    // lease was dropped unended (`conformance::janitor`).
    assert_eq!(left.len(), 2, "only the blobs with rows: {left:?}");
    assert!(left[0].starts_with("c/p/"), "{left:?}");
}

#[test]
fn keys_without_a_prefix_are_bare_ids() {
    let sw = must(shared_seaweed());
    let bucket = new_bucket(sw);
    let id = new_id();
    rt().block_on(async {
        let s = S3BlobStore::new(config(sw, &bucket, "")).unwrap();
        s.ready().await.unwrap();
        let mut w = s.begin(&id, Lease::detached(&id)).await.unwrap();
        w.write(vec![Bytes::from_static(b"small")]).await.unwrap();
        w.commit().await.unwrap();
        assert_eq!(read_all(&s, &id, 5).await, b"small");
    });
    assert_eq!(objects(sw, &bucket), [id]);
    assert_eq!(uploads(sw, &bucket), 0, "a small blob is one PUT");
}

#[test]
fn a_missing_bucket_is_not_ready() {
    let sw = must(shared_seaweed());
    let s = S3BlobStore::new(config(sw, &format!("none-{}", &new_id()[..8]), "")).unwrap();
    let e = rt().block_on(s.ready()).unwrap_err().to_string();
    assert!(e.starts_with("S3 list"), "{e}");
}

/// Part sizes of an upload in progress, from ListParts.
fn part_sizes(sw: &Seaweed, bucket: &str, id: &str, upload: &str) -> Vec<usize> {
    let body = s3_get(sw, &format!("/{bucket}/{id}?uploadId={upload}"));
    body.split("<Size>")
        .skip(1)
        .filter_map(|s| s.split_once("</Size>")?.0.parse().ok())
        .collect()
}

#[test]
fn abandoned_multipart_uploads_are_aborted() {
    let sw = must(shared_seaweed());
    let bucket = new_bucket(sw);
    rt().block_on(async {
        let s = S3BlobStore::new(config(sw, &bucket, "")).unwrap();
        // Two and a half parts written, two sent: then dropped, or forgotten
        // as a crash would leave it.
        for forget in [false, true] {
            let id = new_id();
            let lease = Lease::detached(&id);
            let mut w = s.begin(&id, lease.clone()).await.unwrap();
            for i in 0..5 {
                w.write(vec![bytes_of(PART / 2, i)]).await.unwrap();
            }
            w.write(Vec::new()).await.unwrap();
            let upload = lease.handle().expect("the upload id is noted");
            assert_eq!(part_sizes(sw, &bucket, &id, &upload), [PART, PART]);
            assert_eq!(uploads(sw, &bucket), 1);
            if forget {
                std::mem::forget(w);
            } else {
                drop(w);
            }
            s.abort(&id, Some(upload.as_str())).await.unwrap();
            assert_eq!(uploads(sw, &bucket), 0, "forgotten: {forget}");
            // The janitor may come twice.
            s.abort(&id, Some(upload.as_str())).await.unwrap();
        }
    });
    assert_eq!(objects(sw, &bucket), Vec::<String>::new());
}

#[test]
fn a_failed_lease_note_aborts_the_upload_before_any_part() {
    let sw = must(shared_seaweed());
    let bucket = new_bucket(sw);
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("m.sqlite");
    rt().block_on(async {
        let meta = Arc::new(SqliteMeta::open(&path).unwrap());
        let blobs: Arc<dyn BlobStore> =
            Arc::new(S3BlobStore::new(config(sw, &bucket, "")).unwrap());
        let id = new_id();
        let lease = Leases::new(meta, blobs.clone(), "node".into())
            .take(&id)
            .await
            .unwrap();
        // The metadata store refuses the note (SqliteMeta notes with an
        // UPDATE of its `pending` row).
        let refuse = "CREATE TRIGGER refuse BEFORE UPDATE ON pending \
                      BEGIN SELECT RAISE(ABORT, 'note refused'); END;";
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch(refuse)
            .unwrap();
        let mut w = blobs.begin(&id, lease).await.unwrap();
        let e = w
            .write(vec![bytes_of(PART, 0)])
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("S3 lease_note") && e.contains("note refused"),
            "{e}"
        );
        assert_eq!(uploads(sw, &bucket), 0, "aborted at once");
        let e = w.write(vec![bytes_of(1, 0)]).await.unwrap_err().to_string();
        assert!(e.contains("unusable after an earlier failure"), "{e}");
    });
    assert_eq!(objects(sw, &bucket), Vec::<String>::new());
}

/// Bytes whose drop is counted: how many of them are alive.
struct Counted {
    bytes: Bytes,
    alive: Arc<AtomicUsize>,
}

impl AsRef<[u8]> for Counted {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.alive.fetch_sub(self.bytes.len(), Ordering::SeqCst);
    }
}

fn counted(alive: &Arc<AtomicUsize>, bytes: Bytes) -> Bytes {
    alive.fetch_add(bytes.len(), Ordering::SeqCst);
    let alive = alive.clone();
    Bytes::from_owner(Counted { bytes, alive })
}

#[test]
fn a_writer_holds_at_most_two_parts() {
    const TOTAL: usize = 40 << 20;
    const CHUNK: usize = 64 << 10;
    let sw = must(shared_seaweed());
    let bucket = new_bucket(sw);
    let id = new_id();
    let alive = Arc::new(AtomicUsize::new(0));
    let mut peak = 0;
    rt().block_on(async {
        let s = S3BlobStore::new(config(sw, &bucket, "m")).unwrap();
        let mut w = s.begin(&id, Lease::detached(&id)).await.unwrap();
        for i in 0..TOTAL / CHUNK {
            w.write(vec![counted(&alive, bytes_of(CHUNK, i))])
                .await
                .unwrap();
            peak = peak.max(alive.load(Ordering::SeqCst));
            // Lets the part in flight move on this one-thread runtime.
            tokio::task::yield_now().await;
        }
        w.commit().await.unwrap();
        assert_eq!(alive.load(Ordering::SeqCst), 0, "every part released");
        let back = read_all(&s, &id, TOTAL as u64).await;
        assert_eq!(back.len(), TOTAL);
        for (i, c) in back.chunks(CHUNK).enumerate() {
            assert!(c == bytes_of(CHUNK, i), "chunk {i}");
        }
    });
    // Right after a part is handed over, it is alive in full; at no point
    // is more than the part in flight and the one being filled.
    assert!((PART..=2 * PART).contains(&peak), "peak {peak} bytes");
}

/// `f`'s output, which must come within [`GUARD`].
async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, f)
        .await
        .expect("no answer within the guard: a hang")
}

#[test]
fn a_dead_s3_fails_writes_and_commits_in_time() {
    let mut sw = must(Seaweed::start(&default_cache()));
    let bucket = new_bucket(&sw);
    let mut cfg = config(&sw, &bucket, "dead");
    cfg.timeout = Duration::from_secs(3);
    cfg.connect_timeout = Duration::from_secs(1);
    cfg.retry_timeout = Duration::from_secs(2);
    let s = S3BlobStore::new(cfg).unwrap();
    let rt = rt();
    let mut w = rt.block_on(async {
        s.ready().await.unwrap();
        let id = new_id();
        let mut w = s.begin(&id, Lease::detached(&id)).await.unwrap();
        w.write(vec![bytes_of(PART, 0)]).await.unwrap();
        w.write(Vec::new()).await.unwrap();
        w
    });
    sw.kill();
    rt.block_on(async {
        // The next parts: at the latest the third one waits for the second,
        // whose error it returns.
        let mut failed = None;
        for i in 0..2 * PART / (1 << 20) + 1 {
            if let Err(e) = within(w.write(vec![bytes_of(1 << 20, i)])).await {
                failed = Some(e.to_string());
                break;
            }
        }
        let e = failed.expect("a write fails");
        assert!(e.starts_with(&format!("S3 put_part {bucket}/dead/")), "{e}");
        let e = within(w.commit()).await.unwrap_err();
        assert!(e.to_string().starts_with("S3 commit"), "{e}");
        // A small blob fails at its one PUT.
        let id = new_id();
        let mut w = s.begin(&id, Lease::detached(&id)).await.unwrap();
        w.write(vec![Bytes::from_static(b"x")]).await.unwrap();
        let e = within(w.commit()).await.unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("S3 put {bucket}/dead/{id}")),
            "{e}"
        );
        let e = within(s.ready()).await.unwrap_err();
        assert!(e.to_string().starts_with("S3 list"), "{e}");
        assert!(within(s.open(&id, 0, 1)).await.is_err());
    });
    // Back again, the same store works.
    must(sw.start_again());
    rt.block_on(async {
        s.ready().await.unwrap();
        let id = new_id();
        let mut w = s.begin(&id, Lease::detached(&id)).await.unwrap();
        w.write(vec![bytes_of(PART + 1, 0)]).await.unwrap();
        w.commit().await.unwrap();
        assert_eq!(
            read_all(&s, &id, PART as u64 + 1).await,
            bytes_of(PART + 1, 0)
        );
    });
}

/// A spool whose part failed (S3 away) refuses every later call, so that no
/// state it returns can name bytes S3 does not have; resuming from the last
/// saved state stores exactly the bytes sent.
#[test]
fn a_spool_whose_part_failed_never_returns_a_state_again() {
    let mut sw = must(Seaweed::start(&default_cache()));
    let bucket = new_bucket(&sw);
    let mut cfg = config(&sw, &bucket, "spool");
    cfg.timeout = Duration::from_secs(3);
    cfg.connect_timeout = Duration::from_secs(1);
    cfg.retry_timeout = Duration::from_secs(1);
    let s = S3BlobStore::new(cfg).unwrap();
    let data: Vec<u8> = (0..2 * PART + 1000).map(|i| (i * 7 % 251) as u8).collect();
    let rt = rt();
    let id = new_id();
    let (saved, mut w) = rt.block_on(async {
        let spool = s.spool_create(&id, Lease::detached(&id)).await.unwrap();
        let mut w = s.spool_open(&id, spool).await.unwrap();
        w.write(vec![Bytes::copy_from_slice(&data[..PART])])
            .await
            .unwrap();
        let saved = w.sync().await.unwrap();
        w.saved(true).await;
        (saved, w)
    });
    sw.kill();
    rt.block_on(async {
        let second = Bytes::copy_from_slice(&data[PART..2 * PART]);
        let failed = match within(w.write(vec![second])).await {
            Err(e) => e,
            Ok(()) => within(w.sync()).await.unwrap_err(),
        };
        assert!(failed.to_string().contains("S3"), "{failed}");
    });
    must(sw.start_again());
    rt.block_on(async {
        let e = within(w.sync()).await.unwrap_err();
        assert!(
            e.to_string().contains("unusable after an earlier failure"),
            "{e}"
        );
        drop(w);
        let mut w = s.spool_open(&id, saved.clone()).await.unwrap();
        w.write(vec![Bytes::copy_from_slice(&data[PART..])])
            .await
            .unwrap();
        let last = w.sync().await.unwrap();
        w.saved(true).await;
        assert_eq!(last.len, data.len() as u64);
        w.finish().await.unwrap();
        assert_eq!(read_all(&s, &id, last.len).await, data);
    });
}
