//! Interoperability with CPython's `xmlrpc.client` and `xmlrpc.server`
//! (stdlib only, run as `python3` subprocesses): bodies Python writes parse
//! to what Python itself reads from them; bodies we write, Python reads as
//! the values we encoded; and a call to a real `SimpleXMLRPCServer` on
//! loopback round-trips. Values are compared through one JSON form both
//! sides print (see `to_json` and `PY_JSON`). Skipped, with a message, only
//! when `python3` is not installed.

use bulkwire_runtimes::{need, Runtime};
use bulkwire_xmlrpc::testutil::{random_splits, run_split};
use bulkwire_xmlrpc::{
    encode_call, encode_fault, encode_response, parse_read_with, DateTime, EncodeOptions, Fault,
    Limits, LineEnd, Message, Parser, Response, Sha256Sink, Value,
};
use serde_json::{json, Value as Json};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};

type V = Value<Vec<u8>>;

/// Python's half of the JSON form: bools, ints, strings, None as
/// themselves; doubles by their IEEE bits (exact); DateTime, Binary and
/// struct tagged; faults as {"fault": …}.
const PY_JSON: &str = r#"
import json, struct, sys, xmlrpc.client as xc
def j(v):
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)): return v
    if isinstance(v, float): return {"double": struct.unpack('>Q', struct.pack('>d', v))[0]}
    if isinstance(v, xc.DateTime): return {"datetime": v.value}
    if isinstance(v, xc.Binary): return {"base64": v.data.hex()}
    if isinstance(v, (bytes, bytearray)): return {"base64": bytes(v).hex()}
    if isinstance(v, dict): return {"struct": [[k, j(x)] for k, x in v.items()]}
    if isinstance(v, (list, tuple)): return [j(x) for x in v]
    raise TypeError(type(v))
def loaded(body):
    try:
        params, method = xc.loads(body)
        return {"method": method, "params": j(params)}
    except xc.Fault as f:
        return {"fault": {"code": f.faultCode, "string": f.faultString}}
"#;

fn to_json(v: &V) -> Json {
    match v {
        V::Int(i) => json!(i),
        V::I8(i) => json!(i),
        V::Bool(b) => json!(b),
        V::String(s) => json!(s),
        V::Double(d) => json!({ "double": d.to_bits() }),
        V::DateTime(d) => json!({ "datetime": d.as_str() }),
        V::Base64(b) => json!({ "base64": hex::encode(b) }),
        V::Struct(m) => {
            json!({ "struct": m.iter().map(|(k, v)| json!([k, to_json(v)])).collect::<Vec<_>>() })
        }
        V::Array(a) => Json::Array(a.iter().map(to_json).collect()),
        V::Nil => Json::Null,
    }
}

fn message_json(m: &Message<Vec<u8>>) -> Json {
    match m {
        Message::Call(c) => {
            json!({"method": c.method, "params": c.params.iter().map(to_json).collect::<Vec<_>>()})
        }
        Message::Response(Response::Params(p)) => {
            json!({"method": null, "params": p.iter().map(to_json).collect::<Vec<_>>()})
        }
        Message::Response(Response::Fault(f)) => {
            json!({"fault": {"code": f.code, "string": f.string}})
        }
    }
}

