//! Login throttling over HTTP (issue "Who may do what"): password guessing
//! costs the guesser, not the server. A stored user's logins run Argon2
//! (19 MiB, tens of milliseconds each); the throttle refuses a guessing
//! address with 429 before the hash runs, while the real user logs in from
//! elsewhere. Other addresses are other loopback addresses (127.0.0.2, …:
//! Linux routes the whole 127/8 to this machine).

mod common;

use bulkwire_server::store::UserSet;
use bulkwire_server::Limits;
use common::*;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

const NAME: &str = "alice-stored";
const PASSWORD: &str = "the right one";

fn client_from(ip: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .local_address(IpAddr::from(ip))
        .build()
        .unwrap()
}

fn login_call(user: &str, password: &str) -> String {
    format!(
        "<?xml version=\"1.0\"?><methodCall><methodName>wp.getMediaLibrary</methodName><params>\
         <param><value><int>1</int></value></param>\
         <param><value><string>{user}</string></value></param>\
         <param><value><string>{password}</string></value></param>\
         <param><value><struct></struct></value></param></params></methodCall>"
    )
}

/// (HTTP status, whether the body is a fault, `Retry-After`).
async fn call(c: &reqwest::Client, url: &str, user: &str, pw: &str) -> (u16, bool, Option<String>) {
    let r = c
        .post(url)
        .header("content-type", "text/xml")
        .body(login_call(user, pw))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let body = r.text().await.unwrap();
    (status, body.contains("<fault>"), retry)
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
}

async fn metrics(h: &Harness) -> String {
    h.http
        .get(h.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// 2,000 wrong XML-RPC passwords from one address cost at most
/// `login_failures` Argon2 runs; the right password from another address
/// logs in during the attack.
#[tokio::test]
async fn guessing_over_xmlrpc_costs_at_most_login_failures_argon2_runs() {
    let h = start(Limits::default()).await;
    let meta = &h.srv.state.meta;
    assert!(bulkwire_server::auth::set_user(
        &**meta,
        NAME,
        PASSWORD.as_bytes(),
        UserSet::Create,
        bulkwire_server::principal::Role::Author
    )
    .await
    .unwrap());
    let url = h.url("/xmlrpc.php");
    let attacker = client_from([127, 0, 0, 1]);
    let done = Arc::new(AtomicBool::new(false));
    let (throttled, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let attack = {
        let (url, done, throttled, refused) = (
            url.clone(),
            done.clone(),
            throttled.clone(),
            refused.clone(),
        );
        tokio::spawn(async move {
            let sent = AtomicUsize::new(0);
            let one = |i: usize| {
                let (c, url) = (attacker.clone(), url.clone());
                let (throttled, refused) = (throttled.clone(), refused.clone());
                async move {
                    let (status, fault, retry) = call(&c, &url, NAME, &format!("guess {i}")).await;
                    match status {
                        429 => {
                            assert!(fault && retry.is_some(), "a 429 with its fault and wait");
                            throttled.fetch_add(1, SeqCst);
                        }
                        200 => {
                            assert!(fault, "a wrong password is a fault");
                            refused.fetch_add(1, SeqCst);
                        }
                        s => panic!("status {s}"),
                    }
                }
            };
            // Eight at a time, 2,000 in all.
            while sent.load(SeqCst) < 2000 {
                let base = sent.fetch_add(8, SeqCst);
                futures_util::future::join_all((base..base + 8).map(one)).await;
            }
            done.store(true, SeqCst);
        })
    };
    // The real user, from another address, while the attack runs.
    let user = client_from([127, 0, 0, 2]);
    while throttled.load(SeqCst) < 100 {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let during = !done.load(SeqCst);
    let (status, fault, _) = call(&user, &url, NAME, PASSWORD).await;
    assert_eq!(
        (status, fault),
        (200, false),
        "the right password from elsewhere"
    );
    attack.await.unwrap();
    assert!(during, "the attack was over before the real login");
    let m = metrics(&h).await;
    let runs = metric(&m, "bulkwire_password_checks_total");
    let limit = Limits::default().login_failures as u64;
    // Each of the first `login_failures` guesses, and the real login.
    assert!(runs <= limit + 1, "{runs} Argon2 runs");
    assert_eq!(
        refused.load(SeqCst) as u64,
        limit,
        "guesses that were checked"
    );
    assert_eq!(throttled.load(SeqCst) + refused.load(SeqCst), 2000);
    assert!(metric(&m, "bulkwire_logins_throttled_total") >= 2000 - limit);
}

/// The table stays within `login_table_entries` however many addresses
/// and names fail, and a pair it blocks stays blocked.
#[tokio::test]
async fn the_login_table_stays_bounded_under_many_addresses_and_names() {
    let h = start(Limits {
        login_table_entries: 300,
        login_failures: 3,
        ..Limits::default()
    })
    .await;
    let url = h.url("/v1/media");
    let blocked = client_from([127, 0, 0, 1]);
    for _ in 0..3 {
        let r = blocked
            .get(&url)
            .basic_auth("victim", Some("x"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
    }
    let r = blocked
        .get(&url)
        .basic_auth("victim", Some("x"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    // 100 addresses × 20 names.
    let mut tasks = Vec::new();
    for a in 0..100u8 {
        let (c, url) = (client_from([127, 1, 0, a]), url.clone());
        tasks.push(tokio::spawn(async move {
            for n in 0..20 {
                let name = format!("n{a}-{n}");
                let r = c
                    .get(&url)
                    .basic_auth(name, Some("x"))
                    .send()
                    .await
                    .unwrap();
                assert!(matches!(r.status().as_u16(), 401 | 429));
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let m = metrics(&h).await;
    assert!(metric(&m, "bulkwire_login_table_entries") <= 300);
    assert!(metric(&m, "bulkwire_login_table_evicted_total") > 0);
    let r = blocked
        .get(&url)
        .basic_auth("victim", Some("x"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429, "the victim's attacker is still refused");
}

/// A stored token on its first use (a store lookup; again each time its
/// `auth_cache_ms` runs out) by 40 requests at once from one address, as
/// an application's server sends them: none is refused. Checks in flight
/// count against `login_failures` for passwords, so that guesses cannot
/// all pass before the first fails; a bearer token is 256 random bits
/// looked up by digest, and its checks in flight are no guesses.
#[tokio::test]
async fn a_stored_token_on_40_requests_at_once_is_never_throttled() {
    // Lookups as slow as PostgreSQL's across a network: the 40 overlap.
    let dir = tempfile::tempdir().unwrap();
    let meta = FailingMeta {
        token_delay: Some(std::time::Duration::from_millis(100)),
        ..FailingMeta::on(meta_store(dir.path()).await)
    };
    let blobs = blob_store(dir.path());
    let h = start_with(dir, Limits::default(), blobs, Arc::new(meta)).await;
    let token = bulkwire_server::auth::new_token();
    let digest = bulkwire_server::auth::token_digest(&token);
    let made = bulkwire_server::auth::admin_token("forty at once");
    h.srv.state.meta.token_add(digest, made).await.unwrap();
    let c = client_from([127, 0, 0, 1]);
    let url = h.url("/v1/media?limit=1");
    let all = (0..40).map(|_| c.get(&url).bearer_auth(&token).send());
    let statuses: Vec<u16> = futures_util::future::join_all(all)
        .await
        .into_iter()
        .map(|r| r.unwrap().status().as_u16())
        .collect();
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
    let m = metrics(&h).await;
    assert_eq!(metric(&m, "bulkwire_logins_throttled_total"), 0);
}
