//! `PgMeta` against a real PostgreSQL, started by bulkwire-testenv: the
//! shared conformance checks, nodes migrating at once, an outage, and two
//! janitors racing for the same leases. A PostgreSQL that cannot be
//! started fails these tests (`must`); they never skip.

use bulkwire_store::{
    conformance, new_id, FsBlobStore, LeaseStore, ListQuery, MediaStore, MetaCore, MetaStore,
    NewMedia, Order, PgMeta, TypeFilter,
};
use bulkwire_testenv::{must, shared_postgres, Postgres};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(2);

/// Runs `f` to completion on a runtime of its own: testenv is blocking,
/// so tests stay plain `#[test]`s and enter async code here.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(f)
}

/// A new database on the process's shared server, for one test.
fn fresh_database(name: &str) -> String {
    must(must(shared_postgres()).create_database(name))
}

async fn connect(url: &str) -> PgMeta {
    match PgMeta::connect(url, 4, TIMEOUT).await {
        Ok(m) => m,
        Err(e) => panic!("{e}"),
    }
}

/// A plain client, to look at and tamper with the schema.
async fn raw(url: &str) -> tokio_postgres::Client {
    // Without libpq's TLS parameters, which tokio-postgres's parser refuses.
    let url = url.split('?').next().unwrap_or(url);
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("a plain connection");
    tokio::spawn(conn);
    client
}

fn row(id: &str) -> NewMedia {
    NewMedia {
        id: id.into(),
        owner: "admin".into(),
        field: None,
        filename: Some("a.txt".into()),
        content_type: "text/plain".into(),
        size: 3,
        sha256: "00".repeat(32),
        width: None,
        height: None,
    }
}

#[test]
fn conformance_on_a_fresh_database() {
    let url = fresh_database("conformance");
    block_on(async {
        let meta: Arc<dyn MetaStore> = Arc::new(connect(&url).await);
        conformance::meta_store(meta.clone()).await;
        let dir = tempfile::tempdir().unwrap();
        let blobs = Arc::new(FsBlobStore::open(dir.path()).unwrap());
        conformance::janitor(meta, blobs).await;
    });
}