/// Runs `script` (after `PY_JSON`) with `stdin`, returns its stdout as JSON.
fn python(script: &str, stdin: &str) -> Json {
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(format!("{PY_JSON}\n{script}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("python prints JSON")
}

fn uploaded_file() -> Vec<u8> {
    (0..5000u32).map(|i| (i * 131 + i / 7) as u8).collect()
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[test]
fn python_bodies_parse_to_what_python_reads() {
    need(Runtime::Python);
    let script = r#"
from xmlrpc.client import Binary, DateTime, Fault, dumps
data = bytes((i * 131 + i // 7) % 256 for i in range(5000))
bodies = [
    dumps((1, 'admin', 'secret', {'name': 'a.bin', 'type': 'application/octet-stream',
           'bits': Binary(data), 'overwrite': True}), 'wp.uploadFile'),
    dumps((None, [1, 2.5, 'x<&>y', {'a': {'b': [None, False, {}]}}], DateTime('20240101T12:34:56'),
           -2**31, 2**31 - 1, 'é☃😀', '', 1e300, -0.0, 5e-324, 'line\r\nbreak\ttab'), 'test.types',
          allow_none=True),
    dumps(({'ok': True, 'list': [Binary(b''), Binary(b'\x00')]},), methodresponse=True),
    dumps(Fault(403, 'Incorrect username or password.')),
    dumps(Fault(-32601, 'server error. requested method x not found <&>')),
    dumps((), 'system.listMethods'),
]
print(json.dumps([{"body": b, "expected": loaded(b)} for b in bodies]))
"#;
    let cases = python(script, "");
    let cases = cases.as_array().unwrap();
    assert_eq!(cases.len(), 6);
    for (i, case) in cases.iter().enumerate() {
        let body = case["body"].as_str().unwrap().as_bytes();
        let whole = run_split(&Limits::default(), body, &[]);
        for seed in 1..=20 {
            let splits = random_splits(body.len(), 100, seed);
            assert_eq!(
                run_split(&Limits::default(), body, &splits),
                whole,
                "case {i}"
            );
        }
        let msg = whole
            .message
            .unwrap_or_else(|| panic!("case {i}: {:?}", whole.error));
        assert_eq!(message_json(&msg), case["expected"], "case {i}");
    }
    // The upload's bits arrived intact (wrapped at 76 columns by Python).
    let body = cases[0]["body"].as_str().unwrap();
    assert!(body.lines().any(|l| l.len() == 76), "Python wraps base64");
    let msg = run_split(&Limits::default(), body.as_bytes(), &[])
        .message
        .unwrap();
    let call = msg.into_call().unwrap();
    assert_eq!(
        call.params[3].get("bits"),
        Some(&V::Base64(uploaded_file()))
    );
}

fn our_values() -> Vec<V> {
    vec![
        V::Int(-7),
        V::I8(9_000_000_000),
        V::Bool(false),
        V::String("a<b>&c\r\nd\u{e9}\u{1F600}".into()),
        V::String(String::new()),
        V::Double(-1.25e-7),
        V::Double(1e300),
        V::DateTime(DateTime::parse("19980717T14:08:55").unwrap()),
        V::Base64(uploaded_file()),
        V::Nil,
        V::Struct(vec![
            (
                "outer".into(),
                V::Struct(vec![("inner".into(), V::Array(vec![V::Nil, V::Int(1)]))]),
            ),
            ("bits".into(), V::Base64(vec![0, 255])),
        ]),
        V::Array(vec![]),
    ]
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[test]
fn python_reads_what_we_encode() {
    need(Runtime::Python);
    let values = our_values();
    let mut bodies = Vec::new();
    let mut expected = Vec::new();
    for wrap in [None, Some(LineEnd::Lf), Some(LineEnd::CrLf)] {
        let opts = EncodeOptions {
            wrap,
            ..Default::default()
        };
        let call = encode_call("wp.uploadFile", &values, &opts).unwrap();
        bodies.push(call.to_vec().unwrap());
        expected.push(json!({"method": "wp.uploadFile", "params": values.iter().map(to_json).collect::<Vec<_>>()}));
        let resp = encode_response(&values[10], &opts).unwrap();
        bodies.push(resp.to_vec().unwrap());
        expected.push(json!({"method": null, "params": [to_json(&values[10])]}));
    }
    bodies.push(encode_fault(&Fault::new(
        Fault::FORBIDDEN,
        "Incorrect <username> & password.",
    )));
    expected.push(json!({"fault": {"code": 403, "string": "Incorrect <username> & password."}}));
    let input: Vec<String> = bodies
        .iter()
        .map(|b| String::from_utf8(b.clone()).unwrap())
        .collect();
    let script = "print(json.dumps([loaded(b) for b in json.load(sys.stdin)]))";
    let got = python(script, &serde_json::to_string(&input).unwrap());
    assert_eq!(got, Json::Array(expected));
}

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const SERVER: &str = r#"
import hashlib
from xmlrpc.server import SimpleXMLRPCServer
from xmlrpc.client import Binary, Fault
srv = SimpleXMLRPCServer(('127.0.0.1', 0), allow_none=True, logRequests=False)
def echo(*a): return list(a)
def upload(blog_id, user, password, f):
    if password != 'secret': raise Fault(403, 'Incorrect username or password.')
    d = f['bits'].data
    return {'file': f['name'], 'len': len(d), 'sha256': hashlib.sha256(d).hexdigest(), 'head': Binary(d[:10])}
srv.register_function(echo, 'echo')
srv.register_function(upload, 'wp.uploadFile')
print(srv.server_address[1], flush=True)
srv.serve_forever()
"#;

fn start_server() -> (Server, u16) {
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(SERVER)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().expect("server prints its port");
    (Server(child), port)
}

/// POSTs `params` as a call over loopback and parses the response as it
/// streams from the socket, hashing base64 values.
fn post(port: u16, method: &str, params: &[V]) -> Message<bulkwire_xmlrpc::Digested> {
    let opts = EncodeOptions {
        wrap: Some(LineEnd::Lf),
        ..Default::default()
    };
    let body = encode_call(method, params, &opts).unwrap();
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let head = format!(
        "POST /RPC2 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: text/xml\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut w = std::io::BufWriter::new(&mut sock);
    w.write_all(head.as_bytes()).unwrap();
    assert_eq!(body.write_to(&mut w).unwrap(), body.len());
    w.flush().unwrap();
    drop(w);
    let mut r = BufReader::new(sock);
    let mut status = String::new();
    r.read_line(&mut status).unwrap();
    assert!(status.contains(" 200 "), "{status}");
    let mut len = None;
    loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = Some(v.trim().parse::<u64>().unwrap());
            }
        }
    }
    let body = r.take(len.expect("Content-Length"));
    let parser = Parser::new(Limits::default(), Sha256Sink::default());
    let (msg, _) = parse_read_with(body, parser, 1500).unwrap();
    msg
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[test]
fn simple_xmlrpc_server_over_loopback() {
    need(Runtime::Python);
    let (_server, port) = start_server();
    use sha2::Digest;
    let file: Vec<u8> = (0..1_000_000u32).map(|i| (i ^ (i >> 8)) as u8).collect();
    let upload = |password: &str| {
        vec![
            V::Int(1),
            V::String("admin".into()),
            V::String(password.into()),
            V::Struct(vec![
                ("name".into(), V::String("big.bin".into())),
                ("type".into(), V::String("application/octet-stream".into())),
                ("bits".into(), V::Base64(file.clone())),
                ("overwrite".into(), V::Bool(true)),
            ]),
        ]
    };
    let Message::Response(Response::Params(p)) = post(port, "wp.uploadFile", &upload("secret"))
    else {
        panic!("params")
    };
    let r = &p[0];
    let sha = hex::encode(sha2::Sha256::digest(&file));
    assert_eq!(r.get("len"), Some(&Value::Int(1_000_000)));
    assert_eq!(r.get("sha256").and_then(Value::as_str), Some(sha.as_str()));
    assert_eq!(r.get("file").and_then(Value::as_str), Some("big.bin"));
    let head = r.get("head").and_then(Value::as_base64).unwrap();
    assert_eq!(
        (head.len, head.sha256),
        (10, <[u8; 32]>::from(sha2::Sha256::digest(&file[..10])))
    );

    let fault = post(port, "wp.uploadFile", &upload("wrong"));
    assert_eq!(
        fault,
        Message::Response(Response::Fault(Fault::new(
            403,
            "Incorrect username or password."
        )))
    );
    let Message::Response(Response::Fault(f)) = post(port, "no.such", &[]) else {
        panic!()
    };
    assert!(f.string.contains("no.such"), "{f:?}");

    // Echo: every type comes back (an i8 that fits comes back as int).
    let values: Vec<V> = our_values()
        .into_iter()
        .filter(|v| !matches!(v, V::I8(_) | V::String(_)))
        .chain([V::String("a<b>&c\u{e9}".into()), V::I8(42)])
        .collect();
    let Message::Response(Response::Params(p)) = post(port, "echo", &values) else {
        panic!()
    };
    let hashed: Vec<Value<bulkwire_xmlrpc::Digested>> = values
        .iter()
        .cloned()
        .map(|v| {
            v.map_base64(&mut |b: Vec<u8>| bulkwire_xmlrpc::Digested {
                len: b.len() as u64,
                sha256: sha2::Sha256::digest(&b).into(),
            })
        })
        .map(|v| match v {
            Value::I8(i) => Value::Int(i as i32),
            v => v,
        })
        .collect();
    assert_eq!(p, vec![Value::Array(hashed)]);
}
