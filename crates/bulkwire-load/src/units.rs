//! Parsing of durations (`10s`, `500ms`, `2m`, `1.5s`, `250us`), rates
//! (`2000/s`, `2000`, `120/m`) and sizes (`64KiB`, `1MB`, `512`) as given on
//! the command line. Sizes and durations are `bulkwire-units`', so they mean
//! the same here as in the server's config.

use crate::error::{Error, Result};
use std::time::Duration;

/// A duration with a unit: `us`, `ms`, `s`, `m`, `h`, `d`. A bare number
/// is seconds. (The parser is `bulkwire-units`', shared with the server's
/// config and the other commands.)
pub fn parse_duration(text: &str) -> Result<Duration> {
    bulkwire_units::parse_duration(text).map_err(Error::config)
}

/// A rate in requests per second: `N`, `N/s`, `N/m`, `N/h`.
pub fn parse_rate(text: &str) -> Result<f64> {
    let t = text.trim();
    let (num, per) = t.split_once('/').unwrap_or((t, "s"));
    let per = match per.trim() {
        "s" | "sec" | "1s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(Error::config(format!(
                "rate {text:?}: unknown period {other:?}"
            )))
        }
    };
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| Error::config(format!("rate {text:?}: not a number")))?;
    let r = n / per;
    if !(r.is_finite() && r > 0.0) {
        return Err(Error::config(format!("rate {text:?} must be positive")));
    }
    Ok(r)
}

/// A size in bytes: `B` (or none), binary `KiB`/`MiB`/`GiB` (also `K`,
/// `M`, `G`), decimal `kB`/`MB`/`GB` (`bulkwire-units`).
pub fn parse_size(text: &str) -> Result<u64> {
    bulkwire_units::parse_size(text).map_err(Error::config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        for bad in ["", "s", "10x", "-1s", "1e99s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("2000/s").unwrap(), 2000.0);
        assert_eq!(parse_rate("2000").unwrap(), 2000.0);
        assert_eq!(parse_rate("120/m").unwrap(), 2.0);
        for bad in ["0/s", "x/s", "5/d", "-3"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64KiB").unwrap(), 65_536);
        assert_eq!(parse_size("64k").unwrap(), 65_536);
        assert_eq!(parse_size("140kB").unwrap(), 140_000);
        assert_eq!(parse_size("1.5MiB").unwrap(), 1_572_864);
        assert_eq!(parse_size("512").unwrap(), 512);
        for bad in ["", "KiB", "1x", "-1", "1e30"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
