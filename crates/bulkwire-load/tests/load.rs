//! End-to-end: the load tool against a recording test server. Bodies are
//! parsed back and compared byte for byte, per-request variation is checked
//! for uniqueness, rates are checked against arrival times, and the
//! coordinated-omission test shows what corrected and uncorrected mean.
//! Two servers stand for two nodes of one service behind no balancer.

mod common;

use bulkwire_load::scenario::Raw;
use bulkwire_load::{
    execute, run_blocking, ErrorKind, Live, Mode, Options, Plan, Report, ScenarioKind, Target,
};
use bytes::Bytes;
use common::{payload_file, sha, Behavior, Reply, TestServer, SOAP12_FAULT, XMLRPC_FAULT_403};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

fn quiet(url: &str, kind: ScenarioKind) -> Options {
    let mut o = Options::new(url, kind);
    o.quiet = true;
    o
}

fn run(o: &Options) -> Report {
    execute(o).unwrap().report
}

#[test]
fn formdata_bodies_are_byte_exact_and_vary_per_request() {
    let server = TestServer::start(Behavior::default());
    let (path, data) = payload_file("photo.jpg", 140_000);
    let mut o = quiet(&server.url("/upload"), ScenarioKind::FormData);
    o.files = vec![path];
    o.filename = Some("img-{uuid}.jpg".into());
    o.content_type = Some("image/jpeg".into());
    o.fields = vec![
        "title=post {seq}".into(),
        "id={uuid}".into(),
        "static=hello".into(),
    ];
    o.connections = Some(4);
    o.requests = Some(200);
    let r = run(&o);
    assert_eq!((r.sent, r.completed, r.ok, r.errors), (200, 200, 200, 0));

    let seen = server.seen();
    assert_eq!(seen.len(), 200);
    let want_sha = sha(&data);
    let mut seqs = Vec::new();
    let mut ids = HashSet::new();
    let mut body_bytes = 0;
    for s in &seen {
        assert_eq!(s.parse_error, None);
        assert_eq!(
            s.content_length,
            Some(s.len),
            "Content-Length matches the body"
        );
        body_bytes += s.len;
        assert_eq!(s.fields.len(), 3);
        assert_eq!(s.field("static"), Some("hello"));
        let title = s.field("title").unwrap();
        seqs.push(title.strip_prefix("post ").unwrap().parse::<u64>().unwrap());
        let id = s.field("id").unwrap();
        assert!(is_uuid_v4(id), "{id}");
        assert!(ids.insert(id.to_owned()), "uuid {id} repeated");
        assert_eq!(s.files.len(), 1);
        let f = &s.files[0];
        assert_eq!(f.field, "file");
        // One {uuid} per request: the filename carries the same one as `id`.
        assert_eq!(f.filename, format!("img-{id}.jpg"));
        assert_eq!(f.content_type.as_deref(), Some("image/jpeg"));
        assert_eq!((f.len, &f.sha256), (data.len() as u64, &want_sha));
        assert_eq!(
            s.sha256,
            sha(&rebuild(s, &data)),
            "byte-exact against Builder"
        );
    }
    seqs.sort_unstable();
    assert_eq!(
        seqs,
        (0..200).collect::<Vec<_>>(),
        "{{seq}} unique and consecutive"
    );
    assert_eq!(r.bytes_sent, body_bytes);
}

/// The body `bulkwire_multipart::Builder` makes from what the server saw,
/// with the same boundary.
fn rebuild(s: &common::Seen, file: &[u8]) -> Vec<u8> {
    let boundary = s.content_type.split("boundary=").nth(1).unwrap();
    let mut b = bulkwire_multipart::Builder::new();
    b.boundary(boundary).unwrap();
    for (k, v) in &s.fields {
        b.text(k, v);
    }
    let f = &s.files[0];
    b.bytes(
        &f.field,
        Some(&f.filename),
        f.content_type.as_deref(),
        file.to_vec(),
    );
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut b.finish().unwrap().into_reader(), &mut out).unwrap();
    out
}

fn is_uuid_v4(s: &str) -> bool {
    let groups: Vec<_> = s.split('-').map(str::len).collect();
    groups == [8, 4, 4, 4, 12]
        && &s[14..15] == "4"
        && s.bytes().all(|c| c == b'-' || c.is_ascii_hexdigit())
}

