//! The PostgreSQL test server does what the store's tests rely on: it answers at its URL, makes
//! databases on demand, and survives a stop/start on the same port with its data.

use std::net::TcpStream;
use std::process::Command;
use std::thread::{sleep, spawn};
use std::time::{Duration, Instant};

use bulkwire_testenv::{must, shared_postgres, Postgres};

/// Set in the child test process started by `server_dies_with_its_test_process`.
const HELPER_ENV: &str = "BULKWIRE_TESTENV_HELPER";

#[test]
fn shared_server_answers_and_makes_databases() {
    let pg = must(shared_postgres());
    assert_eq!(must(pg.psql("bulkwire", "select 1")).trim(), "1");
    let url = must(pg.create_database("testenv_isolated"));
    assert_eq!(url, pg.url_for("testenv_isolated"));
    assert!(pg.plain_url_for("bulkwire").ends_with("/bulkwire"));
    assert!(
        pg.url()
            .contains("/bulkwire?sslmode=verify-full&sslrootcert="),
        "{}",
        pg.url()
    );
    let db = must(pg.psql("testenv_isolated", "select current_database()"));
    assert_eq!(db.trim(), "testenv_isolated");
}

#[test]
fn bad_database_names_are_refused() {
    let pg = must(shared_postgres());
    assert!(pg
        .create_database("Robert'); drop table students;--")
        .is_err());
    assert!(pg.create_database("9lives").is_err());
}

#[test]
fn stop_and_start_again_keeps_port_and_data() {
    // Started on a thread that ends at once: the server must outlive it, as a shared server
    // started lazily by one test outlives that test. The pause lets a wrongly aimed
    // parent-death signal land before we look.
    let mut pg = spawn(|| must(Postgres::start())).join().unwrap();
    sleep(Duration::from_millis(200));
    must(pg.psql(
        "bulkwire",
        "create table t (v int); insert into t values (42)",
    ));
    let port = pg.port();

    pg.stop();
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "still accepting after stop"
    );
    assert!(pg.psql("bulkwire", "select 1").is_err());

    must(pg.start_again());
    assert_eq!(pg.port(), port);
    assert_eq!(must(pg.psql("bulkwire", "select v from t")).trim(), "42");
}

#[test]
fn server_dies_with_its_test_process() {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([
            "--exact",
            "helper_start_shared_and_exit",
            "--ignored",
            "--nocapture",
        ])
        .env(HELPER_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "helper failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port: u16 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("helper port "))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no port in helper output: {stdout}"));
    // The postmaster gets SIGKILL as the helper exits; give the kernel a moment to close it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(
            Instant::now() < deadline,
            "server on port {port} outlived its test process"
        );
        sleep(Duration::from_millis(50));
    }
}

/// Not a test: the child process of `server_dies_with_its_test_process`. It starts the shared
/// server (never dropped) and exits, as a test binary does.
#[test]
#[ignore = "helper process for server_dies_with_its_test_process"]
fn helper_start_shared_and_exit() {
    if std::env::var_os(HELPER_ENV).is_none() {
        return;
    }
    let pg = must(shared_postgres());
    println!("helper port {}", pg.port());
}
