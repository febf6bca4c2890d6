//! `#[serde(deserialize_with = …)]` helpers: each takes a plain integer (in the key's own unit)
//! or a string with a unit, so `file_bytes = 4294967296` and `file_bytes = "4 GiB"` mean the same.

use serde::de::{self, Deserializer, Visitor};
use std::fmt;
use std::time::Duration;

/// Bytes: an integer, or a size such as `"64 KiB"`.
pub fn size<'de, D: Deserializer<'de>, T: TryFrom<u64>>(d: D) -> Result<T, D::Error> {
    let n = d.deserialize_any(Either(parse_size))?;
    narrow(n)
}

/// Bytes or nothing (an absent key is `None` through `#[serde(default)]`).
pub fn opt_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    size(d).map(Some)
}

/// Milliseconds: an integer, or a duration such as `"30s"`.
pub fn millis<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(Either(|s| in_unit(s, Duration::from_millis(1))))
}

/// Seconds: an integer, or a duration such as `"24h"`.
pub fn secs<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(Either(|s| in_unit(s, Duration::from_secs(1))))
}

/// Seconds or nothing (an absent key is `None` through `#[serde(default)]`).
pub fn opt_secs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    secs(d).map(Some)
}

fn parse_size(s: &str) -> Result<u64, String> {
    crate::parse_size(s)
}

/// `s` as a whole number of `unit`s; a remainder is an error rather than silently dropped.
fn in_unit(s: &str, unit: Duration) -> Result<u64, String> {
    let d = crate::parse_duration(s)?;
    let n = d.as_nanos() / unit.as_nanos();
    if n * unit.as_nanos() != d.as_nanos() {
        return Err(format!("duration {s:?} is not a whole number of {unit:?}"));
    }
    u64::try_from(n).map_err(|_| format!("duration {s:?} out of range"))
}

fn narrow<E: de::Error, T: TryFrom<u64>>(n: u64) -> Result<T, E> {
    T::try_from(n).map_err(|_| E::custom(format!("{n} is out of range")))
}

/// Accepts a non-negative integer as is, or a string through its parser.
struct Either(fn(&str) -> Result<u64, String>);

impl<'de> Visitor<'de> for Either {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a non-negative integer or a string with a unit (\"4 GiB\", \"30s\")")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::custom(format!("{v} is negative")))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        (self.0)(v).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct L {
        #[serde(deserialize_with = "super::size")]
        file_bytes: u64,
        #[serde(deserialize_with = "super::size")]
        read_buffer: usize,
        #[serde(deserialize_with = "super::millis")]
        idle_timeout_ms: u64,
        #[serde(deserialize_with = "super::secs")]
        expiry_s: u64,
        #[serde(default, deserialize_with = "super::opt_size")]
        part: Option<u64>,
    }

    fn l(s: &str) -> Result<L, String> {
        toml::from_str(s).map_err(|e| e.to_string())
    }

    #[test]
    fn integers_and_strings_with_units_mean_the_same() {
        let a = l("file_bytes = 4294967296\nread_buffer = 262144\nidle_timeout_ms = 30000\nexpiry_s = 86400\npart = 8388608").unwrap();
        let b = l("file_bytes = \"4 GiB\"\nread_buffer = \"256KiB\"\nidle_timeout_ms = \"30s\"\nexpiry_s = \"24h\"\npart = \"8 MiB\"").unwrap();
        assert_eq!(a, b);
        assert_eq!(
            l("file_bytes = 1\nread_buffer = 1\nidle_timeout_ms = 1\nexpiry_s = 1")
                .unwrap()
                .part,
            None
        );
    }

    #[test]
    fn errors_name_the_key_and_the_problem() {
        let e = l("file_bytes = \"4 GB s\"\nread_buffer = 1\nidle_timeout_ms = 1\nexpiry_s = 1")
            .unwrap_err();
        assert!(
            e.contains("file_bytes") && e.contains("unknown unit"),
            "{e}"
        );
        let e =
            l("file_bytes = -1\nread_buffer = 1\nidle_timeout_ms = 1\nexpiry_s = 1").unwrap_err();
        assert!(e.contains("negative"), "{e}");
        let e = l("file_bytes = 1\nread_buffer = 1\nidle_timeout_ms = \"1.5ms\"\nexpiry_s = 1")
            .unwrap_err();
        assert!(e.contains("whole number"), "{e}");
        let e =
            l("file_bytes = 1\nread_buffer = 1\nidle_timeout_ms = 1\nexpiry_s = true").unwrap_err();
        assert!(
            e.contains("a non-negative integer or a string with a unit"),
            "{e}"
        );
    }
}