#[test]
fn raw_scenario_sends_the_file_with_headers_and_auth() {
    let server = TestServer::start(Behavior::default());
    let (path, data) = payload_file("blob.bin", 50_000);
    let mut o = quiet(&server.url("/raw?x=1"), ScenarioKind::Raw);
    o.files = vec![path];
    o.headers = vec!["X-Seq: n{seq}".into()];
    o.user = Some("alice:s3cret".into());
    o.requests = Some(50);
    o.connections = Some(3);
    let r = run(&o);
    assert_eq!(r.ok, 50);
    let seen = server.seen();
    let mut seqs: Vec<u64> = seen
        .iter()
        .map(|s| s.header("x-seq").unwrap()[1..].parse().unwrap())
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..50).collect::<Vec<_>>());
    for s in &seen {
        assert_eq!(s.sha256, sha(&data));
        assert_eq!(s.content_type, "application/octet-stream");
        assert_eq!(s.header("authorization"), Some("Basic YWxpY2U6czNjcmV0"));
    }
}

#[test]
fn errors_are_counted_by_status_and_thresholds_fail() {
    let server = TestServer::start(Behavior {
        fail_every: Some(4),
        ..Behavior::default()
    });
    let mut o = quiet(&server.url("/"), ScenarioKind::Raw);
    o.requests = Some(40);
    o.connections = Some(1);
    o.thresholds = vec!["errors<1%".into(), "errors<=10".into(), "p99<10s".into()];
    let out = execute(&o).unwrap();
    let r = &out.report;
    assert_eq!(r.by_status.get("200"), Some(&30));
    assert_eq!(r.by_status.get("503"), Some(&10));
    assert_eq!(r.errors, 10);
    assert!((r.error_rate - 0.25).abs() < 1e-9);
    let failed: Vec<_> = out.failed.iter().map(|t| t.threshold.as_str()).collect();
    assert_eq!(failed, ["errors<1%"]);
    assert!((out.failed[0].actual - 25.0).abs() < 1e-9);
    assert_eq!(out.failed[0].unit, "%");
    assert_eq!(r.faults, 0);
    assert!(r.by_fault.is_empty());
    let table = bulkwire_load::output::table(r);
    for line in [
        "  status    200: 30 requests (75.0 %), 503: 10 requests (25.0 %)\n",
        "  errors    10 requests (25.000 %): 0 faults, 10 other non-2xx, 0 without an answer\n",
        "  FAIL      errors<1% (actual 25.000 %)\n",
        "  ok        errors<=10 (actual 10.000 requests)\n",
    ] {
        assert!(table.contains(line), "{line}in\n{table}");
    }
    assert!(
        !table.contains("faults    "),
        "no fault line without faults"
    );
}

/// The case: an XML-RPC endpoint that refuses the password answers
/// every call with a `<fault>` over HTTP 200. Every one is an error, with
/// its code, and an error threshold fails.
#[test]
fn xmlrpc_faults_over_200_are_errors_with_their_code() {
    let server = TestServer::start(Behavior {
        reply: Some(XMLRPC_FAULT_403),
        ..Behavior::default()
    });
    let (path, _) = payload_file("fault.jpg", 3_000);
    let mut o = quiet(&server.url("/xmlrpc"), ScenarioKind::Xmlrpc);
    o.files = vec![path];
    o.user = Some("admin:wrong".into());
    o.requests = Some(30);
    o.connections = Some(3);
    o.thresholds = vec!["errors<1%".into()];
    let out = execute(&o).unwrap();
    let r = &out.report;
    assert_eq!((r.completed, r.ok, r.errors, r.faults), (30, 0, 30, 30));
    assert_eq!(r.error_rate, 1.0);
    assert_eq!(r.by_status.get("200"), Some(&30), "the status says 200");
    assert_eq!(r.by_fault.get("xmlrpc:403"), Some(&30));
    assert_eq!(r.by_fault.len(), 1);
    assert_eq!(r.bytes_received, 30 * XMLRPC_FAULT_403.body.len() as u64);
    let failed: Vec<_> = out.failed.iter().map(|t| t.threshold.as_str()).collect();
    assert_eq!(failed, ["errors<1%"]);
    assert_eq!(out.failed[0].actual, 100.0);
    let seen = server.seen();
    assert_eq!(seen.len(), 30);
    let call = seen[0].xml.as_ref().unwrap();
    assert_eq!(
        (call.method.as_str(), call.password.as_deref()),
        ("wp.uploadFile", Some("wrong"))
    );

    let table = bulkwire_load::output::table(r);
    for line in [
        "  faults    xmlrpc:403: 30 requests (100.0 %)\n",
        "  errors    30 requests (100.000 %): 30 faults, 0 other non-2xx, 0 without an answer\n",
    ] {
        assert!(table.contains(line), "{line}in\n{table}");
    }
    let j = serde_json::to_value(r).unwrap();
    assert_eq!(j["by_fault"]["xmlrpc:403"], 30);
    assert_eq!(j["faults"], 30);
}

