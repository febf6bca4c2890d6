//! Telling a fault from a success: an answer can say "failed" in its body
//! while its status says 200. XML-RPC sends every fault with HTTP 200
//! (XML-RPC specification, "Response format": a `<methodResponse>` holding
//! a `<fault>` whose struct has an int `faultCode`); SOAP sends a `Fault`
//! as the one child of `Body` (SOAP 1.1 §4.4 with a `faultcode`, SOAP 1.2
//! Part 1 §5.4 with `Code/Value`), usually with a 4xx or 5xx status.
//!
//! The load loop keeps only the first [`PEEK_BYTES`] bytes of an answer
//! whose type is XML or `multipart/related` (MTOM), as they stream by
//! ([`Peek`]); nothing else is buffered, and answers of other types cost
//! nothing. [`classify`] then walks the tags of that prefix. A fault must
//! therefore begin within the first [`PEEK_BYTES`] bytes, which it does for
//! both formats (it is the first thing in the body, or follows the SOAP
//! header).
//!
//! The walk knows only what these two formats need: element names with
//! their namespace prefix dropped, comments, processing instructions,
//! CDATA and quoted attribute values skipped. It is not a validating
//! parser: it finds a fault in a well-formed answer and never reports one
//! in an answer whose root is neither `methodResponse` nor `Envelope`.

use std::fmt;

/// Bytes of an answer's body kept to look for a fault.
pub(crate) const PEEK_BYTES: usize = 16 * 1024;

/// Longest fault code kept (`xmlrpc:` and a 64-bit integer fit; a longer
/// SOAP code is cut at a character boundary).
const CODE_BYTES: usize = 32;

/// A fault code as the summary shows it: `xmlrpc:403`, `soap:Client`,
/// `soap:Sender`, or `…:?` when the fault carried no readable code. Kept
/// inline (`Copy`), so counting faults allocates nothing per request.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fault {
    text: [u8; CODE_BYTES],
    len: u8,
}

impl Fault {
    /// `format:code`, the code cut to fit [`CODE_BYTES`].
    fn new(format: &str, code: &str) -> Fault {
        let mut text = [0u8; CODE_BYTES];
        let mut len = 0;
        for piece in [format, ":", code] {
            for c in piece.chars() {
                let n = c.len_utf8();
                if len + n > CODE_BYTES {
                    break;
                }
                c.encode_utf8(&mut text[len..len + n]);
                len += n;
            }
        }
        Fault {
            text,
            len: len as u8,
        }
    }

    /// The code as text.
    pub fn as_str(&self) -> &str {
        // Built only from whole UTF-8 characters in `new`.
        std::str::from_utf8(&self.text[..usize::from(self.len)]).unwrap_or("?")
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fault({})", self.as_str())
    }
}

/// Whether an answer of this `Content-Type` is looked into: XML media
/// types (RFC 7303: `text/xml`, `application/xml`, any `+xml`, which
/// includes SOAP 1.2's `application/soap+xml`) and `multipart/related`
/// (an MTOM answer's root part is the SOAP envelope).
pub(crate) fn worth_a_look(content_type: &[u8]) -> bool {
    let essence = content_type
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default();
    let essence = essence.trim_ascii();
    let is = |t: &[u8]| essence.eq_ignore_ascii_case(t);
    is(b"text/xml")
        || is(b"application/xml")
        || is(b"multipart/related")
        || (essence.len() > 4 && essence[essence.len() - 4..].eq_ignore_ascii_case(b"+xml"))
}

/// The first [`PEEK_BYTES`] of one answer's body, gathered as it streams
/// by; the buffer is kept from answer to answer on a connection.
#[derive(Default)]
pub(crate) struct Peek {
    buf: Vec<u8>,
    /// The answer is `multipart/related`: the envelope follows the root
    /// part's header block.
    multipart: bool,
}

impl Peek {
    /// Starts a new answer.
    pub(crate) fn start(&mut self, multipart: bool) {
        self.buf.clear();
        self.multipart = multipart;
    }

    /// Keeps what still fits of `data`.
    pub(crate) fn feed(&mut self, data: &[u8]) {
        let room = PEEK_BYTES.saturating_sub(self.buf.len());
        self.buf.extend_from_slice(&data[..data.len().min(room)]);
    }

