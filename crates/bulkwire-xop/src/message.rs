//! What a parse gives: the [`Message`] with its text fields and binaries,
//! and the [`Sink`] trait through which every binary's bytes stream (an
//! attachment's data as it arrives, an inline base64 value as it decodes).

use std::io;

/// The SOAP version, from the envelope's namespace (SOAP 1.1 §4.1.2, SOAP
/// 1.2 Part 1 §5.1) and the media type (`text/xml`, `application/soap+xml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SoapVersion {
    Soap11,
    Soap12,
}

impl SoapVersion {
    /// The envelope namespace URI.
    pub fn namespace(self) -> &'static str {
        match self {
            SoapVersion::Soap11 => "http://schemas.xmlsoap.org/soap/envelope/",
            SoapVersion::Soap12 => "http://www.w3.org/2003/05/soap-envelope",
        }
    }

    /// The media type of a bare envelope, and of XOP's `type`/`start-info`.
    pub fn media_type(self) -> &'static str {
        match self {
            SoapVersion::Soap11 => "text/xml",
            SoapVersion::Soap12 => "application/soap+xml",
        }
    }

    /// The version a media type names. Parameters are ignored: MTOM's
    /// `start-info` and the root part's `type` carry SOAP 1.2's `action`
    /// (RFC 3902 §1) when the WSDL gives one, as Apache CXF sends
    /// `start-info="application/soap+xml; action=\"urn:…\""`.
    pub(crate) fn from_media_type(t: &str) -> Option<SoapVersion> {
        let t = t.split(';').next().unwrap_or_default().trim();
        if t.eq_ignore_ascii_case("text/xml") {
            Some(SoapVersion::Soap11)
        } else if t.eq_ignore_ascii_case("application/soap+xml") {
            Some(SoapVersion::Soap12)
        } else {
            None
        }
    }
}

/// What a sink is told when a binary begins.
#[derive(Debug, Clone, Copy)]
pub struct BinaryInfo<'a> {
    /// Position the binary will have in [`Message::binaries`].
    pub index: usize,
    /// The attachment's Content-ID (normalized); `None` for inline base64.
    pub cid: Option<&'a str>,
    /// The part's Content-Type, or an inline element's `xmime:contentType`.
    pub content_type: Option<&'a str>,
    /// Element paths that refer to it, as far as known now: empty for an
    /// attachment that arrives before the root part or that nothing
    /// references ([`Message`] has the final list).
    pub paths: &'a [String],
    /// True when `paths` is final: for inline base64, and for an attachment
    /// after the root part (one nothing refers to is then known as such
    /// and can be discarded as it streams); false before the root.
    pub paths_final: bool,
}

/// Where binaries go. One sink serves a whole message: binaries come one at
/// a time, each as `begin`, any number of `write`s, then `finish` (or
/// `abort` if the message fails while it is open).
pub trait Sink {
    /// What a finished binary leaves behind (a file name, a hash, a count).
    type Output;
    fn begin(&mut self, info: &BinaryInfo<'_>) -> io::Result<()>;
    fn write(&mut self, data: &[u8]) -> io::Result<()>;
    fn finish(&mut self) -> io::Result<Self::Output>;
    /// The message failed with this binary open; drop what was written.
    fn abort(&mut self) {}
}

impl<S: Sink + ?Sized> Sink for &mut S {
    type Output = S::Output;
    fn begin(&mut self, info: &BinaryInfo<'_>) -> io::Result<()> {
        (**self).begin(info)
    }
    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        (**self).write(data)
    }
    fn finish(&mut self) -> io::Result<S::Output> {
        (**self).finish()
    }
    fn abort(&mut self) {
        (**self).abort()
    }
}

/// Counts bytes and drops them (benchmarks, validation).
#[derive(Debug, Default, Clone)]
pub struct CountingSink {
    current: u64,
    /// Bytes of every binary so far.
    pub total: u64,
}

impl Sink for CountingSink {
    type Output = u64;
    fn begin(&mut self, _: &BinaryInfo<'_>) -> io::Result<()> {
        self.current = 0;
        Ok(())
    }
    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        self.current += data.len() as u64;
        self.total += data.len() as u64;
        Ok(())
    }
    fn finish(&mut self) -> io::Result<u64> {
        Ok(self.current)
    }
}

/// Collects each binary in memory, up to `max_total` bytes over the whole
/// message; more is an error (bounded memory, for small messages and tests).
#[derive(Debug, Clone)]
pub struct MemorySink {
    current: Vec<u8>,
    total: u64,
    max_total: u64,
}

impl MemorySink {
    pub fn new(max_total: u64) -> MemorySink {
        MemorySink {
            current: Vec::new(),
            total: 0,
            max_total,
        }
    }
}

