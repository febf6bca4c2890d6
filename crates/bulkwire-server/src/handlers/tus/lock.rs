//! One writer per upload (DESIGN.md "Storage"; the IETF draft §4.4: a
//! server receiving a new append while an earlier one is ongoing should
//! terminate the earlier one).
//!
//! Two layers. Across nodes, every writer claims the upload's row
//! (`UploadStore::upload_claim` bumps its generation) and every save is
//! fenced by that generation: a writer that was taken over fails its next
//! save and stops, with nothing of its unsaved bytes counted, and a node
//! that died holds nothing (there is no lock to outlive it). Within a
//! node, the newcomer also asks the current writer to stop at once and
//! waits for it to let go, so that two writers never append to the same
//! spool file at the same time.
//!
//! The rule a client sees: the newest request wins; an older one still
//! sending is cut with 409 Conflict, and the newer one continues from the
//! last durable offset (a mismatch is 409 with the right `Upload-Offset`).
//!
//! Where the metadata store is this process's alone (SQLite) and the spool
//! is a file, a request that ends on a durable offset parks its writer in
//! the upload's slot: the next request for the upload on this node goes on
//! with its row and open file, without a claim or an open (two round trips
//! to the blocking pool, ~0.5 ms of each 8 MiB `PATCH`). Only an append
//! takes a parked writer; every other holder of the slot (a `DELETE`, a
//! length declared late, a recovery) drops it and claims the row, so a
//! parked row is never older than the stored one. At most `max_uploads`
//! are parked, each for at most `idle_timeout_ms`.

use super::state::UploadState;
use crate::store::{SpoolWriter, UploadRow};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, OwnedMutexGuard};

/// The uploads this node is writing now, or has a writer parked for.
/// Entries live as long as a writer holds, waits for or parked them: at
/// most one per admitted upload request, plus the parked ones.
pub struct Writers {
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    /// Parked writers at most (`max_uploads`).
    park_max: usize,
    /// A parked writer older than this is dropped (`idle_timeout_ms`).
    park_ttl: Duration,
}

/// A writer left open, with the row and state it last saved (or is saving:
/// `saving`).
pub struct Parked {
    pub row: UploadRow,
    pub st: UploadState,
    pub writer: Box<dyn SpoolWriter>,
    /// The file's running hash at the offset (the saved one may lag).
    pub hasher: sha2::Sha256,
    /// The row save that the last request left running behind its answer
    /// (`append.rs`): the next save of the same writer waits for it, so
    /// that saves land in order.
    pub saving: Option<tokio::task::JoinHandle<bool>>,
}

#[derive(Default)]
struct Slot {
    lock: Arc<tokio::sync::Mutex<()>>,
    /// The current holder's stop signal.
    holder: Mutex<Option<Arc<Notify>>>,
    /// The newest request's ticket: a waiter that gets the lock while a
    /// newer one waits behind it yields at once.
    latest: AtomicU64,
    /// A writer parked by the last request, and when.
    parked: Mutex<Option<(Parked, Instant)>>,
}

impl Slot {
    fn parked(&self) -> std::sync::MutexGuard<'_, Option<(Parked, Instant)>> {
        self.parked.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The right to write one upload on this node; `stop` fires when a newer
/// request wants it.
pub struct WriterGuard {
    writers: Arc<Writers>,
    id: String,
    slot: Arc<Slot>,
    _lock: OwnedMutexGuard<()>,
    pub stop: Arc<Notify>,
    ticket: u64,
    /// The writer the previous request parked, for an append to take.
    pub parked: Option<Parked>,
}

impl Writers {
    pub fn new(park_max: usize, park_ttl: Duration) -> Writers {
        Writers {
            slots: Mutex::default(),
            park_max,
            park_ttl,
        }
    }

    /// As [`Writers::take`], with the writer the previous request parked
    /// if it is still fresh: for an append, which alone may go on with it.
    pub async fn take_for_append(self: &Arc<Self>, id: &str) -> WriterGuard {
        let mut g = self.acquire(id).await;
        let parked = g.slot.parked().take();
        g.parked = parked
            .filter(|(_, at)| at.elapsed() < self.park_ttl)
            .map(|(p, _)| p);
        g
    }

