//! The `mtom` scenario: the SOAP operation `{urn:bulkwire:media}upload`
//! (document/literal wrapped, children `name`, `contentType`, `data`) with
//! `data` an `xop:Include` of one attachment, in an MTOM message (SOAP MTOM
//! §3, XOP 1.0 §4.1: `multipart/related`, root `application/xop+xml`).
//!
//! The message is built once by `bulkwire_xop::build::Builder` (which checks
//! the envelope and the Include, and picks the boundary) with a sentinel for
//! the name; the envelope is then cut around it. A request is the static
//! pieces, the escaped name and the attachment, the file's one shared
//! `Bytes`, sent raw (binary MIME part): nothing large is copied.

use super::slot::{escape, sample, NameSlot, SENTINEL};
use super::{Payload, Scenario};
use crate::error::{Error, Result};
use crate::pattern::{Pattern, Vars};
use bulkwire_xop::build::{include_element, Builder};
use bulkwire_xop::SoapVersion;
use bytes::Bytes;

/// The service namespace of bulkwire's SOAP endpoint.
pub const MEDIA_NS: &str = "urn:bulkwire:media";
/// The attachment's Content-ID.
pub const ATTACHMENT_ID: &str = "data@bulkwire";

/// What one SOAP upload carries.
#[derive(Debug, Clone)]
pub struct SoapUpload {
    pub version: SoapVersion,
    /// The `name` element; may use `{seq}` and `{uuid}`.
    pub name: Pattern,
    /// The `contentType` element and the attachment's `Content-Type`.
    pub content_type: String,
    /// The attachment: the file, read once.
    pub data: Bytes,
}

impl SoapUpload {
    /// SOAP 1.1, `application/octet-stream`.
    pub fn new(name: Pattern, data: Bytes) -> SoapUpload {
        SoapUpload {
            version: SoapVersion::Soap11,
            name,
            content_type: "application/octet-stream".into(),
            data,
        }
    }

    /// The envelope with `name` (escaped here).
    pub fn envelope(&self, name: &str) -> String {
        let text = |s: &str| String::from_utf8(escape(s)).unwrap_or_default();
        format!(
            "<s:Envelope xmlns:s=\"{env}\"><s:Body><m:upload xmlns:m=\"{MEDIA_NS}\">\
             <name>{name}</name><contentType>{ct}</contentType><data>{inc}</data>\
             </m:upload></s:Body></s:Envelope>",
            env = self.version.namespace(),
            name = text(name),
            ct = text(&self.content_type),
            inc = include_element(ATTACHMENT_ID),
        )
    }

    /// The builder for one message with `name` (for tests: the reference
    /// encoding of one request, given the template's boundary).
    pub fn builder(&self, name: &str) -> Builder {
        let mut b = Builder::new(self.version);
        b.envelope(self.envelope(name))
            .bytes(ATTACHMENT_ID, &self.content_type, self.data.clone());
        b
    }
}

/// The MTOM upload template.
#[derive(Debug, Clone)]
pub struct Mtom {
    content_type: String,
    slot: NameSlot,
}

impl Mtom {
    /// Builds the message once and cuts it around the name.
    pub fn new(up: &SoapUpload) -> Result<Mtom> {
        let bad = |e: std::io::Error| Error::config(format!("mtom message: {e}"));
        // Checks the name's literal text through the envelope parser once.
        up.builder(&sample(&up.name)).finish().map_err(bad)?;
        let body = up.builder(SENTINEL).finish().map_err(bad)?;
        let segments = body
            .to_bytes_vec()
            .ok_or_else(|| Error::config("mtom message not in memory"))?;
        let delimiter = format!("--{}", body.boundary());
        Ok(Mtom {
            content_type: body.content_type().to_owned(),
            slot: NameSlot::cut(segments, up.name.clone())?.forbid(delimiter),
        })
    }

    /// The boundary chosen when the template was built.
    pub fn boundary(&self) -> &str {
        self.content_type
            .rsplit("boundary=\"")
            .next()
            .and_then(|b| b.strip_suffix('"'))
            .unwrap_or_default()
    }
}

impl Scenario for Mtom {
    fn name(&self) -> &str {
        "mtom"
    }

    fn content_type(&self) -> &str {
        &self.content_type
    }

    fn render(&self, vars: &Vars) -> std::io::Result<Payload> {
        self.slot.render(vars)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(seq: u64) -> Vars {
        Vars {
            seq,
            uuid: *b"12345678-1234-4234-8234-123456789abc",
        }
    }

    fn data(n: usize) -> Bytes {
        (0..n).map(|i| (i * 13 + i / 509) as u8).collect()
    }

    #[test]
    fn renders_exactly_what_the_builder_builds() {
        for version in [SoapVersion::Soap11, SoapVersion::Soap12] {
            for n in [0, 1, 70_000] {
                let mut up = SoapUpload::new(Pattern::parse("a<&>-{seq}-{uuid}").unwrap(), data(n));
                up.version = version;
                up.content_type = "image/png".into();
                let m = Mtom::new(&up).unwrap();
                assert!(m.content_type().starts_with("multipart/related;"));
                for seq in [0, 77] {
                    let v = vars(seq);
                    let p = m.render(&v).unwrap();
                    let mut b = up.builder(&up.name.to_string(&v));
                    b.boundary(m.boundary());
                    let want = b.finish().unwrap();
                    assert_eq!(want.content_type(), m.content_type());
                    assert_eq!(p.len, want.content_length());
                    assert_eq!(p.to_vec(), want.to_vec().unwrap(), "{version:?} {n} {seq}");
                }
            }
        }
    }

    #[test]
    fn the_attachment_is_the_shared_file() {
        let up = SoapUpload::new(Pattern::parse("{seq}").unwrap(), data(100_000));
        let m = Mtom::new(&up).unwrap();
        let p = m.render(&vars(3)).unwrap();
        assert!(p.segments.iter().any(|s| s.as_ptr() == up.data.as_ptr()));
    }
}
