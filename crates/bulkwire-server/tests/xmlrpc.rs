//! `POST /xmlrpc` end to end: every method, WordPress's fault codes,
//! multicall and its cap, limits, storage failure, and a 64 MiB upload in
//! bounded memory. Each upload is downloaded back from the returned URL
//! and compared by SHA-256; after each failure nothing is listed and no
//! file is left. Credentials are checked before the bits reach storage:
//! a counting blob store shows that a bad login never opens a file.

mod common;

use bulkwire_server::handlers::xmlrpc::BAD_LOGIN as BAD_LOGIN_FAULT;
use bulkwire_server::store::{BlobStore, BlobWriter, BoxFut, Lease};
use bulkwire_server::Limits;
use bulkwire_xmlrpc::{
    encode_call, parse, EncodeOptions, Fault, LineEnd, MemorySink, Message, Response, Value,
};
use common::*;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

type V = Value<Vec<u8>>;

const USER: &str = "alice";
const PASS: &str = "wonder:land";

/// Counts files begun and fails them on demand.
struct Counting {
    begun: AtomicUsize,
    fail: AtomicBool,
}

impl StoreHook for Counting {
    fn begin<'a>(
        &'a self,
        inner: &'a dyn BlobStore,
        id: &'a str,
        lease: Arc<Lease>,
    ) -> BoxFut<'a, io::Result<Box<dyn BlobWriter>>> {
        self.begun.fetch_add(1, SeqCst);
        if self.fail.load(SeqCst) {
            return Box::pin(async { Err(io::Error::other("injected failure")) });
        }
        inner.begin(id, lease)
    }
}

struct Rpc {
    h: Harness,
    blobs: Arc<Hooked<Counting>>,
}

async fn start_rpc(limits: Limits) -> Rpc {
    let dir = tempfile::tempdir().unwrap();
    let blobs = Arc::new(Hooked {
        inner: common::blob_store(dir.path()),
        hook: Counting {
            begun: AtomicUsize::new(0),
            fail: AtomicBool::new(false),
        },
    });
    let meta = common::meta_store(dir.path()).await;
    let h = start_with(dir, limits, blobs.clone(), meta).await;
    Rpc { h, blobs }
}

impl Rpc {
    async fn post(&self, body: Vec<u8>) -> (u16, Result<V, Fault>) {
        let r = self
            .h
            .http
            .post(self.h.url("/xmlrpc"))
            .header("content-type", "text/xml")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let ct = r.headers()["content-type"].to_str().unwrap().to_string();
        assert_eq!(ct, "text/xml; charset=UTF-8");
        let bytes = r.bytes().await.unwrap();
        let (msg, _) = parse(&bytes, Default::default(), MemorySink::new(1 << 20)).unwrap();
        let Some(resp) = msg.into_response() else {
            panic!("not a response")
        };
        match resp {
            Response::Params(mut p) => {
                assert_eq!(p.len(), 1);
                (status, Ok(p.remove(0)))
            }
            Response::Fault(f) => (status, Err(f)),
        }
    }

    async fn call(&self, method: &str, params: &[V]) -> Result<V, Fault> {
        let body = encode_call(method, params, &EncodeOptions::default()).unwrap();
        let (status, r) = self.post(body.to_vec().unwrap()).await;
        assert_eq!(status, 200, "{method}: {r:?}");
        r
    }

    async fn fault(&self, method: &str, params: &[V]) -> Fault {
        self.call(method, params).await.expect_err("a fault")
    }

    /// Downloads a media struct's `url` (absolute) with Basic auth.
    async fn fetch(&self, m: &V) -> Vec<u8> {
        let url = m.get("url").and_then(Value::as_str).unwrap();
        assert!(url.starts_with(&self.h.url("/v1/media/")), "{url}");
        let r = self.h.http.get(url).basic_auth(USER, Some(PASS));
        let r = r.send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap().to_vec()
    }

    fn begun(&self) -> usize {
        self.blobs.hook.begun.load(SeqCst)
    }
}

