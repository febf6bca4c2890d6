//! The rough edges a new user hit in their first hour (issue "The first
//! hour"), one test each, named after the edge: what a 401 says, a form
//! without a file, the type of an upload sent without one, what a 413 says.
//! The load tool's, the CLI's and the page's edges are tested in their own
//! crates and suites (`bulkwire-cli/tests/first_hour.rs`, `web_browser.rs`).

mod common;

use bulkwire_server::Limits;
use common::*;
use reqwest::multipart::Form;
use serde_json::Value;

/// A JPEG's first bytes (SOI, APP0 "JFIF"), then noise.
fn jpeg(n: usize) -> Vec<u8> {
    let mut v = vec![0xff, 0xd8, 0xff, 0xe0, 0, 0x10, b'J', b'F', b'I', b'F', 0];
    v.extend(payload(n, 5));
    v
}

fn png(n: usize) -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    v.extend(payload(n, 6));
    v
}

async fn message(r: reqwest::Response) -> String {
    let j: Value = r.json().await.unwrap();
    j["message"].as_str().unwrap_or_default().to_string()
}

/// Rough edge 3: every refusal said only `missing or bad credentials`.
#[tokio::test]
async fn unauthorized_answers_say_which_schemes_are_accepted_and_how_to_get_a_credential() {
    let h = start(Limits::default()).await;
    let url = h.url("/v1/media");
    let cases: [(Option<&str>, &str); 5] = [
        (None, "bulkwire token create"),
        (Some("Bearer nope"), "bulkwire token list"),
        (Some("Basic YWxpY2U6d3Jvbmc="), "bulkwire user passwd"),
        (Some("Basic !!!"), "base64 of NAME:PASSWORD"),
        (Some("Digest x=y"), "\"Digest\" is not accepted"),
    ];
    for (auth, says) in cases {
        let mut req = h.http.get(&url);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 401, "{auth:?}");
        let www = r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(www.contains("Bearer") && www.contains("Basic"), "{www}");
        let m = message(r).await;
        assert!(m.contains(says), "{auth:?}: {m}");
    }
    // The same answers on the resumable and SOAP routes.
    let r = h.http.post(h.url("/v1/uploads")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert!(message(r).await.contains("bulkwire user add"));
    let r = h
        .http
        .post(h.url("/soap"))
        .header("content-type", "text/xml")
        .body("<x/>")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let fault = r.text().await.unwrap();
    assert!(fault.contains("bulkwire token create"), "{fault}");
}

fn xmlrpc_login_call(user: &str, password: &str) -> String {
    format!(
        "<?xml version=\"1.0\"?><methodCall><methodName>wp.getMediaLibrary</methodName><params>\
         <param><value><int>1</int></value></param>\
         <param><value><string>{user}</string></value></param>\
         <param><value><string>{password}</string></value></param>\
         <param><value><struct></struct></value></param></params></methodCall>"
    )
}

