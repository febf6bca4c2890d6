//! Image variants for bulkwire: thumbnails and sized copies of stored
//! images, made without trusting the image (DESIGN.md "Sending bytes").
//!
//! Three steps, each bounded before it runs:
//! 1. [`HeaderScan`] reads the header from the first bytes (no pixel
//!    decoded): format, size, EXIF orientation. The caller refuses what is
//!    over its limits (pixels, bytes) there.
//! 2. [`plan`] works out the output size and what decoding will hold in
//!    memory at most ([`Plan::memory`]), which the caller reserves from its
//!    budget; decoders are told that bound too and fail past it.
//! 3. [`make`] decodes (a JPEG at 1/2, 1/4 or 1/8 of its size where the
//!    output is that much smaller: only the DCT's low frequencies are
//!    computed), applies the orientation, crops and resizes with a SIMD
//!    convolution (Lanczos3), and encodes WebP, JPEG or PNG. A deadline is
//!    checked between the steps.
//!
//! Why each crate: `docs/src/design.md`, "Image variants".

mod header;
mod make;

pub use header::{
    exif_orientation, probe, Format, Header, HeaderScan, HEADER_KEEP, HEADER_SCAN_MAX,
};
pub use make::{make, plan, Plan};

use std::fmt;

/// How a variant fills its box.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fit {
    /// The whole image inside the box (one side may be shorter).
    Contain,
    /// The box filled exactly, the image cropped around its centre.
    Cover,
}

impl Fit {
    pub fn parse(s: &str) -> Option<Fit> {
        match s {
            "contain" => Some(Fit::Contain),
            "cover" => Some(Fit::Cover),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Fit::Contain => "contain",
            Fit::Cover => "cover",
        }
    }
}

/// What a variant is encoded as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Output {
    WebP,
    Jpeg,
    Png,
}

impl Output {
    pub fn parse(s: &str) -> Option<Output> {
        match s {
            "webp" => Some(Output::WebP),
            "jpeg" | "jpg" => Some(Output::Jpeg),
            "png" => Some(Output::Png),
            _ => None,
        }
    }

    /// The name in URLs and file names.
    pub fn as_str(self) -> &'static str {
        match self {
            Output::WebP => "webp",
            Output::Jpeg => "jpeg",
            Output::Png => "png",
        }
    }

    pub fn media_type(self) -> &'static str {
        match self {
            Output::WebP => "image/webp",
            Output::Jpeg => "image/jpeg",
            Output::Png => "image/png",
        }
    }
}

/// A variant: a box (`None` on one side: as the other side's scale
/// makes it), how to fit it, what to encode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Spec {
    pub width: Option<u32>,
    pub height: Option<u32>,
    pub fit: Fit,
    pub output: Output,
}

impl Spec {
    /// The variant's name in the blob store: `w300-h300-cover.webp`
    /// (`h0`: no height given). Bump [`ENGINE`] instead when the same spec
    /// would make other bytes.
    pub fn name(&self) -> String {
        format!(
            "{ENGINE}-w{}-h{}-{}.{}",
            self.width.unwrap_or(0),
            self.height.unwrap_or(0),
            self.fit.as_str(),
            self.output.as_str()
        )
    }
}

/// The engine's version, in every variant's name: a change that makes
/// other bytes for the same spec (another filter, quality or encoder)
/// bumps it, so that stored variants and cached ETags of before are not
/// taken for the new ones.
pub const ENGINE: &str = "e1";

/// Why a variant cannot be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Not a format decoded here (HTTP 415).
    Unsupported(String),
    /// A format decoded here, but these bytes do not decode (422).
    Undecodable(String),
    /// Decoding would hold more than the plan allowed (a decoder's own
    /// count; the caller's limit).
    Memory(u64),
    /// The deadline passed between two steps.
    TimedOut,
}

impl Error {
    pub(crate) fn unsupported(m: impl Into<String>) -> Error {
        Error::Unsupported(m.into())
    }

    pub(crate) fn undecodable(m: impl Into<String>) -> Error {
        Error::Undecodable(m.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unsupported(m) | Error::Undecodable(m) => f.write_str(m),
            Error::Memory(n) => write!(f, "decoding needs more than the {n} bytes planned"),
            Error::TimedOut => f.write_str("the deadline passed"),
        }
    }
}

impl std::error::Error for Error {}
