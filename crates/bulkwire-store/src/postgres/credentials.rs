//! Tokens, users and secrets ([`CredentialStore`]).

use super::error::db;
use super::{rows, PgMeta};
use crate::{
    token_id, BoxFut, CredentialStore, MetaError, NewToken, Quota, StoredUser, Token, UserInfo,
    UserSet,
};
use tokio_postgres::Row;

/// Seconds since the epoch of a `TIMESTAMPTZ` column (truncated, as
/// SQLite's store keeps them), and back.
macro_rules! secs {
    ($c:literal) => {
        concat!("floor(extract(epoch FROM ", $c, "))::bigint")
    };
}

macro_rules! token_columns {
    () => {
        concat!(
            "id, label, ",
            secs!("created"),
            ", owner, scopes, ",
            secs!("expires"),
            ", ",
            secs!("last_used")
        )
    };
}

const TOKEN_ADD: &str = concat!(
    "INSERT INTO tokens (id, digest, label, owner, scopes, expires)
     VALUES ($1, $2, $3, $4, $5, to_timestamp($6::bigint))
     RETURNING ",
    secs!("created")
);
const TOKEN_FIND: &str = concat!(
    "SELECT ",
    token_columns!(),
    " FROM tokens WHERE digest = $1"
);
/// At most one write a minute per token, on the database's clock.
const TOKEN_USED: &str = "UPDATE tokens SET last_used = now()
     WHERE id = $1 AND (last_used IS NULL OR last_used <= now() - interval '60 seconds')";
const TOKENS: &str = concat!(
    "SELECT ",
    token_columns!(),
    " FROM tokens ORDER BY created, id"
);

fn token(r: &Row) -> Result<Token, tokio_postgres::Error> {
    Ok(Token {
        id: r.try_get(0)?,
        label: r.try_get(1)?,
        created: r.try_get(2)?,
        owner: r.try_get(3)?,
        scopes: r.try_get(4)?,
        expires: r.try_get(5)?,
        last_used: r.try_get(6)?,
    })
}

macro_rules! user_columns {
    () => {
        concat!(
            "name, ",
            secs!("created"),
            ", role, quota_bytes, quota_items"
        )
    };
}

fn user(r: &Row) -> Result<UserInfo, tokio_postgres::Error> {
    let n = |v: Option<i64>| v.map(|v| v.max(0) as u64);
    Ok(UserInfo {
        name: r.try_get(0)?,
        created: r.try_get(1)?,
        role: r.try_get(2)?,
        quota: Quota {
            bytes: n(r.try_get(3)?),
            items: n(r.try_get(4)?),
        },
    })
}

const USER_GET: &str = concat!(
    "SELECT ",
    user_columns!(),
    ", hash FROM users WHERE name = $1"
);
const USER_ROLE: &str = "UPDATE users SET role = $2 WHERE name = $1";
const USER_QUOTA: &str = "UPDATE users SET quota_bytes = $2, quota_items = $3 WHERE name = $1";
const TOKEN_REVOKE: &str = "DELETE FROM tokens WHERE id = $1";
const USER_CREATE: &str = "INSERT INTO users (name, hash, role) VALUES ($1, $2, $3)
     ON CONFLICT (name) DO NOTHING";
const USER_UPDATE: &str = "UPDATE users SET hash = $2 WHERE name = $1";
const USER_UPSERT: &str = "INSERT INTO users (name, hash, role) VALUES ($1, $2, $3)
     ON CONFLICT (name) DO UPDATE SET hash = excluded.hash";
const USER_REMOVE: &str = "DELETE FROM users WHERE name = $1";
const USERS: &str = concat!("SELECT ", user_columns!(), " FROM users ORDER BY name");
const SECRET_INIT: &str =
    "INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING";
const SECRET_GET: &str = "SELECT value FROM secrets WHERE name = $1";
const SECRET_SET: &str = "INSERT INTO secrets (name, value) VALUES ($1, $2)
     ON CONFLICT (name) DO UPDATE SET value = excluded.value, created = now()";

