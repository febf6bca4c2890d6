//! Tokens, users and secrets.

use crate::{new_id, token_id, MetaStore, NewToken, Quota, UserSet};

pub(super) async fn checks(m: &dyn MetaStore) {
    credentials(m).await;
    secrets(m).await;
}

fn token(owner: &str, scopes: &str, expires: Option<i64>) -> NewToken {
    NewToken {
        label: "ci".into(),
        owner: owner.into(),
        scopes: scopes.into(),
        expires,
    }
}

async fn credentials(m: &dyn MetaStore) {
    let digest: [u8; 32] = rand::random();
    let t = m
        .token_add(digest, token("cam", "upload", Some(4_000_000_000)))
        .await
        .unwrap();
    assert_eq!(t.id, token_id(&digest));
    assert_eq!((t.owner.as_str(), t.scopes.as_str()), ("cam", "upload"));
    assert_eq!((t.expires, t.last_used), (Some(4_000_000_000), None));
    assert_eq!(m.token_find(digest).await.unwrap(), Some(t.clone()));
    assert_eq!(m.token_find(rand::random()).await.unwrap(), None);
    assert!(m.tokens().await.unwrap().contains(&t));
    let again = token("x", "admin", None);
    assert!(m.token_add(digest, again).await.is_err(), "unique");
    // A use is recorded, then not again within the minute.
    m.token_used(&t.id).await.unwrap();
    let used = m.token_find(digest).await.unwrap().unwrap().last_used;
    assert!(used.is_some_and(|u| u >= t.created));
    m.token_used(&t.id).await.unwrap();
    assert_eq!(m.token_find(digest).await.unwrap().unwrap().last_used, used);
    assert!(m.token_revoke(&t.id).await.unwrap());
    assert!(!m.token_revoke(&t.id).await.unwrap());
    assert_eq!(m.token_find(digest).await.unwrap(), None);
    users(m).await;
}

async fn users(m: &dyn MetaStore) {
    let name = format!("u{}", new_id());
    let hash = |m: Option<crate::StoredUser>| m.map(|u| u.hash);
    assert!(!m
        .user_set(&name, "h1", UserSet::Update, "author")
        .await
        .unwrap());
    assert!(m
        .user_set(&name, "h1", UserSet::Create, "author")
        .await
        .unwrap());
    assert!(!m
        .user_set(&name, "h2", UserSet::Create, "admin")
        .await
        .unwrap());
    let u = m.user_get(&name).await.unwrap().unwrap();
    assert_eq!((u.hash.as_str(), u.info.role.as_str()), ("h1", "author"));
    assert_eq!(u.info.quota, Quota::default());
    assert!(m
        .user_set(&name, "h2", UserSet::Update, "admin")
        .await
        .unwrap());
    assert!(m
        .user_set(&name, "h3", UserSet::Upsert, "admin")
        .await
        .unwrap());
    let u = m.user_get(&name).await.unwrap().unwrap();
    assert_eq!(
        (u.hash.as_str(), u.info.role.as_str()),
        ("h3", "author"),
        "a password change keeps the role"
    );
    assert!(m.user_role(&name, "editor").await.unwrap());
    assert!(!m.user_role("nobody-at-all", "editor").await.unwrap());
    let q = Quota {
        bytes: Some(10 << 30),
        items: Some(5000),
    };
    assert!(m.user_quota(&name, q).await.unwrap());
    let listed = m.users().await.unwrap();
    let u = listed.iter().find(|u| u.name == name).unwrap();
    assert_eq!((u.role.as_str(), u.quota), ("editor", q));
    assert!(m.user_quota(&name, Quota::default()).await.unwrap());
    assert_eq!(
        m.user_get(&name).await.unwrap().unwrap().info.quota,
        Quota::default()
    );
    assert!(m.user_remove(&name).await.unwrap());
    assert!(!m.user_remove(&name).await.unwrap());
    assert_eq!(hash(m.user_get(&name).await.unwrap()), None);
}

/// A secret is created once and read back the same by every caller, until
/// it is replaced.
async fn secrets(m: &dyn MetaStore) {
    let name = format!("test-{}", new_id());
    let first = m.secret(&name, vec![1; 32]).await.unwrap();
    assert_eq!(first, vec![1; 32]);
    let again = m.secret(&name, vec![2; 32]).await.unwrap();
    assert_eq!(again, first, "a second start must not replace the key");
    m.secret_set(&name, vec![3; 32]).await.unwrap();
    assert_eq!(m.secret(&name, vec![4; 32]).await.unwrap(), vec![3; 32]);
    let other = format!("{name}-other");
    assert_eq!(m.secret(&other, vec![5; 16]).await.unwrap(), vec![5; 16]);
}
