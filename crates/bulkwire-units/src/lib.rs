//! Sizes and durations as people write them — `"4 GiB"`, `"64KiB"`, `"1.5 MB"`, `"30s"`,
//! `"500ms"`, `"24h"` — for command-line flags and config files, next to plain integers.
//!
//! One parser for the whole project, so that a size means the same in `bulkwire load --size`,
//! `bulkwire parse --max-body-bytes` and `[limits]` in `bulkwire.toml`:
//! - sizes: no unit or `B` is bytes; `KiB`/`MiB`/`GiB`/`TiB` (also `K`, `M`, `G`, `T`) are powers
//!   of 1024 (IEC 80000-13); `kB`/`MB`/`GB`/`TB` are powers of 1000. Spaces between number and
//!   unit are allowed.
//! - durations: `us`, `ms`, `s`, `m` (or `min`), `h`, `d`; a bare number is seconds on the command
//!   line, while in a config file a bare integer keeps the unit of the key's name (`_ms`, `_s`).
//!
//! With the `serde` feature, [`de`] has `deserialize_with` helpers that take either form.

use std::time::Duration;

#[cfg(feature = "serde")]
pub mod de;

/// Largest size accepted (1 PB): beyond any file this project handles, and exact in an `f64`.
const MAX_SIZE: f64 = 1e15;
/// Longest duration accepted (about 31 years).
const MAX_SECS: f64 = 1e9;

/// A size in bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let (num, unit) = split(text);
    let mult: f64 = match unit {
        "" | "B" => 1.0,
        "K" | "k" | "KiB" | "kiB" => 1024.0,
        "kB" | "KB" => 1e3,
        "M" | "MiB" => 1024.0 * 1024.0,
        "MB" => 1e6,
        "G" | "GiB" => 1024.0 * 1024.0 * 1024.0,
        "GB" => 1e9,
        "T" | "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "TB" => 1e12,
        _ => {
            return Err(format!(
                "size {text:?}: unknown unit {unit:?} (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)"
            ))
        }
    };
    let v = (number(text, num, "size")? * mult).round();
    if !(0.0..=MAX_SIZE).contains(&v) {
        return Err(format!("size {text:?} out of range (0 to 1 PB)"));
    }
    Ok(v as u64)
}

/// A duration; a bare number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (num, unit) = split(text);
    let secs = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => {
            return Err(format!(
                "duration {text:?}: unknown unit {unit:?} (us, ms, s, m, h, d)"
            ))
        }
    };
    let v = number(text, num, "duration")? * secs;
    if !(0.0..MAX_SECS).contains(&v) {
        return Err(format!("duration {text:?} out of range"));
    }
    Ok(Duration::from_secs_f64(v))
}

/// `"64 KiB"` → (`"64"`, `"KiB"`): the unit starts at the first letter (or `µ`).
fn split(text: &str) -> (&str, &str) {
    let t = text.trim();
    let at = t.find(|c: char| c.is_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(at);
    (num.trim(), unit.trim())
}

/// A size as a person reads it: in the largest binary unit that keeps it
/// exact (`"8 GiB"`, `"16 KiB"`), or exact with at most two decimals
/// (`"1.5 MiB"`), else in bytes (`"1025 B"`): always what [`parse_size`]
/// reads back to the same number.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    // Whole or in exact hundredths of the unit: 8 GiB, 1.5 MiB, 2.25 GiB.
    let exact = |m: u64| (u128::from(bytes) * 100) % u128::from(m) == 0;
    match UNITS.iter().find(|(_, m)| bytes >= *m && exact(*m)) {
        Some((unit, m)) => {
            let v = format!("{:.2}", bytes as f64 / *m as f64);
            format!("{} {unit}", v.trim_end_matches('0').trim_end_matches('.'))
        }
        None => format!("{bytes} B"),
    }
}

/// A duration as a person reads it, in the largest unit that keeps it
/// exact (`"30s"`, `"10m"`, `"1500ms"`, `"24h"`), as [`parse_duration`]
/// reads it back.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    const UNITS: [(&str, u128); 4] = [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ];
    match UNITS
        .iter()
        .find(|(_, m)| ms >= *m && ms.is_multiple_of(*m))
    {
        Some((unit, m)) => format!("{}{unit}", ms / m),
        None => format!("{ms}ms"),
    }
}

fn number(text: &str, num: &str, what: &str) -> Result<f64, String> {
    match num.parse::<f64>() {
        Ok(n) if n.is_finite() => Ok(n),
        _ => Err(format!("{what} {text:?}: not a number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_binary_decimal_and_spaced() {
        assert_eq!(parse_size("64KiB"), Ok(65_536));
        assert_eq!(parse_size("64k"), Ok(65_536));
        assert_eq!(parse_size("4 GiB"), Ok(4 << 30));
        assert_eq!(parse_size(" 1.5 MiB "), Ok(1_572_864));
        assert_eq!(parse_size("140kB"), Ok(140_000));
        assert_eq!(parse_size("2 TB"), Ok(2_000_000_000_000));
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("0"), Ok(0));
        for bad in ["", "KiB", "1x", "-1", "1e30", "NaN", "inf", "1 Kb s"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(parse_size("3 PiB")
            .unwrap_err()
            .contains("unknown unit \"PiB\""));
    }

    #[test]
    fn sizes_format_exactly_where_they_can_and_read_back() {
        assert_eq!(format_size(8 << 30), "8 GiB");
        assert_eq!(format_size(16 << 10), "16 KiB");
        assert_eq!(format_size(500), "500 B");
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(1_572_864), "1.5 MiB");
        assert_eq!(format_size(1025), "1025 B");
        assert_eq!(format_size(2_415_919_104), "2.25 GiB");
        assert_eq!(format_size(1 << 40), "1 TiB");
        for v in [
            0,
            1,
            512,
            1025,
            1 << 10,
            1_572_864,
            3 << 20,
            8 << 30,
            5 << 40,
        ] {
            assert_eq!(parse_size(&format_size(v)), Ok(v), "{v}");
        }
    }

    #[test]
    fn durations_format_in_the_largest_exact_unit_and_read_back() {
        assert_eq!(format_duration(Duration::from_secs(30)), "30s");
        assert_eq!(format_duration(Duration::from_secs(600)), "10m");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::from_secs(86_400)), "1d");
        assert_eq!(format_duration(Duration::ZERO), "0ms");
        for ms in [0, 1, 1500, 30_000, 3_600_000] {
            let d = Duration::from_millis(ms);
            assert_eq!(parse_duration(&format_duration(d)), Ok(d), "{ms}");
        }
    }

    #[test]
    fn durations_with_units_and_bare_seconds() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("2 m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        for bad in ["", "s", "10x", "-1s", "1e99s", "NaN"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
