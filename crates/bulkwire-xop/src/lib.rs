//! Streaming MTOM/XOP and SOAP codec for bulkwire: SOAP 1.1 and 1.2
//! messages whose binaries (XOP attachments in `multipart/related`, or
//! inline `xs:base64Binary` values) stream to a sink in constant memory.
//!
//! - [`Parser`]: sans-IO, fed chunks of any size. MTOM bodies (SOAP MTOM
//!   §3, XOP 1.0 §4) go through `bulkwire_multipart`'s boundary scan; the
//!   root envelope through `bulkwire_xml`'s tokenizer (bounded, no DTD),
//!   with every `xop:Include` resolved by Content-ID (RFC 2392). A bare
//!   envelope (`text/xml`, `application/soap+xml`) is parsed the same way,
//!   its inline base64 decoded block-wise into the sink.
//! - [`Select`]: which element paths are *binary* (to the sink, inline or
//!   Included alike) and which are small *text* fields (returned as
//!   strings); everything else is tokenized and checked.
//! - [`build::Builder`]: MTOM bodies with exact `Content-Length`, as
//!   `Bytes` segments plus a streaming reader for file and reader parts.
//! - [`read`] and [`stream`]: blocking `Read` and async `Stream` adapters.
//!
//! Every buffer is capped by [`Limits`]; every error is an [`Error`] with a
//! byte offset, part index and HTTP status.
//!
//! ```
//! use bulkwire_xop::{build, Limits, MemorySink, Parser, Select, SoapVersion};
//!
//! // Build: an envelope whose `data` element holds an xop:Include.
//! let mut b = build::Builder::new(SoapVersion::Soap11);
//! let envelope = format!(
//!     "<s:Envelope xmlns:s=\"http://schemas.xmlsoap.org/soap/envelope/\"><s:Body>\
//!      <m:upload xmlns:m=\"urn:bulkwire:media\"><name>a.bin</name>\
//!      <data>{}</data></m:upload></s:Body></s:Envelope>",
//!     build::include_element("a@example")
//! );
//! b.envelope(envelope).bytes("a@example", "application/octet-stream", vec![7u8; 5000]);
//! let body = b.finish()?;
//! let bytes = body.to_vec().expect("in memory");
//!
//! // Parse, in chunks, the way a server receives it.
//! let select = Select::new()
//!     .binary("/Envelope/Body/{urn:bulkwire:media}upload/data")?
//!     .text("/Envelope/Body/{urn:bulkwire:media}upload/name")?;
//! let mut p = Parser::new(body.content_type(), select, Limits::default(), MemorySink::new(1 << 20))?;
//! let mut chunks = bytes.chunks(1000).peekable();
//! while let Some(c) = chunks.next() {
//!     p.feed(c, chunks.peek().is_none())?;
//! }
//! let msg = p.finish()?;
//! assert_eq!(msg.field("/Envelope/Body/upload/name"), Some("a.bin"));
//! let data = msg.binary("/Envelope/Body/upload/data").unwrap();
//! assert_eq!((data.cid.as_deref(), data.output.len()), (Some("a@example"), 5000));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

pub mod build;
pub mod cid;
mod envelope;
mod error;
mod limits;
mod media;
mod message;
mod parser;
mod path;
pub mod read;
pub mod stream;
#[doc(hidden)]
pub mod testutil;

pub use error::{Error, ErrorKind};
pub use limits::{LimitKind, Limits};
pub use message::{
    Binary, BinaryInfo, CountingSink, Field, Include, MemorySink, Message, QName, RootPart, Sink,
    SoapVersion,
};
pub use parser::Parser;
pub use path::{ElementPath, Select, MAX_SELECTORS};

#[cfg(test)]
mod tests;