    /// Drops parked writers past their time, and the oldest beyond
    /// `park_max`. Their descriptors close outside the locks.
    pub fn sweep(&self) {
        let mut gone = Vec::new();
        {
            let mut m = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let mut parked: Vec<(Instant, String)> = m
                .iter()
                .filter_map(|(id, s)| s.parked().as_ref().map(|(_, at)| (*at, id.clone())))
                .collect();
            parked.sort();
            let over = parked.len().saturating_sub(self.park_max);
            for (i, (at, id)) in parked.into_iter().enumerate() {
                if i >= over && at.elapsed() < self.park_ttl {
                    continue;
                }
                let Some(slot) = m.get(&id).cloned() else {
                    continue;
                };
                gone.extend(slot.parked().take());
                // Only the map holds it: nobody writes or waits.
                if Arc::strong_count(&slot) == 2 {
                    m.remove(&id);
                }
            }
        }
        drop(gone);
    }

    /// Asks the current writer of `id`, if any, to stop, and waits until
    /// it has. A writer parked for `id` is dropped: only an append may go
    /// on with it.
    pub async fn take(self: &Arc<Self>, id: &str) -> WriterGuard {
        let g = self.acquire(id).await;
        let stale = g.slot.parked().take();
        drop(stale);
        g
    }

    async fn acquire(self: &Arc<Self>, id: &str) -> WriterGuard {
        let slot = {
            let mut m = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            m.entry(id.to_string()).or_default().clone()
        };
        let ticket = slot.latest.fetch_add(1, SeqCst) + 1;
        if let Some(n) = &*slot.holder.lock().unwrap_or_else(|p| p.into_inner()) {
            // `notify_one` keeps a permit: the holder sees it even if it
            // is not waiting at this instant.
            n.notify_one();
        }
        let lock = slot.lock.clone().lock_owned().await;
        let stop = Arc::new(Notify::new());
        *slot.holder.lock().unwrap_or_else(|p| p.into_inner()) = Some(stop.clone());
        WriterGuard {
            writers: self.clone(),
            id: id.to_string(),
            slot,
            _lock: lock,
            stop,
            ticket,
            parked: None,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.lock().unwrap().len()
    }
}

impl WriterGuard {
    /// True when a newer request for the upload waits: this one must not
    /// start (the newest wins, also among three or more at once).
    pub fn superseded(&self) -> bool {
        self.slot.latest.load(SeqCst) != self.ticket
    }

