//! Image variants (`GET /v1/media/{id}/variant`, `crate::variants`) over a
//! corpus the tests make with Pillow (testsuite/py/variants_corpus.py, in
//! the venv under target/): JPEGs with each EXIF orientation, PNG and WebP
//! with alpha, a GIF, 24- and 12-megapixel photos; every variant is decoded
//! by Pillow. Image bombs and garbage are made here, byte by byte.
//!
//! Every test needs Python for its corpus (`missing_python`: ignored when
//! python3 was missing at build time, a failure under `CI`).
//!
//! The tests of this file run one at a time (`SERIAL`): two of them
//! measure the process's memory, which the others would disturb.

mod common;

use bulkwire_server::Limits;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testsuite/py/variants_corpus.py")
}

fn python() -> PathBuf {
    bulkwire_testsuite::python_venv(
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        "PIL, wordpress_xmlrpc",
    )
}

/// The corpus, made once per test process (with the big photos).
fn corpus() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("variants-corpus");
        if !dir.join("big12.jpg").exists() {
            std::fs::create_dir_all(&dir).unwrap();
            let out = Command::new(python())
                .arg(script())
                .args(["make"])
                .arg(&dir)
                .arg("big")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        dir
    })
}

/// Pillow decodes `bytes` and checks its size (and `flags`: `alpha`,
/// `corner`); its format name.
fn pillow_check(bytes: &[u8], w: u32, h: u32, flags: &[&str]) -> String {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), bytes).unwrap();
    let out = Command::new(python())
        .arg(script())
        .arg("check")
        .arg(f.path())
        .args([w.to_string(), h.to_string()])
        .args(flags)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "Pillow on a {w}×{h} {flags:?} variant: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

async fn upload(h: &Harness, name: &str, ct: &str, data: Vec<u8>) -> Value {
    let r = h.put(name, ct, data).await;
    assert_eq!(r.status(), 201, "{name}");
    let j: Value = r.json().await.unwrap();
    j["media"][0].clone()
}

async fn upload_file(h: &Harness, name: &str) -> Value {
    let data = std::fs::read(corpus().join(name)).unwrap();
    upload(h, name, "application/octet-stream", data).await
}

async fn variant(h: &Harness, id: &str, q: &str) -> reqwest::Response {
    h.get(&format!("/v1/media/{id}/variant?{q}"))
        .send()
        .await
        .unwrap()
}

async fn ok_bytes(r: reqwest::Response) -> (reqwest::header::HeaderMap, Vec<u8>) {
    let status = r.status();
    let headers = r.headers().clone();
    let body = r.bytes().await.unwrap().to_vec();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    (headers, body)
}

fn made(h: &Harness) -> u64 {
    let line = h.metric("bulkwire_variants_made_total");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test]
