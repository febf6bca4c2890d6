//! The SeaweedFS test server does what the store's tests rely on: signed S3 requests through
//! `s3_curl`, bucket creation, listing objects and incomplete multipart uploads, and data that
//! survives a crash (SIGKILL) and restart.

use std::fs;

use bulkwire_testenv::{default_cache, must, shared_seaweed, Seaweed};

#[test]
fn put_list_and_multipart_listing_on_the_shared_server() {
    let sw = must(shared_seaweed());
    must(sw.create_bucket("testenv-shared"));
    let file = tempfile::NamedTempFile::new().unwrap();
    fs::write(file.path(), b"hello, object store").unwrap();
    let data = format!("@{}", file.path().display());

    let (status, body) = must(sw.s3_curl(
        "PUT",
        "/testenv-shared/dir/a.txt",
        &["--data-binary", &data],
    ));
    assert_eq!(status, 200, "{body}");
    let (status, body) = must(sw.s3_curl("GET", "/testenv-shared/dir/a.txt", &[]));
    assert_eq!((status, body.as_str()), (200, "hello, object store"));

    // Query keys out of order and a bare `/` in a value: s3_curl canonicalises both.
    let (status, body) = must(sw.s3_curl("GET", "/testenv-shared?prefix=dir/&list-type=2", &[]));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("<Key>dir/a.txt</Key>"), "{body}");

    let (status, body) = must(sw.s3_curl("POST", "/testenv-shared/big.bin?uploads", &[]));
    assert_eq!(status, 200, "{body}");
    let (status, body) = must(sw.s3_curl("GET", "/testenv-shared?uploads", &[]));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("<Key>big.bin</Key>"), "{body}");
}

#[test]
fn bad_bucket_names_and_bad_credentials_are_errors() {
    let sw = must(shared_seaweed());
    assert!(
        sw.create_bucket("x").is_err(),
        "S3 bucket names need 3+ characters"
    );
    let (status, _) = must(sw.s3_curl("GET", "/", &["--user", "bulkwire-test:wrong"]));
    assert_eq!(status, 403);
}

#[test]
fn kill_and_start_again_keeps_objects() {
    let mut sw = must(Seaweed::start(&default_cache()));
    must(sw.create_bucket("testenv-crash"));
    let put = must(sw.s3_curl(
        "PUT",
        "/testenv-crash/kept",
        &["--data-binary", "kept bytes"],
    ));
    assert_eq!(put.0, 200, "{}", put.1);
    let s3_url = sw.endpoint();

    sw.kill();
    assert!(
        sw.s3_curl("GET", "/", &["-m", "2"]).is_err(),
        "still answering after kill"
    );

    must(sw.start_again());
    assert_eq!(sw.endpoint(), s3_url);
    let (status, body) = must(sw.s3_curl("GET", "/testenv-crash/kept", &[]));
    assert_eq!((status, body.as_str()), (200, "kept bytes"));
}