/// A SOAP 1.2 fault (here with 400) is one error, counted under its status
/// and under its code.
#[test]
fn soap_faults_are_errors_with_their_code() {
    let server = TestServer::start(Behavior {
        reply: Some(SOAP12_FAULT),
        ..Behavior::default()
    });
    let (path, _) = payload_file("fault.bin", 2_000);
    let mut o = quiet(&server.url("/soap"), ScenarioKind::Mtom);
    o.files = vec![path];
    o.requests = Some(12);
    o.connections = Some(2);
    let r = run(&o);
    assert_eq!((r.completed, r.ok, r.errors, r.faults), (12, 0, 12, 12));
    assert_eq!(r.by_status.get("400"), Some(&12));
    assert_eq!(r.by_fault.get("soap:Sender"), Some(&12));
    let table = bulkwire_load::output::table(&r);
    assert!(
        table.contains("12 faults, 0 other non-2xx, 0 without an answer"),
        "a fault with a 400 counts once: {table}"
    );
}

/// XML that is not a fault, and a fault-looking body that is not XML, are
/// successes.
#[test]
fn only_faults_in_xml_answers_count() {
    for (content_type, body) in [
        (
            "text/xml",
            "<methodResponse><params><param><value><string>ok</string></value></param></params></methodResponse>",
        ),
        ("text/plain", XMLRPC_FAULT_403.body),
    ] {
        let server = TestServer::start(Behavior {
            reply: Some(Reply {
                status: 200,
                content_type,
                body,
            }),
            ..Behavior::default()
        });
        let mut o = quiet(&server.url("/"), ScenarioKind::Raw);
        o.requests = Some(5);
        let r = run(&o);
        assert_eq!((r.ok, r.errors, r.faults), (5, 0, 0), "{content_type}");
    }
}

/// `--method PUT` with `{seq}` in the path, as for `PUT /v1/media/{name}`:
/// each request names its own file, and the server sees each name once.
#[test]
fn put_with_seq_and_uuid_in_the_path() {
    let server = TestServer::start(Behavior::default());
    let (path, data) = payload_file("put.bin", 10_000);
    let mut o = quiet(
        &server.url("/v1/media/img-{seq}.bin?id={uuid}"),
        ScenarioKind::Raw,
    );
    o.method = "PUT".into();
    o.files = vec![path];
    o.requests = Some(40);
    o.connections = Some(4);
    let r = run(&o);
    assert_eq!((r.ok, r.method.as_str()), (40, "PUT"));
    let seen = server.seen();
    let mut seqs = Vec::new();
    let mut ids = HashSet::new();
    for s in &seen {
        assert_eq!(s.method, "PUT");
        assert_eq!(s.sha256, sha(&data));
        let (file, id) = s.path.split_once("?id=").unwrap();
        let n = file
            .strip_prefix("/v1/media/img-")
            .unwrap()
            .strip_suffix(".bin")
            .unwrap();
        seqs.push(n.parse::<u64>().unwrap());
        assert!(is_uuid_v4(id), "{id}");
        assert!(ids.insert(id.to_owned()), "uuid {id} repeated");
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (0..40).collect::<Vec<_>>());
    assert!(bulkwire_load::output::table(&r).contains("raw PUT http://"));
}

#[test]
fn a_fixed_path_keeps_its_method() {
    let server = TestServer::start(Behavior::default());
    let mut o = quiet(&server.url("/v1/media/one.bin"), ScenarioKind::Raw);
    o.method = "patch".into();
    o.requests = Some(3);
    assert_eq!(run(&o).ok, 3);
    assert!(server
        .seen()
        .iter()
        .all(|s| s.method == "PATCH" && s.path == "/v1/media/one.bin"));

    for bad in ["HEAD", "GET /", ""] {
        o.method = bad.into();
        let e = execute(&o).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config, "{bad:?}");
    }
}