async fn each_orientation_format_and_fit_decodes_at_its_size() {
    let _one = SERIAL.lock().await;
    let h = start(Limits::default()).await;
    for o in 1..=8 {
        let m = upload_file(&h, &format!("o{o}.jpg")).await;
        assert_eq!(
            (m["width"].as_u64(), m["height"].as_u64()),
            (Some(1200), Some(800)),
            "o{o}"
        );
        let id = m["id"].as_str().unwrap();
        for (q, w, ht) in [
            ("w=300&format=webp", 300, 200),
            ("w=300&h=300&fit=contain&format=jpeg", 300, 200),
            ("w=200&format=png", 300, 200), // rounded up the ladder
            ("w=150&h=150&fit=cover&format=webp", 150, 150),
        ] {
            let (hs, body) = ok_bytes(variant(&h, id, q).await).await;
            let fmt = pillow_check(&body, w, ht, &["corner"]);
            let want = q.rsplit("format=").next().unwrap().to_uppercase();
            assert!(fmt.starts_with(&want), "o{o} {q}: {fmt}");
            assert_eq!(hs["content-type"], format!("image/{}", want.to_lowercase()));
        }
    }
    // Alpha kept in PNG and WebP, from PNG and from WebP; a GIF's first frame.
    for name in ["alpha.png", "alpha.webp"] {
        let m = upload_file(&h, name).await;
        assert_eq!(
            (m["width"].as_u64(), m["height"].as_u64()),
            (Some(600), Some(400))
        );
        let id = m["id"].as_str().unwrap();
        for fmt in ["png", "webp"] {
            let (_, body) = ok_bytes(variant(&h, id, &format!("w=300&format={fmt}")).await).await;
            pillow_check(&body, 300, 200, &["alpha"]);
        }
        let (_, body) = ok_bytes(variant(&h, id, "w=150&h=150&fit=cover&format=png").await).await;
        pillow_check(&body, 150, 150, &["alpha"]);
    }
    let m = upload_file(&h, "anim.gif").await;
    let (_, body) =
        ok_bytes(variant(&h, m["id"].as_str().unwrap(), "w=150&format=png").await).await;
    assert_eq!(
        pillow_check(&body, 120, 80, &[]),
        "PNG 120 80",
        "not upscaled"
    );
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test]
async fn a_variant_is_made_once_then_served_as_a_download_is() {
    let _one = SERIAL.lock().await;
    let h = start(Limits::default()).await;
    let m = upload_file(&h, "o6.jpg").await;
    let id = m["id"].as_str().unwrap().to_string();
    let before = made(&h);
    let q = "w=300&h=300&fit=cover&format=webp";
    let (hs, body) = ok_bytes(variant(&h, &id, q).await).await;
    assert_eq!(made(&h), before + 1);
    let etag = hs["etag"].to_str().unwrap().to_string();
    assert!(hs["cache-control"]
        .to_str()
        .unwrap()
        .contains("max-age=31536000"));
    assert_eq!(hs["accept-ranges"], "bytes");
    // Cached: the same bytes, nothing made again; Range and If-None-Match.
    let (_, again) = ok_bytes(variant(&h, &id, "w=290&h=300&fit=cover&format=webp").await).await;
    assert_eq!(again, body, "290 rounds to 300: the same variant");
    assert_eq!(made(&h), before + 1);
    let r = h
        .get(&format!("/v1/media/{id}/variant?{q}"))
        .header("range", "bytes=0-9")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(r.bytes().await.unwrap(), body[..10]);
    let r = h
        .get(&format!("/v1/media/{id}/variant?{q}"))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304);
    // Listed nowhere as media of its own; gone with the item.
    assert_eq!(h.list_all().await.len(), 1);
    let name = bulkwire_image::Spec {
        width: Some(300),
        height: Some(300),
        fit: bulkwire_image::Fit::Cover,
        output: bulkwire_image::Output::WebP,
    }
    .name();
    let blobs = h.srv.state.blobs.clone();
    assert!(blobs.variant_size(&id, &name).await.unwrap().is_some());
    let r = h
        .http
        .delete(h.url(&format!("/v1/media/{id}")))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(
        blobs.variant_size(&id, &name).await.unwrap(),
        None,
        "deleted with its item"
    );
    assert_eq!(variant(&h, &id, q).await.status(), 404);
    // Deleted where this server does not see it (another node, the CLI)
    // after a variant remembered its row: 404, nothing made again.
    let m = upload_file(&h, "o6.jpg").await;
    let id = m["id"].as_str().unwrap().to_string();
    assert_eq!(variant(&h, &id, q).await.status(), 200);
    let state = &h.srv.state;
    assert!(state
        .meta
        .delete(&id, None, "elsewhere", None)
        .await
        .unwrap()
        .is_some());
    state.blobs.delete(&id).await.unwrap();
    let before = made(&h);
    assert_eq!(variant(&h, &id, q).await.status(), 404);
    assert_eq!(variant(&h, &id, "w=150&format=jpeg").await.status(), 404);
    assert_eq!(made(&h), before, "nothing made of a deleted item");
    h.assert_empty().await;
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test]
async fn links_name_their_variant_and_nothing_else() {
    let _one = SERIAL.lock().await;
    let h = start(Limits::default()).await;
    let m = upload_file(&h, "o1.jpg").await;
    let thumb = m["thumbnail"].as_str().unwrap();
    assert!(
        thumb.contains("/variant?w=300&h=300&fit=cover&format=webp&sig="),
        "{thumb}"
    );
    let two = m["thumbnail_2x"].as_str().unwrap();
    assert!(two.contains("w=768&h=768"), "{two}");
    let tpl = m["variants"].as_str().unwrap();
    assert!(tpl.ends_with("/variant{?w,h,fit,format}"), "{tpl}");
    // Without credentials, as an <img> fetches it.
    let r = h.http.get(thumb).send().await.unwrap();
    let (_, body) = ok_bytes(r).await;
    pillow_check(&body, 300, 300, &["corner"]);
    // Another size under the same signature, or the item's own link's
    // signature on a variant: refused before the id is looked up.
    let other = thumb.replace("w=300&h=300", "w=2048&h=2048");
    assert_eq!(h.http.get(&other).send().await.unwrap().status(), 403);
    let item_sig = m["url"]
        .as_str()
        .unwrap()
        .split("sig=")
        .nth(1)
        .unwrap()
        .to_string();
    let id = m["id"].as_str().unwrap();
    let forged = h.url(&format!(
        "/v1/media/{id}/variant?w=300&h=300&fit=cover&format=webp&sig={item_sig}"
    ));
    assert_eq!(h.http.get(&forged).send().await.unwrap().status(), 403);
    // Without a signature, credentials are needed.
    let bare = h.url(&format!("/v1/media/{id}/variant?w=300"));
    assert_eq!(h.http.get(&bare).send().await.unwrap().status(), 401);
}