fn s(v: &str) -> V {
    Value::String(v.into())
}

fn creds() -> Vec<V> {
    vec![Value::Int(1), s(USER), s(PASS)]
}

fn upload_params(user: &str, pass: &str, name: &str, ct: &str, data: Vec<u8>) -> Vec<V> {
    vec![
        Value::Int(1),
        s(user),
        s(pass),
        Value::Struct(vec![
            ("name".into(), s(name)),
            ("type".into(), s(ct)),
            ("bits".into(), Value::Base64(data)),
            ("overwrite".into(), Value::Bool(true)),
        ]),
    ]
}

fn str_of<'a>(v: &'a V, k: &str) -> &'a str {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{k} in {v:?}"))
}

#[tokio::test]
async fn upload_file_and_new_media_object_round_trip() {
    let r = start_rpc(Limits::default()).await;
    let data = payload(1_000_003, 1);
    let p = upload_params(USER, PASS, "photo.jpg", "image/jpeg", data.clone());
    let m = r.call("wp.uploadFile", &p).await.unwrap();
    assert_eq!(str_of(&m, "file"), "photo.jpg");
    assert_eq!(str_of(&m, "type"), "image/jpeg");
    assert_eq!(str_of(&m, "id"), str_of(&m, "attachment_id"));
    assert_eq!(sha256(&r.fetch(&m).await), sha256(&data));
    let md = m.get("metadata").unwrap();
    assert_eq!(str_of(md, "sha256"), sha256(&data));

    // metaWeblog.newMediaObject, the base64 wrapped at 76 columns as
    // Python's xmlrpc.client sends it, and an empty file.
    let data2 = payload(70_001, 2);
    let p = upload_params(USER, PASS, "doc.pdf", "application/pdf", data2.clone());
    let opts = EncodeOptions {
        wrap: Some(LineEnd::Lf),
        ..EncodeOptions::default()
    };
    let body = encode_call("metaWeblog.newMediaObject", &p, &opts).unwrap();
    let (status, m2) = r.post(body.to_vec().unwrap()).await;
    let m2 = m2.unwrap();
    assert_eq!(status, 200);
    assert_eq!(sha256(&r.fetch(&m2).await), sha256(&data2));
    let p = upload_params(USER, PASS, "empty.txt", "text/plain", Vec::new());
    let m3 = r.call("wp.uploadFile", &p).await.unwrap();
    assert_eq!(r.fetch(&m3).await, b"");

    assert_eq!(r.h.list_all().await.len(), 3);
    assert_eq!(
        r.h.srv
            .state
            .metrics
            .uploads("xmlrpc", bulkwire_server::metrics::Outcome::Ok),
        3
    );
}

#[tokio::test]
async fn get_media_item_and_library() {
    let r = start_rpc(Limits::default()).await;
    let mut ids = Vec::new();
    for (i, (name, ct)) in [
        ("a.png", "image/png"),
        ("b.txt", "text/plain"),
        ("c.gif", "image/gif"),
    ]
    .iter()
    .enumerate()
    {
        let p = upload_params(USER, PASS, name, ct, payload(1000 + i, i as u64));
        let m = r.call("wp.uploadFile", &p).await.unwrap();
        ids.push(str_of(&m, "id").to_string());
    }
    let mut p = creds();
    p.push(s(&ids[1]));
    let item = r.call("wp.getMediaItem", &p).await.unwrap();
    assert_eq!(str_of(&item, "attachment_id"), ids[1]);
    assert_eq!(str_of(&item, "title"), "b.txt");
    assert!(matches!(
        item.get("date_created_gmt"),
        Some(Value::DateTime(_))
    ));
    assert_eq!(r.fetch(&item).await, payload(1001, 1));

    let lib = |f: Vec<(&str, V)>| {
        let mut p = creds();
        p.push(Value::Struct(
            f.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        ));
        p
    };
    let ids_of = |v: V| -> Vec<String> {
        let Value::Array(a) = v else { panic!("array") };
        a.iter().map(|m| str_of(m, "id").to_string()).collect()
    };
    let all = r.call("wp.getMediaLibrary", &lib(vec![])).await.unwrap();
    assert_eq!(ids_of(all), ids);
    let images = lib(vec![("mime_type", s("image"))]);
    let images = r.call("wp.getMediaLibrary", &images).await.unwrap();
    assert_eq!(ids_of(images), [ids[0].clone(), ids[2].clone()]);
    let page = lib(vec![("number", Value::Int(1)), ("offset", Value::Int(1))]);
    let page = r.call("wp.getMediaLibrary", &page).await.unwrap();
    assert_eq!(ids_of(page), [ids[1].clone()]);

    // Missing media is WordPress's 404.
    let mut p = creds();
    p.push(s(&"0".repeat(32)));
    let f = r.fault("wp.getMediaItem", &p).await;
    assert_eq!((f.code, f.string.as_str()), (404, "Invalid attachment ID."));
    let mut p = creds();
    p.push(Value::Int(12));
    assert_eq!(r.fault("wp.getMediaItem", &p).await.code, 404);
}

