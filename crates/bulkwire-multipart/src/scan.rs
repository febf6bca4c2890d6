//! The boundary scan (RFC 2046 §5.1.1): a pure function of a buffer.
//!
//! A delimiter is `CRLF "--" boundary`; the CRLF belongs to the delimiter, not
//! to the data before it. [`Delimiter::scan`] says either where the next
//! delimiter is, or how many leading bytes are surely data, holding back only
//! a tail that could still grow into a delimiter (as Go's
//! `scanUntilBoundary`). The search is one `memmem::Finder`, built once per
//! message, so near-boundary data costs no more than random data.

use memchr::memmem::Finder;

/// Result of scanning one buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// A delimiter: data ends at `data_end`, the boundary's last byte is at
    /// `after - 1`.
    Found { data_end: usize, after: usize },
    /// No delimiter; `buf[..safe]` is data, `buf[safe..]` may start one.
    Partial { safe: usize },
}

/// The delimiter of one message and its searcher.
#[derive(Debug, Clone)]
pub struct Delimiter {
    finder: Finder<'static>,
    /// `\r\n--boundary`, or `\n--boundary` when bare LF is tolerated.
    needle: Box<[u8]>,
    lenient_lf: bool,
}

impl Delimiter {
    /// `boundary` must already be validated: it contains no CR or LF, which
    /// is what lets a possible straddling match start only at the needle's
    /// first byte.
    pub fn new(boundary: &[u8], lenient_lf: bool) -> Self {
        let prefix: &[u8] = if lenient_lf { b"\n--" } else { b"\r\n--" };
        let needle: Box<[u8]> = [prefix, boundary].concat().into();
        let finder = Finder::new(&needle).into_owned();
        Delimiter {
            finder,
            needle,
            lenient_lf,
        }
    }

    /// Bytes of the needle; `CRLF--boundary` in strict mode.
    pub fn needle(&self) -> &[u8] {
        &self.needle
    }

    /// The most bytes a [`Scan::Partial`] can hold back.
    pub fn max_holdback(&self) -> usize {
        self.needle.len() + usize::from(self.lenient_lf)
    }

    /// Finds the first delimiter in `buf`, or how much of it is surely data.
    pub fn scan(&self, buf: &[u8]) -> Scan {
        match self.finder.find(buf) {
            Some(i) => Scan::Found {
                data_end: self.strip_cr(buf, i),
                after: i + self.needle.len(),
            },
            None => Scan::Partial {
                safe: self.strip_cr(buf, buf.len() - self.prefix_tail(buf)),
            },
        }
    }

    /// In lenient mode a CR before the LF still belongs to the line end.
    fn strip_cr(&self, buf: &[u8], end: usize) -> usize {
        if self.lenient_lf && end > 0 && buf[end - 1] == b'\r' {
            end - 1
        } else {
            end
        }
    }

    /// Length of the longest suffix of `buf` that is a proper prefix of the
    /// needle. The needle's first byte occurs nowhere else in it, so only its
    /// last occurrence in the tail can start such a suffix.
    fn prefix_tail(&self, buf: &[u8]) -> usize {
        let n = self.needle.len();
        let tail_start = buf.len().saturating_sub(n - 1);
        let Some(i) = memchr::memrchr(self.needle[0], &buf[tail_start..]) else {
            return 0;
        };
        let cand = &buf[tail_start + i..];
        if self.needle.starts_with(cand) {
            cand.len()
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(lenient: bool) -> Delimiter {
        Delimiter::new(b"xyz", lenient)
    }

    #[test]
    fn finds_delimiter() {
        assert_eq!(
            d(false).scan(b"abc\r\n--xyz\r\n"),
            Scan::Found {
                data_end: 3,
                after: 10
            }
        );
    }

    #[test]
    fn holds_back_only_a_possible_prefix() {
        let s = d(false);
        assert_eq!(s.scan(b"abc"), Scan::Partial { safe: 3 });
        assert_eq!(s.scan(b"abc\r"), Scan::Partial { safe: 3 });
        assert_eq!(s.scan(b"abc\r\n--xy"), Scan::Partial { safe: 3 });
        assert_eq!(s.scan(b"abc\r\n--xa"), Scan::Partial { safe: 9 });
        assert_eq!(s.scan(b"\r\n-\r\n--"), Scan::Partial { safe: 3 });
        assert_eq!(s.scan(b""), Scan::Partial { safe: 0 });
    }

    #[test]
    fn near_misses_are_data() {
        let s = d(false);
        assert_eq!(
            s.scan(b"\r\n--xyX\r\n--xy\n--xyz"),
            Scan::Partial { safe: 19 }
        );
    }

    #[test]
    fn lenient_lf_keeps_cr_with_line_end() {
        let s = d(true);
        assert_eq!(
            s.scan(b"ab\n--xyz"),
            Scan::Found {
                data_end: 2,
                after: 8
            }
        );
        assert_eq!(
            s.scan(b"ab\r\n--xyz"),
            Scan::Found {
                data_end: 2,
                after: 9
            }
        );
        assert_eq!(s.scan(b"ab\r"), Scan::Partial { safe: 2 });
        assert_eq!(s.scan(b"ab\r\n--x"), Scan::Partial { safe: 2 });
        assert_eq!(s.max_holdback(), 7);
    }
}
