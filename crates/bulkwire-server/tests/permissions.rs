//! Who may do what (DESIGN.md; crate module `principal`), cell by cell: every kind of principal
//! × every operation on every protocol × its own item and another owner's, on one server per
//! run, on the embedded stores and (`rerun_on_shared_stores`) on PostgreSQL + SeaweedFS.
//!
//! The expected answers are [`MATRIX`], written out in full so that a reader can audit it; the
//! test prints the table it observed in the same form when any cell differs.
//!
//! Principals (the columns):
//! - `admin token`: the `--token` flag (owner and scope `admin`);
//! - `author A`, `author B`: the stored users `ann` and `bob`, role author (HTTP Basic; the
//!   XML-RPC login);
//! - `editor`: the stored user `ed`, role editor (everybody's items, no credentials);
//! - `upload token`, `read token`: stored tokens owned by `ann` with the one scope `upload`,
//!   `read`;
//! - `JWT`: HS256 (`[auth] jwt_secret`), made by PyJWT (tests/py/mint_jwts.py), `sub` ann and
//!   `scope` "upload read": a bearer token on HTTP, the password of the user `jwt` on XML-RPC
//!   and SOAP;
//! - `upload JWT`: the same with `scope` "upload" (the one principal without `read` that can
//!   log in to XML-RPC);
//! - `expired JWT`: the same as `JWT`, expired an hour ago.
//!
//! The JWT columns need Python (PyJWT from PyPI): they run in their own test, ignored when
//! Python was missing at build time (crate bulkwire-runtimes), so the six other columns run
//! everywhere.
//!
//! Targets: `new` is a creation; `own` an item (or resumable upload) of the principal's owner,
//! made by that owner; `other` one of another owner (bob's for ann's credentials, ann's for
//! everyone else's). Cells: an HTTP status; `fault N` for an XML-RPC fault with code N (over
//! HTTP 200) or a SOAP fault with HTTP status N; `ok` for an XML-RPC result. After a creation
//! that passed, `url` or `no-url` says whether the answer handed out the item's link (the
//! `url` field, the tus/IETF `Link` header, the SOAP `url` element); after a listing, `listed`
//! or `hidden` whether the target item was in it.
//!
//! Beyond the answer, every cell checks what it did to the stores (fresh items and uploads for
//! each cell that changes something):
//! - a creation that passed made an item owned by the principal's owner (an append completes
//!   the upload's owner's item), holding the bytes sent; a refused one left the stores as they
//!   were: no row, no blob or object, no unfinished upload (spool file, S3 multipart upload);
//! - a delete that passed removed the row and the blob (or the upload); a refused one left
//!   them;
//! - an append that passed moved the upload's offset; a refused one left it;
//! - a listing names only items the principal reaches (and with `owner=`, of that owner);
//! - an image's variant links (`thumbnail`, `thumbnail_2x`) go with its `url`: a creation that
//!   answers `no-url` hands out none of them (the raw PUT sends a JPEG for that);
//! - a variant that was sent is the format asked for (`variant GET`: PNG; `variant link GET`,
//!   the item's `thumbnail`: WebP).

mod common;
mod soap_util;

use base64::Engine as _;
use bulkwire_server::principal::Role;
use bulkwire_xmlrpc::{encode_call, parse, EncodeOptions, MemorySink, Response, Value};
use common::*;
use reqwest::{Method, RequestBuilder};
use serde_json::Value as Json;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Mutex;

