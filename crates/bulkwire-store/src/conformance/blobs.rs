//! `BlobStore`: blobs, resumable spools and their notes.

use super::{read, write_blob};
use crate::{new_id, BlobStore, Lease, Spool};
use bytes::Bytes;
use futures_util::StreamExt;
use std::sync::Arc;

/// Every `BlobStore` check. `big` is a size that crosses the backend's
/// part or batch size (an S3 multipart upload).
pub async fn blob_store(b: Arc<dyn BlobStore>, big: usize) {
    b.ready().await.unwrap();
    assert!(!b.describe().await.unwrap().is_empty());
    variants(&*b).await;
    local_files(&*b).await;
    presigned(&*b).await;
    for (len, chunk) in [(0, 1), (5, 2), (big, 64 << 10), (big + 12_345, 1 << 20)] {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        let id = new_id();
        write_blob(&*b, Lease::detached(&id), &data, chunk).await;
        assert_eq!(read(&*b, &id, 0, len as u64).await, data, "len {len}");
        if len > 10 {
            let (o, l) = (len as u64 / 3, len as u64 / 2);
            let want = &data[o as usize..(o + l) as usize];
            assert_eq!(read(&*b, &id, o, l).await, want, "range of {len}");
        }
        b.delete(&id).await.unwrap();
        b.delete(&id).await.unwrap();
    }
    // Dropped before commit: nothing becomes visible, and abort (what a
    // janitor does) removes whatever the writer left.
    let id = new_id();
    let lease = Lease::detached(&id);
    let mut w = b.begin(&id, lease.clone()).await.unwrap();
    w.write(vec![Bytes::from(vec![1u8; big])]).await.unwrap();
    w.write(Vec::new()).await.unwrap();
    let handle = lease.handle();
    std::mem::forget(w);
    b.abort(&id, handle.as_deref()).await.unwrap();
    b.abort(&id, handle.as_deref()).await.unwrap();
    // A committed blob is removed by abort too (a deletion's lease).
    let id = new_id();
    write_blob(&*b, Lease::detached(&id), b"abc", 3).await;
    b.abort(&id, None).await.unwrap();
    let gone = b.open(&id, 0, 3).await;
    let empty = match gone {
        Err(_) => true,
        Ok(mut s) => s.next().await.is_none_or(|r| r.is_err()),
    };
    assert!(empty, "an aborted blob is gone");
}

/// Resumable spools: appends across writers at every kind of offset (in a
/// part, on a part's edge), bytes written after the last save discarded by
/// the next writer (also when they filled a part that reached the store:
/// [`takeover`]), finish (twice: idempotent), abort. `part` is the
/// backend's part size (S3), or any size for files.
pub async fn spools(b: Arc<dyn BlobStore>, part: usize) {
    for cut in [part / 3, part + part / 3] {
        takeover(&*b, part, cut).await;
    }
    let id = new_id();
    let data: Vec<u8> = (0..2 * part + 1234).map(|i| (i * 13 % 251) as u8).collect();
    let mut spool = b.spool_create(&id, Lease::detached(&id)).await.unwrap();
    assert_eq!(spool.len, 0);
    // Cuts: inside the first part, exactly at its end, inside the last.
    for cut in [part / 3, part, 2 * part + 1000, data.len()] {
        let from = spool.len as usize;
        let mut w = b.spool_open(&id, spool.clone()).await.unwrap();
        for c in data[from..cut].chunks(100_000) {
            w.write(vec![Bytes::copy_from_slice(c)]).await.unwrap();
        }
        spool = w.sync().await.unwrap();
        assert_eq!(spool.len as usize, cut);
        w.saved(true).await;
        // One writer at a time: the next one opens once this one is gone.
        drop(w);
        // A writer that sends more and is never saved: its bytes are not
        // the upload's.
        if cut < data.len() {
            let mut w = b.spool_open(&id, spool.clone()).await.unwrap();
            w.write(vec![Bytes::from(vec![0xEE; 4321])]).await.unwrap();
            let lost: Spool = w.sync().await.unwrap();
            assert_eq!(lost.len as usize, cut + 4321);
            w.saved(false).await;
        }
    }
    let w = b.spool_open(&id, spool.clone()).await.unwrap();
    w.finish().await.unwrap();
    b.spool_finish(&id, spool.clone()).await.unwrap();
    assert_eq!(read(&*b, &id, 0, data.len() as u64).await, data);
    b.spool_abort(&id, spool.clone()).await.unwrap();
    b.spool_abort(&id, spool).await.unwrap();
    // An empty upload, and one aborted half-way.
    let id = new_id();
    let spool = b.spool_create(&id, Lease::detached(&id)).await.unwrap();
    b.spool_finish(&id, spool).await.unwrap();
    assert!(read(&*b, &id, 0, 0).await.is_empty());
    b.delete(&id).await.unwrap();
    let id = new_id();
    let spool = b.spool_create(&id, Lease::detached(&id)).await.unwrap();
    let mut w = b.spool_open(&id, spool).await.unwrap();
    w.write(vec![Bytes::from(vec![1u8; part + 7])])
        .await
        .unwrap();
    let spool = w.sync().await.unwrap();
    w.saved(true).await;
    drop(w);
    b.spool_abort(&id, spool).await.unwrap();
}