impl Sink for MemorySink {
    type Output = Vec<u8>;
    fn begin(&mut self, _: &BinaryInfo<'_>) -> io::Result<()> {
        self.current.clear();
        Ok(())
    }
    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        self.total += data.len() as u64;
        if self.total > self.max_total {
            let msg = format!("binaries exceed MemorySink's {} bytes", self.max_total);
            return Err(io::Error::new(io::ErrorKind::OutOfMemory, msg));
        }
        self.current.extend_from_slice(data);
        Ok(())
    }
    fn finish(&mut self) -> io::Result<Vec<u8>> {
        Ok(std::mem::take(&mut self.current))
    }
    fn abort(&mut self) {
        self.current.clear();
    }
}

/// A namespace-qualified element name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QName {
    pub ns: Option<String>,
    pub local: String,
}

/// A selected text field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Rendered element path (`/Envelope/Body/upload/name`).
    pub path: String,
    pub value: String,
}

/// An `xop:Include` in the envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Include {
    /// Path of the element the Include stands for (its parent).
    pub path: String,
    /// The Content-ID its `href` names.
    pub cid: String,
}

/// One binary: an attachment or an inline base64 value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binary<O> {
    /// Element paths that refer to it (empty: an unreferenced attachment).
    pub paths: Vec<String>,
    /// Content-ID for an attachment, `None` for inline base64.
    pub cid: Option<String>,
    pub content_type: Option<String>,
    /// Bytes handed to the sink.
    pub len: u64,
    pub output: O,
}

/// The root part of an MTOM message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootPart {
    /// Index among the MIME parts.
    pub index: usize,
    pub cid: Option<String>,
    pub content_type: String,
}

/// A parsed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message<O> {
    pub version: SoapVersion,
    /// The root part, for MTOM; `None` for a bare envelope.
    pub root: Option<RootPart>,
    /// The first child of `Body` (the document/literal operation wrapper).
    pub operation: Option<QName>,
    /// Selected text fields in document order.
    pub fields: Vec<Field>,
    /// Binaries in the order they finished.
    pub binaries: Vec<Binary<O>>,
    /// Every `xop:Include` in document order.
    pub includes: Vec<Include>,
    /// Content-IDs of attachments no Include refers to (not an error).
    pub unreferenced: Vec<String>,
}

impl<O> Message<O> {
    /// Whether this was an MTOM message.
    pub fn is_mtom(&self) -> bool {
        self.root.is_some()
    }

    /// The first field at `path` (rendered form).
    pub fn field(&self, path: &str) -> Option<&str> {
        let f = self.fields.iter().find(|f| f.path == path)?;
        Some(&f.value)
    }

    /// The first binary referred to by `path` (rendered form).
    pub fn binary(&self, path: &str) -> Option<&Binary<O>> {
        self.binaries
            .iter()
            .find(|b| b.paths.iter().any(|p| p == path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{include_element, Builder};
    use crate::{Limits, Parser, Select};

    #[test]
    fn media_type_parameters_do_not_hide_the_version() {
        let v = SoapVersion::from_media_type("application/soap+xml; action=\"urn:a;b\"");
        assert_eq!(v, Some(SoapVersion::Soap12));
        let v = SoapVersion::from_media_type(" text/xml ; charset=utf-8");
        assert_eq!(v, Some(SoapVersion::Soap11));
        assert_eq!(SoapVersion::from_media_type("application/xml"), None);
    }

    #[test]
    fn mtom_with_an_action_in_start_info_and_root_type_parses() {
        let mut b = Builder::new(SoapVersion::Soap12);
        let env = format!(
            "<e:Envelope xmlns:e=\"{}\"><e:Body><m:upload xmlns:m=\"urn:m\"><data>{}</data>\
             </m:upload></e:Body></e:Envelope>",
            SoapVersion::Soap12.namespace(),
            include_element("d@x")
        );
        b.envelope(env)
            .bytes("d@x", "application/octet-stream", vec![5u8; 300]);
        let body = b.finish().unwrap();
        let with_action = "application/soap+xml; action=\\\"urn:m#upload\\\"";
        let ct = body.content_type().replace(
            "start-info=\"application/soap+xml\"",
            &format!("start-info=\"{with_action}\""),
        );
        assert!(ct.contains("action="), "{ct}");
        let bytes = String::from_utf8_lossy(&body.to_vec().unwrap()).replace(
            "type=\"application/soap+xml\"",
            &format!("type=\"{with_action}\""),
        );
        let select = Select::new()
            .binary("/Envelope/Body/{urn:m}upload/data")
            .unwrap();
        let sink = crate::MemorySink::new(1 << 20);
        let mut p = Parser::new(&ct, select, Limits::default(), sink).unwrap();
        p.feed(bytes.as_bytes(), true).unwrap();
        let m = p.finish().unwrap();
        assert_eq!(m.version, SoapVersion::Soap12);
        assert_eq!(
            m.binary("/Envelope/Body/upload/data").unwrap().output,
            vec![5u8; 300]
        );
    }
}