#[tokio::test]
async fn introspection() {
    let r = start_rpc(Limits::default()).await;
    let want = [
        "wp.uploadFile",
        "metaWeblog.newMediaObject",
        "wp.getMediaItem",
        "wp.getMediaLibrary",
        "wp.deletePost",
        "mt.supportedMethods",
        "system.listMethods",
        "system.methodHelp",
        "system.methodSignature",
        "system.multicall",
    ];
    let list = r.call("system.listMethods", &[]).await.unwrap();
    let Value::Array(names) = &list else { panic!() };
    let names: Vec<&str> = names.iter().filter_map(Value::as_str).collect();
    assert_eq!(names, want);
    assert_eq!(r.call("mt.supportedMethods", &[]).await.unwrap(), list);
    let help = r.call("system.methodHelp", &[s("wp.uploadFile")]).await;
    assert!(help.unwrap().as_str().unwrap().contains("bits"));
    let sig = r
        .call("system.methodSignature", &[s("wp.getMediaItem")])
        .await
        .unwrap();
    let one = |t: &[&str]| Value::Array(vec![Value::Array(t.iter().map(|x| s(x)).collect())]);
    assert_eq!(sig, one(&["struct", "int", "string", "string", "string"]));
    let f = r.fault("system.methodHelp", &[s("nope")]).await;
    assert_eq!(f.code, -32601);
    assert_eq!(r.fault("system.methodSignature", &[]).await.code, -32602);
}