/// A metrics page without a memory gauge: the run goes on, without memory
/// figures, and says why once.
#[test]
fn watch_metrics_without_a_gauge_warns_and_runs() {
    let server = TestServer::start(Behavior {
        reply: Some(Reply {
            status: 200,
            content_type: "text/plain; version=0.0.4",
            body: "# TYPE http_requests_total counter\nhttp_requests_total 7\n",
        }),
        ..Behavior::default()
    });
    let mut o = quiet(&server.url("/"), ScenarioKind::Raw);
    o.watch_metrics = Some(server.url("/metrics"));
    o.requests = Some(10);
    let r = run(&o);
    assert_eq!(r.ok, 10);
    assert!(r.memory.is_none());
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    let w = &r.warnings[0];
    assert!(w.contains(&server.url("/metrics")), "{w}");
    assert!(w.contains("bulkwire_process_resident_memory_bytes"), "{w}");
    assert!(!bulkwire_load::output::table(&r).contains("  server "));
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["warnings"][0], w.as_str());
}

/// bulkwire's own gauge name is read.
#[test]
fn watch_metrics_reads_bulkwires_gauge() {
    let server = TestServer::start(Behavior {
        reply: Some(Reply {
            status: 200,
            content_type: "text/plain; version=0.0.4",
            body: "# TYPE bulkwire_process_resident_memory_bytes gauge\n\
                   bulkwire_process_resident_memory_bytes 52428800\n",
        }),
        ..Behavior::default()
    });
    let mut o = quiet(&server.url("/"), ScenarioKind::Raw);
    o.watch_metrics = Some(server.url("/metrics"));
    o.requests = Some(10);
    let r = run(&o);
    let m = r.memory.as_ref().expect("memory sampled");
    assert_eq!((m.start_bytes, m.peak_bytes), (52_428_800, 52_428_800));
    assert!(r.warnings.is_empty());
    let j = serde_json::to_value(&r).unwrap();
    assert!(j.get("warnings").is_none());
}

#[test]
fn open_loop_holds_the_rate() {
    let server = TestServer::start(Behavior::default());
    let mut o = quiet(&server.url("/"), ScenarioKind::Raw);
    o.rate = Some(200.0);
    o.duration = Some(Duration::from_secs(2));
    let r = run(&o);
    // Intended times are i/200 s for i < 400: exactly 400 tickets fit.
    assert!((392..=408).contains(&r.sent), "sent {}", r.sent);
    assert_eq!(r.ok, r.sent);
    let mut at: Vec<_> = server.seen().iter().map(|s| s.at).collect();
    assert_eq!(at.len() as u64, r.sent);
    at.sort_unstable();
    let span = at[at.len() - 1].duration_since(at[0]).as_secs_f64();
    assert!((1.85..2.2).contains(&span), "arrivals spread over {span} s");
    // Evenly spaced: each quarter second holds ~50 arrivals.
    let mut per_quarter = [0u32; 8];
    for t in &at {
        let q = (t.duration_since(at[0]).as_secs_f64() / 0.25) as usize;
        per_quarter[q.min(7)] += 1;
    }
    assert!(
        per_quarter.iter().all(|&n| (30..=70).contains(&n)),
        "{per_quarter:?}"
    );
}

/// A server that holds everything arriving in the last second of each five
/// (1 s pause every 5 s), driven at 40 req/s for 10 s: ~80 of 400 requests
/// fall in a pause and wait up to 1 s, so the true p90 is ~500 ms.
fn pausing_run(connections: usize, late_after: Duration) -> Report {
    let server = TestServer::start(Behavior {
        pause: Some((Duration::from_secs(5), Duration::from_secs(1))),
        ..Behavior::default()
    });
    let mut o = quiet(&server.url("/"), ScenarioKind::Raw);
    o.rate = Some(40.0);
    o.duration = Some(Duration::from_secs(10));
    o.connections = Some(connections);
    o.late_after = late_after;
    let r = run(&o);
    eprintln!(
        "{connections} connections: corrected p90 {:.1} ms, uncorrected p90 {:.1} ms, late {}",
        r.corrected.p90_ms, r.uncorrected.p90_ms, r.late.count
    );
    assert_eq!(r.ok, 400);
    r
}