/// A node dies after its writer sent a whole part past the saved offset
/// `cut` (synced, so the store has it) but before its row was saved;
/// another dies with such a part in flight. The writer that takes over
/// from the saved state sends other bytes for that range: the blob is
/// exactly the saved bytes and the last writer's, whatever the dead ones
/// left in the store (GCS: in a resumable session, a chunk sent again is
/// appended by the emulator and ignored by GCS, so neither can be used).
async fn takeover(b: &dyn BlobStore, part: usize, cut: usize) {
    let id = new_id();
    let data: Vec<u8> = (0..3 * part + 99).map(|i| (i * 31 % 251) as u8).collect();
    let spool = b.spool_create(&id, Lease::detached(&id)).await.unwrap();
    let mut w = b.spool_open(&id, spool).await.unwrap();
    w.write(vec![Bytes::copy_from_slice(&data[..cut])])
        .await
        .unwrap();
    let spool = w.sync().await.unwrap();
    w.saved(true).await;
    drop(w);
    let junk = vec![Bytes::from(vec![0xEE; part + 4321])];
    let mut dead = b.spool_open(&id, spool.clone()).await.unwrap();
    dead.write(junk.clone()).await.unwrap();
    assert_eq!(dead.sync().await.unwrap().len as usize, cut + part + 4321);
    drop(dead);
    let mut dead = b.spool_open(&id, spool.clone()).await.unwrap();
    dead.write(junk).await.unwrap();
    drop(dead);
    let mut w = b.spool_open(&id, spool).await.unwrap();
    for c in data[cut..].chunks(300_000) {
        w.write(vec![Bytes::copy_from_slice(c)]).await.unwrap();
    }
    let spool = w.sync().await.unwrap();
    assert_eq!(spool.len as usize, data.len());
    w.saved(true).await;
    w.finish().await.unwrap();
    let got = read(b, &id, 0, data.len() as u64).await;
    let diff = got.iter().zip(&data).position(|(g, d)| g != d);
    assert!(got == data, "cut {cut}: other bytes from {diff:?}");
    b.delete(&id).await.unwrap();
}

/// Spool notes (`SpoolWriter::sync_noted`): a writer that keeps them
/// hands back the last one (not one of a plain sync after it) until the
/// spool is finished; one that keeps none refuses one and syncs nothing.
pub async fn spool_notes(b: Arc<dyn BlobStore>) {
    let id = new_id();
    let spool = b.spool_create(&id, Lease::detached(&id)).await.unwrap();
    assert_eq!(b.spool_note(&id).await.unwrap(), None);
    let mut w = b.spool_open(&id, spool.clone()).await.unwrap();
    w.write(vec![Bytes::from(vec![7u8; 5000])]).await.unwrap();
    if !w.notes() {
        assert!(w.sync_noted(b"n".to_vec()).await.is_err());
        assert_eq!(b.spool_note(&id).await.unwrap(), None);
        drop(w);
        return b.spool_abort(&id, spool).await.unwrap();
    }
    let s = w.sync_noted(b"first".to_vec()).await.unwrap();
    assert_eq!(s.len, 5000);
    assert_eq!(b.spool_note(&id).await.unwrap().unwrap(), b"first");
    // A writer opened with a state older than the note (its row was not
    // saved) does not cut the noted bytes off: it goes on after them.
    w.write(vec![Bytes::from(vec![0xEE; 100])]).await.unwrap();
    drop(w);
    assert_eq!(b.spool_note(&id).await.unwrap().unwrap(), b"first");
    let mut w = b.spool_open(&id, spool.clone()).await.unwrap();
    assert_eq!(w.sync().await.unwrap().len, 5000, "opened at the note");
    w.write(vec![Bytes::from(vec![8u8; 3000])]).await.unwrap();
    let s = w.sync_noted(b"second".to_vec()).await.unwrap();
    assert_eq!(s.len, 8000);
    w.write(vec![Bytes::from(vec![9u8; 10])]).await.unwrap();
    let s = w.sync().await.unwrap();
    assert_eq!(s.len, 8010);
    assert_eq!(b.spool_note(&id).await.unwrap().unwrap(), b"second");
    let long = vec![b'x'; crate::NOTE_MAX + 1];
    assert!(
        w.sync_noted(long).await.is_err(),
        "a note longer than NOTE_MAX"
    );
    w.finish().await.unwrap();
    assert_eq!(
        b.spool_note(&id).await.unwrap(),
        None,
        "gone with the spool"
    );
    assert_eq!(read(&*b, &id, 4998, 4).await, [7, 7, 8, 8]);
    b.delete(&id).await.unwrap();
}