/// Rough edge 3: XML-RPC on a fresh zero-configuration server (a token, no
/// user) answered every login `Incorrect username or password.` and nothing
/// said that XML-RPC needs a user from `bulkwire user add`.
#[tokio::test]
async fn xmlrpc_login_on_a_server_without_users_names_bulkwire_user_add() {
    let h = start_configured(|c| c.users.clear()).await;
    let post = |body: String| {
        h.http
            .post(h.url("/xmlrpc.php"))
            .header("content-type", "text/xml")
            .body(body)
            .send()
    };
    let fault = post(xmlrpc_login_call("admin", "x"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(fault.contains("<int>403</int>"), "{fault}");
    assert!(fault.contains("Incorrect username or password."), "{fault}");
    assert!(fault.contains("bulkwire user add NAME"), "{fault}");
    // Once a user exists, a wrong password is WordPress's answer alone.
    let meta = &h.srv.state.meta;
    bulkwire_server::auth::set_user(
        &**meta,
        "erin",
        b"pw",
        bulkwire_server::store::UserSet::Create,
        bulkwire_server::principal::Role::Author,
    )
    .await
    .unwrap();
    let fault = post(xmlrpc_login_call("erin", "wrong"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(fault.contains("Incorrect username or password."), "{fault}");
    assert!(!fault.contains("user add"), "{fault}");
}

/// Rough edge 4: `curl -F file=photo.jpg` (the `@` forgotten) was 201 with
/// `"media":[]`, and curl exited 0 with nothing uploaded.
#[tokio::test]
async fn a_form_without_a_file_part_is_400_naming_the_forgotten_at() {
    let h = start(Limits::default()).await;
    let form = Form::new().text("file", "photo.jpg");
    let r = h.post_form(form).await;
    assert_eq!(r.status(), 400);
    let m = message(r).await;
    assert!(m.contains("did you mean -F file=@photo.jpg?"), "{m}");
    let r = h.post_form(Form::new().text("title", "a day out")).await;
    assert_eq!(r.status(), 400);
    assert!(message(r).await.contains("-F name=@path"));
    h.assert_empty().await;
}

/// Uploads `data` with PUT and the given `Content-Type` (none when empty);
/// the stored type.
async fn put_type(h: &Harness, name: &str, ct: Option<&str>, data: Vec<u8>) -> Value {
    let mut req = h
        .http
        .put(h.url(&format!("/v1/media/{name}")))
        .bearer_auth(TOKEN)
        .body(data);
    if let Some(ct) = ct {
        req = req.header("content-type", ct);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 201);
    let j: Value = r.json().await.unwrap();
    j["media"][0].clone()
}

/// Rough edge 5: `curl -T photo.jpg` and tus uploads without `filetype`
/// stored a JPEG as `application/octet-stream`, and the library showed a
/// placeholder instead of its thumbnail.
#[tokio::test]
async fn uploads_without_a_type_take_it_from_magic_bytes_then_the_name() {
    let h = start(Limits::default()).await;
    let octets = Some("application/octet-stream");
    let m = put_type(&h, "photo.bin", None, jpeg(3 << 20)).await;
    assert_eq!(m["content_type"], "image/jpeg", "bytes before the name");
    let m = put_type(&h, "a.jpg", octets, png(1000)).await;
    assert_eq!(m["content_type"], "image/png", "bytes over the name");
    let m = put_type(&h, "notes.txt", octets, b"plain words".to_vec()).await;
    assert_eq!(
        m["content_type"], "text/plain",
        "the name when bytes say nothing"
    );
    let m = put_type(&h, "data", None, payload(100, 1)).await;
    assert_eq!(m["content_type"], "application/octet-stream");
    let m = put_type(&h, "x.jpg", Some("text/plain"), jpeg(10)).await;
    assert_eq!(m["content_type"], "text/plain", "a declared type stays");
    // Whatever was detected, an active type is still an attachment.
    let svg = b"<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script></svg>";
    let m = put_type(&h, "logo.svg", None, svg.to_vec()).await;
    assert_eq!(m["content_type"], "image/svg+xml");
    let r = h.get(m["url"].as_str().unwrap()).send().await.unwrap();
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    let cd = r.headers()["content-disposition"].to_str().unwrap();
    assert!(cd.starts_with("attachment"), "{cd}");
    // A resumable upload without `filetype`: its bytes are read back once
    // finished (on S3 they may have come through another node).
    let data = jpeg(200_000);
    let r = h
        .http
        .post(h.url("/v1/uploads"))
        .bearer_auth(TOKEN)
        .header("tus-resumable", "1.0.0")
        .header("upload-length", data.len())
        .header("upload-metadata", "filename cGhvdG8=")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let loc = r.headers()["location"].to_str().unwrap().to_string();
    let r = h
        .http
        .patch(h.url(&loc))
        .bearer_auth(TOKEN)
        .header("tus-resumable", "1.0.0")
        .header("upload-offset", 0)
        .header("content-type", "application/offset+octet-stream")
        .body(data)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let all = h.list_all().await;
    let tus = all.iter().find(|m| m["filename"] == "photo").unwrap();
    assert_eq!(tus["content_type"], "image/jpeg", "{tus}");
}

/// Rough edge 9: a 413 said `limit body_bytes = 8589934592 exceeded`: raw
/// bytes, and nothing said where to change it.
#[tokio::test]
async fn a_413_gives_a_human_size_and_the_key_to_change() {
    let h = start(Limits {
        body_bytes: 1 << 20,
        ..Limits::default()
    })
    .await;
    let r = h
        .http
        .put(h.url("/v1/media/big.bin"))
        .bearer_auth(TOKEN)
        .body(vec![0u8; 2 << 20])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let j: Value = r.json().await.unwrap();
    let m = j["message"].as_str().unwrap();
    assert!(m.contains("[limits] body_bytes = 1 MiB"), "{m}");
    assert_eq!(j["limit"]["value"], 1 << 20, "the number stays in the JSON");
}

#[test]
fn rerun_on_shared_stores() {
    common::rerun_on_shared_stores(&[]);
}
