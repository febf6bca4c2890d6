//! A small bounded map whose entries expire: passed logins (`crate::auth`)
//! and media rows for downloads (`crate::handlers::media::find_sent`).
//! When full, expired entries go, and if none had, everything goes: the
//! cost of a miss is one more store lookup, never a wrong answer, and a
//! cache this simple needs no eviction order to keep in step.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub(crate) struct TtlCache<K, V> {
    ttl: Duration,
    cap: usize,
    map: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    /// Entries live `ttl` at most; `cap` of them at once. Either 0 turns
    /// the cache off.
    pub fn new(ttl: Duration, cap: usize) -> Self {
        TtlCache {
            ttl,
            cap,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// The value under `k`, unless it expired.
    pub fn hit<Q>(&self, k: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        if self.cap == 0 {
            return None;
        }
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(k)
            .filter(|(t, _)| Instant::now() < *t)
            .map(|(_, v)| v.clone())
    }

    /// Remembers `v` under `k` for the cache's time, or `shorter` when
    /// that is less.
    pub fn put(&self, k: K, v: V, shorter: Option<Duration>) {
        let ttl = shorter.map_or(self.ttl, |s| s.min(self.ttl));
        if ttl.is_zero() || self.cap == 0 {
            return;
        }
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= self.cap {
            let now = Instant::now();
            map.retain(|_, (t, _)| now < *t);
            if map.len() >= self.cap {
                map.clear();
            }
        }
        map.insert(k, (Instant::now() + ttl, v));
    }

    /// Forgets `k` (its item was deleted here).
    pub fn forget<Q>(&self, k: &Q)
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(k);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires_is_bounded_and_forgets() {
        let c = TtlCache::new(Duration::from_secs(60), 2);
        c.put("a".to_string(), 1, None);
        c.put("b".to_string(), 2, Some(Duration::ZERO));
        assert_eq!(c.hit("a"), Some(1));
        assert_eq!(c.hit("b"), None, "a zero lifetime is not remembered");
        c.put("b".to_string(), 2, None);
        c.put("c".to_string(), 3, None);
        assert!(c.len() <= 2, "the cap holds: {}", c.len());
        assert_eq!(c.hit("c"), Some(3));
        c.forget("c");
        assert_eq!(c.hit("c"), None);
        let short = TtlCache::new(Duration::from_millis(1), 8);
        short.put(1u8, 1, None);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(short.hit(&1), None, "expired");
        let off = TtlCache::new(Duration::from_secs(60), 0);
        off.put(1u8, 1, None);
        assert_eq!(off.hit(&1), None, "cap 0 is off");
    }
}