impl CredentialStore for PgMeta {
    fn token_add(&self, digest: [u8; 32], t: NewToken) -> BoxFut<'_, Result<Token, MetaError>> {
        Box::pin(async move {
            let id = token_id(&digest);
            let p: super::Params<'_> =
                &[&id, &&digest[..], &t.label, &t.owner, &t.scopes, &t.expires];
            let created = self.value(TOKEN_ADD, p).await?;
            Ok(Token {
                id,
                label: t.label,
                created,
                owner: t.owner,
                scopes: t.scopes,
                expires: t.expires,
                last_used: None,
            })
        })
    }

    fn token_find(&self, digest: [u8; 32]) -> BoxFut<'_, Result<Option<Token>, MetaError>> {
        Box::pin(async move {
            let row = self.query_opt(TOKEN_FIND, &[&&digest[..]]).await?;
            row.map(|r| token(&r)).transpose().map_err(db)
        })
    }

    fn token_used<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        Box::pin(async move { self.execute(TOKEN_USED, &[&id]).await.map(drop) })
    }

    fn tokens(&self) -> BoxFut<'_, Result<Vec<Token>, MetaError>> {
        Box::pin(async move { rows(self.query(TOKENS, &[]).await?, token) })
    }

    fn token_revoke<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(async move { Ok(self.execute(TOKEN_REVOKE, &[&id]).await? > 0) })
    }

    fn user_set<'a>(
        &'a self,
        name: &'a str,
        hash: &'a str,
        mode: UserSet,
        role: &'a str,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(async move {
            let n = match mode {
                UserSet::Create => self.execute(USER_CREATE, &[&name, &hash, &role]).await?,
                UserSet::Update => self.execute(USER_UPDATE, &[&name, &hash]).await?,
                UserSet::Upsert => self.execute(USER_UPSERT, &[&name, &hash, &role]).await?,
            };
            Ok(n > 0)
        })
    }

    fn user_get<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<Option<StoredUser>, MetaError>> {
        Box::pin(async move {
            let row = self.query_opt(USER_GET, &[&name]).await?;
            let stored = |r: &Row| -> Result<StoredUser, tokio_postgres::Error> {
                Ok(StoredUser {
                    info: user(r)?,
                    hash: r.try_get(5)?,
                })
            };
            row.map(|r| stored(&r)).transpose().map_err(db)
        })
    }

    fn user_role<'a>(
        &'a self,
        name: &'a str,
        role: &'a str,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(async move { Ok(self.execute(USER_ROLE, &[&name, &role]).await? > 0) })
    }

    fn user_quota<'a>(
        &'a self,
        name: &'a str,
        quota: Quota,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        let big = |v: Option<u64>| v.map(|v| i64::try_from(v).unwrap_or(i64::MAX));
        Box::pin(async move {
            let (b, i) = (big(quota.bytes), big(quota.items));
            Ok(self.execute(USER_QUOTA, &[&name, &b, &i]).await? > 0)
        })
    }

    fn user_remove<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(async move { Ok(self.execute(USER_REMOVE, &[&name]).await? > 0) })
    }

    fn users(&self) -> BoxFut<'_, Result<Vec<UserInfo>, MetaError>> {
        Box::pin(async move { rows(self.query(USERS, &[]).await?, user) })
    }

    fn secret<'a>(
        &'a self,
        name: &'a str,
        fresh: Vec<u8>,
    ) -> BoxFut<'a, Result<Vec<u8>, MetaError>> {
        Box::pin(async move {
            // Two nodes starting at once both insert; the first wins and
            // both read its value.
            self.execute(SECRET_INIT, &[&name, &fresh]).await?;
            self.value(SECRET_GET, &[&name]).await
        })
    }

    fn secret_set<'a>(
        &'a self,
        name: &'a str,
        value: Vec<u8>,
    ) -> BoxFut<'a, Result<(), MetaError>> {
        Box::pin(async move { self.execute(SECRET_SET, &[&name, &value]).await.map(drop) })
    }
}