/// What every principal may do: rows are operations on a target, columns principals (see the
/// module's documentation for the words).
const MATRIX: &str = "
| operation              | target | admin token | author A   | author B   | editor     | upload token | read token | JWT        | upload JWT | expired JWT |
|------------------------|--------|-------------|------------|------------|------------|--------------|------------|------------|------------|-------------|
| form upload            | new    | 201 url     | 201 url    | 201 url    | 201 url    | 201 no-url   | 403        | 201 url    | 201 no-url | 401         |
| raw PUT                | new    | 201 url     | 201 url    | 201 url    | 201 url    | 201 no-url   | 403        | 201 url    | 201 no-url | 401         |
| list                   | own    | 200 listed  | 200 listed | 200 listed | 200 listed | 403          | 200 listed | 200 listed | 403        | 401         |
| list                   | other  | 200 listed  | 200 hidden | 200 hidden | 200 listed | 403          | 200 hidden | 200 hidden | 403        | 401         |
| list owner=            | own    | 200 listed  | 200 listed | 200 listed | 200 listed | 403          | 200 listed | 200 listed | 403        | 401         |
| list owner=            | other  | 200 listed  | 200 hidden | 200 hidden | 200 listed | 403          | 200 hidden | 200 hidden | 403        | 401         |
| GET                    | own    | 200         | 200        | 200        | 200        | 403          | 200        | 200        | 403        | 401         |
| GET                    | other  | 200         | 404        | 404        | 200        | 403          | 404        | 404        | 403        | 401         |
| HEAD                   | own    | 200         | 200        | 200        | 200        | 403          | 200        | 200        | 403        | 401         |
| HEAD                   | other  | 200         | 404        | 404        | 200        | 403          | 404        | 404        | 403        | 401         |
| link GET               | own    | 200         | 200        | 200        | 200        | 200          | 200        | 200        | 200        | 200         |
| link GET               | other  | 200         | 200        | 200        | 200        | 200          | 200        | 200        | 200        | 200         |
| variant GET            | own    | 200         | 200        | 200        | 200        | 403          | 200        | 200        | 403        | 401         |
| variant GET            | other  | 200         | 404        | 404        | 200        | 403          | 404        | 404        | 403        | 401         |
| variant link GET       | own    | 200         | 200        | 200        | 200        | 200          | 200        | 200        | 200        | 200         |
| variant link GET       | other  | 200         | 200        | 200        | 200        | 200          | 200        | 200        | 200        | 200         |
| DELETE                 | own    | 204         | 204        | 204        | 204        | 403          | 403        | 403        | 403        | 401         |
| DELETE                 | other  | 204         | 404        | 404        | 204        | 403          | 403        | 403        | 403        | 401         |
| tus create             | new    | 201 url     | 201 url    | 201 url    | 201 url    | 201 no-url   | 403        | 201 url    | 201 no-url | 401         |
| tus HEAD               | own    | 200         | 200        | 200        | 200        | 200          | 403        | 200        | 200        | 401         |
| tus HEAD               | other  | 200         | 404        | 404        | 200        | 404          | 403        | 404        | 404        | 401         |
| tus PATCH              | own    | 204         | 204        | 204        | 204        | 204          | 403        | 204        | 204        | 401         |
| tus PATCH              | other  | 204         | 404        | 404        | 204        | 404          | 403        | 404        | 404        | 401         |
| tus DELETE unfinished  | own    | 204         | 204        | 204        | 204        | 204          | 403        | 204        | 204        | 401         |
| tus DELETE unfinished  | other  | 204         | 404        | 404        | 204        | 404          | 403        | 404        | 404        | 401         |
| tus DELETE finished    | own    | 204         | 204        | 204        | 204        | 403          | 403        | 403        | 403        | 401         |
| tus DELETE finished    | other  | 204         | 404        | 404        | 204        | 404          | 403        | 404        | 404        | 401         |
| tus concatenation      | own    | 201 url     | 201 url    | 201 url    | 201 url    | 201 no-url   | 403        | 201 url    | 201 no-url | 401         |
| tus concatenation      | other  | 201 url     | 404        | 404        | 201 url    | 404          | 403        | 404        | 404        | 401         |
| IETF append            | own    | 204 url     | 204 url    | 204 url    | 204 url    | 204 no-url   | 403        | 204 url    | 204 no-url | 401         |
| IETF append            | other  | 204 url     | 404        | 404        | 204 url    | 404          | 403        | 404        | 404        | 401         |
| XML-RPC wp.uploadFile  | new    | fault 403   | ok url     | ok url     | ok url     | fault 403    | fault 403  | ok url     | ok no-url  | fault 403   |
| XML-RPC getMediaLibrary| own    | fault 403   | ok listed  | ok listed  | ok listed  | fault 403    | fault 403  | ok listed  | fault 401  | fault 403   |
| XML-RPC getMediaLibrary| other  | fault 403   | ok hidden  | ok hidden  | ok listed  | fault 403    | fault 403  | ok hidden  | fault 401  | fault 403   |
| XML-RPC getMediaItem   | own    | fault 403   | ok         | ok         | ok         | fault 403    | fault 403  | ok         | fault 401  | fault 403   |
| XML-RPC getMediaItem   | other  | fault 403   | fault 404  | fault 404  | ok         | fault 403    | fault 403  | fault 404  | fault 401  | fault 403   |
| XML-RPC wp.deletePost  | own    | fault 403   | ok         | ok         | ok         | fault 403    | fault 403  | fault 401  | fault 401  | fault 403   |
| XML-RPC wp.deletePost  | other  | fault 403   | fault 404  | fault 404  | ok         | fault 403    | fault 403  | fault 401  | fault 401  | fault 403   |
| SOAP upload            | new    | 200 url     | 200 url    | 200 url    | 200 url    | 200 no-url   | fault 403  | 200 url    | 200 no-url | fault 401   |
";

// Why some cells are what they are (the issue is silent on them; a reader auditing the table
// should not have to guess):
// - A missing scope is checked before anything is looked up, so a credential without `read`
//   gets 403 for another owner's item as for its own: the answer tells nothing about the id.
//   The exception is the tus `DELETE` of a finished upload: whether it needs `delete` depends on
//   the upload, which must be found first, so another owner's is 404 there.
// - XML-RPC takes a user's name and password, or a JWT as the password of the user `jwt`, never
//   a stored token (the admin token, the upload and read tokens are a bad login, fault 403).
//   Its codes are WordPress's: 403 a bad login, 401 a capability the user lacks, 404 a missing
//   (or another author's) item; an author's library is their own items, as WordPress's.
// - A link is a capability: whoever holds it reads the item, whatever else the request
//   carries (even credentials that are refused elsewhere); it is handed out only to a principal
//   with `read`. An image's variants follow the item: `GET /v1/media/{id}/variant` answers as
//   `GET /v1/media/{id}` does, and a variant's own link (the item's `thumbnail`) as the item's.
// - Concatenating another owner's partial uploads answers as for missing ones: 404, as a
//   missing upload is everywhere else in the tus protocol (tusd answers the same).

const SECRET: &str = "permissions-test-hs256-secret-of-more-than-32-bytes";
const ANN: &str = "ann";
const BOB: &str = "bob";
const ED: &str = "ed";
const ADMIN: &str = "admin";
const OCTETS: &str = "application/offset+octet-stream";

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Who {
    Admin,
    AuthorA,
    AuthorB,
    Editor,
    UploadToken,
    ReadToken,
    Jwt,
    UploadJwt,
    ExpiredJwt,
}

const WHO: [(Who, &str); 9] = [
    (Who::Admin, "admin token"),
    (Who::AuthorA, "author A"),
    (Who::AuthorB, "author B"),
    (Who::Editor, "editor"),
    (Who::UploadToken, "upload token"),
    (Who::ReadToken, "read token"),
    (Who::Jwt, "JWT"),
    (Who::UploadJwt, "upload JWT"),
    (Who::ExpiredJwt, "expired JWT"),
];

/// The principals whose credentials are JWTs (made with Python).
const JWTS: [Who; 3] = [Who::Jwt, Who::UploadJwt, Who::ExpiredJwt];

