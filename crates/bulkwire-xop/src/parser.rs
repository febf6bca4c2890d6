//! The sans-IO MTOM/XOP parser (SOAP MTOM §3, XOP 1.0 §4 packaging over
//! RFC 2387 `multipart/related`), and bare SOAP envelopes with inline
//! base64, behind one API.
//!
//! [`Parser::feed`] takes each chunk of the body as it arrives, consumes
//! all of it and returns; binaries go to the [`Sink`] meanwhile, so nothing
//! is collected. The boundary scan is `bulkwire_multipart::Parser`'s (one
//! `memmem::Finder`, data handed out as borrowed slices); the root part is
//! tokenized by the envelope walker; every other part streams to the sink.
//!
//! Ordering (XOP 1.0 §4.1 leaves part order free): the root part normally
//! comes first, so each attachment's sink is told the element paths that
//! refer to it. An attachment before the root (possible when `start` names
//! a later part) still streams at once, with no paths yet; [`Message`] has
//! the final paths for every binary. At the end every Include must have
//! found its attachment; attachments nothing refers to are listed in
//! [`Message::unreferenced`], not refused.
//!
//! Choices:
//! - The root is the part whose Content-ID is the `start` parameter, else
//!   the first part (RFC 2387 §3.2). It must be `application/xop+xml`; its
//!   `type` parameter (else the `start-info` of the message) gives the SOAP
//!   version, which the envelope's namespace must match.
//! - Every other part needs a Content-ID, unique in the message (with or
//!   without angle brackets). Every part's `Content-Transfer-Encoding`, if
//!   present, is `binary`, `8bit` or `7bit` (MTOM sends raw octets; a
//!   base64 part is refused rather than silently stored encoded).
//! - Part-level errors (missing or duplicate Content-ID, wrong types) are
//!   placed at the first data byte of the part; end-of-message errors at
//!   the end of the close delimiter.

use crate::cid;
use crate::envelope::{Collected, Envelope};
use crate::error::{Error, ErrorKind};
use crate::limits::{LimitKind, Limits};
use crate::media::MediaType;
use crate::message::{Binary, BinaryInfo, Message, RootPart, Sink, SoapVersion};
use crate::path::Select;
use bulkwire_multipart::{ContentType, Event, Part, Subtype};
use std::sync::Arc;

enum Mode {
    Mtom(Box<bulkwire_multipart::Parser>),
    /// A bare envelope: the body is the document.
    Plain,
}

/// The part being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Current {
    None,
    Root,
    Attachment,
}

/// An attachment seen so far.
struct Attachment {
    cid: String,
    /// Index in `Collected::binaries` once finished.
    binary: Option<usize>,
}

/// Parses one MTOM or bare SOAP message into a [`Message`], streaming every
/// binary to `S`.
pub struct Parser<S: Sink> {
    mode: Mode,
    core: Core<S>,
}

struct Core<S: Sink> {
    sink: S,
    env: Envelope,
    out: Collected<S::Output>,
    limits: Limits,
    /// Content-ID the `start` parameter names.
    start: Option<String>,
    /// SOAP version declared by `start-info` (MTOM) or the media type.
    declared: Option<SoapVersion>,
    root: Option<RootPart>,
    current: Current,
    part: Option<usize>,
    /// The current attachment: Content-ID, type, bytes so far.
    att: (String, Option<String>, u64),
    attachments: Vec<Attachment>,
    unreferenced: Vec<String>,
    error: Option<Error>,
    done: bool,
}

impl<S: Sink> Parser<S> {
    /// A parser for a body sent with this `Content-Type`: MTOM
    /// (`multipart/related; type="application/xop+xml"`) or a bare envelope
    /// (`text/xml` for SOAP 1.1, `application/soap+xml` for SOAP 1.2).
    pub fn new(
        content_type: &str,
        select: impl Into<Arc<Select>>,
        limits: Limits,
        sink: S,
    ) -> Result<Parser<S>, Error> {
        let media = MediaType::parse(content_type)
            .ok_or_else(|| Error::malformed("bad Content-Type parameter", 0))?;
        let env = Envelope::new(select.into(), &limits);
        let mut core = Core {
            sink,
            env,
            out: Collected::default(),
            start: None,
            declared: None,
            root: None,
            current: Current::None,
            part: None,
            att: (String::new(), None, 0),
            attachments: Vec::new(),
            unreferenced: Vec::new(),
            error: None,
            done: false,
            limits,
        };
        let mode = if media.essence.starts_with("multipart/") {
            Mode::Mtom(Box::new(core.mtom(content_type)?))
        } else {
            let v = SoapVersion::from_media_type(&media.essence).ok_or_else(|| {
                let msg = "not an MTOM or SOAP media type";
                Error::new(ErrorKind::Unsupported, msg, 0)
            })?;
            core.declared = Some(v);
            core.env.start(0, Some(v), None);
            Mode::Plain
        };
        Ok(Parser { mode, core })
    }

