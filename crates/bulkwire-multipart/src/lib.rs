//! Streaming, sans-IO multipart codec for bulkwire.
//!
//! - [`Parser`]: `multipart/form-data` (RFC 7578), `multipart/related`
//!   (RFC 2387) and `multipart/mixed` (RFC 2046 §5.1), fed chunks of any size,
//!   with data events that borrow the caller's bytes.
//! - [`read`] and [`stream`]: blocking `Read` and async `Stream` adapters over
//!   the same core.
//! - [`build`] and [`template`]: RFC 7578 body builders with exact
//!   `Content-Length`, and precomputed templates for load generation; both
//!   give a [`body::Body`] to send.
//!
//! Every buffer is capped by [`Limits`]; every error is an [`Error`] with a
//! byte offset and an HTTP status.
#![forbid(unsafe_code)]

pub mod body;
pub mod build;
mod content_type;
mod error;
mod headers;
mod info;
mod limits;
mod params;
mod parser;
pub mod read;
mod scan;
pub mod stream;
#[doc(hidden)]
pub mod testutil;

pub mod template;

pub use body::{Body, BodyReader, Segment};
pub use build::Builder;
pub use content_type::{validate_boundary, ContentType, Subtype};
pub use error::{Error, ErrorKind};
pub use headers::Part;
pub use info::PartInfo;
pub use limits::{LimitKind, Limits};
pub use parser::{Event, Parser, Step};
pub use read::MultipartReader;
pub use scan::{Delimiter, Scan};
pub use stream::{MultipartStream, StreamError, StreamEvent};

pub use template::{Slot, Template, TemplateBuilder, Value};
