//! Parsing of durations (`10s`, `500ms`, `2m`, `1.5s`, `250us`) and rates
//! (`2000/s`, `2000`, `120/m`) as given on the command line.

use crate::error::{Error, Result};
use std::time::Duration;

/// A duration with a unit: `us`, `ms`, `s`, `m`, `h`. A bare number is
/// seconds.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let secs = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(Error::config(format!(
                "duration {text:?}: unknown unit {unit:?}"
            )))
        }
    };
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| Error::config(format!("duration {text:?}: not a number")))?;
    let v = n * secs;
    if !(0.0..1e9).contains(&v) {
        return Err(Error::config(format!("duration {text:?} out of range")));
    }
    Ok(Duration::from_secs_f64(v))
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
}
