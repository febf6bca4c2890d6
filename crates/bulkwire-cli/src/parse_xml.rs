//! `bulkwire parse` for the XML formats: XML-RPC calls and responses
//! (`text/xml` whose root is `methodCall`/`methodResponse`) and SOAP
//! messages, MTOM/XOP (`multipart/related; type="application/xop+xml"`,
//! SOAP MTOM §3) or a bare envelope. Binaries are hashed as they stream
//! through the codecs, never held whole.

use bulkwire_xml::{Token, Tokenizer};
use bulkwire_xmlrpc::{Digested, Message, Response, Sha256Sink, StreamError, Value as Rpc};
use bulkwire_xop::{BinaryInfo, Select, Sink};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::io::{self, Read, Write};

/// What the Content-Type and the first bytes say the body is.
pub enum Format {
    Multipart,
    /// `multipart/related` carrying XOP (MTOM).
    Mtom,
    /// An XML body: XML-RPC or SOAP, decided by its root element.
    Xml,
}

/// Reads the media type (RFC 9110 §8.3.1) and, for `multipart/related`,
/// the `type` parameter (RFC 2387 §3.1, XOP §4.1).
pub fn format_of(content_type: &str) -> Format {
    let lower = content_type.to_ascii_lowercase();
    let media = lower.split(';').next().unwrap_or("").trim();
    if media == "multipart/related" && lower.contains("application/xop+xml") {
        Format::Mtom
    } else if media.starts_with("multipart/") {
        Format::Multipart
    } else {
        Format::Xml
    }
}

/// Longest prefix read to find the root element (a prolog with comments
/// and processing instructions is rarely more than a few hundred bytes).
const SNIFF_LIMIT: usize = 64 * 1024;

/// Reads just enough of `input` to see the root element's local name;
/// returns it with the bytes read so far, to be replayed.
fn sniff_root(input: &mut dyn Read) -> io::Result<(Option<String>, Vec<u8>)> {
    let mut prefix = Vec::new();
    let mut buf = [0u8; 4096];
    while prefix.len() < SNIFF_LIMIT {
        let n = input.read(&mut buf)?;
        prefix.extend_from_slice(&buf[..n]);
        if let Some(root) = root_name(&prefix, n == 0) {
            return Ok((Some(root), prefix));
        }
        if n == 0 {
            break;
        }
    }
    Ok((None, prefix))
}

/// The first start tag's local name, if `prefix` already holds it.
fn root_name(prefix: &[u8], is_last: bool) -> Option<String> {
    let mut tk = Tokenizer::new(bulkwire_xml::Limits::default());
    let mut input = prefix;
    loop {
        let step = tk.step(input, is_last).ok()?;
        input = &input[step.consumed..];
        match step.event {
            Token::Start { name, .. } => {
                let local = name.rsplit(|&b| b == b':').next().unwrap_or(name);
                return Some(String::from_utf8_lossy(local).into_owned());
            }
            Token::NeedMore | Token::Eof => return None,
            _ => {}
        }
    }
}

/// Parses an XML body: XML-RPC when the root is `methodCall` or
/// `methodResponse`, SOAP otherwise (the SOAP codec rejects anything that
/// is not an envelope).
pub fn parse_xml(
    content_type: &str,
    mut input: Box<dyn Read>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let (root, prefix) = sniff_root(&mut input)?;
    let body = io::Cursor::new(prefix).chain(input);
    match root.as_deref() {
        Some("methodCall" | "methodResponse") => parse_xmlrpc(body, out),
        _ => parse_soap(content_type, body, out),
    }
}

/// One JSON object: `{"method","params"}` for a call, `{"params"}` or
/// `{"fault"}` for a response.
fn parse_xmlrpc(body: impl Read, out: &mut dyn Write) -> io::Result<()> {
    let parser =
        bulkwire_xmlrpc::Parser::new(bulkwire_xmlrpc::Limits::default(), Sha256Sink::default());
    let (msg, _) = bulkwire_xmlrpc::parse_read(body, parser).map_err(|e| match e {
        StreamError::Parse(e) => io::Error::from(e),
        StreamError::Source(e) => e,
    })?;
    let v = match msg {
        Message::Call(c) => json!({
            "method": c.method,
            "params": c.params.iter().map(rpc_json).collect::<Vec<_>>(),
        }),
        Message::Response(Response::Params(p)) => json!({
            "params": p.iter().map(rpc_json).collect::<Vec<_>>(),
        }),
        Message::Response(Response::Fault(f)) => json!({
            "fault": {"faultCode": f.code, "faultString": f.string},
        }),
    };
    serde_json::to_writer(&mut *out, &v)?;
    out.write_all(b"\n")
}