/// The applied schema steps, in order.
async fn versions(url: &str) -> Vec<(i32, String)> {
    let c = raw(url).await;
    let rows = c
        .query(
            "SELECT version, applied::text FROM schema_version ORDER BY version",
            &[],
        )
        .await
        .unwrap();
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

#[test]
fn nodes_starting_together_migrate_once_and_a_newer_schema_is_refused() {
    let url = fresh_database("migrations");
    block_on(async {
        // Eight nodes at once on an empty database: the advisory lock
        // lets one migrate; without it, CREATE TABLE would race.
        let starts = (0..8).map(|_| PgMeta::connect(&url, 2, TIMEOUT));
        for r in futures_util::future::join_all(starts).await {
            r.unwrap_or_else(|e| panic!("{e}"));
        }
        let applied = versions(&url).await;
        let numbers: Vec<i32> = applied.iter().map(|v| v.0).collect();
        assert_eq!(
            numbers,
            (1..=PgMeta::SCHEMA_VERSION as i32).collect::<Vec<_>>()
        );
        // Connecting again changes nothing.
        let m = connect(&url).await;
        assert_eq!(versions(&url).await, applied);
        let d = m.describe().await.unwrap();
        let schema = format!(", schema version {}, ", PgMeta::SCHEMA_VERSION);
        assert!(d.starts_with("PostgreSQL ") && d.contains(&schema), "{d}");
        assert!(d.contains("/migrations,"), "{d}");
        // A database a newer build migrated is refused.
        raw(&url)
            .await
            .execute("INSERT INTO schema_version (version) VALUES (99)", &[])
            .await
            .unwrap();
        let e = PgMeta::connect(&url, 2, TIMEOUT)
            .await
            .err()
            .expect("a newer schema is refused");
        assert!(e.message.starts_with("PostgreSQL at 127.0.0.1:"), "{e}");
        assert!(e.message.contains("schema version 99 is newer"), "{e}");
        assert!(!e.full);
    });
}

/// A database of before the listing's keys (schema version 4): its rows
/// are found by name and type once a node migrated it, and the step that
/// added the keys may run again on a database that has them.
#[test]
fn rows_of_before_the_listing_keys_are_found_by_name_and_type() {
    let url = fresh_database("listkeys");
    block_on(async {
        drop(connect(&url).await);
        let c = raw(&url).await;
        c.batch_execute(
            "DELETE FROM schema_version WHERE version >= 5;
             DROP INDEX media_type_top;
             ALTER TABLE media DROP COLUMN name_fold, DROP COLUMN type_key, DROP COLUMN type_top;
             INSERT INTO media (id, filename, content_type, size, sha256)
                VALUES ('old-png', 'ÉCLAIR.PNG', 'Image/PNG', 1, 'x'),
                       ('old-txt', 'notes.txt', 'text/plain', 1, 'x'),
                       ('old-none', NULL, 'image/png', 1, 'x');",
        )
        .await
        .unwrap();
        let m = connect(&url).await;
        let q = ListQuery {
            name: Some("éclair".into()),
            media_type: TypeFilter::parse("image/png"),
            ..ListQuery::new(Order::NewestFirst, 10)
        };
        let found: Vec<String> = m.list(q).await.unwrap().into_iter().map(|r| r.id).collect();
        assert_eq!(found, ["old-png"]);
        let q = ListQuery {
            media_type: TypeFilter::parse("image/*"),
            ..ListQuery::new(Order::OldestFirst, 10)
        };
        let found: Vec<String> = m.list(q).await.unwrap().into_iter().map(|r| r.id).collect();
        assert_eq!(found, ["old-png", "old-none"]);
        // The steps again, on the columns they added: nothing changes.
        c.batch_execute("DELETE FROM schema_version WHERE version >= 5")
            .await
            .unwrap();
        let m = connect(&url).await;
        assert_eq!(versions(&url).await.len(), PgMeta::SCHEMA_VERSION);
        let all = m
            .list(ListQuery::new(Order::NewestFirst, 10))
            .await
            .unwrap();
        assert_eq!(all.len(), 3);
    });
}

#[test]
fn a_failed_connect_names_the_server_never_the_password() {
    // A port nobody listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let url = format!("postgres://bulkwire:s3cret@127.0.0.1:{port}/media");
    let e = block_on(PgMeta::connect(&url, 2, TIMEOUT))
        .err()
        .expect("nothing listens there");
    let at = format!("PostgreSQL at 127.0.0.1:{port}/media: ");
    assert!(e.message.starts_with(&at), "{e}");
    assert!(!e.message.contains("s3cret"), "{e}");
    let e = block_on(PgMeta::connect(
        "postgres://u:s3cret@host:port/db",
        2,
        TIMEOUT,
    ))
    .err()
    .expect("not a URL");
    assert!(!e.message.contains("s3cret"), "{e}");
}

/// Runs each call against a stopped server: each must fail, in bounded
/// time, with a PostgreSQL error.
async fn all_fail(m: &PgMeta, id: &str) {
    let calls: Vec<(&str, bulkwire_store::BoxFut<'_, Result<(), _>>)> = vec![
        ("ready", m.ready()),
        ("get", Box::pin(async { m.get(id, None).await.map(drop) })),
        ("heartbeat", m.heartbeat("n")),
        ("lease", m.lease("x", "n")),
        (
            "insert",
            Box::pin(async {
                m.insert(vec![row(id)], "n", bulkwire_store::Quota::default(), None)
                    .await
                    .map(drop)
            }),
        ),
    ];
    for (name, call) in calls {
        // Far above the pool's timeouts: only a hang reaches it.
        let r = tokio::time::timeout(TIMEOUT * 10, call)
            .await
            .unwrap_or_else(|_| panic!("{name} hung while PostgreSQL was down"));
        let e = r.expect_err(name);
        assert!(e.message.starts_with("PostgreSQL: "), "{name}: {e}");
    }
}

#[test]
fn an_outage_fails_requests_and_the_pool_recovers() {
    // A private server: stopping the shared one would break other tests.
    let mut pg = must(Postgres::start());
    let url = pg.url();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let m = rt.block_on(connect(&url));
    let id = new_id();
    rt.block_on(async {
        m.lease(&id, "n").await.unwrap();
        m.insert(vec![row(&id)], "n", bulkwire_store::Quota::default(), None)
            .await
            .unwrap();
        // Several connections in the pool, all of which the outage kills.
        let busy = (0..4).map(|_| m.ready());
        for r in futures_util::future::join_all(busy).await {
            r.unwrap();
        }
    });
    pg.stop();
    rt.block_on(all_fail(&m, &id));
    must(pg.start_again());
    // The same store, no reconnect by hand: dead connections are replaced.
    rt.block_on(async {
        m.ready().await.unwrap();
        assert_eq!(m.get(&id, None).await.unwrap().unwrap().id, id);
        m.heartbeat("n").await.unwrap();
    });
}

/// A janitor's loop: claim a small batch, end each lease, until none is
/// left. Returns every id it claimed.
async fn janitor(m: &PgMeta, me: &str) -> Vec<String> {
    let mut got = Vec::new();
    loop {
        let batch = m
            .claim_expired(me, Duration::from_secs(3600), 5)
            .await
            .unwrap();
        if batch.is_empty() {
            return got;
        }
        for p in batch {
            m.release(&p.id, me).await.unwrap();
            got.push(p.id);
        }
    }
}

#[test]
fn two_janitors_never_claim_the_same_lease() {
    let url = fresh_database("janitors");
    block_on(async {
        let (a, b) = (connect(&url).await, connect(&url).await);
        // Both janitors are alive: a lease one took is not expired.
        a.heartbeat("a.janitor").await.unwrap();
        b.heartbeat("b.janitor").await.unwrap();
        for round in 0..3 {
            let dead = new_id();
            let leased: HashSet<String> = (0..200).map(|_| new_id()).collect();
            for id in &leased {
                a.lease(id, &dead).await.unwrap();
            }
            let (x, y) = tokio::join!(janitor(&a, "a.janitor"), janitor(&b, "b.janitor"));
            let (xs, ys): (HashSet<_>, HashSet<_>) = (x.iter().collect(), y.iter().collect());
            assert_eq!(xs.len(), x.len(), "round {round}: a claimed an id twice");
            assert_eq!(ys.len(), y.len(), "round {round}: b claimed an id twice");
            let both: Vec<_> = xs.intersection(&ys).collect();
            assert!(both.is_empty(), "round {round}: both claimed {both:?}");
            let all: HashSet<String> = x.into_iter().chain(y).collect();
            assert_eq!(all, leased, "round {round}");
        }
    });
}

/// The shared server runs with TLS (testenv), and its URL asks for
/// verify-full: `--check`'s line says so.
#[test]
fn verify_full_connects_and_says_so() {
    let url = fresh_database("tls_describe");
    assert!(url.contains("sslmode=verify-full"), "{url}");
    let d = block_on(async { connect(&url).await.describe().await.unwrap() });
    assert!(
        d.contains("TLSv1.3 (verify-full), certificate verified"),
        "{d}"
    );
}

fn connect_err(url: &str) -> String {
    match block_on(PgMeta::connect(url, 2, TIMEOUT)) {
        Ok(_) => panic!("{url} connected"),
        Err(e) => e.message,
    }
}

#[test]
fn a_wrong_ca_or_host_name_is_refused_in_one_line() {
    let pg = must(shared_postgres());
    let certs = pg.certs().expect("the shared server has TLS");
    let plain = pg.plain_url_for("bulkwire");
    let other = format!(
        "{plain}?sslmode=verify-full&sslrootcert={}",
        certs.other_ca.display()
    );
    let e = connect_err(&other);
    assert!(
        e.contains("certificate failed sslmode=verify-full") && e.contains("UnknownIssuer"),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
    // The certificate names localhost and 127.0.0.1, not this name.
    let wrong = plain.replace("127.0.0.1", "db.invalid")
        + &format!(
            "?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={}",
            certs.ca.display()
        );
    let e = connect_err(&wrong);
    assert!(
        e.contains("certificate failed sslmode=verify-full")
            && e.contains("not valid for name \"db.invalid\""),
        "{e}"
    );
    // verify-ca checks the chain only: the same name passes.
    let ca_only = wrong.replace("verify-full", "verify-ca");
    let d = block_on(async { connect(&ca_only).await.describe().await.unwrap() });
    assert!(
        d.contains("certificate chain verified (host name not checked)"),
        "{d}"
    );
}

#[test]
fn require_refuses_a_server_without_tls() {
    let pg = must(Postgres::start_with(false));
    let url = format!("{}?sslmode=require", pg.plain_url_for("bulkwire"));
    let e = connect_err(&url);
    assert!(
        e.ends_with("the server does not offer TLS, and sslmode=require requires it"),
        "{e}"
    );
    // prefer (the default) goes on in clear, and says so.
    let d = block_on(async { connect(&pg.url()).await.describe().await.unwrap() });
    assert!(d.ends_with("no TLS (sslmode=prefer)"), "{d}");
}

#[test]
fn a_client_certificate_logs_in_where_pg_hba_asks_for_one() {
    let pg = must(shared_postgres());
    let c = pg.certs().expect("the shared server has TLS");
    let base = pg
        .plain_url_for("bulkwire")
        .replace("postgres@", &format!("{}@", bulkwire_testenv::CERT_USER));
    let verify = format!("{base}?sslmode=verify-full&sslrootcert={}", c.ca.display());
    let with_cert = format!(
        "{verify}&sslcert={}&sslkey={}",
        c.client_cert.display(),
        c.client_key.display()
    );
    let d = block_on(async { connect(&with_cert).await.describe().await.unwrap() });
    assert!(d.contains("certificate verified"), "{d}");
    // The same role without its certificate: pg_hba.conf's `cert` refuses it.
    let e = connect_err(&verify);
    assert!(e.contains("certificate"), "{e}");
}
