//! Admission of uploads: a slot ([`crate::Limits::max_uploads`]) and a
//! memory reservation out of [`crate::Limits::memory_budget`], taken only
//! once the request's credentials have been checked (DESIGN.md "Admission
//! and abuse"), and given back when the upload ends.
//!
//! A saturated server answers 503 at once rather than queueing. One
//! exception keeps slow clients from locking everyone out: when no slot or
//! memory is free, the admitted upload that is slowest on average, if it is
//! at least [`PREEMPT_MIN_AGE`] old and below
//! [`crate::Limits::min_body_rate`], is told to yield ([`Progress`]): its
//! handler answers 408 (the limit `min_body_rate`) and drops its upload,
//! which leaves nothing stored, and the new upload takes its place. An
//! upload at or above the minimum rate is never preempted, so 64 clients
//! sending a byte every few seconds cannot hold every slot for the whole
//! of their 20 s grace, while a slow but honest client keeps its slot when
//! the server has room.

use crate::error::ApiError;
use crate::state::AppState;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, OwnedSemaphorePermit};

/// Uploads younger than this are never preempted: their first bytes may
/// still be on the way.
pub const PREEMPT_MIN_AGE: Duration = Duration::from_secs(1);

/// How long a new upload waits for a preempted one to give back its slot
/// and memory (it is waiting on its body, so it answers at once).
const PREEMPT_WAIT: Duration = Duration::from_secs(2);

/// How far one request's body has come, shared between its
/// [`crate::upload::BodyReader`] and admission.
#[derive(Debug)]
pub struct Progress {
    start: Instant,
    received: AtomicU64,
    preempted: AtomicBool,
    /// Wakes the body reader of a preempted upload.
    pub(crate) yield_now: Notify,
}

impl Progress {
    pub fn new() -> Arc<Progress> {
        Arc::new(Progress {
            start: Instant::now(),
            received: AtomicU64::new(0),
            preempted: AtomicBool::new(false),
            yield_now: Notify::new(),
        })
    }

    pub(crate) fn add(&self, n: u64) {
        self.received.fetch_add(n, Relaxed);
    }

    /// Bytes per second since the body began; `None` while too young to
    /// judge.
    fn rate(&self, now: Instant) -> Option<f64> {
        let age = now.saturating_duration_since(self.start);
        (age >= PREEMPT_MIN_AGE).then(|| self.received.load(Relaxed) as f64 / age.as_secs_f64())
    }
}

/// The uploads admitted now, for preemption.
#[derive(Default)]
pub struct Admitted {
    next: AtomicU64,
    map: Mutex<HashMap<u64, Arc<Progress>>>,
}

impl Admitted {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Progress>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tells the slowest upload under `min_rate` to yield; false if none
    /// qualifies.
    fn preempt_slowest(&self, min_rate: u64) -> bool {
        if min_rate == 0 {
            return false;
        }
        let now = Instant::now();
        let map = self.lock();
        let slowest = map
            .values()
            .filter(|p| !p.preempted.load(Relaxed))
            .filter_map(|p| Some((p.rate(now)?, p)))
            .filter(|(r, _)| *r < min_rate as f64)
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let Some((_, p)) = slowest else {
            return false;
        };
        p.preempted.store(true, Relaxed);
        p.yield_now.notify_one();
        true
    }
}

/// An admitted upload: holds its slot and memory reservation until dropped.
pub struct Admission {
    state: Arc<AppState>,
    id: u64,
    _slot: OwnedSemaphorePermit,
    _memory: OwnedSemaphorePermit,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.state.admitted.lock().remove(&self.id);
        self.state.metrics.active_uploads.fetch_sub(1, Relaxed);
    }
}

/// Admits an upload whose body is `progress`: a slot and
/// [`crate::Limits::upload_reserve`] plus `extra` bytes of the memory
/// budget, now, or after preempting the slowest upload (see the module
/// doc); else 503 naming the limit that was reached.
pub async fn admit(
    state: &Arc<AppState>,
    progress: &Arc<Progress>,
    extra: u64,
) -> Result<Admission, ApiError> {
    let kib = state
        .reserve_permits
        .saturating_add(u32::try_from(extra.div_ceil(1024)).unwrap_or(u32::MAX));
    let (slot, memory) = match try_permits(state, kib) {
        Ok(p) => p,
        Err(busy) => {
            let l = &state.config.limits;
            // Room that no preemption can make is not worth a victim.
            let never = u64::from(kib) > l.memory_budget / 1024;
            if never || !state.admitted.preempt_slowest(l.min_body_rate) {
                return Err(busy);
            }
            state.metrics.uploads_preempted.fetch_add(1, Relaxed);
            match tokio::time::timeout(PREEMPT_WAIT, wait_permits(state, kib)).await {
                Ok(Ok(p)) => p,
                _ => return Err(busy),
            }
        }
    };
    let id = state.admitted.next.fetch_add(1, Relaxed);
    state.admitted.lock().insert(id, progress.clone());
    state.metrics.active_uploads.fetch_add(1, Relaxed);
    Ok(Admission {
        state: state.clone(),
        id,
        _slot: slot,
        _memory: memory,
    })
}

type Permits = (OwnedSemaphorePermit, OwnedSemaphorePermit);

fn try_permits(state: &AppState, kib: u32) -> Result<Permits, ApiError> {
    let l = &state.config.limits;
    let slot = state
        .uploads
        .clone()
        .try_acquire_owned()
        .map_err(|_| ApiError::busy("max_uploads", l.max_uploads as u64))?;
    let memory = state
        .memory
        .clone()
        .try_acquire_many_owned(kib)
        .map_err(|_| ApiError::busy("memory_budget", l.memory_budget))?;
    Ok((slot, memory))
}

async fn wait_permits(state: &AppState, kib: u32) -> Result<Permits, tokio::sync::AcquireError> {
    let slot = state.uploads.clone().acquire_owned().await?;
    let memory = state.memory.clone().acquire_many_owned(kib).await?;
    Ok((slot, memory))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(age: Duration, received: u64) -> Arc<Progress> {
        Arc::new(Progress {
            start: Instant::now() - age,
            received: AtomicU64::new(received),
            preempted: AtomicBool::new(false),
            yield_now: Notify::new(),
        })
    }

    #[test]
    fn the_slowest_under_the_rate_yields_and_only_once() {
        let a = Admitted::default();
        let young = progress(Duration::from_millis(100), 0);
        let honest = progress(Duration::from_secs(10), 10_000);
        let slow = progress(Duration::from_secs(10), 40);
        let slower = progress(Duration::from_secs(10), 4);
        for (i, p) in [&young, &honest, &slow, &slower].into_iter().enumerate() {
            a.lock().insert(i as u64, p.clone());
        }
        assert!(a.preempt_slowest(500));
        assert!(slower.preempted.load(Relaxed));
        assert!(a.preempt_slowest(500));
        assert!(slow.preempted.load(Relaxed));
        // 1,000 bytes/s and a 0.1 s old upload are left alone.
        assert!(!a.preempt_slowest(500));
        assert!(!honest.preempted.load(Relaxed) && !young.preempted.load(Relaxed));
        // The rate off: nobody is preempted.
        let b = Admitted::default();
        b.lock().insert(0, progress(Duration::from_secs(10), 0));
        assert!(!b.preempt_slowest(0));
    }
}
