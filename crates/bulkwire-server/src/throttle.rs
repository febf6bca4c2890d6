//! Login throttling: failed logins counted per client address and user
//! name, so that guessing passwords costs the guesser and never the
//! server (DESIGN.md "Who may do what"; in the spirit of WordPress's
//! "Limit Login Attempts", Django-axes and fail2ban).
//!
//! After [`Limits::login_failures`](crate::Limits::login_failures) failures
//! within [`Limits::login_window`](crate::Limits::login_window) from one
//! address for one name, that pair is refused with 429 and `Retry-After`
//! **before** its password is checked: Argon2 (19 MiB, tens of
//! milliseconds) never runs for it. The wait doubles with each further
//! failure, from one second up to the window, and an attempt made before
//! the wait is over counts as a failure too, so a guesser that does not
//! wait gets no password checked at all. A different address still
//! logs in as that user: a stranger cannot lock the real user out. One
//! address that fails for many names (spraying) is refused for every name
//! once it reaches ten times the per-name count.
//!
//! The table is bounded ([`Limits::login_table_entries`]): when full, the
//! entries that block nothing (expired, or below the threshold) go first;
//! only if every entry blocks does the half that expires soonest go. Keys
//! are keyed hashes of address and name, never the names themselves (an
//! attacker chooses them, and their length).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures from one address, over every name, that block the address
/// for every name: this many times the per-name count.
const SPRAY_FACTOR: u32 = 10;

/// The first wait once blocked; it doubles with each failure beyond.
const FIRST_WAIT: Duration = Duration::from_secs(1);

/// One key's failures.
#[derive(Clone, Copy, Debug)]
struct Entry {
    failures: u32,
    /// Checks of this key in flight: counted against the threshold as
    /// failures-to-be, so that concurrent guesses cannot all pass the
    /// check before the first of them fails.
    pending: u32,
    /// When the window of these failures began.
    since: Instant,
    /// Refused until then.
    until: Option<Instant>,
}

/// Refused: come back after this long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Throttled {
    pub retry_after: Duration,
}

impl Throttled {
    /// The 429 answer.
    pub fn error(&self) -> crate::ApiError {
        // Whole seconds, rounded up: a client that waits that long is let in.
        let secs = self.retry_after.as_millis().div_ceil(1000).max(1) as u64;
        let mut e = crate::ApiError::new(
            crate::Kind::TooMany,
            format!(
                "too many failed logins from this address for this name: retry in {secs} s \
                 ([limits] login_failures, login_window)"
            ),
        );
        e.retry_after = Some(secs);
        e
    }
}

/// A login being checked, let through by [`Throttle::check`]: say how it
/// went; dropped without a word (the store failed), it counts for nothing.
pub struct Attempt<'a> {
    throttle: &'a Throttle,
    ip: Option<IpAddr>,
    name: Vec<u8>,
    settled: bool,
}

impl std::fmt::Debug for Attempt<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attempt").field("ip", &self.ip).finish()
    }
}

impl Attempt<'_> {
    pub fn failed(mut self) {
        self.settle();
        self.throttle.failed(self.ip, &self.name);
    }

    pub fn passed(mut self) {
        self.settle();
        self.throttle.passed(self.ip, &self.name);
    }

    fn settle(&mut self) {
        if !self.settled {
            self.settled = true;
            let k = self.throttle.key(self.ip, Some(&self.name));
            self.throttle.settle(k);
        }
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        self.settle();
    }
}

/// Counters for `/metrics`.
#[derive(Default, Debug)]
pub struct ThrottleCounts {
    /// Logins that failed (a wrong password, an unknown name or token).
    pub failures: AtomicU64,
    /// Attempts refused with 429 without checking the password.
    pub throttled: AtomicU64,
    /// Entries removed to keep the table within its bound.
    pub evicted: AtomicU64,
}

/// The table of failures.
pub struct Throttle {
    failures: u32,
    window: Duration,
    cap: usize,
    hasher: std::collections::hash_map::RandomState,
    map: Mutex<HashMap<u64, Entry>>,
    pub counts: ThrottleCounts,
}

impl Throttle {
    pub fn new(l: &crate::Limits) -> Throttle {
        Throttle {
            failures: l.login_failures,
            window: l.login_window(),
            cap: l.login_table_entries,
            hasher: Default::default(),
            map: Mutex::new(HashMap::new()),
            counts: ThrottleCounts::default(),
        }
    }

    fn key(&self, ip: Option<IpAddr>, name: Option<&[u8]>) -> u64 {
        let mut h = self.hasher.build_hasher();
        ip.hash(&mut h);
        match name {
            Some(n) => {
                1u8.hash(&mut h);
                n.hash(&mut h);
            }
            None => 0u8.hash(&mut h),
        }
        h.finish()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Before a password or token is checked: refused while the pair, or
    /// the address as a whole, is blocked. An attempt that does not wait
    /// its `Retry-After` counts as one more failure (its wait doubles):
    /// a guesser that keeps trying gets no password checked at all, however
    /// long it goes on.
    pub fn check(&self, ip: Option<IpAddr>, name: &[u8]) -> Result<Attempt<'_>, Throttled> {
        self.check_with(ip, name, true)
    }