/// Two connections: during a pause both are stuck, so the following ~38
/// requests cannot be sent on time. Measured from their actual send they
/// look fast (the server answers at once after the pause): that is the
/// uncorrected view, what a tool with coordinated omission reports. From
/// their intended time they waited, as real users would have.
#[test]
fn coordinated_omission_is_corrected_when_connections_run_out() {
    let r = pausing_run(2, Duration::from_millis(10));
    assert!(
        r.corrected.p90_ms >= 400.0,
        "corrected p90 {}",
        r.corrected.p90_ms
    );
    assert!(
        r.uncorrected.p90_ms < 100.0,
        "uncorrected p90 {}",
        r.uncorrected.p90_ms
    );
    // The requests stuck behind the pause were sent late, and counted so.
    assert!(r.late.count >= 60, "late {}", r.late.count);
    assert!(r.late.max_ms >= 800.0, "late max {}", r.late.max_ms);
}

/// Enough connections: every request goes out on time and waits at the
/// server, so both views see the pause, and nothing is late. (Late here
/// means over 200 ms: a request stuck behind a pause would be up to 1 s
/// late, while a busy test machine can delay a timer by tens of ms.)
#[test]
fn with_enough_connections_both_views_see_the_pause() {
    let r = pausing_run(64, Duration::from_millis(200));
    assert!(
        r.corrected.p90_ms >= 400.0,
        "corrected p90 {}",
        r.corrected.p90_ms
    );
    assert!(
        r.uncorrected.p90_ms >= 400.0,
        "uncorrected p90 {}",
        r.uncorrected.p90_ms
    );
    assert_eq!(r.late.count, 0, "late max {} ms", r.late.max_ms);
}

#[test]
fn json_and_html_reports_are_written() {
    let server = TestServer::start(Behavior::default());
    let dir = bulkwire_testenv::must(bulkwire_testenv::test_dir("reports"));
    let mut o = quiet(&server.url("/"), ScenarioKind::FormData);
    o.fields = vec!["a={seq}".into()];
    o.rate = Some(100.0);
    o.requests = Some(150);
    o.watch_pid = Some(std::process::id());
    o.json = Some(dir.join("r.json"));
    o.report = Some(dir.join("r.html"));
    let r = run(&o);
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
    assert_eq!(j["sent"], 150);
    assert_eq!(j["mode"], "open");
    assert_eq!(j["by_status"]["200"], 150);
    assert_eq!(j["timeline"].as_array().unwrap().len(), r.timeline.len());
    assert!(r.timeline.len() >= 2, "{:?}", r.timeline);
    let m = r.memory.as_ref().unwrap();
    assert!(
        m.samples.len() >= 5 && m.peak_bytes >= m.start_bytes && m.peak_bytes > 0,
        "{m:?}"
    );
    let html = std::fs::read_to_string(dir.join("r.html")).unwrap();
    assert_eq!(
        html.matches("<svg").count(),
        6,
        "requests/s, statuses, latency over time, percentiles, boxes, memory"
    );
    assert!(html.contains("<h2>Requests per second (by completion second)</h2>\n<svg"));
    assert!(html.contains("<h2>Answers by status and fault</h2>\n<svg"));
    assert!(html.contains(">status 200</text>"));
    assert!(html.contains(">requests/s</text>"));
    assert!(html.contains("<polyline") && html.contains("<rect"));
    assert!(!html.contains("<script"));
    for external in ["src=", "href=", "@import", "url("] {
        assert!(!html.contains(external), "no external assets: {external}");
    }
    // Every axis label is a round value: 1, 2 or 5 times a power of ten
    // times a whole number.
    for label in axis_labels(&html) {
        assert!(is_round(label), "tick {label}");
    }
}

/// The numbers of the axis tick labels (centred or right-aligned text that
/// is only a number).
fn axis_labels(html: &str) -> Vec<f64> {
    let mut out = Vec::new();
    for part in html.split("text-anchor=\"").skip(1) {
        if !(part.starts_with("middle\">") || part.starts_with("end\">")) {
            continue;
        }
        let text = &part[part.find('>').unwrap() + 1..part.find("</text>").unwrap()];
        if let Ok(v) = text.parse::<f64>() {
            out.push(v);
        }
    }
    assert!(out.len() >= 20, "{out:?}");
    out
}

