//! Tokens, users and secrets.

use crate::{new_id, token_id, MetaStore, UserSet};

pub(super) async fn checks(m: &dyn MetaStore) {
    credentials(m).await;
    secrets(m).await;
}

async fn credentials(m: &dyn MetaStore) {
    let digest: [u8; 32] = rand::random();
    let t = m.token_add(digest, "ci".into()).await.unwrap();
    assert_eq!(t.id, token_id(&digest));
    assert!(m.token_known(digest).await.unwrap());
    assert!(!m.token_known(rand::random()).await.unwrap());
    assert!(m.tokens().await.unwrap().contains(&t));
    assert!(m.token_add(digest, "again".into()).await.is_err(), "unique");
    assert!(m.token_revoke(&t.id).await.unwrap());
    assert!(!m.token_revoke(&t.id).await.unwrap());
    assert!(!m.token_known(digest).await.unwrap());

    let name = format!("u{}", new_id());
    assert!(!m.user_set(&name, "h1", UserSet::Update).await.unwrap());
    assert!(m.user_set(&name, "h1", UserSet::Create).await.unwrap());
    assert!(!m.user_set(&name, "h2", UserSet::Create).await.unwrap());
    assert_eq!(m.user_hash(&name).await.unwrap().as_deref(), Some("h1"));
    assert!(m.user_set(&name, "h2", UserSet::Update).await.unwrap());
    assert!(m.user_set(&name, "h3", UserSet::Upsert).await.unwrap());
    assert_eq!(m.user_hash(&name).await.unwrap().as_deref(), Some("h3"));
    assert!(m.users().await.unwrap().iter().any(|u| u.name == name));
    assert!(m.user_remove(&name).await.unwrap());
    assert!(!m.user_remove(&name).await.unwrap());
    assert_eq!(m.user_hash(&name).await.unwrap(), None);
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
