//! One writer per upload (DESIGN.md "Storage"; the IETF draft §4.4: a
//! server receiving a new append while an earlier one is ongoing should
//! terminate the earlier one).
//!
//! Two layers. Across nodes, every writer claims the upload's row
//! (`MetaStore::upload_claim` bumps its generation) and every save is
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

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, OwnedMutexGuard};

/// The uploads this node is writing now. Entries live as long as a writer
/// holds or waits for them: at most one per admitted upload request.
#[derive(Default)]
pub struct Writers {
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

#[derive(Default)]
struct Slot {
    lock: Arc<tokio::sync::Mutex<()>>,
    /// The current holder's stop signal.
    holder: Mutex<Option<Arc<Notify>>>,
    /// The newest request's ticket: a waiter that gets the lock while a
    /// newer one waits behind it yields at once.
    latest: AtomicU64,
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
}

impl Writers {
    /// Asks the current writer of `id`, if any, to stop, and waits until
    /// it has.
    pub async fn take(self: &Arc<Self>, id: &str) -> WriterGuard {
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
}

impl Drop for WriterGuard {
    fn drop(&mut self) {
        let mut m = self.writers.slots.lock().unwrap_or_else(|p| p.into_inner());
        // The map's reference and this guard's: nobody else waits.
        if Arc::strong_count(&self.slot) == 2 {
            m.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn among_three_at_once_the_newest_wins() {
        let w = Arc::new(Writers::default());
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
        let w = Arc::new(Writers::default());
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