/// `(name, content type, bytes, expected statuses)` of the bombs and the
/// garbage: each is refused from its header or its first bytes.
fn bombs() -> Vec<(&'static str, &'static str, Vec<u8>, &'static [u16])> {
    let photo = std::fs::read(corpus().join("o1.jpg")).unwrap();
    let random: Vec<u8> = payload(200_000, 7);
    vec![
        (
            "bomb.png",
            "image/png",
            png_declaring(100_000, 100_000),
            &[413],
        ),
        (
            "bomb.jpg",
            "image/jpeg",
            jpeg_declaring(65_535, 65_535),
            &[413],
        ),
        (
            "frames.gif",
            "image/gif",
            gif_frames(10_000, 10_000, 10_000),
            &[413],
        ),
        (
            "truncated.jpg",
            "image/jpeg",
            photo[..photo.len() / 2].to_vec(),
            &[422],
        ),
        ("random.jpg", "application/octet-stream", random, &[422]),
        ("notes.txt", "text/plain", b"just words".to_vec(), &[415]),
        (
            "logo.svg",
            "image/svg+xml",
            b"<svg xmlns='http://www.w3.org/2000/svg'/>".to_vec(),
            &[415],
        ),
    ]
}

/// Peak resident memory since the last reset, and resets it (Linux's
/// `clear_refs` 5, then `VmHWM`).
fn peak_rss_reset() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap();
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    kib << 10
}

fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        .unwrap()
        << 10
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test]
async fn bombs_and_garbage_are_refused_fast_in_little_memory_and_store_nothing() {
    let _one = SERIAL.lock().await;
    let h = start(Limits::default()).await;
    let mut items = Vec::new();
    for (name, ct, data, want) in bombs() {
        let m = upload(&h, name, ct, data).await;
        items.push((name, m["id"].as_str().unwrap().to_string(), want));
    }
    // A 10,000-frame GIF of a sane size is no bomb: its first frame.
    let small = upload(&h, "small.gif", "image/gif", gif_frames(10_000, 100, 80)).await;
    let base = rss();
    peak_rss_reset();
    let q = "w=300&h=300&fit=cover&format=webp";
    for (name, id, want) in &items {
        let t = Instant::now();
        let r = variant(&h, id, q).await;
        let status = r.status().as_u16();
        let body = r.text().await.unwrap();
        let took = t.elapsed();
        println!("{name}: {status} in {took:?}: {body}");
        assert!(want.contains(&status), "{name}: {status} {body}");
        assert!(
            took < Duration::from_secs(1),
            "{name}: answered in {took:?}"
        );
        if status == 413 {
            assert!(
                body.contains("variant_max_pixels"),
                "{name}: names the limit: {body}"
            );
        }
    }
    let t = Instant::now();
    let (_, body) =
        ok_bytes(variant(&h, small["id"].as_str().unwrap(), "w=150&format=png").await).await;
    assert!(t.elapsed() < Duration::from_secs(1));
    pillow_check(&body, 100, 80, &[]);
    let grew = peak_rss_reset().saturating_sub(base);
    println!(
        "peak RSS growth over the bombs: {:.1} MiB",
        grew as f64 / 1048576.0
    );
    assert!(grew < 64 << 20, "RSS grew {grew} bytes");
    let name = bulkwire_image::Spec {
        width: Some(300),
        height: Some(300),
        fit: bulkwire_image::Fit::Cover,
        output: bulkwire_image::Output::WebP,
    }
    .name();
    for (n, id, _) in &items {
        let stored = h.srv.state.blobs.variant_size(id, &name).await.unwrap();
        assert_eq!(stored, None, "{n}: nothing stored as a variant");
    }
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test]
async fn two_hundred_concurrent_requests_stay_within_the_memory_budget() {
    let _one = SERIAL.lock().await;
    let budget: u64 = 128 << 20;
    let h = start(Limits {
        memory_budget: budget,
        ..Limits::default()
    })
    .await;
    let mut ids = Vec::new();
    for name in ["big24.jpg", "big12.jpg"] {
        let m = upload_file(&h, name).await;
        ids.push(m["id"].as_str().unwrap().to_string());
    }
    let base = rss();
    peak_rss_reset();
    let fits = ["cover", "contain"];
    let formats = ["webp", "jpeg", "png"];
    let sizes = [150, 300, 768, 1024];
    let mut tasks = Vec::new();
    for i in 0..200usize {
        let q = format!(
            "w={}&h={}&fit={}&format={}",
            sizes[i % 4],
            sizes[i % 4],
            fits[i / 4 % 2],
            formats[i / 8 % 3]
        );
        let url = h.url(&format!("/v1/media/{}/variant?{q}", ids[i / 24 % 2]));
        let http = h.http.clone();
        tasks.push(tokio::spawn(async move {
            let mut r = http.get(url).bearer_auth(TOKEN).send().await.unwrap();
            let s = r.status().as_u16();
            let retry = r.headers().contains_key("retry-after");
            // Counted as it comes: this process is the server's too, and
            // 200 bodies held here would be counted as the server's.
            let mut n = 0;
            while let Some(c) = r.chunk().await.unwrap() {
                n += c.len();
            }
            (s, retry, n)
        }));
    }
    let (mut ok, mut busy) = (0, 0);
    for t in tasks {
        let (s, retry, n) = t.await.unwrap();
        match s {
            200 => {
                assert!(n > 0);
                ok += 1
            }
            503 => {
                assert!(retry, "503 with Retry-After");
                busy += 1
            }
            s => panic!("status {s}"),
        }
    }
    let grew = peak_rss_reset().saturating_sub(base);
    println!(
        "200 requests: {ok} made or served, {busy} told to retry; peak RSS growth {:.1} MiB (budget {} MiB)",
        grew as f64 / 1048576.0,
        budget >> 20
    );
    assert!(ok > 0);
    // The budget, and what the HTTP side of 200 requests holds beside it.
    assert!(grew < budget + (64 << 20), "RSS grew {grew} bytes");
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test]
async fn wordpress_clients_get_a_thumbnail_that_decodes_at_150() {
    let _one = SERIAL.lock().await;
    let h = start(Limits::default()).await;
    let m = upload_file(&h, "o8.jpg").await;
    let id = m["id"].as_str().unwrap();
    let code = r#"
import io, json, sys, urllib.request
from PIL import Image
from wordpress_xmlrpc import Client
from wordpress_xmlrpc.methods.media import GetMediaItem
c = Client(sys.argv[1], "alice", "wonder:land")
item = GetMediaItem(sys.argv[2])
m = c.call(item)
img = Image.open(io.BytesIO(urllib.request.urlopen(m.thumbnail).read()))
print(json.dumps({"thumb": list(img.size), "format": img.format, "metadata": m.metadata}))
"#;
    let mut cmd = Command::new(python());
    cmd.args(["-c", code, &h.url("/xmlrpc.php"), id])
        .env("NO_PROXY", "127.0.0.1");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["thumb"], serde_json::json!([150, 150]));
    assert_eq!(j["format"], "JPEG");
    let md = &j["metadata"];
    assert_eq!(
        (md["width"].as_u64(), md["height"].as_u64()),
        (Some(1200), Some(800))
    );
    let sizes = &md["sizes"];
    for (n, w, ht) in [
        ("thumbnail", 150, 150),
        ("medium", 300, 200),
        ("large", 1024, 683),
    ] {
        let s = &sizes[n];
        assert_eq!(
            (s["width"].as_u64(), s["height"].as_u64()),
            (Some(w), Some(ht)),
            "{n}"
        );
        assert_eq!(s["mime-type"], "image/jpeg");
        let url = s["url"].as_str().unwrap();
        let (_, body) = ok_bytes(h.http.get(url).send().await.unwrap()).await;
        pillow_check(&body, w as u32, ht as u32, &["corner"]);
    }
}