#[tokio::test]
async fn faults_have_wordpress_codes_and_leave_nothing() {
    let r = start_rpc(Limits::default()).await;
    let data = payload(300_000, 3);

    // Bad login: 403, and not one file opened.
    for (u, p) in [(USER, "wrong"), ("mallory", PASS)] {
        let f = r
            .fault(
                "wp.uploadFile",
                &upload_params(u, p, "x.bin", "x/y", data.clone()),
            )
            .await;
        assert_eq!((f.code, f.string.as_str()), (403, BAD_LOGIN_FAULT));
    }
    let mut p = vec![Value::Int(1), s(USER), s("bad")];
    p.push(s(&"0".repeat(32)));
    assert_eq!(r.fault("wp.getMediaItem", &p).await.code, 403);
    let mut p = vec![Value::Int(1), s(USER), s("bad")];
    p.push(Value::Struct(vec![]));
    assert_eq!(r.fault("wp.getMediaLibrary", &p).await.code, 403);
    assert_eq!(r.begun(), 0, "a bad login opened a file");

    // Unknown method, with WordPress's text.
    let f = r.fault("wp.deleteEverything", &creds()).await;
    assert_eq!(f.code, -32601);
    assert_eq!(
        f.string,
        "server error. requested method wp.deleteEverything does not exist."
    );

    // Not well-formed, not a call, wrong parameters.
    for bad in [
        &b"<methodCall><methodName>system.listMethods</methodName><params>"[..],
        b"<methodCall><methodName>system.listMethods</methodName></methodCal>",
        b"<!DOCTYPE x [<!ENTITY a 'b'>]><methodCall/>",
        b"",
    ] {
        let (status, f) = r.post(bad.to_vec()).await;
        assert_eq!((status, f.unwrap_err().code), (200, -32700), "{bad:?}");
    }
    let resp = b"<methodResponse><params><param><value>1</value></param></params></methodResponse>";
    let (_, f) = r.post(resp.to_vec()).await;
    assert_eq!(f.unwrap_err().code, -32600);
    let mut short = upload_params(USER, PASS, "x", "x/y", data.clone());
    short.truncate(3);
    assert_eq!(r.fault("wp.uploadFile", &short).await.code, -32602);
    let mut no_bits = upload_params(USER, PASS, "x", "x/y", Vec::new());
    if let Value::Struct(m) = &mut no_bits[3] {
        m[2].1 = s("not base64");
    }
    assert_eq!(r.fault("wp.uploadFile", &no_bits).await.code, -32602);
    let unnamed = upload_params(USER, PASS, "", "x/y", data.clone());
    assert_eq!(r.fault("wp.uploadFile", &unnamed).await.code, -32602);
    // base64 anywhere but params[3].bits, in an upload or not.
    let mut p = upload_params(USER, PASS, "x", "x/y", data.clone());
    p[1] = Value::Base64(b"alice".to_vec());
    assert_eq!(r.fault("wp.uploadFile", &p).await.code, -32602);
    let mut p = creds();
    p.push(Value::Struct(vec![(
        "bits".into(),
        Value::Base64(data.clone()),
    )]));
    assert_eq!(r.fault("wp.getMediaLibrary", &p).await.code, -32602);
    // Two bits members: the second is refused, the first file removed.
    let mut p = upload_params(USER, PASS, "x", "x/y", data.clone());
    if let Value::Struct(m) = &mut p[3] {
        m.push(("bits".into(), Value::Base64(b"again".to_vec())));
    }
    assert_eq!(r.fault("wp.uploadFile", &p).await.code, -32602);

    // GET is not XML-RPC.
    let g = r.h.http.get(r.h.url("/xmlrpc")).send().await.unwrap();
    assert_eq!(g.status(), 405);
    r.h.assert_empty().await;
}

#[tokio::test]
async fn multicall_runs_each_call_and_is_capped() {
    let r = start_rpc(Limits {
        xmlrpc_multicall: 4,
        ..Limits::default()
    })
    .await;
    let data = payload(5000, 4);
    let m = r
        .call(
            "wp.uploadFile",
            &upload_params(USER, PASS, "m.bin", "x/y", data.clone()),
        )
        .await
        .unwrap();
    let id = str_of(&m, "id").to_string();
    let one = |name: &str, params: Vec<V>| {
        Value::Struct(vec![
            ("methodName".into(), s(name)),
            ("params".into(), Value::Array(params)),
        ])
    };
    let mut item = creds();
    item.push(s(&id));
    let mut bad_login = vec![Value::Int(1), s(USER), s("x")];
    bad_login.push(s(&id));
    let calls = vec![
        one("system.listMethods", vec![]),
        one("wp.getMediaItem", item),
        one("wp.getMediaItem", bad_login),
        one("nope", vec![]),
    ];
    let out = r
        .call("system.multicall", &[Value::Array(calls.clone())])
        .await
        .unwrap();
    let Value::Array(out) = out else { panic!() };
    assert_eq!(out.len(), 4);
    let Value::Array(first) = &out[0] else {
        panic!()
    };
    assert_eq!(first.len(), 1);
    let Value::Array(second) = &out[1] else {
        panic!()
    };
    assert_eq!(str_of(&second[0], "id"), id);
    assert_eq!(out[2].get("faultCode"), Some(&Value::Int(403)));
    assert_eq!(out[3].get("faultCode"), Some(&Value::Int(-32601)));

    // Nested multicall and uploads inside are faults of their own.
    let nested = vec![
        one("system.multicall", vec![Value::Array(vec![])]),
        one("wp.uploadFile", creds()),
    ];
    let out = r.call("system.multicall", &[Value::Array(nested)]).await;
    let Value::Array(out) = out.unwrap() else {
        panic!()
    };
    assert_eq!(out[0].get("faultCode"), Some(&Value::Int(-32800)));
    assert_eq!(out[1].get("faultCode"), Some(&Value::Int(-32602)));

    // Over the cap: one fault naming the limit, nothing run.
    let mut five = calls;
    five.push(one("system.listMethods", vec![]));
    let f = r.fault("system.multicall", &[Value::Array(five)]).await;
    assert_eq!(f.code, 500);
    assert!(f.string.contains("xmlrpc_multicall = 4"), "{}", f.string);
    assert_eq!(r.fault("system.multicall", &[s("x")]).await.code, -32602);
}