    /// Leaves `p` for the upload's next append on this node.
    pub fn park(&self, p: Parked) {
        *self.slot.parked() = Some((p, Instant::now()));
        self.writers.sweep();
    }
}

impl Drop for WriterGuard {
    fn drop(&mut self) {
        let mut m = self.writers.slots.lock().unwrap_or_else(|p| p.into_inner());
        // The map's reference and this guard's: nobody else waits, and no
        // writer is parked.
        if Arc::strong_count(&self.slot) == 2 && self.slot.parked().is_none() {
            m.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A writer that records its drop (its file closing).
    struct Probe(Arc<std::sync::atomic::AtomicBool>);

    impl Drop for Probe {
        fn drop(&mut self) {
            self.0.store(true, SeqCst);
        }
    }

    impl SpoolWriter for Probe {
        fn write(&mut self, _: Vec<bytes::Bytes>) -> crate::store::BoxFut<'_, std::io::Result<()>> {
            Box::pin(async { Ok(()) })
        }
        fn sync(&mut self) -> crate::store::BoxFut<'_, std::io::Result<crate::store::Spool>> {
            Box::pin(async { Ok(crate::store::Spool::default()) })
        }
        fn saved(&mut self, _: bool) -> crate::store::BoxFut<'_, ()> {
            Box::pin(async {})
        }
        fn finish(self: Box<Self>) -> crate::store::BoxFut<'static, std::io::Result<()>> {
            Box::pin(async { Ok(()) })
        }
        fn holds_chunks(&self) -> bool {
            false
        }
        fn parkable(&self) -> bool {
            true
        }
        fn sync_noted(
            &mut self,
            _: Vec<u8>,
        ) -> crate::store::BoxFut<'_, std::io::Result<crate::store::Spool>> {
            Box::pin(async { Err(crate::store::spool::no_notes()) })
        }
        fn notes(&self) -> bool {
            false
        }
    }

    async fn park(w: &Arc<Writers>, id: &str) -> Arc<std::sync::atomic::AtomicBool> {
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let g = w.take_for_append(id).await;
        let row = UploadRow {
            id: id.into(),
            owner: "o".into(),
            expires: 0,
            gen: 1,
            open: true,
            state: String::new(),
        };
        let st = UploadState::new(crate::store::Spool::default(), None);
        let writer = Box::new(Probe(dropped.clone()));
        let hasher = sha2::Sha256::default();
        g.park(Parked {
            row,
            st,
            writer,
            hasher,
            saving: None,
        });
        dropped
    }

    #[tokio::test]
    async fn parked_writers_are_bounded_in_number_and_time_and_only_appends_take_them() {
        let w = Arc::new(Writers::new(2, Duration::from_secs(30)));
        let a = park(&w, "a").await;
        let b = park(&w, "b").await;
        let c = park(&w, "c").await;
        assert!(a.load(SeqCst), "the oldest beyond the cap is closed");
        assert!(!b.load(SeqCst) && !c.load(SeqCst));
        assert_eq!(
            w.len(),
            2,
            "a parked writer keeps its slot, a closed one not"
        );
        let g = w.take_for_append("b").await;
        assert!(g.parked.is_some(), "an append goes on with it");
        drop(g);
        assert!(b.load(SeqCst), "not parked again: closed");
        let g = w.take("c").await;
        assert!(
            g.parked.is_none() && c.load(SeqCst),
            "any other holder closes it"
        );
        drop(g);
        assert_eq!(w.len(), 0);

        let w = Arc::new(Writers::new(2, Duration::from_millis(50)));
        let d = park(&w, "d").await;
        tokio::time::sleep(Duration::from_millis(80)).await;
        w.sweep();
        assert!(d.load(SeqCst), "past its time: closed by the sweep");
        assert_eq!(w.len(), 0);
        let e = park(&w, "e").await;
        tokio::time::sleep(Duration::from_millis(80)).await;
        let g = w.take_for_append("e").await;
        assert!(
            g.parked.is_none() && e.load(SeqCst),
            "too old to go on with"
        );
    }

    #[tokio::test]
    async fn among_three_at_once_the_newest_wins() {
        let w = Arc::new(Writers::new(4, Duration::from_secs(30)));
        let first = w.take("a").await;
        let (w2, w3) = (w.clone(), w.clone());
        let second = tokio::spawn(async move { w2.take("a").await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let third = tokio::spawn(async move { w3.take("a").await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(first);
        let second = second.await.unwrap();
        assert!(second.superseded(), "a newer request waits behind it");
        drop(second);
        let third = third.await.unwrap();
        assert!(!third.superseded());
    }

    #[tokio::test]
    async fn a_newcomer_stops_the_holder_and_takes_over() {
        let w = Arc::new(Writers::new(4, Duration::from_secs(30)));
        let first = w.take("a").await;
        let stop = first.stop.clone();
        let w2 = w.clone();
        let second = tokio::spawn(async move { w2.take("a").await });
        // The holder is told to stop, and the newcomer waits for it.
        tokio::time::timeout(Duration::from_secs(5), stop.notified())
            .await
            .expect("the holder is asked to stop");
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!second.is_finished());
        drop(first);
        let second = second.await.unwrap();
        assert!(!second.superseded());
        assert_eq!(w.len(), 1);
        // Another upload is independent.
        let other = w.take("b").await;
        drop((second, other));
        assert_eq!(w.len(), 0, "no entry outlives its writers");
    }
}