fn is_round(v: f64) -> bool {
    if v == 0.0 {
        return true;
    }
    // Some step 1, 2 or 5 x 10^k of which v is a whole multiple, with
    // few enough digits to be a tick (not a measured value).
    (-4..8).any(|k| {
        [1.0, 2.0, 5.0].iter().any(|m| {
            let q = v / (m * 10f64.powi(k));
            (q - q.round()).abs() < 1e-6 && q.abs() <= 20.0
        })
    })
}

#[test]
fn bad_options_are_errors_not_panics() {
    let mut o = quiet("http://127.0.0.1:1/", ScenarioKind::FormData);
    assert!(execute(&o)
        .unwrap_err()
        .to_string()
        .contains("--file or a --field"));
    o.fields = vec!["a={sequence}".into()];
    assert!(execute(&o)
        .unwrap_err()
        .to_string()
        .contains("unknown variable"));
    o.fields = vec!["novalue".into()];
    assert!(execute(&o).is_err());
    o.fields = vec!["a=b".into()];
    o.thresholds = vec!["p95 ~ 3".into()];
    assert!(execute(&o).is_err());
    o.thresholds.clear();
    o.connections = Some(20_000);
    let e = execute(&o).unwrap_err();
    assert_eq!(
        e.limit_exceeded(),
        Some((bulkwire_load::LimitKind::Connections, 10_000))
    );
}

/// Issue 23: with no server on the port the run "completed" 84,124
/// requests at 0.00 ms and succeeded. Now it is stopped once the first
/// second's requests have all been refused, with an error naming the
/// address: at 50 req/s for 20 s it sends about a second's worth, not a
/// thousand.
#[test]
fn load_with_no_server_listening_stops_at_once_and_names_the_address() {
    let port = closed_port();
    let target = Target::resolve(&format!("http://127.0.0.1:{port}/v1/media")).unwrap();
    let mut plan = Plan::new(Mode::Open { rate: 50.0 });
    plan.duration = Some(Duration::from_secs(20));
    plan.connections = 4;
    let live = Arc::new(Live::default());
    let scenario = Arc::new(Raw::new(Bytes::from_static(b"x"), None));
    let e = run_blocking(Some(1), target, plan, scenario, live.clone()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unreachable);
    let msg = e.to_string();
    let want = format!("connection refused: is a server listening on 127.0.0.1:{port}?");
    assert!(msg.starts_with(&want), "{msg}");
    let sent = live.sent.load(Ordering::Relaxed);
    // A second's worth is 50; the full run would be 1,000.
    assert!(
        (1..250).contains(&sent),
        "{sent} sent: stopped after the first second"
    );
    assert_eq!(live.completed.load(Ordering::Relaxed), 0);
    assert_eq!(live.errors.load(Ordering::Relaxed), sent);
}

/// The same in closed loop (as fast as the refusals come), through
/// `execute`, and for a run shorter than a second.
#[test]
fn load_in_closed_loop_with_no_server_listening_is_an_error_naming_the_address() {
    let port = closed_port();
    let mut o = quiet(&format!("http://127.0.0.1:{port}/"), ScenarioKind::Raw);
    o.duration = Some(Duration::from_secs(20));
    o.connections = Some(2);
    let e = execute(&o).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unreachable);
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!(
            "connection refused: is a server listening on 127.0.0.1:{port}?"
        )),
        "{msg}"
    );
    assert!(msg.contains("without an answer: connect: "), "{msg}");
    o.duration = None;
    o.requests = Some(5);
    let e = execute(&o).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unreachable, "{e}");
    assert!(
        e.to_string().ends_with("without an answer: connect: 5)"),
        "{e}"
    );
}

/// A server that answers, then goes away for good: the run goes on to
/// its end, counting the refusals as errors (never as completions), and
/// the report says the server stopped answering.
#[test]
fn a_server_that_goes_away_mid_run_is_reported_as_stopped_answering() {
    let (url, answered) = common::server_that_goes_away(30);
    let mut o = quiet(&url, ScenarioKind::Raw);
    o.connections = Some(1);
    o.rate = Some(100.0);
    o.duration = Some(Duration::from_secs(3));
    let r = run(&o);
    assert_eq!(answered.load(Ordering::Relaxed), 30);
    assert_eq!((r.completed, r.ok), (30, 30));
    assert_eq!(r.no_answer, r.sent - 30, "every request after them failed");
    assert!(r.no_answer >= 100, "{} without an answer", r.no_answer);
    assert_eq!(r.errors, r.no_answer);
    assert_eq!(r.corrected.count, 30);
    let s = r.stopped_answering.clone().expect("stopped answering");
    assert_eq!(s.no_answer, r.no_answer);
    assert!(s.last_ended_s - s.last_answer_s >= 1.0, "{s:?}");
    let table = bulkwire_load::output::table(&r);
    assert!(
        table.contains("  LOST      the server stopped answering: "),
        "{table}"
    );
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["stopped_answering"]["no_answer"], r.no_answer);
}