    /// As [`Throttle::check`], for a bearer token: its failures block as a
    /// password's do, but its checks in flight do not. A token is 256
    /// random bits looked up by digest (no Argon2, nothing to guess), and
    /// an application's server sends many requests at once with one: on
    /// its first use, and each time `auth_cache_ms` ran out, every one of
    /// them is a store lookup in flight.
    pub fn check_token(&self, ip: Option<IpAddr>, name: &[u8]) -> Result<Attempt<'_>, Throttled> {
        self.check_with(ip, name, false)
    }

    fn check_with(
        &self,
        ip: Option<IpAddr>,
        name: &[u8],
        in_flight_counts: bool,
    ) -> Result<Attempt<'_>, Throttled> {
        let now = Instant::now();
        let mut map = self.lock();
        let keys = [
            (self.key(ip, Some(name)), self.failures),
            (self.key(ip, None), self.failures * SPRAY_FACTOR),
        ];
        let mut until = None;
        for (k, at) in keys {
            let Some(e) = map.get_mut(&k).filter(|e| e.until.is_some_and(|u| u > now)) else {
                continue;
            };
            e.failures = e.failures.saturating_add(1);
            let u = now + self.wait(e.failures.saturating_sub(at));
            e.until = Some(u);
            until = until.max(Some(u));
        }
        if let Some(u) = until {
            self.counts.throttled.fetch_add(1, Relaxed);
            return Err(Throttled {
                retry_after: u - now,
            });
        }
        // Checks in flight count as failures-to-be: with `login_failures`
        // of them running, the next waits for their outcome.
        let pair = keys[0].0;
        if !map.contains_key(&pair) && map.len() >= self.cap {
            self.make_room(&mut map, now);
        }
        let e = map.entry(pair).or_insert(Entry {
            failures: 0,
            pending: 0,
            since: now,
            until: None,
        });
        if in_flight_counts && e.failures.saturating_add(e.pending) >= self.failures {
            self.counts.throttled.fetch_add(1, Relaxed);
            return Err(Throttled {
                retry_after: FIRST_WAIT,
            });
        }
        e.pending += 1;
        Ok(Attempt {
            throttle: self,
            ip,
            name: name.to_vec(),
            settled: false,
        })
    }

    /// The check of `key` is over.
    fn settle(&self, key: u64) {
        if let Some(e) = self.lock().get_mut(&key) {
            e.pending = e.pending.saturating_sub(1);
        }
    }

    /// A failed login for `name` from `ip` (see [`Attempt::failed`]).
    fn failed(&self, ip: Option<IpAddr>, name: &[u8]) {
        self.counts.failures.fetch_add(1, Relaxed);
        let now = Instant::now();
        let mut map = self.lock();
        let pair = self.key(ip, Some(name));
        let addr = self.key(ip, None);
        for (k, at) in [(pair, self.failures), (addr, self.failures * SPRAY_FACTOR)] {
            if !map.contains_key(&k) && map.len() >= self.cap {
                self.make_room(&mut map, now);
            }
            let e = map.entry(k).or_insert(Entry {
                failures: 0,
                pending: 0,
                since: now,
                until: None,
            });
            if now.duration_since(e.since) > self.window && e.until.is_none_or(|u| u <= now) {
                *e = Entry {
                    failures: 0,
                    pending: e.pending,
                    since: now,
                    until: None,
                };
            }
            e.failures = e.failures.saturating_add(1);
            if e.failures >= at {
                let wait = self.wait(e.failures - at);
                e.until = Some(now + wait);
            }
        }
    }

    /// A login that passed: the pair's failures are forgotten (the
    /// address's stay: spraying is counted over names).
    fn passed(&self, ip: Option<IpAddr>, name: &[u8]) {
        let k = self.key(ip, Some(name));
        self.lock().remove(&k);
    }

    /// 1 s, 2 s, 4 s, … up to the window.
    fn wait(&self, beyond: u32) -> Duration {
        let w = FIRST_WAIT.saturating_mul(1u32 << beyond.min(30));
        w.min(self.window.max(FIRST_WAIT))
    }

    /// Frees room: first whatever blocks nothing now or later (expired
    /// windows, counts under the threshold), then, if every entry blocks,
    /// the half that would be released soonest.
    fn make_room(&self, map: &mut HashMap<u64, Entry>, now: Instant) {
        let before = map.len();
        let window = self.window;
        map.retain(|_, e| {
            e.pending > 0
                || (e.until.is_some_and(|u| u > now)
                    && now.duration_since(e.since) <= window + window)
        });
        if map.len() >= self.cap {
            let mut ends: Vec<Instant> = map.values().filter_map(|e| e.until).collect();
            ends.sort_unstable();
            let cut = ends[ends.len() / 2];
            map.retain(|_, e| e.pending > 0 || e.until.is_some_and(|u| u > cut));
        }
        let gone = before - map.len();
        self.counts.evicted.fetch_add(gone as u64, Relaxed);
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn throttle(failures: u32, cap: usize) -> Throttle {
        let l = crate::Limits {
            login_failures: failures,
            login_window: 600,
            login_table_entries: cap,
            ..crate::Limits::default()
        };
        Throttle::new(&l)
    }

    fn ip(n: u8) -> Option<IpAddr> {
        Some(IpAddr::from([10, 0, 0, n]))
    }

    #[test]
    fn a_pair_is_refused_after_its_failures_and_another_address_is_not() {
        let t = throttle(3, 100);
        for _ in 0..3 {
            t.check(ip(1), b"alice").unwrap().failed();
        }
        let r = t.check(ip(1), b"alice").unwrap_err();
        // This attempt did not wait: one more failure, twice the wait.
        assert!(
            r.retry_after <= 2 * FIRST_WAIT && r.retry_after > FIRST_WAIT,
            "{r:?}"
        );
        assert!(t.check(ip(2), b"alice").is_ok(), "another address");
        assert!(t.check(ip(1), b"bob").is_ok(), "another name");
        assert_eq!(t.counts.throttled.load(Relaxed), 1);
        let e = r.error();
        assert_eq!(e.status(), 429);
        assert_eq!(e.retry_after, Some(2));
    }

    #[test]
    fn the_wait_doubles_and_is_capped_at_the_window() {
        let t = throttle(2, 100);
        assert_eq!(t.wait(0), Duration::from_secs(1));
        assert_eq!(t.wait(3), Duration::from_secs(8));
        assert_eq!(t.wait(40), Duration::from_secs(600));
        for _ in 0..2 {
            t.check(ip(1), b"x").unwrap().failed();
        }
        for _ in 0..4 {
            assert!(t.check(ip(1), b"x").is_err());
        }
        let r = t.check(ip(1), b"x").unwrap_err();
        assert!(r.retry_after > Duration::from_secs(8), "{r:?}");
    }

    #[test]
    fn a_login_that_passed_forgets_the_pair() {
        let t = throttle(2, 100);
        t.check(ip(1), b"a").unwrap().failed();
        t.check(ip(1), b"a").unwrap().passed();
        t.check(ip(1), b"a").unwrap().failed();
        assert!(t.check(ip(1), b"a").is_ok(), "one failure since the pass");
    }

    #[test]
    fn spraying_names_from_one_address_blocks_the_address() {
        let t = throttle(2, 1000);
        for i in 0..20u32 {
            t.check(ip(1), format!("user{i}").as_bytes())
                .unwrap()
                .failed();
        }
        assert!(t.check(ip(1), b"someone-new").is_err());
        assert!(t.check(ip(2), b"someone-new").is_ok());
    }

    #[test]
    fn checks_in_flight_count_against_the_threshold() {
        let t = throttle(3, 100);
        let a: Vec<_> = (0..3).map(|_| t.check(ip(1), b"x").unwrap()).collect();
        assert!(t.check(ip(1), b"x").is_err(), "three in flight already");
        drop(a);
        assert!(t.check(ip(1), b"x").is_ok(), "settled without failures");
    }

    #[test]
    fn a_tokens_checks_in_flight_do_not_block_but_its_failures_do() {
        let t = throttle(3, 100);
        let a: Vec<_> = (0..40)
            .map(|_| t.check_token(ip(1), b"t").unwrap())
            .collect();
        drop(a);
        for _ in 0..3 {
            t.check_token(ip(1), b"t").unwrap().failed();
        }
        assert!(t.check_token(ip(1), b"t").is_err(), "three failures");
        assert!(t.check_token(ip(2), b"t").is_ok(), "another address");
    }

    #[test]
    fn the_table_stays_bounded_under_many_names_and_keeps_blocking() {
        let t = throttle(3, 1000);
        for _ in 0..3 {
            t.check(ip(9), b"target").unwrap().failed();
        }
        for i in 0..100_000u32 {
            let name = format!("n{i}");
            if let Ok(a) = t.check(Some(IpAddr::from(i.to_be_bytes())), name.as_bytes()) {
                a.failed();
            }
            assert!(t.len() <= 1000);
        }
        assert!(
            t.check(ip(9), b"target").is_err(),
            "a blocking entry survives"
        );
        assert!(t.counts.evicted.load(Relaxed) > 0);
    }
}
