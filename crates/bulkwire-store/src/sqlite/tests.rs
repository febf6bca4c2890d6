use super::*;
use crate::schema::{SCHEMA_VERSION, STEPS};
use crate::{LeaseStore, ListQuery, MediaRecord, MediaStore, NewMedia};
use rusqlite::params;

fn new(id: &str) -> NewMedia {
    NewMedia {
        id: id.into(),
        owner: "admin".into(),
        field: Some("f".into()),
        filename: None,
        content_type: "text/plain".into(),
        size: 3,
        sha256: "00".into(),
        width: None,
        height: None,
    }
}

/// Leases each row's id to node "n", then inserts.
async fn put(m: &SqliteMeta, rows: Vec<NewMedia>) -> Result<Vec<MediaRecord>, MetaError> {
    for r in &rows {
        m.lease(&r.id, "n").await?;
    }
    m.insert(rows, "n", crate::Quota::default(), None).await
}

#[tokio::test]
async fn conformance() {
    let d = tempfile::tempdir().unwrap();
    let m = SqliteMeta::open(&d.path().join("m.sqlite")).unwrap();
    crate::conformance::meta_store(Arc::new(m)).await;
}

#[tokio::test]
async fn migrations_run_once_and_a_newer_schema_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("m.sqlite");
    // A database of the first release: the media table, no version.
    let c = Connection::open(&path).unwrap();
    c.execute_batch(STEPS[0].sqlite).unwrap();
    c.execute("INSERT INTO media (id, field, filename, content_type, size, sha256, created) VALUES ('old', NULL, NULL, 't', 1, 'x', 0)", []).unwrap();
    c.execute("INSERT INTO media (id, field, filename, content_type, size, sha256, created) VALUES ('named', NULL, 'ÉCLAIR.PNG', 'Image/PNG', 1, 'x', 0)", []).unwrap();
    drop(c);
    let m = SqliteMeta::open(&path).unwrap();
    assert!(m.get("old", None).await.unwrap().is_some(), "rows survive");
    // Rows of before are found by name and type like new ones.
    let q = ListQuery {
        name: Some("éclair".into()),
        media_type: crate::TypeFilter::parse("image/png"),
        ..ListQuery::new(crate::Order::NewestFirst, 10)
    };
    let found = m.list(q).await.unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].id, "named");
    assert!(m
        .describe()
        .await
        .unwrap()
        .contains(&format!("schema version {SCHEMA_VERSION}")));
    drop(m);
    SqliteMeta::open(&path).unwrap();
    let c = Connection::open(&path).unwrap();
    c.pragma_update(None, "user_version", 99).unwrap();
    drop(c);
    let e = SqliteMeta::open(&path)
        .err()
        .expect("a newer schema is refused");
    assert!(e.message.contains("newer"), "{e}");
}

#[tokio::test]
async fn a_full_database_is_reported_as_full() {
    let d = tempfile::tempdir().unwrap();
    let m = SqliteMeta::open(&d.path().join("m.sqlite")).unwrap();
    // SQLite answers SQLITE_FULL for a full disk and for a database at
    // its max_page_count alike; the latter can be had without a disk.
    m.with(|c| {
        let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
        c.query_row(
            &format!("PRAGMA max_page_count = {}", pages + 2),
            [],
            |_| Ok(()),
        )
    })
    .await
    .unwrap();
    let mut e = None;
    for i in 0..10_000 {
        let rows = (0..50)
            .map(|j| new(&format!("{i}-{j}-{}", "x".repeat(100))))
            .collect();
        if let Err(err) = put(&m, rows).await {
            e = Some(err);
            break;
        }
    }
    let e = e.expect("the database filled up");
    assert!(e.full, "{e}");
    // Any other failure is not "full".
    let e = m.with(|c| c.execute("no sql", [])).await.unwrap_err();
    assert!(!e.full);
}

#[tokio::test]
async fn insert_get_list_delete() {
    let d = tempfile::tempdir().unwrap();
    let m = SqliteMeta::open(&d.path().join("m.sqlite")).unwrap();
    let r = put(&m, vec![new("a"), new("b"), new("c")]).await.unwrap();
    assert!(r[0].seq < r[1].seq && r[1].seq < r[2].seq);
    assert_eq!(m.get("b", None).await.unwrap().unwrap(), r[1]);
    assert_eq!(m.get("zz", None).await.unwrap(), None);
    let oldest = ListQuery::new(crate::Order::OldestFirst, 2);
    let page = m.list(oldest.clone()).await.unwrap();
    assert_eq!(
        page.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    let page = m.list(oldest.after(page[1].seq)).await.unwrap();
    assert_eq!(
        page.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["c"]
    );
    assert!(m.delete("a", None, "n", None).await.unwrap().is_some());
    assert!(m.delete("a", None, "n", None).await.unwrap().is_none());
    assert_eq!(m.all_ids().await.unwrap().len(), 2);
}

#[tokio::test]
async fn inserts_do_not_checkpoint_the_checkpointer_does() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("m.sqlite");
    let m = SqliteMeta::open(&path).unwrap();
    // Rows reach the database file only through a checkpoint.
    let db_len = || std::fs::metadata(&path).unwrap().len();
    let empty = db_len();
    // Well past SQLite's autocheckpoint (1,000 pages), in writes the
    // checkpointer does not count: the WAL only grows.
    for t in 0..6 {
        m.with(move |c| {
            let tx = c.transaction()?;
            for i in 0..1000 {
                tx.execute(
                    "INSERT INTO media (id, field, filename, content_type, size, sha256, created)
                     VALUES (?1, NULL, NULL, 't/t', 1, ?2, 0)",
                    params![format!("bulk-{t}-{i}"), "x".repeat(1000)],
                )?;
            }
            tx.commit()
        })
        .await
        .unwrap();
    }
    let wal = std::fs::metadata(d.path().join("m.sqlite-wal"))
        .unwrap()
        .len();
    assert!(wal > 1000 * 4096, "the WAL holds {wal} bytes");
    assert_eq!(db_len(), empty, "SQLite checkpointed by itself");
    // Counted writes below the threshold do not checkpoint either.
    for _ in 0..(CHECKPOINT_WRITES - 1) {
        m.heartbeat("n").await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(db_len(), empty, "checkpointed before the threshold");
    // The write that reaches the threshold wakes the checkpointer.
    put(&m, vec![new("last")]).await.unwrap();
    let t = std::time::Instant::now();
    while db_len() == empty {
        assert!(t.elapsed() < Duration::from_secs(5), "no checkpoint");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(m.all_ids().await.unwrap().len(), 6001);
}

#[tokio::test]
async fn insert_is_all_or_nothing() {
    let d = tempfile::tempdir().unwrap();
    let m = SqliteMeta::open(&d.path().join("m.sqlite")).unwrap();
    put(&m, vec![new("a")]).await.unwrap();
    // The second row clashes on the unique id: neither row may stay.
    assert!(put(&m, vec![new("b"), new("a")]).await.is_err());
    assert_eq!(m.get("b", None).await.unwrap(), None);
    assert_eq!(m.all_ids().await.unwrap().len(), 1);
}