/// XML-RPC values as JSON; the types JSON lacks are tagged objects so
/// nothing is lost (`{"base64": {"size","sha256"}}`, `{"i8": n}`,
/// `{"dateTime.iso8601": "…"}`, `{"double": x}` for non-finite values).
fn rpc_json(v: &Rpc<Digested>) -> Value {
    match v {
        Rpc::Int(i) => json!(i),
        Rpc::I8(i) => json!({ "i8": i }),
        Rpc::Bool(b) => json!(b),
        Rpc::String(s) => json!(s),
        Rpc::Double(d) if d.is_finite() => json!(d),
        Rpc::Double(d) => json!({ "double": d.to_string() }),
        Rpc::DateTime(d) => json!({ "dateTime.iso8601": d.as_str() }),
        Rpc::Base64(b) => json!({ "base64": {"size": b.len, "sha256": hex::encode(b.sha256)} }),
        Rpc::Struct(members) => {
            // Document order is kept; a repeated member keeps its first value,
            // as `Value::get` reads it.
            let mut m = Map::new();
            for (k, v) in members {
                m.entry(k.clone()).or_insert_with(|| rpc_json(v));
            }
            Value::Object(m)
        }
        Rpc::Array(items) => Value::Array(items.iter().map(rpc_json).collect()),
        Rpc::Nil => Value::Null,
    }
}

/// MTOM or a bare SOAP envelope: one JSON object per binary (as for
/// multipart parts, plus the element paths that include it), then one
/// `{"root","includes","unreferenced"}` object.
pub fn parse_soap(content_type: &str, body: impl Read, out: &mut dyn Write) -> io::Result<()> {
    let parser = bulkwire_xop::Parser::new(
        content_type,
        Select::new(),
        bulkwire_xop::Limits::default(),
        HashSink::default(),
    )
    .map_err(io::Error::from)?;
    let msg = bulkwire_xop::read::parse_reader(body, parser)?;
    for (index, b) in msg.binaries.iter().enumerate() {
        let (size, sha) = &b.output;
        let v = json!({
            "index": index,
            "name": null,
            "filename": null,
            "content_type": b.content_type,
            "content_id": b.cid,
            "headers": null,
            "size": size,
            "sha256": sha,
            "paths": b.paths,
        });
        serde_json::to_writer(&mut *out, &v)?;
        out.write_all(b"\n")?;
    }
    let root = json!({
        "soap_version": match msg.version {
            bulkwire_xop::SoapVersion::Soap11 => "1.1",
            bulkwire_xop::SoapVersion::Soap12 => "1.2",
        },
        "index": msg.root.as_ref().map(|r| r.index),
        "content_id": msg.root.as_ref().and_then(|r| r.cid.clone()),
        "content_type": msg.root.as_ref().map(|r| r.content_type.clone()),
        "operation": msg.operation.as_ref().map(|q| json!({"ns": q.ns, "name": q.local})),
    });
    let includes: Vec<Value> = msg
        .includes
        .iter()
        .map(|i| json!({"path": i.path, "cid": i.cid}))
        .collect();
    let v = json!({"root": root, "includes": includes, "unreferenced": msg.unreferenced});
    serde_json::to_writer(&mut *out, &v)?;
    out.write_all(b"\n")
}

/// Hashes each binary; its output is `(size, sha256 hex)`.
#[derive(Default)]
struct HashSink {
    hash: Sha256,
    size: u64,
}

impl Sink for HashSink {
    type Output = (u64, String);

    fn begin(&mut self, _: &BinaryInfo<'_>) -> io::Result<()> {
        self.hash = Sha256::new();
        self.size = 0;
        Ok(())
    }

    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        self.hash.update(data);
        self.size += data.len() as u64;
        Ok(())
    }

    fn finish(&mut self) -> io::Result<(u64, String)> {
        let hash = std::mem::take(&mut self.hash);
        Ok((self.size, hex::encode(hash.finalize())))
    }
}

/// The one JSON object written to stderr when an XML codec fails, with the
/// same keys as the multipart one.
pub fn error_json(e: &io::Error) -> Option<Value> {
    let inner = e.get_ref()?;
    if let Some(x) = inner.downcast_ref::<bulkwire_xop::Error>() {
        return Some(json!({
            "error": x.kind().as_str(),
            "message": x.to_string(),
            "offset": x.offset(),
            "part": x.part(),
            "limit": x.limit_exceeded().map(|(l, v)| json!({"name": l.name(), "value": v})),
        }));
    }
    let x = inner.downcast_ref::<bulkwire_xmlrpc::Error>()?;
    Some(json!({
        "error": x.kind().as_str(),
        "message": x.to_string(),
        "offset": x.offset(),
        "part": null,
        "limit": x.limit_exceeded().map(|(l, v)| json!({"name": l.name(), "value": v})),
    }))
}