impl Who {
    /// The owner of what it makes.
    fn owner(self) -> &'static str {
        match self {
            Who::Admin => ADMIN,
            Who::AuthorB => BOB,
            Who::Editor => ED,
            _ => ANN,
        }
    }

    /// The owner of its `other` target.
    fn other(self) -> &'static str {
        match self.owner() {
            ANN => BOB,
            _ => ANN,
        }
    }

    /// Reaches every owner's items.
    fn everyone(self) -> bool {
        matches!(self, Who::Admin | Who::Editor)
    }

    fn user(self) -> Option<&'static str> {
        match self {
            Who::AuthorA => Some(ANN),
            Who::AuthorB => Some(BOB),
            Who::Editor => Some(ED),
            _ => None,
        }
    }

    /// Who makes the items of `owner` for the cells.
    fn maker(owner: &str) -> Who {
        match owner {
            ADMIN => Who::Admin,
            ANN => Who::AuthorA,
            BOB => Who::AuthorB,
            ED => Who::Editor,
            o => panic!("no maker for {o}"),
        }
    }
}

fn password(user: &str) -> String {
    format!("{user}-pass:word")
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    Form,
    Put,
    List,
    ListOwner,
    Get,
    Head,
    Link,
    Variant,
    VariantLink,
    Delete,
    TusCreate,
    TusHead,
    TusPatch,
    TusDelete,
    TusDeleteFinished,
    TusConcat,
    IetfAppend,
    RpcUpload,
    RpcLibrary,
    RpcItem,
    RpcDelete,
    SoapUpload,
}