    /// The fault in what was kept, if any.
    pub(crate) fn fault(&self) -> Option<Fault> {
        let body = if self.multipart {
            let at = memchr::memmem::find(&self.buf, b"\r\n\r\n")?;
            &self.buf[at + 4..]
        } else {
            &self.buf[..]
        };
        classify(body)
    }
}

/// The fault an XML-RPC or SOAP answer body (or its beginning) carries;
/// `None` for a success or anything else.
pub fn classify(body: &[u8]) -> Option<Fault> {
    let mut tags = Tags { buf: body, at: 0 };
    let root = tags.next_open()?;
    match local(root.name) {
        b"methodResponse" => {
            let first = tags.next()?;
            (first.kind == Kind::Open && first.name == b"fault").then(|| xmlrpc_code(&mut tags))
        }
        b"Envelope" => {
            // Header, if any, then Body; its first child element is the Fault.
            let body = tags.find_open(b"Body")?;
            if body.kind != Kind::Open {
                return None;
            }
            let first = tags.next()?;
            (first.kind != Kind::Close && local(first.name) == b"Fault")
                .then(|| soap_code(&mut tags))
        }
        _ => None,
    }
}

/// `faultCode`'s int in the fault's struct (`xmlrpc:?` if unreadable).
fn xmlrpc_code(tags: &mut Tags<'_>) -> Fault {
    let code = (|| {
        loop {
            let t = tags.next_open()?;
            if t.name == b"name" && tags.text()?.trim_ascii() == b"faultCode" {
                break;
            }
        }
        let value = tags.next_open()?;
        if value.name != b"value" {
            return None;
        }
        // `<int>`, `<i4>` or `<i8>`; an untyped value is its own text.
        let text = match tags.text()?.trim_ascii() {
            b"" => {
                tags.next_open()?;
                tags.text()?
            }
            t => t,
        };
        let n: i64 = std::str::from_utf8(text.trim_ascii()).ok()?.parse().ok()?;
        Some(n.to_string())
    })();
    Fault::new("xmlrpc", code.as_deref().unwrap_or("?"))
}

/// SOAP 1.1 `faultcode` or SOAP 1.2 `Code/Value`, prefix dropped
/// (`soap:?` if unreadable).
fn soap_code(tags: &mut Tags<'_>) -> Fault {
    let code = (|| loop {
        let t = tags.next()?;
        match (t.kind, local(t.name)) {
            (Kind::Close, b"Fault") => return None,
            (Kind::Open, b"faultcode") => break tags.text(),
            (Kind::Open, b"Code") => {
                let v = tags.next_open()?;
                if local(v.name) == b"Value" {
                    break tags.text();
                }
            }
            _ => {}
        }
    })();
    let code = code.map(|c| local(c.trim_ascii()));
    let code = code.and_then(|c| std::str::from_utf8(c).ok());
    Fault::new("soap", code.filter(|c| !c.is_empty()).unwrap_or("?"))
}

/// A name without its namespace prefix.
fn local(name: &[u8]) -> &[u8] {
    match memchr::memrchr(b':', name) {
        Some(i) => &name[i + 1..],
        None => name,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Open,
    Close,
    /// `<x/>`.
    Empty,
}

#[derive(Debug, Clone, Copy)]
struct Tag<'a> {
    name: &'a [u8],
    kind: Kind,
}

/// Element tags of `buf`, in order, from `at`.
struct Tags<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Tags<'a> {
    /// The next element tag; `None` at the end of what was kept.
    fn next(&mut self) -> Option<Tag<'a>> {
        loop {
            let rest = &self.buf[self.at..];
            let lt = memchr::memchr(b'<', rest)?;
            let tag = &rest[lt..];
            let skip_to = |end: &[u8]| memchr::memmem::find(tag, end).map(|i| i + end.len());
            let markup = if tag.starts_with(b"<!--") {
                skip_to(b"-->")
            } else if tag.starts_with(b"<![CDATA[") {
                skip_to(b"]]>")
            } else if tag.starts_with(b"<?") {
                skip_to(b"?>")
            } else if tag.starts_with(b"<!") {
                skip_to(b">")
            } else {
                None
            };
            if let Some(len) = markup {
                self.at += lt + len;
                continue;
            }
            if tag.starts_with(b"<!") || tag.starts_with(b"<?") {
                return None;
            }
            let len = tag_len(tag)?;
            self.at += lt + len;
            return Some(element(&tag[..len]));
        }
    }

    /// The next opening (or empty) tag.
    fn next_open(&mut self) -> Option<Tag<'a>> {
        loop {
            let t = self.next()?;
            if t.kind != Kind::Close {
                return Some(t);
            }
        }
    }

    /// The next opening (or empty) tag with this local name.
    fn find_open(&mut self, name: &[u8]) -> Option<Tag<'a>> {
        loop {
            let t = self.next_open()?;
            if local(t.name) == name {
                return Some(t);
            }
        }
    }

    /// Character data up to the next tag (entities left as they are).
    fn text(&mut self) -> Option<&'a [u8]> {
        let rest = &self.buf[self.at..];
        let lt = memchr::memchr(b'<', rest)?;
        Some(&rest[..lt])
    }
}

