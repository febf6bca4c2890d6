//! The `xmlrpc` scenario: WordPress's media upload,
//! `wp.uploadFile(blog_id, username, password, {name, type, bits})`
//! (<http://xmlrpc.com/spec.md>; WordPress `wp_xmlrpc_server::mw_newMediaObject`).
//!
//! The file's base64 text does not vary, so it is encoded once (SIMD,
//! `bulkwire-xml`'s encoder) into one shared `Bytes`, a third larger than
//! the file; the XML around it comes from `bulkwire_xmlrpc::encode_call`
//! with a sentinel for the name, cut into static pieces. A request is those
//! pieces, the escaped name, and the shared base64 text: nothing large is
//! copied or encoded per request.

use super::slot::{sample, NameSlot, SENTINEL};
use super::{Payload, Scenario};
use crate::error::{Error, Result};
use crate::pattern::{Pattern, Vars};
use bulkwire_xml::base64::{encoded_len, Encoder, LineEnd};
use bulkwire_xmlrpc::{encode_call, EncodeOptions, Value};
use bytes::Bytes;
use std::convert::Infallible;

/// The method called, unless set otherwise.
pub const UPLOAD_METHOD: &str = "wp.uploadFile";

/// What one upload call carries.
#[derive(Debug, Clone)]
pub struct UploadCall {
    /// `wp.uploadFile` or `metaWeblog.newMediaObject`.
    pub method: String,
    pub blog_id: i32,
    pub username: String,
    pub password: String,
    /// The `name` member; may use `{seq}` and `{uuid}`.
    pub name: Pattern,
    /// The `type` member.
    pub content_type: String,
    /// The `bits` member: the file, read once.
    pub data: Bytes,
    /// Wrap the base64 text at 76 columns (Python's `xmlrpc.client` does,
    /// with LF), or not (the default; parsers strip white space).
    pub wrap: Option<LineEnd>,
}

impl UploadCall {
    /// `wp.uploadFile` on blog 1, no wrapping.
    pub fn new(username: &str, password: &str, name: Pattern, data: Bytes) -> UploadCall {
        UploadCall {
            method: UPLOAD_METHOD.into(),
            blog_id: 1,
            username: username.into(),
            password: password.into(),
            name,
            content_type: "application/octet-stream".into(),
            data,
            wrap: None,
        }
    }

    /// The call's parameters with `name` and `bits`, as `encode_call`
    /// takes them (for tests: the reference encoding of one request).
    pub fn params<B>(&self, name: &str, bits: B) -> Vec<Value<B>> {
        vec![
            Value::Int(self.blog_id),
            Value::String(self.username.clone()),
            Value::String(self.password.clone()),
            Value::Struct(vec![
                ("name".into(), Value::String(name.into())),
                ("type".into(), Value::String(self.content_type.clone())),
                ("bits".into(), Value::Base64(bits)),
            ]),
        ]
    }

    /// Encoding options matching [`UploadCall::wrap`].
    pub fn options(&self) -> EncodeOptions {
        EncodeOptions {
            wrap: self.wrap,
            ..EncodeOptions::default()
        }
    }
}

/// The XML-RPC upload template.
#[derive(Debug, Clone)]
pub struct XmlRpc {
    slot: NameSlot,
}

impl XmlRpc {
    /// Encodes the call once: the XML around the name and the base64 text.
    pub fn new(call: &UploadCall) -> Result<XmlRpc> {
        let bad = |e: bulkwire_xmlrpc::Error| Error::config(format!("xml-rpc call: {e}"));
        // The name's literal text is checked by the codec once (characters
        // XML cannot carry); variables only ever add digits and hex.
        let check = call.params(&sample(&call.name), Bytes::new());
        encode_call(&call.method, &check, &call.options()).map_err(bad)?;

        let params = call.params(SENTINEL, Bytes::new());
        let text = encode_call(&call.method, &params, &call.options())
            .map_err(bad)?
            .to_vec()
            .map_err(|e| Error::io("xml-rpc call", e))?;
        let text = Bytes::from(text);
        // The empty blob leaves `<base64></base64>`: the shared text goes
        // between. A user name cannot hold it, as `<` is escaped.
        let tag = b"<base64>";
        let at = memchr::memmem::find(&text, tag)
            .ok_or_else(|| Error::config("xml-rpc call without <base64>"))?
            + tag.len();
        let bits = encode_once(&call.data, call.wrap);
        let segments = vec![text.slice(..at), bits, text.slice(at..)];
        Ok(XmlRpc {
            slot: NameSlot::cut(segments, call.name.clone())?,
        })
    }
}

/// The base64 text of `data`, encoded once into one buffer of exactly
/// [`encoded_len`] bytes.
fn encode_once(data: &[u8], wrap: Option<LineEnd>) -> Bytes {
    let mut out = Vec::with_capacity(encoded_len(data.len() as u64, wrap) as usize);
    let mut enc = Encoder::new(wrap);
    let mut sink = |b: &[u8]| {
        out.extend_from_slice(b);
        Ok::<_, Infallible>(())
    };
    let _ = enc.push(data, &mut sink);
    let _ = enc.finish(&mut sink);
    Bytes::from(out)
}

impl Scenario for XmlRpc {
    fn name(&self) -> &str {
        "xmlrpc"
    }

    fn content_type(&self) -> &str {
        "text/xml"
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
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    /// Every request equals what `encode_call` writes for its name.
    #[test]
    fn renders_exactly_what_the_codec_encodes() {
        for wrap in [None, Some(LineEnd::Lf), Some(LineEnd::CrLf)] {
            for n in [0, 1, 2, 3, 57, 100_000] {
                let mut call = UploadCall::new(
                    "ad&min",
                    "p<w>",
                    Pattern::parse("f-{seq} & {uuid}.bin").unwrap(),
                    data(n),
                );
                call.wrap = wrap;
                call.content_type = "image/jpeg".into();
                let s = XmlRpc::new(&call).unwrap();
                for seq in [0, 9, 12345] {
                    let v = vars(seq);
                    let p = s.render(&v).unwrap();
                    let name = call.name.to_string(&v);
                    let params = call.params(&name, call.data.clone());
                    let want = encode_call(&call.method, &params, &call.options()).unwrap();
                    assert_eq!(p.len, want.len(), "{wrap:?} {n}");
                    assert_eq!(p.to_vec(), want.to_vec().unwrap(), "{wrap:?} {n} {seq}");
                }
            }
        }
    }

    #[test]
    fn the_base64_text_is_shared_not_copied() {
        let call = UploadCall::new("u", "p", Pattern::parse("{seq}").unwrap(), data(300_000));
        let s = XmlRpc::new(&call).unwrap();
        let a = s.render(&vars(1)).unwrap();
        let b = s.render(&vars(2)).unwrap();
        let big = |p: &Payload| {
            p.segments
                .iter()
                .find(|s| s.len() >= 400_000)
                .unwrap()
                .as_ptr()
        };
        assert_eq!(big(&a), big(&b));
    }

    #[test]
    fn a_name_xml_cannot_carry_is_refused() {
        let call = UploadCall::new("u", "p", Pattern::parse("a\u{1}").unwrap(), data(3));
        assert_eq!(
            XmlRpc::new(&call).unwrap_err().kind(),
            crate::ErrorKind::Config
        );
    }
}