const OPS: [(Op, &str); 22] = [
    (Op::Form, "form upload"),
    (Op::Put, "raw PUT"),
    (Op::List, "list"),
    (Op::ListOwner, "list owner="),
    (Op::Get, "GET"),
    (Op::Head, "HEAD"),
    (Op::Link, "link GET"),
    (Op::Variant, "variant GET"),
    (Op::VariantLink, "variant link GET"),
    (Op::Delete, "DELETE"),
    (Op::TusCreate, "tus create"),
    (Op::TusHead, "tus HEAD"),
    (Op::TusPatch, "tus PATCH"),
    (Op::TusDelete, "tus DELETE unfinished"),
    (Op::TusDeleteFinished, "tus DELETE finished"),
    (Op::TusConcat, "tus concatenation"),
    (Op::IetfAppend, "IETF append"),
    (Op::RpcUpload, "XML-RPC wp.uploadFile"),
    (Op::RpcLibrary, "XML-RPC getMediaLibrary"),
    (Op::RpcItem, "XML-RPC getMediaItem"),
    (Op::RpcDelete, "XML-RPC wp.deletePost"),
    (Op::SoapUpload, "SOAP upload"),
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Target {
    New,
    Own,
    Other,
}

/// One row of [`MATRIX`].
struct Row {
    op: Op,
    op_name: &'static str,
    target: Target,
    target_name: &'static str,
    cells: Vec<(Who, &'static str)>,
}

/// [`MATRIX`] read: every column named, every row an operation and target this test knows.
fn matrix() -> Vec<Row> {
    let mut lines = MATRIX.lines().map(str::trim).filter(|l| !l.is_empty());
    let split = |l: &'static str| -> Vec<&'static str> {
        let l = l.trim_matches('|');
        l.split('|').map(str::trim).collect()
    };
    let head = split(lines.next().unwrap());
    let who: Vec<Who> = head[2..]
        .iter()
        .map(|c| {
            WHO.iter()
                .find(|(_, n)| n == c)
                .unwrap_or_else(|| panic!("no principal {c:?}"))
                .0
        })
        .collect();
    assert_eq!(who.len(), WHO.len());
    lines.next(); // the rule
    let rows: Vec<Row> = lines
        .map(|l| {
            let c = split(l);
            assert_eq!(c.len(), 2 + who.len(), "{l}");
            let (op, op_name) = *OPS
                .iter()
                .find(|(_, n)| *n == c[0])
                .unwrap_or_else(|| panic!("no operation {:?}", c[0]));
            let target = match c[1] {
                "new" => Target::New,
                "own" => Target::Own,
                "other" => Target::Other,
                t => panic!("no target {t:?}"),
            };
            Row {
                op,
                op_name,
                target,
                target_name: c[1],
                cells: who.iter().copied().zip(c[2..].iter().copied()).collect(),
            }
        })
        .collect();
    for (op, n) in OPS {
        assert!(rows.iter().any(|r| r.op == op), "{n} has no row");
    }
    rows
}

/// Observed cells in [`MATRIX`]'s form (only the columns that ran).
fn table(rows: &[Row], who: &[Who], got: &HashMap<(usize, Who), String>) -> String {
    let mut out = String::from("| operation | target |");
    for w in who {
        let name = WHO.iter().find(|(x, _)| x == w).unwrap().1;
        out.push_str(&format!(" {name} |"));
    }
    out.push('\n');
    for (i, r) in rows.iter().enumerate() {
        out.push_str(&format!("| {} | {} |", r.op_name, r.target_name));
        for w in who {
            let c = got.get(&(i, *w)).map_or("?", String::as_str);
            out.push_str(&format!(" {c} |"));
        }
        out.push('\n');
    }
    out
}

// ---------------------------------------------------------------------------
// JWTs from PyJWT

/// The JWTs of [`JWTS`], made by tests/py/mint_jwts.py in the venv of
/// testsuite/py/requirements.txt.
fn mint_jwts() -> HashMap<Who, String> {
    let py = bulkwire_testsuite::python_venv(Path::new(env!("CARGO_TARGET_TMPDIR")), "jwt");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/mint_jwts.py");
    let want = serde_json::json!({
        "jwt": {"sub": ANN, "scope": "upload read", "exp_in": 3600},
        "upload": {"sub": ANN, "scope": "upload", "exp_in": 3600},
        "expired": {"sub": ANN, "scope": "upload read", "exp_in": -3600},
    });
    let out = Command::new(py)
        .arg(script)
        .arg(SECRET)
        .arg(want.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let j: Json = match stdout.lines().last().map(serde_json::from_str::<Json>) {
        Some(Ok(j)) if out.status.success() && j["ok"] == true => j,
        _ => panic!(
            "mint_jwts.py failed ({:?}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
    };
    let t = |k: &str| j["tokens"][k].as_str().unwrap().to_string();
    HashMap::from([
        (Who::Jwt, t("jwt")),
        (Who::UploadJwt, t("upload")),
        (Who::ExpiredJwt, t("expired")),
    ])
}

// ---------------------------------------------------------------------------
// The server and its fixtures

/// What the stores hold, as far as a refused creation could have changed it.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    ids: BTreeSet<String>,
    blobs: usize,
    temps: usize,
    spools: usize,
}

/// An item, an unfinished upload and two complete partial uploads of one owner, read by the
/// cells that change nothing.
struct Fixed {
    item: String,
    data: Vec<u8>,
    link: String,
    /// An image of the owner's (a JPEG) and its `thumbnail`, a variant's own link.
    image: String,
    thumbnail: String,
    upload: String,
    partials: String,
    whole: Vec<u8>,
}

struct M {
    h: Harness,
    /// Bearer secrets of the principals that have one.
    secrets: HashMap<Who, String>,
    fixed: HashMap<&'static str, Fixed>,
    seed: AtomicU64,
    problems: Mutex<Vec<String>>,
}

/// A server with the users, tokens and JWT secret of the matrix, and each owner's fixtures.
async fn setup(jwts: HashMap<Who, String>) -> M {
    let h = start_edited(|c| {
        c.auth.jwt_secret = Some(SECRET.into());
        // The tokens given to XML-RPC are wrong passwords of ann and admin, failed logins
        // from one address that, with more rows, could throttle ann's own cells: not what
        // this test is about (expired_jwts_lock_no_one_out is about the throttle).
        c.limits.login_failures = 1_000_000;
        // Refused appends and deletes leave their uploads open.
        c.limits.open_uploads = 10_000;
    })
    .await;
    for (name, role) in [(ANN, Role::Author), (BOB, Role::Author), (ED, Role::Editor)] {
        add_user(&h, name, &password(name), role).await;
    }
    let mut secrets = jwts;
    secrets.insert(Who::Admin, TOKEN.to_string());
    for (who, scope) in [(Who::UploadToken, "upload"), (Who::ReadToken, "read")] {
        secrets.insert(who, add_token(&h, ANN, scope).await);
    }
    let mut m = M {
        h,
        secrets,
        fixed: HashMap::new(),
        seed: AtomicU64::new(1000),
        problems: Mutex::new(Vec::new()),
    };
    for owner in [ADMIN, ANN, BOB, ED] {
        let (item, data) = m.new_item(owner).await;
        let link = m
            .items()
            .await
            .into_iter()
            .find(|i| i["id"] == item.as_str())
            .unwrap()["url"]
            .as_str()
            .unwrap()
            .to_string();
        let (image, thumbnail) = m.new_image(owner).await;
        let upload = m.new_upload(owner, 10, b"abc").await;
        let (one, two) = (m.data(70), m.data(30));
        let a = m.new_partial(owner, &one).await;
        let b = m.new_partial(owner, &two).await;
        let fixed = Fixed {
            item,
            data,
            link,
            image,
            thumbnail,
            upload,
            partials: format!("/v1/uploads/{a} /v1/uploads/{b}"),
            whole: [one, two].concat(),
        };
        m.fixed.insert(owner, fixed);
    }
    m
}

fn basic(user: &str, pass: &str) -> String {
    let b = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
    format!("Basic {b}")
}

fn header(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
}

/// The id at the end of a `Location`.
fn location_id(r: &reqwest::Response) -> String {
    let loc = header(r, "location").expect("a Location");
    loc.rsplit('/').next().unwrap().to_string()
}

type V = Value<Vec<u8>>;

fn s(v: &str) -> V {
    Value::String(v.into())
}

/// One XML-RPC call (blog id, `user`, `pass`, then `rest`): the result, or the fault's code.
async fn rpc(h: &Harness, user: &str, pass: &str, method: &str, rest: Vec<V>) -> Result<V, i32> {
    let mut params = vec![Value::Int(1), s(user), s(pass)];
    params.extend(rest);
    let body = encode_call(method, &params, &EncodeOptions::default()).unwrap();
    let r = h
        .http
        .post(h.url("/xmlrpc"))
        .header("content-type", "text/xml")
        .body(body.to_vec().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{method}");
    let bytes = r.bytes().await.unwrap();
    let (msg, _) = parse(&bytes, Default::default(), MemorySink::new(1 << 20)).unwrap();
    match msg.into_response().expect("a methodResponse") {
        Response::Params(mut p) => Ok(p.remove(0)),
        Response::Fault(f) => Err(f.code),
    }
}

impl M {
    fn problem(&self, p: String) {
        self.problems.lock().unwrap().push(p);
    }

    /// Distinct bytes for each file.
    fn data(&self, len: usize) -> Vec<u8> {
        payload(len, self.seed.fetch_add(1, SeqCst))
    }

    fn secret(&self, who: Who) -> &str {
        self.secrets
            .get(&who)
            .unwrap_or_else(|| panic!("no secret for {who:?}"))
    }

    /// The `Authorization` of `who` on `/v1`.
    fn authorization(&self, who: Who) -> String {
        match who.user() {
            Some(u) => basic(u, &password(u)),
            None => format!("Bearer {}", self.secret(who)),
        }
    }

    /// The `Authorization` of `who` on `/soap`: a JWT as the password of the user `jwt`.
    fn soap_authorization(&self, who: Who) -> String {
        match who {
            Who::Jwt | Who::UploadJwt | Who::ExpiredJwt => basic("jwt", self.secret(who)),
            _ => self.authorization(who),
        }
    }

    /// The name and password `who` gives to XML-RPC.
    fn rpc_login(&self, who: Who) -> (String, String) {
        match (who.user(), who) {
            (Some(u), _) => (u.to_string(), password(u)),
            (None, w) if JWTS.contains(&w) => ("jwt".into(), self.secret(who).into()),
            (None, _) => (who.owner().to_string(), self.secret(who).into()),
        }
    }

    fn req(&self, who: Who, m: Method, path: &str) -> RequestBuilder {
        self.h
            .http
            .request(m, self.h.url(path))
            .header("authorization", self.authorization(who))
    }

    fn tus(&self, who: Who, m: Method, path: &str) -> RequestBuilder {
        self.req(who, m, path).header("tus-resumable", "1.0.0")
    }

    fn ietf(&self, who: Who, m: Method, path: &str) -> RequestBuilder {
        self.req(who, m, path)
            .header("upload-draft-interop-version", "6")
    }

    // -- fixtures, made by each owner's own credentials

    async fn new_item(&self, owner: &str) -> (String, Vec<u8>) {
        let data = self.data(100);
        let r = self
            .req(Who::maker(owner), Method::PUT, "/v1/media/item.bin")
            .header("content-type", "application/octet-stream")
            .body(data.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{owner}");
        let j: Json = r.json().await.unwrap();
        assert_eq!(j["media"][0]["owner"], owner);
        (j["media"][0]["id"].as_str().unwrap().to_string(), data)
    }

    /// A JPEG of `owner`'s: its id and, as the owner's answer gives it, its `thumbnail`.
    async fn new_image(&self, owner: &str) -> (String, String) {
        let r = self
            .req(Who::maker(owner), Method::PUT, "/v1/media/photo.jpg")
            .header("content-type", "image/jpeg")
            .body(self.jpeg())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{owner}");
        let j: Json = r.json().await.unwrap();
        let m = &j["media"][0];
        let thumb = m["thumbnail"].as_str().expect("a thumbnail link");
        (m["id"].as_str().unwrap().to_string(), thumb.to_string())
    }

    /// A small real JPEG (40 × 30 pixels of noise), different each time.
    fn jpeg(&self) -> Vec<u8> {
        let px = self.data(40 * 30 * 3);
        let mut v = Vec::new();
        jpeg_encoder::Encoder::new(&mut v, 80)
            .encode(&px, 40, 30, jpeg_encoder::ColorType::Rgb)
            .unwrap();
        v
    }

    /// An unfinished tus upload of `len` bytes, `first` of them sent.
    async fn new_upload(&self, owner: &str, len: usize, first: &[u8]) -> String {
        let mut r = self
            .tus(Who::maker(owner), Method::POST, "/v1/uploads")
            .header("upload-length", len);
        if !first.is_empty() {
            r = r.header("content-type", OCTETS).body(first.to_vec());
        }
        let r = r.send().await.unwrap();
        assert_eq!(r.status(), 201, "{owner}");
        if !first.is_empty() {
            assert_eq!(header(&r, "upload-offset"), Some(first.len().to_string()));
        }
        location_id(&r)
    }

    async fn new_finished(&self, owner: &str) -> String {
        let data = self.data(20);
        self.new_upload(owner, data.len(), &data).await
    }

    async fn new_partial(&self, owner: &str, data: &[u8]) -> String {
        let r = self
            .tus(Who::maker(owner), Method::POST, "/v1/uploads")
            .header("upload-length", data.len())
            .header("upload-concat", "partial")
            .header("content-type", OCTETS)
            .body(data.to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{owner}");
        location_id(&r)
    }

    /// An IETF (interop 6) upload with no byte yet.
    async fn new_ietf(&self, owner: &str) -> String {
        let r = self
            .ietf(Who::maker(owner), Method::POST, "/v1/uploads")
            .header("upload-complete", "?0")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{owner}");
        location_id(&r)
    }

    // -- the administrator's view

    /// Every item, as the admin token lists it.
    async fn items(&self) -> Vec<Json> {
        let r = self
            .req(Who::Admin, Method::GET, "/v1/media?limit=1000&order=asc")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let j: Json = r.json().await.unwrap();
        assert!(j["next"].is_null(), "more than 1000 items");
        j["media"].as_array().unwrap().clone()
    }

    async fn owners(&self) -> HashMap<String, String> {
        self.items()
            .await
            .into_iter()
            .map(|i| {
                let id = i["id"].as_str().unwrap().to_string();
                (id, i["owner"].as_str().unwrap().to_string())
            })
            .collect()
    }

    async fn snapshot(&self) -> Snapshot {
        let p = self.h.probe();
        Snapshot {
            ids: self.owners().await.into_keys().collect(),
            blobs: p.blob_count(),
            temps: p.temp_count(),
            spools: p.spool_count(),
        }
    }

    /// The admin's `GET /v1/media/{id}` status, and whether its blob is there.
    async fn media(&self, id: &str) -> (u16, bool) {
        let r = self
            .req(Who::Admin, Method::GET, &format!("/v1/media/{id}"))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), self.h.probe().blob_exists(id))
    }

    /// The offset of upload `id` as the admin's tus `HEAD` says (`None`: 404).
    async fn offset(&self, id: &str) -> Option<u64> {
        let r = self
            .tus(Who::Admin, Method::HEAD, &format!("/v1/uploads/{id}"))
            .send()
            .await
            .unwrap();
        match r.status().as_u16() {
            200 => Some(header(&r, "upload-offset").unwrap().parse().unwrap()),
            404 => None,
            s => panic!("HEAD {id}: {s}"),
        }
    }

    // -- checks after a cell

    /// A creation that passed made item `id` of `owner` holding `data`.
    async fn check_made(&self, cell: &str, id: &str, owner: &str, data: &[u8]) {
        let items = self.items().await;
        let Some(i) = items.iter().find(|i| i["id"] == id) else {
            return self.problem(format!("{cell}: passed, but {id} is not listed"));
        };
        if i["owner"] != owner || i["sha256"] != sha256(data) {
            self.problem(format!(
                "{cell}: made {i}, not an item of {owner} with sha256 {}",
                sha256(data)
            ));
        }
    }

    /// A refused creation left the stores as they were.
    async fn check_unchanged(&self, cell: &str, before: &Snapshot) {
        let after = self.snapshot().await;
        if &after != before {
            self.problem(format!(
                "{cell}: refused, but the stores changed: {before:?} -> {after:?}"
            ));
        }
    }

    /// Item `id` is gone (`gone`) or still there, row and blob.
    async fn check_media(&self, cell: &str, id: &str, gone: bool) {
        let want = if gone { (404, false) } else { (200, true) };
        let p = self.h.probe();
        let got = if gone {
            // The blob goes before the answer; an S3 listing may lag a moment.
            wait_until("the blob is gone", || !p.blob_exists(id)).await;
            self.media(id).await
        } else {
            self.media(id).await
        };
        if got != want {
            self.problem(format!(
                "{cell}: item {id} is (status, blob) {got:?}, want {want:?}"
            ));
        }
    }

    async fn check_offset(&self, cell: &str, id: &str, want: Option<u64>) {
        let got = self.offset(id).await;
        if got != want {
            self.problem(format!(
                "{cell}: upload {id} at offset {got:?}, want {want:?}"
            ));
        }
    }

    // -- the cells

    async fn cell(&self, op: Op, t: Target, who: Who) -> String {
        let owner = match t {
            Target::Other => who.other(),
            _ => who.owner(),
        };
        let cell = format!("{op:?} {t:?} {who:?}");
        let fixed = &self.fixed[owner];
        match op {
            Op::Form | Op::Put | Op::TusCreate => self.create(&cell, op, who).await,
            Op::List | Op::ListOwner => self.list(&cell, op, who, owner).await,
            Op::Get | Op::Head => {
                let m = if op == Op::Get {
                    Method::GET
                } else {
                    Method::HEAD
                };
                let r = self.req(who, m, &format!("/v1/media/{}", fixed.item));
                self.read(&cell, r, &fixed.data, op == Op::Get).await
            }
            Op::Link => {
                let r = self
                    .h
                    .http
                    .get(&fixed.link)
                    .header("authorization", self.authorization(who));
                self.read(&cell, r, &fixed.data, true).await
            }
            Op::Variant => {
                let q = "variant?w=150&h=150&fit=cover&format=png";
                let r = self.req(who, Method::GET, &format!("/v1/media/{}/{q}", fixed.image));
                self.variant(&cell, r, b"\x89PNG").await
            }
            Op::VariantLink => {
                let r = self
                    .h
                    .http
                    .get(&fixed.thumbnail)
                    .header("authorization", self.authorization(who));
                self.variant(&cell, r, b"RIFF").await
            }
            Op::Delete => {
                let (id, _) = self.new_item(owner).await;
                let r = self.req(who, Method::DELETE, &format!("/v1/media/{id}"));
                let status = r.send().await.unwrap().status().as_u16();
                self.check_media(&cell, &id, status == 204).await;
                status.to_string()
            }
            Op::TusHead => {
                let r = self.tus(who, Method::HEAD, &format!("/v1/uploads/{}", fixed.upload));
                let r = r.send().await.unwrap();
                if r.status() == 200 && header(&r, "upload-offset").as_deref() != Some("3") {
                    self.problem(format!("{cell}: {r:?}"));
                }
                r.status().as_str().to_string()
            }
            Op::TusPatch => {
                let id = self.new_upload(owner, 10, b"").await;
                let r = self
                    .tus(who, Method::PATCH, &format!("/v1/uploads/{id}"))
                    .header("content-type", OCTETS)
                    .header("upload-offset", 0)
                    .body(b"12345".to_vec());
                let status = r.send().await.unwrap().status().as_u16();
                let want = if status == 204 { 5 } else { 0 };
                self.check_offset(&cell, &id, Some(want)).await;
                status.to_string()
            }
            Op::TusDelete => {
                let id = self.new_upload(owner, 10, b"abc").await;
                let before = self.h.probe().spool_count();
                let r = self.tus(who, Method::DELETE, &format!("/v1/uploads/{id}"));
                let status = r.send().await.unwrap().status().as_u16();
                let gone = status == 204;
                self.check_offset(&cell, &id, (!gone).then_some(3)).await;
                let after = self.h.probe().spool_count();
                if self.h.probe().sees_spools() && after + usize::from(gone) != before {
                    self.problem(format!("{cell}: {before} unfinished uploads, then {after}"));
                }
                status.to_string()
            }
            Op::TusDeleteFinished => {
                let id = self.new_finished(owner).await;
                let r = self.tus(who, Method::DELETE, &format!("/v1/uploads/{id}"));
                let status = r.send().await.unwrap().status().as_u16();
                self.check_media(&cell, &id, status == 204).await;
                status.to_string()
            }
            Op::TusConcat => {
                let before = self.snapshot().await;
                let r = self
                    .tus(who, Method::POST, "/v1/uploads")
                    .header("upload-concat", format!("final;{}", fixed.partials))
                    .send()
                    .await
                    .unwrap();
                self.made(&cell, r, 201, who.owner(), &fixed.whole, &before)
                    .await
            }
            Op::IetfAppend => {
                let id = self.new_ietf(owner).await;
                let data = self.data(40);
                let r = self
                    .ietf(who, Method::PATCH, &format!("/v1/uploads/{id}"))
                    .header("content-type", "application/partial-upload")
                    .header("upload-offset", 0)
                    .header("upload-complete", "?1")
                    .body(data.clone())
                    .send()
                    .await
                    .unwrap();
                let status = r.status().as_u16();
                if status != 204 {
                    self.check_offset(&cell, &id, Some(0)).await;
                    return status.to_string();
                }
                let url = header(&r, "link").is_some();
                self.check_made(&cell, &id, owner, &data).await;
                format!("204 {}", if url { "url" } else { "no-url" })
            }
            Op::RpcUpload => self.rpc_upload(&cell, who).await,
            Op::RpcLibrary => {
                let filter = Value::Struct(vec![("number".into(), Value::Int(1000))]);
                match self.rpc(who, "wp.getMediaLibrary", vec![filter]).await {
                    Err(code) => format!("fault {code}"),
                    Ok(Value::Array(items)) => {
                        let ids: Vec<&str> = items
                            .iter()
                            .map(|i| i.get("id").and_then(Value::as_str).unwrap())
                            .collect();
                        self.check_reach(&cell, who, None, &ids).await;
                        let listed = ids.contains(&fixed.item.as_str());
                        format!("ok {}", if listed { "listed" } else { "hidden" })
                    }
                    Ok(v) => panic!("{cell}: {v:?}"),
                }
            }
            Op::RpcItem => match self.rpc(who, "wp.getMediaItem", vec![s(&fixed.item)]).await {
                Err(code) => format!("fault {code}"),
                Ok(v) => {
                    if v.get("id").and_then(Value::as_str) != Some(fixed.item.as_str()) {
                        self.problem(format!("{cell}: {v:?}"));
                    }
                    "ok".into()
                }
            },
            Op::RpcDelete => {
                let (id, _) = self.new_item(owner).await;
                let r = self.rpc(who, "wp.deletePost", vec![s(&id)]).await;
                self.check_media(&cell, &id, r.is_ok()).await;
                match r {
                    Err(code) => format!("fault {code}"),
                    Ok(Value::Bool(true)) => "ok".into(),
                    Ok(v) => panic!("{cell}: {v:?}"),
                }
            }
            Op::SoapUpload => self.soap_upload(&cell, who).await,
        }
    }

    /// A form upload, a raw `PUT` or a tus creation with the whole file.
    async fn create(&self, cell: &str, op: Op, who: Who) -> String {
        let mut data = self.data(50);
        let before = self.snapshot().await;
        let r = match op {
            Op::Form => {
                let part = reqwest::multipart::Part::bytes(data.clone())
                    .file_name("f.bin")
                    .mime_str("application/octet-stream")
                    .unwrap();
                let form = reqwest::multipart::Form::new().part("file", part);
                self.req(who, Method::POST, "/v1/media").multipart(form)
            }
            // A JPEG: its answer has variant links, or none with `no-url`.
            Op::Put => {
                data = self.jpeg();
                self.req(who, Method::PUT, "/v1/media/p.jpg")
                    .header("content-type", "image/jpeg")
                    .body(data.clone())
            }
            _ => self
                .tus(who, Method::POST, "/v1/uploads")
                .header("upload-length", data.len())
                .header("content-type", OCTETS)
                .body(data.clone()),
        };
        let r = r.send().await.unwrap();
        self.made(cell, r, 201, who.owner(), &data, &before).await
    }

    /// The cell of a creation answered by `r`: `{status} url|no-url` when it passed (then
    /// checked as made by `owner`), else the status (then checked to have changed nothing).
    async fn made(
        &self,
        cell: &str,
        r: reqwest::Response,
        ok: u16,
        owner: &str,
        data: &[u8],
        before: &Snapshot,
    ) -> String {
        let status = r.status().as_u16();
        if status != ok {
            self.check_unchanged(cell, before).await;
            return status.to_string();
        }
        let (id, url) = if header(&r, "tus-resumable").is_some() {
            (location_id(&r), header(&r, "link").is_some())
        } else {
            let j: Json = r.json().await.unwrap();
            let m = &j["media"][0];
            if m["url"] != j["url"] {
                self.problem(format!("{cell}: the top url is not the item's: {j}"));
            }
            for k in ["thumbnail", "thumbnail_2x"] {
                let image = m["content_type"] == "image/jpeg";
                if m[k].is_null() != (m["url"].is_null() || !image) {
                    self.problem(format!("{cell}: {k} {} with url {}", m[k], m["url"]));
                }
            }
            (m["id"].as_str().unwrap().to_string(), !m["url"].is_null())
        };
        self.check_made(cell, &id, owner, data).await;
        format!("{status} {}", if url { "url" } else { "no-url" })
    }

    /// A listing that must name only items `who` reaches (of `asked`, when given).
    async fn check_reach(&self, cell: &str, who: Who, asked: Option<&str>, ids: &[&str]) {
        let owners = self.owners().await;
        for id in ids {
            let o = owners.get(*id).map_or("?", String::as_str);
            let reach = who.everyone() || o == who.owner();
            if !reach || asked.is_some_and(|a| a != o) {
                self.problem(format!("{cell}: listed {id} of {o} (asked: {asked:?})"));
            }
        }
    }

    async fn list(&self, cell: &str, op: Op, who: Who, owner: &str) -> String {
        let mut path = "/v1/media?limit=1000".to_string();
        let asked = (op == Op::ListOwner).then_some(owner);
        if let Some(o) = asked {
            path.push_str(&format!("&owner={o}"));
        }
        let r = self.req(who, Method::GET, &path).send().await.unwrap();
        if r.status() != 200 {
            return r.status().as_str().to_string();
        }
        let j: Json = r.json().await.unwrap();
        let media = j["media"].as_array().unwrap();
        let ids: Vec<&str> = media.iter().map(|m| m["id"].as_str().unwrap()).collect();
        self.check_reach(cell, who, asked, &ids).await;
        let listed = ids.contains(&self.fixed[owner].item.as_str());
        format!("200 {}", if listed { "listed" } else { "hidden" })
    }

    /// A download (or `HEAD`): the status, and on 200 the bytes.
    async fn read(&self, cell: &str, r: RequestBuilder, data: &[u8], body: bool) -> String {
        let r = r.send().await.unwrap();
        let status = r.status().as_u16();
        if status == 200 {
            let len = header(&r, "content-length");
            let got = r.bytes().await.unwrap();
            if len != Some(data.len().to_string()) || (body && got != data) {
                self.problem(format!("{cell}: not the item's bytes"));
            }
        }
        status.to_string()
    }

    /// A variant's cell: on 200 its body must begin with `magic` (the format asked for).
    async fn variant(&self, cell: &str, r: RequestBuilder, magic: &[u8]) -> String {
        let r = r.send().await.unwrap();
        let status = r.status().as_u16();
        if status == 200 {
            let got = r.bytes().await.unwrap();
            if !got.starts_with(magic) {
                self.problem(format!("{cell}: not the variant asked for"));
            }
        }
        status.to_string()
    }

    /// One XML-RPC call as `who` (blog id, name, password, then `rest`): the result, or the
    /// fault's code.
    async fn rpc(&self, who: Who, method: &str, rest: Vec<V>) -> Result<V, i32> {
        let (user, pass) = self.rpc_login(who);
        rpc(&self.h, &user, &pass, method, rest).await
    }

    async fn rpc_upload(&self, cell: &str, who: Who) -> String {
        let data = self.data(60);
        let before = self.snapshot().await;
        let file = Value::Struct(vec![
            ("name".into(), s("rpc.bin")),
            ("type".into(), s("application/octet-stream")),
            ("bits".into(), Value::Base64(data.clone())),
            ("overwrite".into(), Value::Bool(true)),
        ]);
        match self.rpc(who, "wp.uploadFile", vec![file]).await {
            Err(code) => {
                self.check_unchanged(cell, &before).await;
                format!("fault {code}")
            }
            Ok(v) => {
                let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let (id, url) = (text("id"), text("url"));
                for k in ["link", "thumbnail"] {
                    // Another name for the same link, never handed out when `url` is not.
                    if !text(k).is_empty() && text(k) != url {
                        self.problem(format!("{cell}: {k} {} but url {url:?}", text(k)));
                    }
                }
                self.check_made(cell, &id, who.owner(), &data).await;
                format!("ok {}", if url.is_empty() { "no-url" } else { "url" })
            }
        }
    }

    async fn soap_upload(&self, cell: &str, who: Who) -> String {
        use soap_util::{base64_wrapped, envelope, fault, parse, text, SOAP11};
        let data = self.data(70);
        let before = self.snapshot().await;
        let env = envelope(SOAP11, "soap.bin", None, &base64_wrapped(&data));
        let r = self
            .h
            .http
            .post(self.h.url("/soap"))
            .header("content-type", "text/xml; charset=utf-8")
            .header("authorization", self.soap_authorization(who))
            .body(env)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let body = r.bytes().await.unwrap();
        if status != 200 {
            // A fault body, or `fault` panics.
            fault(&body);
            self.check_unchanged(cell, &before).await;
            return format!("fault {status}");
        }
        let els = parse(&body);
        let id = text(&els, "id").unwrap().to_string();
        let url = text(&els, "url").is_some_and(|u| !u.is_empty());
        self.check_made(cell, &id, who.owner(), &data).await;
        format!("200 {}", if url { "url" } else { "no-url" })
    }
}

/// Runs every row of [`MATRIX`] for the principals `who`, one cell at a time, and compares.
async fn run_matrix(who: &[Who], jwts: HashMap<Who, String>) {
    let m = setup(jwts).await;
    let rows = matrix();
    let mut got = HashMap::new();
    let mut wrong = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        for (w, want) in r.cells.iter().filter(|(w, _)| who.contains(w)) {
            let cell = m.cell(r.op, r.target, *w).await;
            if cell != *want {
                wrong.push(format!(
                    "{} ({}) as {w:?}: {cell}, want {want}",
                    r.op_name, r.target_name
                ));
            }
            got.insert((i, *w), cell);
        }
    }
    let problems = m.problems.lock().unwrap().clone();
    assert!(
        wrong.is_empty() && problems.is_empty(),
        "{} cells differ:\n{}\n\n{} other problems:\n{}\n\nobserved:\n{}",
        wrong.len(),
        wrong.join("\n"),
        problems.len(),
        problems.join("\n"),
        table(&rows, who, &got)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_matrix() {
    let who: Vec<Who> = WHO
        .iter()
        .map(|(w, _)| *w)
        .filter(|w| !JWTS.contains(w))
        .collect();
    run_matrix(&who, HashMap::new()).await;
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_matrix_of_jwts() {
    let jwts = tokio::task::spawn_blocking(mint_jwts).await.unwrap();
    run_matrix(&JWTS, jwts).await;
}

/// JWTs are not failed logins. More expired ones than `login_failures` from one address (as a
/// proxy in front of an application's users sends them) leave that address's valid JWTs and
/// tokens working, as bearer tokens and as the XML-RPC password of the user `jwt`. Wrong
/// stored tokens from it are still throttled (429, the admin token with them), and even then a
/// valid JWT passes: its signature is no guess.
#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_jwts_lock_no_one_out() {
    let jwts = tokio::task::spawn_blocking(mint_jwts).await.unwrap();
    let (valid, expired) = (&jwts[&Who::Jwt], &jwts[&Who::ExpiredJwt]);
    let h = start_edited(|c| c.auth.jwt_secret = Some(SECRET.into())).await;
    let n = h.srv.state.config.limits.login_failures + 5;
    let me = |bearer: &str| {
        let r = h.http.get(h.url("/v1/me")).bearer_auth(bearer).send();
        async move { r.await.unwrap().status().as_u16() }
    };
    let hr = &h;
    let library = move |pass: &str| {
        let pass = pass.to_string();
        async move { rpc(hr, "jwt", &pass, "wp.getMediaLibrary", vec![]).await }
    };
    for i in 0..n {
        assert_eq!(me(expired).await, 401, "expired JWT {i}");
        assert_eq!(library(expired).await.err(), Some(403), "expired JWT {i}");
    }
    assert_eq!(me(valid).await, 200);
    assert_eq!(me(TOKEN).await, 200);
    assert!(library(valid).await.is_ok());
    // Guessed tokens are throttled as ever, the admin token's address with them.
    let mut last = 0;
    for i in 0..n {
        last = me(&format!("guess-{i}")).await;
    }
    assert_eq!(last, 429);
    assert_eq!(me(TOKEN).await, 429);
    assert_eq!(me(valid).await, 200);
}

#[test]
fn rerun_on_shared_stores() {
    common::rerun_on_shared_stores(&[]);
}
