//! MTOM message builder (SOAP MTOM §3, XOP 1.0 §4.1): a root
//! `application/xop+xml` part holding the envelope, then one part per
//! attachment, in `multipart/related` (RFC 2387) with `type`, `start` and
//! `start-info`.
//!
//! The envelope refers to attachments with `xop:Include` placeholders,
//! written with [`include_element`]. [`Builder::finish`] checks them
//! through the same envelope walker the parser uses: every Include must name
//! an attachment, Content-IDs must be unique. The body is assembled by
//! `bulkwire_multipart::Builder`, so the boundary is random, checked against
//! in-memory data, and the `Content-Length` is exact before the first byte:
//! in-memory data stays in shared `Bytes`, files are opened when read.

use crate::envelope::{Collected, Envelope};
use crate::limits::Limits;
use crate::message::{CountingSink, SoapVersion};
use crate::path::Select;
use bulkwire_multipart::{Body, BodyReader, Segment};
use bytes::Bytes;
use std::io::{self, Read};
use std::path::Path;
use std::sync::Arc;

/// The root part's Content-ID when none is set.
pub const DEFAULT_ROOT_ID: &str = "root.message@bulkwire";

/// The placeholder for the attachment `cid`:
/// `<xop:Include xmlns:xop="…" href="cid:…"/>`, the id percent-encoded.
pub fn include_element(cid: &str) -> String {
    format!(
        "<xop:Include xmlns:xop=\"http://www.w3.org/2004/08/xop/include\" href=\"{}\"/>",
        crate::cid::to_cid_url(cid)
    )
}

enum Data {
    Mem(Bytes),
    File(std::path::PathBuf),
    Reader(u64, Box<dyn Read + Send>),
}

struct Attachment {
    cid: String,
    content_type: String,
    data: Data,
}

/// Collects an envelope and attachments, then encodes them.
pub struct Builder {
    version: SoapVersion,
    root_id: String,
    boundary: Option<String>,
    envelope: Bytes,
    attachments: Vec<Attachment>,
}

/// An encoded MTOM body.
#[derive(Debug)]
pub struct MtomBody {
    content_type: String,
    body: Body,
}

impl MtomBody {
    /// The `Content-Type` header value (with `type`, `start`, `start-info`).
    pub fn content_type(&self) -> &str {
        &self.content_type
    }

    /// The exact body length, for `Content-Length`.
    pub fn content_length(&self) -> u64 {
        self.body.content_length()
    }

    pub fn boundary(&self) -> &str {
        self.body.boundary()
    }

    /// The segments in order, e.g. for vectored writes.
    pub fn segments(&self) -> &[Segment] {
        self.body.segments()
    }

    /// The segments as shared `Bytes`, if all are in memory.
    pub fn to_bytes_vec(&self) -> Option<Vec<Bytes>> {
        self.body.to_bytes_vec()
    }

    /// The whole body in one buffer, if all is in memory (tests, small
    /// messages).
    pub fn to_vec(&self) -> Option<Vec<u8>> {
        Some(self.to_bytes_vec()?.concat())
    }

    /// A blocking reader over the body, in constant memory.
    pub fn into_reader(self) -> BodyReader {
        self.body.into_reader()
    }

    /// The multipart body (segments, reader).
    pub fn into_body(self) -> Body {
        self.body
    }
}

impl Builder {
    pub fn new(version: SoapVersion) -> Builder {
        Builder {
            version,
            root_id: DEFAULT_ROOT_ID.to_owned(),
            boundary: None,
            envelope: Bytes::new(),
            attachments: Vec::new(),
        }
    }

    /// The envelope, with [`include_element`] placeholders.
    pub fn envelope(&mut self, xml: impl Into<Bytes>) -> &mut Self {
        self.envelope = xml.into();
        self
    }

    /// The root part's Content-ID (without angle brackets).
    pub fn root_id(&mut self, cid: &str) -> &mut Self {
        self.root_id = cid.to_owned();
        self
    }