    /// Feeds the next chunk of the body (any size); `is_last` says no more
    /// follows. Errors are sticky: every later call returns the same one.
    pub fn feed(&mut self, chunk: &[u8], is_last: bool) -> Result<(), Error> {
        if let Some(e) = &self.core.error {
            return Err(e.clone());
        }
        let r = match &mut self.mode {
            Mode::Mtom(mp) => self.core.feed_mtom(mp, chunk, is_last),
            Mode::Plain => self.core.feed_plain(chunk, is_last),
        };
        r.map_err(|e| self.core.fail(e))
    }

    /// Whether the message is complete.
    pub fn is_done(&self) -> bool {
        self.core.done
    }

    /// The multipart parser (MTOM only), e.g. for its buffer statistics.
    pub fn multipart(&self) -> Option<&bulkwire_multipart::Parser> {
        match &self.mode {
            Mode::Mtom(mp) => Some(mp),
            Mode::Plain => None,
        }
    }

    /// The sink, e.g. to read its counters.
    pub fn sink(&self) -> &S {
        &self.core.sink
    }

    /// The parsed message, once [`Parser::feed`] was given the last chunk.
    pub fn finish(self) -> Result<Message<S::Output>, Error> {
        let mut core = self.core;
        if let Some(e) = core.error {
            return Err(e);
        }
        if !core.done {
            let msg = "the message is incomplete (feed was not given is_last)";
            return Err(Error::new(ErrorKind::Truncated, msg, core.env.offset()));
        }
        let version = core.out.version.expect("a complete envelope has a version");
        Ok(Message {
            version,
            root: core.root,
            operation: core.out.operation.take(),
            fields: std::mem::take(&mut core.out.fields),
            binaries: std::mem::take(&mut core.out.binaries),
            includes: std::mem::take(&mut core.out.includes),
            unreferenced: core.unreferenced,
        })
    }
}

impl<S: Sink> Core<S> {
    /// Checks the MTOM `Content-Type` (MTOM §3, RFC 2387 §3) and makes the
    /// multipart parser.
    fn mtom(&mut self, content_type: &str) -> Result<bulkwire_multipart::Parser, Error> {
        let ct = ContentType::parse(content_type)?;
        let unsupported = |msg| Error::new(ErrorKind::Unsupported, msg, 0);
        if ct.subtype != Subtype::Related {
            return Err(unsupported("MTOM needs multipart/related"));
        }
        let xop = |t: &str| t.trim().eq_ignore_ascii_case("application/xop+xml");
        if ct.type_.as_deref().is_some_and(|t| !xop(t)) {
            return Err(unsupported(
                "multipart/related whose type is not application/xop+xml",
            ));
        }
        if let Some(info) = &ct.start_info {
            let v = SoapVersion::from_media_type(info);
            self.declared = Some(v.ok_or_else(|| unsupported("start-info is not a SOAP type"))?);
        }
        if let Some(s) = &ct.start {
            self.start = Some(cid::content_id(s.as_bytes(), self.limits.content_id_len)?);
        }
        let limits = self.limits.multipart.clone();
        Ok(bulkwire_multipart::Parser::new(
            ct.boundary.as_bytes(),
            ct.subtype,
            limits,
        )?)
    }

    fn fail(&mut self, e: Error) -> Error {
        let e = e.in_part(self.part);
        if self.out.open {
            self.out.open = false;
            self.sink.abort();
        }
        self.error = Some(e.clone());
        e
    }

    fn feed_plain(&mut self, chunk: &[u8], is_last: bool) -> Result<(), Error> {
        self.env
            .feed(chunk, is_last, &mut self.sink, &mut self.out)?;
        self.done = self.env.is_done();
        Ok(())
    }

    fn feed_mtom(
        &mut self,
        mp: &mut bulkwire_multipart::Parser,
        mut input: &[u8],
        is_last: bool,
    ) -> Result<(), Error> {
        loop {
            let before = mp.offset();
            let step = mp.step(input, is_last)?;
            let at = before + step.consumed as u64;
            input = &input[step.consumed..];
            match step.event {
                Event::NeedMore => return Ok(()),
                Event::PartStart(p) => self.part_start(&p, at)?,
                Event::Data(d) => self.data(d, at)?,
                Event::PartEnd => self.part_end(at)?,
                Event::End => self.end(at)?,
            }
        }
    }

    fn part_start(&mut self, p: &Part<'_>, at: u64) -> Result<(), Error> {
        self.part = Some(p.index());
        let max = self.limits.content_id_len;
        let cid = match p.content_id() {
            Some(v) => Some(cid::content_id(v, max).map_err(|e| e.with_offset(at))?),
            None => None,
        };
        let is_root = self.root.is_none()
            && match &self.start {
                Some(s) => cid.as_ref() == Some(s),
                None => p.index() == 0,
            };
        if let Some(cte) = p.content_transfer_encoding() {
            let ok = [&b"binary"[..], b"8bit", b"7bit"];
            if !ok.iter().any(|k| cte.eq_ignore_ascii_case(k)) {
                let msg = "a Content-Transfer-Encoding other than binary";
                return Err(Error::new(ErrorKind::Unsupported, msg, at));
            }
        }
        let ct = p
            .content_type()
            .map(|t| String::from_utf8_lossy(t).into_owned());
        if is_root {
            return self.root_start(p.index(), cid, ct, at);
        }
        self.attachment_start(cid, ct, at)
    }