/// Length of the tag at the start of `tag` through its `>`, skipping `>`
/// inside quoted attribute values; `None` if it is cut off.
fn tag_len(tag: &[u8]) -> Option<usize> {
    let mut quote = None;
    for (i, &b) in tag.iter().enumerate() {
        match (quote, b) {
            (None, b'"' | b'\'') => quote = Some(b),
            (Some(q), _) if b == q => quote = None,
            (None, b'>') => return Some(i + 1),
            _ => {}
        }
    }
    None
}

/// A whole tag `<…>` as name and kind.
fn element(tag: &[u8]) -> Tag<'_> {
    let inner = &tag[1..tag.len() - 1];
    let (kind, inner) = match inner {
        [b'/', rest @ ..] => (Kind::Close, rest),
        [rest @ .., b'/'] => (Kind::Empty, rest),
        _ => (Kind::Open, inner),
    };
    let end = inner
        .iter()
        .position(|b| b.is_ascii_whitespace() || *b == b'/')
        .unwrap_or(inner.len());
    Tag {
        name: &inner[..end],
        kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: &str) -> Option<String> {
        classify(body.as_bytes()).map(|f| f.to_string())
    }

    const RPC_FAULT: &str = "<?xml version=\"1.0\"?>\n<methodResponse>\n  <fault>\n    <value><struct>\
        <member><name>faultString</name><value><string>Incorrect username or password.</string></value></member>\
        <member><name>faultCode</name><value><int>403</int></value></member>\
        </struct></value>\n  </fault>\n</methodResponse>\n";

    #[test]
    fn xmlrpc_faults_and_their_codes() {
        assert_eq!(code(RPC_FAULT).as_deref(), Some("xmlrpc:403"));
        // As bulkwire's server writes it: no prolog, no whitespace.
        let tight = "<methodResponse><fault><value><struct><member><name>faultCode</name>\
                     <value><i4>-32700</i4></value></member></struct></value></fault></methodResponse>";
        assert_eq!(code(tight).as_deref(), Some("xmlrpc:-32700"));
        let untyped = "<methodResponse><fault><value><struct><member><name> faultCode </name>\
                       <value> 7 </value></member></struct></value></fault></methodResponse>";
        assert_eq!(code(untyped).as_deref(), Some("xmlrpc:7"));
        let no_code =
            "<methodResponse><fault><value><struct></struct></value></fault></methodResponse>";
        assert_eq!(code(no_code).as_deref(), Some("xmlrpc:?"));
    }

    #[test]
    fn xmlrpc_successes_are_not_faults() {
        let ok = "<?xml version=\"1.0\"?><!-- <fault> --><methodResponse><params><param>\
                  <value><struct><member><name>fault</name><value><string>&lt;fault&gt;</string>\
                  </value></member></struct></value></param></params></methodResponse>";
        assert_eq!(code(ok), None);
        assert_eq!(code("<methodCall><fault/></methodCall>"), None);
        assert_eq!(code("not xml at all"), None);
        assert_eq!(code(""), None);
    }

    #[test]
    fn soap_11_and_12_faults_and_their_codes() {
        let v11 = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<env:Envelope \
                   xmlns:env=\"http://schemas.xmlsoap.org/soap/envelope/\"><env:Body><env:Fault>\
                   <faultcode>env:Client</faultcode><faultstring>no</faultstring>\
                   <detail><m:uploadFault xmlns:m=\"urn:x\"><kind>auth</kind></m:uploadFault></detail>\
                   </env:Fault></env:Body></env:Envelope>\n";
        assert_eq!(code(v11).as_deref(), Some("soap:Client"));
        let v12 = "<s:Envelope xmlns:s=\"http://www.w3.org/2003/05/soap-envelope\">\
                   <s:Header a=\"x>y\"><h:t xmlns:h=\"urn:h\"><![CDATA[<s:Body>]]></h:t></s:Header>\n\
                   <s:Body>\n <s:Fault><s:Code><s:Value>s:Sender</s:Value><s:Subcode>\
                   <s:Value>m:Auth</s:Value></s:Subcode></s:Code><s:Reason><s:Text xml:lang=\"en\">no\
                   </s:Text></s:Reason></s:Fault></s:Body></s:Envelope>";
        assert_eq!(code(v12).as_deref(), Some("soap:Sender"));
        let bare =
            "<Envelope><Body><Fault><faultcode>Server.Busy</faultcode></Fault></Body></Envelope>";
        assert_eq!(code(bare).as_deref(), Some("soap:Server.Busy"));
        let no_code = "<e:Envelope xmlns:e=\"u\"><e:Body><e:Fault/></e:Body></e:Envelope>";
        assert_eq!(code(no_code).as_deref(), Some("soap:?"));
    }

    #[test]
    fn soap_successes_are_not_faults() {
        let ok = "<env:Envelope xmlns:env=\"u\"><env:Body><m:uploadResponse xmlns:m=\"v\">\
                  <id>1</id><m:Fault>inside a response</m:Fault></m:uploadResponse></env:Body></env:Envelope>";
        assert_eq!(code(ok), None);
        let lookalike = "<env:Envelope xmlns:env=\"u\"><env:Body><m:uploadFault xmlns:m=\"v\"/>\
                         </env:Body></env:Envelope>";
        assert_eq!(code(lookalike), None);
    }

    #[test]
    fn a_cut_off_answer_gives_what_it_can() {
        // The fault is there, its code is past the end of what was kept.
        let cut = &RPC_FAULT[..RPC_FAULT.find("faultCode").unwrap()];
        assert_eq!(code(cut).as_deref(), Some("xmlrpc:?"));
        assert_eq!(code("<methodResponse><fau"), None);
        assert_eq!(code("<env:Envelope><env:Bo"), None);
    }

    #[test]
    fn peek_keeps_a_bounded_prefix_and_skips_mime_headers() {
        let mut p = Peek::default();
        p.start(false);
        p.feed(RPC_FAULT.as_bytes());
        p.feed(&vec![b' '; PEEK_BYTES * 2]);
        assert_eq!(p.buf.len(), PEEK_BYTES);
        assert_eq!(
            p.fault().map(|f| f.to_string()).as_deref(),
            Some("xmlrpc:403")
        );
        p.start(true);
        assert!(p.buf.is_empty());
        let mime = "--b\r\nContent-ID: <root@x>\r\nContent-Type: application/xop+xml\r\n\r\n\
                    <e:Envelope xmlns:e=\"u\"><e:Body><e:Fault><faultcode>e:Server</faultcode>\
                    </e:Fault></e:Body></e:Envelope>\r\n--b--\r\n";
        p.feed(mime.as_bytes());
        assert_eq!(
            p.fault().map(|f| f.to_string()).as_deref(),
            Some("soap:Server")
        );
    }

    #[test]
    fn xml_types_are_looked_into() {
        for t in [
            "text/xml; charset=UTF-8",
            "application/soap+xml;charset=utf-8;action=\"x\"",
            "Application/XML",
            "multipart/related; type=\"application/xop+xml\"",
        ] {
            assert!(worth_a_look(t.as_bytes()), "{t}");
        }
        for t in ["application/json", "text/plain", "", "+xml", "text/xmlx"] {
            assert!(!worth_a_look(t.as_bytes()), "{t}");
        }
    }

    #[test]
    fn long_codes_are_cut_on_a_character_boundary() {
        let f = Fault::new("soap", &"é".repeat(40));
        assert_eq!(f.as_str(), format!("soap:{}", "é".repeat(13)));
        assert!(f.as_str().len() <= CODE_BYTES);
    }
}