/// One node answers, the other refuses every connection: the run goes on,
/// and only the answers are completions (with a latency and in req/s); the
/// refusals are errors by reason, per target too.
#[test]
fn some_requests_answered_and_others_refused_are_counted_honestly() {
    let server = TestServer::start(Behavior::default());
    let dead = closed_port();
    let mut o = quiet(&server.url("/up"), ScenarioKind::Raw);
    o.extra_targets = vec![format!("http://127.0.0.1:{dead}/up")];
    o.rate = Some(400.0);
    o.requests = Some(60);
    o.connections = Some(2);
    o.threads = Some(1);
    let r = run(&o);
    let answered = server.seen().len() as u64;
    assert!(answered > 0 && answered < 60, "{answered} answered");
    assert_eq!((r.sent, r.completed, r.ok), (60, answered, answered));
    assert_eq!(r.no_answer, 60 - answered);
    assert_eq!(r.by_error.get("connect"), Some(&(60 - answered)));
    assert_eq!(r.errors, r.no_answer);
    assert!((r.error_rate - r.no_answer as f64 / 60.0).abs() < 1e-9);
    assert_eq!(r.corrected.count, answered, "latencies of answers only");
    assert!((r.rps - answered as f64 / r.elapsed_s).abs() < 1e-6 * r.rps);
    let ends: u64 = r.timeline.iter().map(|b| b.count).sum();
    assert_eq!(ends, answered, "the timeline counts answers");
    let [live, refused] = &r.targets[..] else {
        panic!("{:?}", r.targets)
    };
    assert_eq!((live.requests, live.errors), (answered, 0));
    assert_eq!((refused.requests, refused.errors), (0, 60 - answered));
    let table = bulkwire_load::output::table(&r);
    let line = format!(", {} without an answer\n", 60 - answered);
    assert!(table.contains(&line), "{line} in\n{table}");
}

/// A port nothing listens on: bound, then dropped (very likely still free).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Three connections over two nodes: connections 0 and 2 go to the first,
/// 1 to the second, for the whole run. At a fixed rate the idle connections
/// take the tickets in turn, so the first node gets two requests in three.
/// Every node sees the same path, headers and auth, with its own `Host`,
/// and the report's per-target counts are what each node received.
#[test]
fn two_targets_get_connections_round_robin_and_requests_follow() {
    let (a, b) = (
        TestServer::start(Behavior::default()),
        TestServer::start(Behavior::default()),
    );
    let mut o = quiet(&a.url("/up?k=1"), ScenarioKind::Raw);
    o.extra_targets = vec![b.url("/up?k=1")];
    o.headers = vec!["X-Seq: {seq}".into()];
    o.token = Some("t0k".into());
    o.rate = Some(300.0);
    o.requests = Some(300);
    o.connections = Some(3);
    o.threads = Some(2);
    let r = run(&o);
    assert_eq!((r.completed, r.ok), (300, 300));
    assert_eq!((a.accepted(), b.accepted()), (2, 1), "connections per node");

    let (seen_a, seen_b) = (a.seen(), b.seen());
    let mut seqs = Vec::new();
    for (server, seen) in [(&a, &seen_a), (&b, &seen_b)] {
        for s in seen {
            assert_eq!(s.path, "/up?k=1");
            assert_eq!(s.header("host"), Some(server.addr.to_string().as_str()));
            assert_eq!(s.header("authorization"), Some("Bearer t0k"));
            seqs.push(s.header("x-seq").unwrap().parse::<u64>().unwrap());
        }
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (0..300).collect::<Vec<_>>(), "each request once");
    let share = seen_a.len() as f64 / 300.0;
    eprintln!("requests per node: {} and {}", seen_a.len(), seen_b.len());
    assert!((0.6..0.73).contains(&share), "first node's share {share}");

    let [ta, tb] = &r.targets[..] else {
        panic!("two targets: {:?}", r.targets)
    };
    assert_eq!(
        (ta.url.as_str(), tb.url.as_str()),
        (&*o.url, &*o.extra_targets[0])
    );
    assert_eq!((ta.connections, tb.connections), (2, 1));
    assert_eq!(ta.requests, seen_a.len() as u64);
    assert_eq!(tb.requests, seen_b.len() as u64);
    assert_eq!((ta.errors, tb.errors), (0, 0));
    assert!((ta.rps + tb.rps - r.rps).abs() < 1e-6 * r.rps);

    let table = bulkwire_load::output::table(&r);
    for (t, conns) in [(ta, "2 connections"), (tb, "1 connection")] {
        let line = format!(
            "  target    {}: {conns}, {} requests, {:.1} req/s, 0 errors",
            t.url, t.requests, t.rps
        );
        assert!(table.contains(&line), "{line}\n{table}");
    }
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["targets"][1]["requests"], tb.requests);
    assert_eq!(j["sent"], 300, "totals stay");
}