/// A blob's variants: stored first-one-wins, read by range, and gone
/// with the blob on `delete` and on `abort` (a deletion's lease after a
/// crash); a name that is not a variant's is refused before any I/O.
async fn variants(b: &dyn BlobStore) {
    let vread = |id: String, name: &'static str, off: u64, len: u64| async move {
        let mut s = b.variant_open(&id, name, off, len).await.unwrap();
        let mut v = Vec::new();
        while let Some(c) = s.next().await {
            v.extend_from_slice(&c.unwrap());
        }
        v
    };
    for remove in ["delete", "abort"] {
        let id = new_id();
        write_blob(b, Lease::detached(&id), b"source", 3).await;
        let (name, other) = ("w300-h300-cover.webp", "w150-h0-contain.png");
        assert_eq!(b.variant_size(&id, name).await.unwrap(), None);
        let first = Bytes::from_static(b"first variant");
        assert!(b.variant_put(&id, name, first.clone()).await.unwrap());
        // A second maker (another node) loses: the first bytes stay.
        assert!(!b
            .variant_put(&id, name, Bytes::from_static(b"second"))
            .await
            .unwrap());
        assert!(b
            .variant_put(&id, other, Bytes::from_static(b"x"))
            .await
            .unwrap());
        assert_eq!(
            b.variant_size(&id, name).await.unwrap(),
            Some(first.len() as u64)
        );
        assert_eq!(vread(id.clone(), name, 0, 13).await, first);
        assert_eq!(vread(id.clone(), name, 6, 7).await, b"variant");
        assert_eq!(read(b, &id, 0, 6).await, b"source", "the blob itself");
        match remove {
            "delete" => b.delete(&id).await.unwrap(),
            _ => b.abort(&id, None).await.unwrap(),
        }
        for n in [name, other] {
            assert_eq!(b.variant_size(&id, n).await.unwrap(), None, "{remove}");
        }
    }
    let id = new_id();
    for bad in ["../x", "", ".v", "A"] {
        let e = b.variant_put(&id, bad, Bytes::new()).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{bad}");
    }
    assert!(b.variant_size("../etc", "x").await.is_err());
}

/// `open_file`: where a store keeps blobs as local files, the file of a
/// blob and of a variant holds exactly their bytes, a file opened before
/// `DELETE` still reads whole after it (a download in progress finishes:
/// deleting unlinks, never truncates), a missing blob is `NotFound` and a
/// name that is not a variant's is refused; where it keeps none (S3),
/// `None` for any id.
async fn local_files(b: &dyn BlobStore) {
    use std::io::Read;
    let all = |f: &mut std::fs::File| {
        let mut v = Vec::new();
        f.read_to_end(&mut v).unwrap();
        v
    };
    let id = new_id();
    write_blob(b, Lease::detached(&id), b"local bytes", 4).await;
    let Some(mut f) = b.open_file(&id, None).await.unwrap() else {
        assert!(b.open_file(&new_id(), None).await.unwrap().is_none());
        b.delete(&id).await.unwrap();
        return;
    };
    let name = "w150-h150-cover.webp";
    assert!(b
        .variant_put(&id, name, Bytes::from_static(b"variant"))
        .await
        .unwrap());
    let mut v = b.open_file(&id, Some(name)).await.unwrap().unwrap();
    let e = b.open_file(&id, Some("../x")).await.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    b.delete(&id).await.unwrap();
    assert_eq!(all(&mut f), b"local bytes", "an open file outlives DELETE");
    assert_eq!(all(&mut v), b"variant");
    for variant in [None, Some(name)] {
        let e = b.open_file(&id, variant).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{variant:?}");
    }
}

/// `presign_get`: a URL only from a store that signs the answer's type,
/// disposition and caching into it (S3's `response-*`), each one there;
/// every other store (files, Azure, GCS) answers `None`, so downloads
/// never reach a URL that would lose an SVG's `attachment`. A name that is
/// not a variant's is refused either way.
async fn presigned(b: &dyn BlobStore) {
    let id = new_id();
    write_blob(b, Lease::detached(&id), b"signed bytes", 4).await;
    let answer = crate::Answer {
        content_type: "image/svg+xml",
        disposition: "attachment; filename=\"x.svg\"",
        cache_control: "private, max-age=60",
    };
    let ttl = std::time::Duration::from_secs(60);
    let url = b.presign_get(&id, None, ttl, answer).await.unwrap();
    let variant = b.presign_get(&id, Some("w150-x.webp"), ttl, answer).await;
    assert_eq!(url.is_some(), b.kind() == "s3", "{}: {url:?}", b.kind());
    if let Some(url) = url {
        let signed = ["X-Amz-Signature=", "response-content-type=image"];
        let more = [
            "response-content-disposition=attachment",
            "response-cache-control=private",
        ];
        for p in signed.into_iter().chain(more) {
            assert!(url.contains(p), "{p} in {url}");
        }
        assert!(variant.unwrap().is_some());
        assert!(b.presign_get(&id, Some("../x"), ttl, answer).await.is_err());
    }
    b.delete(&id).await.unwrap();
}