/// A PNG whose header declares `w`×`h` RGBA pixels (with a valid CRC),
/// then a few bytes of image data.
fn png_declaring(w: u32, h: u32) -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = b"IHDR".to_vec();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
    v.extend_from_slice(&13u32.to_be_bytes());
    v.extend_from_slice(&ihdr);
    v.extend_from_slice(&crc32(&ihdr).to_be_bytes());
    // A zlib stream of zeros: the bomb's payload, a few bytes here.
    let idat = b"IDAT\x78\x9c\x63\x00\x00\x00\x01\x00\x01";
    v.extend_from_slice(&9u32.to_be_bytes());
    v.extend_from_slice(idat);
    v.extend_from_slice(&crc32(idat).to_be_bytes());
    v
}

fn crc32(b: &[u8]) -> u32 {
    let mut c = !0u32;
    for &x in b {
        c ^= u32::from(x);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// A baseline JPEG header declaring `w`×`h` pixels, then a few bytes.
fn jpeg_declaring(w: u16, h: u16) -> Vec<u8> {
    let mut v = vec![0xFF, 0xD8, 0xFF, 0xC0, 0, 17, 8];
    v.extend_from_slice(&h.to_be_bytes());
    v.extend_from_slice(&w.to_be_bytes());
    v.extend_from_slice(&[3, 1, 0x22, 0, 2, 0x11, 0, 3, 0x11, 0]);
    v.extend_from_slice(&[0xFF, 0xDA, 0, 12, 3, 1, 0, 2, 0x11, 3, 0x11, 0, 63, 0]);
    v.extend_from_slice(&[0; 64]);
    v.extend_from_slice(&[0xFF, 0xD9]);
    v
}

/// A GIF of `frames` one-pixel frames on a `w`×`h` logical screen.
fn gif_frames(frames: usize, w: u16, h: u16) -> Vec<u8> {
    let mut v = b"GIF89a".to_vec();
    v.extend_from_slice(&w.to_le_bytes());
    v.extend_from_slice(&h.to_le_bytes());
    v.extend_from_slice(&[0, 0, 0]);
    for _ in 0..frames {
        // Image descriptor (1×1, a local table of two colours), then LZW:
        // minimum code size 2, codes clear (4), 0, end (5) in 3 bits.
        v.extend_from_slice(&[0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0x80]);
        v.extend_from_slice(&[255, 0, 0, 0, 0, 0]);
        v.extend_from_slice(&[2, 2, 0x44, 0x01, 0]);
    }
    v.push(0x3B);
    v
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test]
async fn a_flood_beyond_the_queue_is_told_to_retry() {
    let _one = SERIAL.lock().await;
    let h = start(Limits {
        variant_jobs: Some(1),
        variant_queue: 2,
        ..Limits::default()
    })
    .await;
    let mut ids = Vec::new();
    for o in 1..=4 {
        ids.push(
            upload_file(&h, &format!("o{o}.jpg")).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let mut tasks = Vec::new();
    for i in 0..40usize {
        let w = [150, 300, 768, 1024, 2048][i % 5];
        let url = h.url(&format!(
            "/v1/media/{}/variant?w={w}&format=png",
            ids[i / 10]
        ));
        let http = h.http.clone();
        tasks.push(tokio::spawn(async move {
            let r = http.get(url).bearer_auth(TOKEN).send().await.unwrap();
            let s = r.status().as_u16();
            let retry = r.headers().get("retry-after").cloned();
            (s, retry, r.text().await.unwrap_or_default())
        }));
    }
    let mut busy = 0;
    for t in tasks {
        let (s, retry, body) = t.await.unwrap();
        assert!(s == 200 || s == 503, "{s}: {body}");
        if s == 503 {
            assert!(retry.is_some(), "503 with Retry-After");
            assert!(body.contains("variant_queue"), "{body}");
            busy += 1;
        }
    }
    assert!(
        busy > 0,
        "40 requests for 20 variants, 1 job and 2 places in the queue"
    );
}

/// The same tests on PostgreSQL + SeaweedFS: variants stored under the
/// item's S3 prefix, with S3's conditional write.
#[test]
fn rerun_on_shared_stores() {
    common::rerun_on_shared_stores(&[]);
}