    /// Forces the boundary instead of a random one.
    pub fn boundary(&mut self, boundary: &str) -> &mut Self {
        self.boundary = Some(boundary.to_owned());
        self
    }

    /// An attachment from memory.
    pub fn bytes(&mut self, cid: &str, content_type: &str, data: impl Into<Bytes>) -> &mut Self {
        self.push(cid, content_type, Data::Mem(data.into()))
    }

    /// An attachment read from `path` when the body is read (its length is
    /// taken when the body is built).
    pub fn file(&mut self, cid: &str, content_type: &str, path: impl AsRef<Path>) -> &mut Self {
        self.push(cid, content_type, Data::File(path.as_ref().to_path_buf()))
    }

    /// An attachment of exactly `len` bytes from `reader`.
    pub fn reader(
        &mut self,
        cid: &str,
        content_type: &str,
        len: u64,
        reader: Box<dyn Read + Send>,
    ) -> &mut Self {
        self.push(cid, content_type, Data::Reader(len, reader))
    }

    fn push(&mut self, cid: &str, content_type: &str, data: Data) -> &mut Self {
        self.attachments.push(Attachment {
            cid: cid.to_owned(),
            content_type: content_type.to_owned(),
            data,
        });
        self
    }

    /// Checks the envelope against the attachments and encodes the body.
    /// The builder is left empty (version, root id, boundary kept).
    pub fn finish(&mut self) -> io::Result<MtomBody> {
        let attachments = std::mem::take(&mut self.attachments);
        let envelope = std::mem::take(&mut self.envelope);
        self.check(&envelope, &attachments)?;
        let xop = "application/xop+xml";
        let mut mb = bulkwire_multipart::Builder::related(xop);
        if let Some(b) = &self.boundary {
            mb.boundary(b)?;
        }
        let media = self.version.media_type();
        let root_type = format!("{xop}; charset=UTF-8; type=\"{media}\"");
        mb.part(Some(&root_type), envelope)
            .header("Content-Transfer-Encoding", "binary")
            .header("Content-ID", &format!("<{}>", self.root_id));
        for a in attachments {
            let ct = Some(a.content_type.as_str());
            match a.data {
                Data::Mem(b) => mb.part(ct, b),
                Data::File(p) => mb.part_file(p, ct)?,
                Data::Reader(len, r) => mb.part_reader(ct, len, r),
            };
            mb.header("Content-Transfer-Encoding", "binary")
                .header("Content-ID", &format!("<{}>", a.cid));
        }
        let body = mb.finish()?;
        let content_type = format!(
            "multipart/related; type=\"{xop}\"; start=\"<{}>\"; start-info=\"{media}\"; boundary=\"{}\"",
            self.root_id,
            body.boundary()
        );
        Ok(MtomBody { content_type, body })
    }

    /// Every Include names an attachment; Content-IDs are unique; the
    /// envelope is a well-formed envelope of this SOAP version.
    fn check(&self, envelope: &[u8], attachments: &[Attachment]) -> io::Result<()> {
        let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
        let ids = std::iter::once(&self.root_id).chain(attachments.iter().map(|a| &a.cid));
        let mut seen: Vec<&String> = Vec::new();
        for id in ids {
            if seen.contains(&id) {
                return Err(invalid(format!("duplicate Content-ID {id:?}")));
            }
            seen.push(id);
        }
        let limits = Limits {
            envelope_bytes: envelope.len() as u64,
            ..Limits::default()
        };
        let mut env = Envelope::new(Arc::new(Select::new()), &limits);
        env.start(0, Some(self.version), Some(self.root_id.clone()));
        let mut out = Collected::default();
        env.feed(envelope, true, &mut CountingSink::default(), &mut out)
            .map_err(|e| invalid(format!("envelope: {e}")))?;
        for inc in &out.includes {
            if !attachments.iter().any(|a| a.cid == inc.cid) {
                let msg = format!(
                    "xop:Include at {} names no attachment ({})",
                    inc.path, inc.cid
                );
                return Err(invalid(msg));
            }
        }
        Ok(())
    }
}
