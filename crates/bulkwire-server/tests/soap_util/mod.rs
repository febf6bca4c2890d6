//! SOAP test helpers shared by tests/soap.rs and tests/soap_clients.rs:
//! envelopes to send, and a small DOM-free reading of the XML the server
//! answers with, through `bulkwire_xml::Tokenizer` (so every response is
//! also checked to be well-formed and namespace-correct).
#![allow(dead_code)]

use base64::Engine;
use bulkwire_xml::{Limits, Token, Tokenizer};

pub const NS: &str = "urn:bulkwire:media";
pub const SOAP11: &str = "http://schemas.xmlsoap.org/soap/envelope/";
pub const SOAP12: &str = "http://www.w3.org/2003/05/soap-envelope";

/// One element: namespace, local name, attributes (namespace, local,
/// value), its own text (children's text excluded) and depth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct El {
    pub ns: Option<String>,
    pub local: String,
    pub attrs: Vec<(Option<String>, String, String)>,
    pub text: String,
    pub depth: usize,
}

impl El {
    pub fn attr(&self, local: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(_, l, _)| l == local)
            .map(|(_, _, v)| v.as_str())
    }
}

fn s(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).expect("UTF-8")
}

/// Every element of a document, in document order; panics on XML that is
/// not well-formed.
pub fn parse(doc: &[u8]) -> Vec<El> {
    let mut tk = Tokenizer::new(Limits::default());
    let mut out: Vec<El> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    let mut input = doc;
    loop {
        let step = tk.step(input, true).expect("well-formed XML");
        input = &input[step.consumed..];
        match step.event {
            Token::Start {
                name, attrs, ns, ..
            } => {
                let (uri, local) = ns.resolve(name);
                let attrs = attrs
                    .iter()
                    .map(|a| {
                        let (u, l) = ns.resolve_attr(a.name);
                        (u.map(s), s(l), s(a.value))
                    })
                    .collect();
                open.push(out.len());
                out.push(El {
                    ns: uri.map(s),
                    local: s(local),
                    attrs,
                    text: String::new(),
                    depth: open.len() - 1,
                });
            }
            Token::End { .. } => {
                open.pop();
            }
            Token::Text(t) => {
                if let Some(&i) = open.last() {
                    out[i].text.push_str(&String::from_utf8_lossy(t));
                }
            }
            Token::Eof => return out,
            Token::NeedMore => panic!("incomplete document"),
            Token::Decl { .. } => {}
        }
    }
}

/// The first element with this namespace and local name.
pub fn find<'a>(els: &'a [El], ns: Option<&str>, local: &str) -> Option<&'a El> {
    els.iter()
        .find(|e| e.ns.as_deref() == ns && e.local == local)
}

/// The text of the unqualified child `local` (of `uploadResponse`, of
/// `uploadFault`).
pub fn text<'a>(els: &'a [El], local: &str) -> Option<&'a str> {
    find(els, None, local).map(|e| e.text.as_str())
}

/// What `uploadResponse` said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    pub id: String,
    /// Absent for a credential without `read` (no link is handed out).
    pub url: Option<String>,
    pub size: u64,
    pub sha256: String,
}

/// Reads an `uploadResponse` envelope of the given SOAP version.
pub fn uploaded(doc: &[u8], env_ns: &str) -> Uploaded {
    let els = parse(doc);
    assert_eq!(els[0].ns.as_deref(), Some(env_ns), "{}", s(doc));
    assert_eq!(els[0].local, "Envelope");
    let r = find(&els, Some(NS), "uploadResponse").expect("uploadResponse");
    assert_eq!(r.depth, 2, "uploadResponse is the Body's child");
    Uploaded {
        id: text(&els, "id").expect("id").to_owned(),
        url: text(&els, "url").map(str::to_owned),
        size: text(&els, "size").expect("size").parse().unwrap(),
        sha256: text(&els, "sha256").expect("sha256").to_owned(),
    }
}

/// A fault as (fault code, reason, detail kind, detail limit name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub code: String,
    pub reason: String,
    pub kind: String,
    pub limit: Option<String>,
}

/// Reads a SOAP 1.1 or 1.2 fault envelope.
pub fn fault(doc: &[u8]) -> Fault {
    let els = parse(doc);
    let env = els[0].ns.clone().expect("envelope namespace");
    assert!(find(&els, Some(&env), "Fault").is_some(), "{}", s(doc));
    let (code, reason) = if env == SOAP11 {
        (
            text(&els, "faultcode").unwrap().to_owned(),
            text(&els, "faultstring").unwrap().to_owned(),
        )
    } else {
        assert_eq!(env, SOAP12);
        let code = find(&els, Some(SOAP12), "Value").unwrap().text.clone();
        let reason = find(&els, Some(SOAP12), "Text").unwrap().text.clone();
        (code, reason)
    };
    assert!(find(&els, Some(NS), "uploadFault").is_some(), "{}", s(doc));
    Fault {
        code,
        reason,
        kind: text(&els, "kind").unwrap().to_owned(),
        limit: text(&els, "limit").map(str::to_owned),
    }
}

/// An `upload` envelope whose `data` element holds `data_content` (inline
/// base64 or an `xop:Include`).
pub fn envelope(
    env_ns: &str,
    name: &str,
    content_type: Option<&str>,
    data_content: &str,
) -> String {
    let ct = content_type
        .map(|c| format!("<contentType>{c}</contentType>"))
        .unwrap_or_default();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<s:Envelope xmlns:s=\"{env_ns}\"><s:Header/>\
         <s:Body><m:upload xmlns:m=\"{NS}\"><name>{name}</name>{ct}<data>{data_content}</data>\
         </m:upload></s:Body></s:Envelope>"
    )
}

/// Base64 with 76-column CRLF line breaks, as MIME writers do.
pub fn base64_wrapped(data: &[u8]) -> String {
    let b = base64::engine::general_purpose::STANDARD.encode(data);
    let lines: Vec<&str> = b
        .as_bytes()
        .chunks(76)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    lines.join("\r\n")
}

/// `Authorization: Basic` for NAME:PASSWORD.
pub fn basic(user_pass: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(user_pass)
    )
}
