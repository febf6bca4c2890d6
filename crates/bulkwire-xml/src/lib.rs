//! Streaming XML and base64 for bulkwire: the shared base of the XML-RPC and
//! SOAP/MTOM codecs.
//!
//! - [`Tokenizer`]: a sans-IO tokenizer for the subset of XML 1.0 these
//!   protocols use (UTF-8, namespaces, no DTD), fed chunks of any size, whose
//!   text tokens borrow the caller's bytes so a huge `<base64>` value streams
//!   through in constant memory.
//! - [`base64`]: a streaming decoder and encoder over `base64-simd`, for
//!   values split anywhere, with 76-column line breaks.
//!
//! Every buffer is capped by [`Limits`]; every error is an [`Error`] with a
//! byte offset and an HTTP status.
//!
//! The step loop of a consumer, here streaming an XML-RPC `<base64>` value
//! into a sink as the body arrives in chunks:
//!
//! ```
//! use bulkwire_xml::{base64::Decoder, Error, Limits, Token, Tokenizer};
//!
//! let body = b"<methodCall><params><param><value><base64>aGVs\nbG8=</base64>\
//!              </value></param></params></methodCall>";
//! let mut tk = Tokenizer::new(Limits::default());
//! let mut dec = Decoder::new();
//! let mut file = Vec::new();
//! let mut sink = |b: &[u8]| -> Result<(), Error> {
//!     file.extend_from_slice(b); // a real consumer writes to storage
//!     Ok(())
//! };
//! let mut in_base64 = false;
//! let mut chunks = body.chunks(7).peekable();
//! while let Some(mut chunk) = chunks.next() {
//!     let is_last = chunks.peek().is_none();
//!     loop {
//!         let step = tk.step(chunk, is_last)?;
//!         chunk = &chunk[step.consumed..];
//!         match step.event {
//!             Token::Start { name: b"base64", .. } => in_base64 = true,
//!             Token::Text(text) if in_base64 => dec.push(text, &mut sink)?,
//!             Token::End { name: b"base64", .. } => {
//!                 in_base64 = false;
//!                 dec.finish(&mut sink)?;
//!             }
//!             Token::NeedMore | Token::Eof => break,
//!             _ => {}
//!         }
//!     }
//! }
//! assert_eq!(file, b"hello");
//! # Ok::<(), Error>(())
//! ```
#![forbid(unsafe_code)]

pub mod base64;
mod error;
mod limits;
pub mod ns;
#[doc(hidden)]
pub mod testutil;
mod tokenizer;

pub use error::{Error, ErrorKind};
pub use limits::{LimitKind, Limits};
pub use tokenizer::{Attr, Attrs, Scope, Step, Token, Tokenizer};
