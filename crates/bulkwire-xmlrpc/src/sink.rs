//! Where decoded `base64` bytes go.
//!
//! The parser never holds a `base64` value: it decodes the text in blocks
//! as it arrives and hands each block to a [`Base64Sink`], which a server
//! implements to open a storage writer when a value starts
//! ([`Base64Sink::begin`], told where the value is), append to it, and
//! finish it into a handle ([`Base64Sink::finish`]) that the value tree
//! keeps in place of the bytes. Ready-made sinks: [`CountSink`] (length
//! only), [`Sha256Sink`] (length and digest) and [`MemorySink`] (bytes in
//! memory up to a cap, for small messages and tests).

use crate::value::ValuePath;
use sha2::{Digest, Sha256};
use std::convert::Infallible;

/// Receives the decoded bytes of each `base64` value in turn.
///
/// For each value the parser calls `begin`, then `write` zero or more
/// times, then `finish`; if parsing fails while a value is open it calls
/// `abort` instead of `finish` (remove the temporary object). Values never
/// overlap.
pub trait Base64Sink {
    /// What the value tree holds for a finished value.
    type Output;
    /// Why the sink failed; reported as [`crate::ErrorKind::Sink`].
    type Error: Into<Box<dyn std::error::Error + Send + Sync>>;

    fn begin(&mut self, path: &ValuePath) -> Result<(), Self::Error>;
    fn write(&mut self, bytes: &[u8]) -> Result<(), Self::Error>;
    fn finish(&mut self) -> Result<Self::Output, Self::Error>;
    /// The value will not be finished (the message was bad or a write
    /// failed). Default: nothing to clean up.
    fn abort(&mut self) {}
}

impl<S: Base64Sink + ?Sized> Base64Sink for &mut S {
    type Output = S::Output;
    type Error = S::Error;

    fn begin(&mut self, path: &ValuePath) -> Result<(), Self::Error> {
        (**self).begin(path)
    }
    fn write(&mut self, bytes: &[u8]) -> Result<(), Self::Error> {
        (**self).write(bytes)
    }
    fn finish(&mut self) -> Result<Self::Output, Self::Error> {
        (**self).finish()
    }
    fn abort(&mut self) {
        (**self).abort()
    }
}

/// Counts the bytes of each value; the tree holds the lengths.
#[derive(Debug, Default, Clone)]
pub struct CountSink {
    current: u64,
    /// Bytes over all values so far.
    pub total: u64,
}

impl Base64Sink for CountSink {
    type Output = u64;
    type Error = Infallible;

    fn begin(&mut self, _: &ValuePath) -> Result<(), Infallible> {
        self.current = 0;
        Ok(())
    }
    fn write(&mut self, bytes: &[u8]) -> Result<(), Infallible> {
        self.current += bytes.len() as u64;
        self.total += bytes.len() as u64;
        Ok(())
    }
    fn finish(&mut self) -> Result<u64, Infallible> {
        Ok(self.current)
    }
}

/// Length and SHA-256 of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digested {
    pub len: u64,
    pub sha256: [u8; 32],
}

/// Hashes each value with SHA-256.
#[derive(Debug, Default, Clone)]
pub struct Sha256Sink {
    hasher: Sha256,
    len: u64,
}

impl Base64Sink for Sha256Sink {
    type Output = Digested;
    type Error = Infallible;

    fn begin(&mut self, _: &ValuePath) -> Result<(), Infallible> {
        self.hasher = Sha256::new();
        self.len = 0;
        Ok(())
    }
    fn write(&mut self, bytes: &[u8]) -> Result<(), Infallible> {
        self.hasher.update(bytes);
        self.len += bytes.len() as u64;
        Ok(())
    }
    fn finish(&mut self) -> Result<Digested, Infallible> {
        let sha256 = std::mem::take(&mut self.hasher).finalize().into();
        Ok(Digested {
            len: self.len,
            sha256,
        })
    }
}

/// Keeps each value's bytes, refusing any value longer than `max` bytes:
/// for small messages and tests, never for uploads.
#[derive(Debug, Clone)]
pub struct MemorySink {
    max: usize,
    buf: Vec<u8>,
}

impl MemorySink {
    pub fn new(max: usize) -> MemorySink {
        MemorySink {
            max,
            buf: Vec::new(),
        }
    }
}

impl Base64Sink for MemorySink {
    type Output = Vec<u8>;
    type Error = std::io::Error;

    fn begin(&mut self, _: &ValuePath) -> std::io::Result<()> {
        self.buf.clear();
        Ok(())
    }
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.buf.len() + bytes.len() > self.max {
            let msg = format!(
                "base64 value longer than the memory sink's {} bytes",
                self.max
            );
            return Err(std::io::Error::other(msg));
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }
    fn finish(&mut self) -> std::io::Result<Vec<u8>> {
        Ok(std::mem::take(&mut self.buf))
    }
    fn abort(&mut self) {
        self.buf = Vec::new();
    }
}