#[tokio::test]
async fn limits_are_faults_over_http_200_and_leave_nothing() {
    let r = start_rpc(Limits {
        file_bytes: 100_000,
        body_bytes: 1_000_000,
        field_bytes: 64,
        ..Limits::default()
    })
    .await;
    let big = upload_params(USER, PASS, "big.bin", "x/y", payload(100_001, 5));
    let f = r.fault("wp.uploadFile", &big).await;
    assert_eq!(f.code, 500);
    assert!(f.string.contains("file_bytes = 100000"), "{}", f.string);
    assert!(r.begun() > 0, "the file was begun, then removed");

    let body = upload_params(USER, PASS, "b.bin", "x/y", payload(900_000, 6));
    let f = r.fault("wp.uploadFile", &body).await;
    assert_eq!(f.code, 500);
    assert!(f.string.contains("body_bytes = 1000000"), "{}", f.string);

    let long = upload_params(USER, PASS, &"n".repeat(65), "x/y", payload(10, 7));
    let f = r.fault("wp.uploadFile", &long).await;
    assert_eq!(f.code, 500);
    assert!(f.string.contains("field_bytes = 64"), "{}", f.string);
    r.h.assert_empty().await;
    // Still serving.
    let ok = upload_params(USER, PASS, "ok.bin", "x/y", payload(99_999, 8));
    let m = r.call("wp.uploadFile", &ok).await.unwrap();
    assert_eq!(r.fetch(&m).await, payload(99_999, 8));
}

#[tokio::test]
async fn storage_failure_is_fault_500() {
    let r = start_rpc(Limits::default()).await;
    r.blobs.hook.fail.store(true, SeqCst);
    let p = upload_params(USER, PASS, "x.bin", "x/y", payload(10_000, 9));
    let f = r.fault("wp.uploadFile", &p).await;
    assert_eq!(f.code, 500);
    assert!(f.string.contains("injected failure"), "{}", f.string);
    r.h.assert_empty().await;
    assert_eq!(
        r.h.srv
            .state
            .metrics
            .uploads("xmlrpc", bulkwire_server::metrics::Outcome::Failed),
        1
    );
}

