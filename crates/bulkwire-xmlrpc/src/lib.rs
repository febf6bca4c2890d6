//! Streaming XML-RPC for bulkwire (<http://xmlrpc.com/spec.md>, plus the
//! `i8` and `nil` extensions): big `base64` values in constant memory.
//!
//! WordPress needed 2.5 GB to receive a 200 MB media upload over XML-RPC
//! because its parser held the whole body and the whole base64 text as
//! strings. Here:
//! - [`Parser`] is sans-IO: fed chunks of any size, it builds a small
//!   [`Value`] tree for everything but `base64`, which it decodes in
//!   blocks with base64-simd (a fast path reads the usual 76-column LF or
//!   CRLF lines straight from the body, ahead of the XML tokenizer; any
//!   other layout goes through `bulkwire-xml`'s streaming decoder), across
//!   chunk edges, straight into a caller's [`Base64Sink`]; the
//!   tree keeps what the sink returned (a length, a digest, a storage
//!   handle). Everything else is capped by [`Limits`].
//! - [`encode_call`], [`encode_response`] and [`encode_fault`] render a
//!   message whose exact length is known before writing, reading each
//!   [`Blob`] in blocks while the body is written.
//! - [`parse_read`] and [`parse_stream`] drive the parser from a blocking
//!   reader or an async stream of `Bytes`.
//!
//! ```
//! use bulkwire_xmlrpc::{
//!     encode_call, parse, EncodeOptions, Limits, Message, Sha256Sink, Value,
//! };
//!
//! // A client encodes an upload, its length known in advance ...
//! let file = vec![7u8; 100_000];
//! let params = vec![
//!     Value::Int(1),
//!     Value::String("admin".into()),
//!     Value::Struct(vec![
//!         ("name".into(), Value::String("a.bin".into())),
//!         ("bits".into(), Value::Base64(file)),
//!     ]),
//! ];
//! let body = encode_call("wp.uploadFile", &params, &EncodeOptions::default())?;
//! let bytes = body.to_vec()?;
//! assert_eq!(bytes.len() as u64, body.len());
//!
//! // ... a server parses it, hashing the file instead of keeping it.
//! let (msg, _sink) = parse(&bytes, Limits::default(), Sha256Sink::default())?;
//! let Message::Call(call) = msg else { panic!("a call") };
//! assert_eq!(call.method, "wp.uploadFile");
//! let bits = call.params[2].get("bits").and_then(Value::as_base64).unwrap();
//! assert_eq!(bits.len, 100_000);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod encode;
mod error;
mod limits;
mod lines;
mod parser;
mod read;
mod scalar;
mod sink;
mod stream;
#[doc(hidden)]
pub mod testutil;
mod value;

pub use bulkwire_xml::base64::LineEnd;
pub use encode::{
    encode_call, encode_fault, encode_response, Blob, EncodeOptions, Encoded, FileBlob,
};
pub use error::{Error, ErrorKind, StreamError};
pub use limits::{LimitKind, Limits};
pub use parser::{parse, Parser};
pub use read::{parse_read, parse_read_with, DEFAULT_BUFFER};
pub use scalar::EXTENSIONS_NS;
pub use sink::{Base64Sink, CountSink, Digested, MemorySink, Sha256Sink};
pub use stream::parse_stream;
pub use value::{Call, DateTime, Fault, Message, PathSeg, Response, Value, ValuePath};
