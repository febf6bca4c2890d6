//! The owners' migration (schema step 6) on stores written by the release
//! before it (`fixtures/release-1`, made by `fixtures/make-release-1.sh`
//! with bulkwire at 59daa2c, schema 4): a data directory's SQLite file and
//! a PostgreSQL dump. Every row survives with the owner `admin` (its maker
//! could reach everything), users and tokens become `admin` too, usage
//! counts what is there, and a second start changes nothing.

use bulkwire_store::{ListQuery, Order, PgMeta, SqliteMeta, Usage};
use bulkwire_testenv::{must, shared_postgres};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/release-1")
        .join(p)
}

/// What the release wrote (see `make-release-1.sh`): four items of 19, 19,
/// 9 and 5 bytes, one finished and one unfinished resumable upload, two
/// tokens and a user.
const ITEMS: usize = 4;
const BYTES: u64 = 19 + 19 + 9 + 5;

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// Everything the store holds, as text, to compare two starts.
async fn snapshot(m: &dyn bulkwire_store::MetaStore) -> String {
    let media = m
        .list(ListQuery::new(Order::OldestFirst, 100))
        .await
        .unwrap();
    let tokens = m.tokens().await.unwrap();
    let users = m.users().await.unwrap();
    let ids: Vec<_> = media.iter().map(|r| r.id.clone()).collect();
    let usage = m.usage("admin").await.unwrap();
    format!("{media:?}\n{tokens:?}\n{users:?}\n{ids:?}\n{usage:?}")
}

async fn every_row_is_admins(m: &dyn bulkwire_store::MetaStore) {
    let media = m
        .list(ListQuery::new(Order::OldestFirst, 100))
        .await
        .unwrap();
    assert_eq!(media.len(), ITEMS, "every item survives");
    assert!(media.iter().all(|r| r.owner == "admin"), "{media:?}");
    let names: Vec<_> = media.iter().filter_map(|r| r.filename.clone()).collect();
    assert_eq!(names, ["photo.jpg", "notes.txt", "rpc.bin", "done.txt"]);
    assert_eq!(
        m.usage("admin").await.unwrap(),
        Usage {
            bytes: BYTES,
            items: ITEMS as u64
        }
    );
    let tokens = m.tokens().await.unwrap();
    assert_eq!(tokens.len(), 2);
    assert!(tokens
        .iter()
        .all(|t| t.owner == "admin" && t.scopes == "admin" && t.expires.is_none()));
    let users = m.users().await.unwrap();
    assert_eq!(users.len(), 1);
    assert_eq!(
        (users[0].name.as_str(), users[0].role.as_str()),
        ("olduser", "admin")
    );
    let done = media
        .iter()
        .find(|r| r.filename.as_deref() == Some("done.txt"))
        .unwrap();
    let up = m.upload_get(&done.id).await.unwrap().unwrap();
    assert_eq!(
        up.owner, "admin",
        "an upload's credential id became its owner"
    );
    // Rows of before have no image size: nothing is decoded to fill it.
    assert!(media
        .iter()
        .all(|r| r.width.is_none() && r.height.is_none()));
    let current = format!("schema version {}", PgMeta::SCHEMA_VERSION);
    assert!(m.describe().await.unwrap().contains(&current));
}

#[tokio::test]
async fn a_data_directory_of_the_release_opens_with_every_item_owned_by_admin() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("meta.sqlite");
    std::fs::copy(fixture("data/meta.sqlite"), &db).unwrap();
    let m = SqliteMeta::open(&db).unwrap();
    every_row_is_admins(&m).await;
    let first = snapshot(&m).await;
    drop(m);
    let m = SqliteMeta::open(&db).unwrap();
    assert_eq!(snapshot(&m).await, first, "a second start changes nothing");
}

#[test]
fn a_postgresql_database_of_the_release_opens_with_every_item_owned_by_admin() {
    let pg = must(shared_postgres());
    let url = must(pg.create_database("release1"));
    must(pg.psql_file("release1", &fixture("postgres.sql")));
    block_on(async {
        let m = PgMeta::connect(&url, 4, Duration::from_secs(5))
            .await
            .unwrap();
        every_row_is_admins(&m).await;
        let first = snapshot(&m).await;
        drop(m);
        // Two nodes starting at once: one migrates nothing, both agree.
        let (a, b) = tokio::join!(
            PgMeta::connect(&url, 2, Duration::from_secs(5)),
            PgMeta::connect(&url, 2, Duration::from_secs(5)),
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(snapshot(&a).await, first, "a second start changes nothing");
        assert_eq!(snapshot(&b).await, first);
    });
}