/// The body of a `wp.uploadFile` call, generated as it is sent: the
/// payload is never held whole by the client either.
fn streamed_upload(total: usize, seed: u64) -> (reqwest::Body, u64, String) {
    use base64::Engine;
    use futures_util::StreamExt;
    use sha2::{Digest, Sha256};
    const BLOCK: usize = 3 * 21_845; // ~64 KiB, a multiple of 3
    let head = format!(
        "<?xml version=\"1.0\"?><methodCall><methodName>wp.uploadFile</methodName><params>\
         <param><value><int>1</int></value></param>\
         <param><value><string>{USER}</string></value></param>\
         <param><value><string>{PASS}</string></value></param>\
         <param><value><struct><member><name>name</name><value><string>big.bin</string></value></member>\
         <member><name>bits</name><value><base64>"
    );
    let tail = "</base64></value></member></struct></value></param></params></methodCall>";
    let mut hasher = Sha256::new();
    let blocks = total.div_ceil(BLOCK);
    for i in 0..blocks {
        let n = BLOCK.min(total - i * BLOCK);
        hasher.update(payload(n, seed + i as u64));
    }
    let b64_len = total.div_ceil(3) * 4;
    let len = (head.len() + b64_len + tail.len()) as u64;
    let body = futures_util::stream::iter(0..blocks + 2).map(move |i| {
        let b: Vec<u8> = if i == 0 {
            head.clone().into_bytes()
        } else if i == blocks + 1 {
            tail.as_bytes().to_vec()
        } else {
            let n = BLOCK.min(total - (i - 1) * BLOCK);
            let data = payload(n, seed + (i - 1) as u64);
            base64::engine::general_purpose::STANDARD
                .encode(data)
                .into_bytes()
        };
        Ok::<_, io::Error>(b)
    });
    (
        reqwest::Body::wrap_stream(body),
        len,
        hex::encode(hasher.finalize()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_upload_streams_in_bounded_memory() {
    let r = start_rpc(Limits::default()).await;
    let total = 64 << 20;
    let (body, len, want) = streamed_upload(total, 11);
    let resp =
        r.h.http
            .post(r.h.url("/xmlrpc"))
            .header("content-type", "text/xml")
            .header("content-length", len)
            .body(body)
            .send()
            .await
            .unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.bytes().await.unwrap();
    let (msg, _) = parse(&bytes, Default::default(), MemorySink::new(0)).unwrap();
    let Message::Response(Response::Params(p)) = msg else {
        panic!("{}", String::from_utf8_lossy(&bytes))
    };
    let m = &p[0];
    assert_eq!(str_of(m.get("metadata").unwrap(), "sha256"), want);
    let got = r.fetch(m).await;
    assert_eq!(got.len(), total);
    assert_eq!(sha256(&got), want);
    // 64 MiB went through; the codec held at most a few KiB of XML and
    // the staging one slice's decoded bytes.
    let parser: u64 = metric_value(&r.h, "bulkwire_parser_buffer_peak_bytes ");
    let staging: u64 = metric_value(&r.h, "bulkwire_staging_buffer_peak_bytes ");
    assert!(parser < 4096, "parser peak {parser}");
    assert!(
        staging > 0 && staging <= 96 * 1024,
        "staging peak {staging}"
    );
}

fn metric_value(h: &Harness, name: &str) -> u64 {
    let line = h.metric(name);
    line.trim_start_matches(name).trim().parse().unwrap()
}

#[tokio::test]
async fn call_without_memory_for_its_reserve_is_503() {
    // Room for the shared upload reserve, not for XML-RPC's extra 848 KiB.
    let budget = common::upload_reserve(&Limits::default()) + 100 * 1024;
    let r = start_rpc(Limits {
        memory_budget: budget,
        ..Limits::default()
    })
    .await;
    let p = upload_params("alice", "wonder:land", "a.bin", "x/y", vec![1; 10]);
    let body = encode_call("wp.uploadFile", &p, &EncodeOptions::default());
    let (status, f) = r.post(body.unwrap().to_vec().unwrap()).await;
    let f = f.unwrap_err();
    assert_eq!((status, f.code), (503, 503));
    assert!(f.string.contains("memory_budget"), "{}", f.string);
    // A call that uploads nothing takes no reservation: it is answered.
    let body = encode_call("system.listMethods", &[] as &[V], &EncodeOptions::default());
    let (status, v) = r.post(body.unwrap().to_vec().unwrap()).await;
    assert_eq!(status, 200);
    assert!(v.is_ok(), "{v:?}");
}

#[test]
fn rerun_on_shared_stores() {
    common::rerun_on_shared_stores(&[]);
}