    fn root_start(
        &mut self,
        index: usize,
        cid: Option<String>,
        ct: Option<String>,
        at: u64,
    ) -> Result<(), Error> {
        let unsupported = |msg| Error::new(ErrorKind::Unsupported, msg, at);
        let ct = ct.ok_or_else(|| unsupported("the root part has no Content-Type"))?;
        let media = MediaType::parse(&ct).ok_or_else(|| unsupported("bad root Content-Type"))?;
        if media.essence != "application/xop+xml" {
            return Err(unsupported("the root part is not application/xop+xml"));
        }
        let mut version = self.declared;
        if let Some(t) = media.param("type") {
            let v = SoapVersion::from_media_type(t)
                .ok_or_else(|| unsupported("the root part's type is not a SOAP type"))?;
            if version.is_some_and(|d| d != v) {
                let msg = "the root part's type contradicts start-info";
                return Err(Error::malformed(msg, at));
            }
            version = Some(v);
        }
        if let Some(c) = &cid {
            if self.attachments.iter().any(|a| &a.cid == c) {
                return Err(Error::malformed("duplicate Content-ID", at));
            }
        }
        self.env.start(at, version, cid.clone());
        self.root = Some(RootPart {
            index,
            cid,
            content_type: ct,
        });
        self.current = Current::Root;
        Ok(())
    }

    fn attachment_start(
        &mut self,
        cid: Option<String>,
        ct: Option<String>,
        at: u64,
    ) -> Result<(), Error> {
        let cid = cid.ok_or_else(|| Error::malformed("an attachment has no Content-ID", at))?;
        let root_cid = self.root.as_ref().and_then(|r| r.cid.as_ref());
        if root_cid == Some(&cid) || self.attachments.iter().any(|a| a.cid == cid) {
            return Err(Error::malformed("duplicate Content-ID", at));
        }
        if self.attachments.len() >= self.limits.attachments {
            let lim = self.limits.attachments as u64;
            return Err(Error::limit(LimitKind::Attachments, lim, at));
        }
        let paths = self.paths_of(&cid);
        let info = BinaryInfo {
            index: self.out.binaries.len(),
            cid: Some(&cid),
            content_type: ct.as_deref(),
            paths: &paths,
            paths_final: self.root.is_some(),
        };
        self.sink.begin(&info).map_err(|e| Error::sink(e, at))?;
        self.out.open = true;
        self.attachments.push(Attachment {
            cid: cid.clone(),
            binary: None,
        });
        self.att = (cid, ct, 0);
        self.current = Current::Attachment;
        Ok(())
    }

    /// Paths of the Includes naming `cid` (none before the root is read).
    fn paths_of(&self, cid: &str) -> Vec<String> {
        let inc = self.out.includes.iter().filter(|i| i.cid == cid);
        inc.map(|i| i.path.clone()).collect()
    }

    fn data(&mut self, d: &[u8], at: u64) -> Result<(), Error> {
        match self.current {
            Current::Root => self.env.feed(d, false, &mut self.sink, &mut self.out),
            Current::Attachment => {
                self.att.2 += d.len() as u64;
                self.sink.write(d).map_err(|e| Error::sink(e, at))
            }
            Current::None => Ok(()),
        }
    }

    fn part_end(&mut self, at: u64) -> Result<(), Error> {
        match std::mem::replace(&mut self.current, Current::None) {
            Current::Root => {
                self.env.feed(&[], true, &mut self.sink, &mut self.out)?;
                debug_assert!(self.env.is_done());
            }
            Current::Attachment => {
                let output = self.sink.finish().map_err(|e| Error::sink(e, at))?;
                self.out.open = false;
                let (cid, content_type, len) = std::mem::take(&mut self.att);
                let paths = self.paths_of(&cid);
                let last = self.attachments.last_mut().expect("started");
                last.binary = Some(self.out.binaries.len());
                self.out.binaries.push(Binary {
                    paths,
                    cid: Some(cid),
                    content_type,
                    len,
                    output,
                });
            }
            Current::None => {}
        }
        self.part = None;
        Ok(())
    }

    /// After the close delimiter: the root was there, every Include found
    /// its attachment; paths are filled in for attachments that came
    /// before the root.
    fn end(&mut self, at: u64) -> Result<(), Error> {
        if self.root.is_none() {
            return Err(Error::malformed("no root part (start names no part)", at));
        }
        for inc in &self.out.includes {
            if !self.attachments.iter().any(|a| a.cid == inc.cid) {
                return Err(Error::malformed("an xop:Include names no attachment", at));
            }
        }
        for a in &self.attachments {
            let paths = self.paths_of(&a.cid);
            if paths.is_empty() {
                self.unreferenced.push(a.cid.clone());
            }
            if let Some(i) = a.binary {
                self.out.binaries[i].paths = paths;
            }
        }
        self.done = true;
        Ok(())
    }
}