#[test]
fn errors_are_counted_per_target() {
    let a = TestServer::start(Behavior {
        fail_every: Some(2),
        ..Behavior::default()
    });
    let b = TestServer::start(Behavior::default());
    let mut o = quiet(&a.url("/"), ScenarioKind::Raw);
    o.extra_targets = vec![b.url("/")];
    o.requests = Some(200);
    o.connections = Some(2);
    let r = run(&o);
    let (na, nb) = (a.seen().len() as u64, b.seen().len() as u64);
    assert_eq!(na + nb, 200);
    // The first node fails every other request it gets (by arrival).
    assert_eq!(r.targets[0].errors, na / 2);
    assert_eq!(r.targets[1].errors, 0);
    assert_eq!(r.errors, na / 2, "totals count every target");
}

#[test]
fn one_target_has_no_breakdown() {
    let server = TestServer::start(Behavior::default());
    let mut o = quiet(&server.url("/"), ScenarioKind::Raw);
    o.requests = Some(5);
    let r = run(&o);
    assert!(r.targets.is_empty());
    let j = serde_json::to_value(&r).unwrap();
    assert!(j.get("targets").is_none(), "JSON as before");
    assert!(!bulkwire_load::output::table(&r).contains("target "));
}

#[test]
fn targets_must_be_nodes_of_one_service() {
    let (a, b) = (
        TestServer::start(Behavior::default()),
        TestServer::start(Behavior::default()),
    );
    let mut o = quiet(&a.url("/upload"), ScenarioKind::Raw);
    o.extra_targets = vec![b.url("/upload?v=2")];
    o.requests = Some(5);
    let e = execute(&o).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config);
    let msg = e.to_string();
    assert!(msg.contains(&a.url("/upload")), "{msg}");
    assert!(msg.contains(&b.url("/upload?v=2")), "{msg}");

    o.extra_targets = vec![b.url("/upload")];
    o.connections = Some(1);
    let e = execute(&o).unwrap_err();
    assert!(
        e.to_string()
            .contains("2 targets need at least 2 connections"),
        "{e}"
    );
    assert_eq!(
        (a.accepted(), b.accepted()),
        (0, 0),
        "refused before any load"
    );
}

/// Issue 23: the closed-loop table read `latency  latency` (the header's
/// first cell above a row named the same). The header names the columns
/// (which view, then each percentile) and the one closed-loop row says
/// what it measures; open loop keeps its two views.
#[test]
fn closed_loop_table_header_says_what_each_column_is_not_latency_latency() {
    let server = TestServer::start(Behavior::default());
    let mut o = quiet(&server.url("/"), ScenarioKind::Raw);
    o.requests = Some(5);
    o.connections = Some(1);
    let table = bulkwire_load::output::table(&run(&o));
    let lines: Vec<&str> = table.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("  latency "))
        .unwrap_or_else(|| panic!("a latency header in\n{table}"));
    let header: Vec<&str> = lines[at].split_whitespace().collect();
    assert_eq!(
        header,
        ["latency", "p50", "p90", "p95", "p99", "max", "mean"]
    );
    let row = lines[at + 1];
    assert!(row.starts_with("  send→answer "), "{table}");
    assert_eq!(row.matches(" ms").count(), 6, "{row}");
    assert_eq!(table.matches("latency").count(), 1, "{table}");

    o.rate = Some(100.0);
    let table = bulkwire_load::output::table(&run(&o));
    assert!(
        table.contains("\n  corrected  ") && table.contains("\n  uncorrected "),
        "{table}"
    );
}
