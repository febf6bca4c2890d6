//! Tokens, users and secrets ([`CredentialStore`]).

use super::{now, SqliteMeta};
use crate::{
    token_id, BoxFut, CredentialStore, MetaError, NewToken, Quota, StoredUser, Token, UserInfo,
    UserSet,
};
use rusqlite::{params, OptionalExtension, Row};

const TOKEN_COLUMNS: &str = "id, label, created, owner, scopes, expires, last_used";

fn token(r: &Row<'_>) -> rusqlite::Result<Token> {
    Ok(Token {
        id: r.get(0)?,
        label: r.get(1)?,
        created: r.get(2)?,
        owner: r.get(3)?,
        scopes: r.get(4)?,
        expires: r.get(5)?,
        last_used: r.get(6)?,
    })
}

const USER_COLUMNS: &str = "name, created, role, quota_bytes, quota_items";

fn user(r: &Row<'_>) -> rusqlite::Result<UserInfo> {
    let n = |v: Option<i64>| v.map(|v| v.max(0) as u64);
    Ok(UserInfo {
        name: r.get(0)?,
        created: r.get(1)?,
        role: r.get(2)?,
        quota: Quota {
            bytes: n(r.get(3)?),
            items: n(r.get(4)?),
        },
    })
}

/// A quota part for a column (`None` stays NULL).
fn col(v: Option<u64>) -> Option<i64> {
    v.map(|v| i64::try_from(v).unwrap_or(i64::MAX))
}

/// How often a token's last use is written (see
/// [`CredentialStore::token_used`]).
const USED_EVERY_S: i64 = 60;

impl CredentialStore for SqliteMeta {
    fn token_add(&self, digest: [u8; 32], t: NewToken) -> BoxFut<'_, Result<Token, MetaError>> {
        let writes = self.writes.clone();
        self.with(move |c| {
            let t = Token {
                id: token_id(&digest),
                label: t.label,
                created: now(),
                owner: t.owner,
                scopes: t.scopes,
                expires: t.expires,
                last_used: None,
            };
            c.prepare_cached(
                "INSERT INTO tokens (id, digest, label, created, owner, scopes, expires)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                t.id,
                &digest[..],
                t.label,
                t.created,
                t.owner,
                t.scopes,
                t.expires
            ])?;
            writes.add(1);
            Ok(t)
        })
    }

    fn token_find(&self, digest: [u8; 32]) -> BoxFut<'_, Result<Option<Token>, MetaError>> {
        self.with(move |c| {
            let sql = format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE digest = ?1");
            c.prepare_cached(&sql)?
                .query_row([&digest[..]], token)
                .optional()
        })
    }

    fn token_used<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        let id = id.to_string();
        // Without an fsync: a last use lost to a crash is harmless.
        self.relaxed(move |c| {
            let now = now();
            c.prepare_cached(
                "UPDATE tokens SET last_used = ?2
                 WHERE id = ?1 AND (last_used IS NULL OR last_used <= ?3)",
            )?
            .execute(params![id, now, now - USED_EVERY_S])?;
            Ok(())
        })
    }

    fn tokens(&self) -> BoxFut<'_, Result<Vec<Token>, MetaError>> {
        self.with(|c| {
            let sql = format!("SELECT {TOKEN_COLUMNS} FROM tokens ORDER BY created, id");
            let mut st = c.prepare_cached(&sql)?;
            let rows = st.query_map([], token)?;
            rows.collect()
        })
    }

    fn token_revoke<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        let id = id.to_string();
        self.with(move |c| Ok(c.execute("DELETE FROM tokens WHERE id = ?1", [id])? > 0))
    }

    fn user_set<'a>(
        &'a self,
        name: &'a str,
        hash: &'a str,
        mode: UserSet,
        role: &'a str,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        let (name, hash, role) = (name.to_string(), hash.to_string(), role.to_string());
        self.with(move |c| {
            let n = match mode {
                UserSet::Create => c.execute(
                    "INSERT INTO users (name, hash, created, role) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (name) DO NOTHING",
                    params![name, hash, now(), role],
                )?,
                UserSet::Update => c.execute(
                    "UPDATE users SET hash = ?2 WHERE name = ?1",
                    params![name, hash],
                )?,
                UserSet::Upsert => c.execute(
                    "INSERT INTO users (name, hash, created, role) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (name) DO UPDATE SET hash = excluded.hash",
                    params![name, hash, now(), role],
                )?,
            };
            Ok(n > 0)
        })
    }

    fn user_get<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<Option<StoredUser>, MetaError>> {
        let name = name.to_string();
        self.with(move |c| {
            let sql = format!("SELECT {USER_COLUMNS}, hash FROM users WHERE name = ?1");
            c.prepare_cached(&sql)?
                .query_row([name], |r| {
                    Ok(StoredUser {
                        info: user(r)?,
                        hash: r.get(5)?,
                    })
                })
                .optional()
        })
    }

    fn user_role<'a>(
        &'a self,
        name: &'a str,
        role: &'a str,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        let (name, role) = (name.to_string(), role.to_string());
        self.with(move |c| {
            let n = c.execute(
                "UPDATE users SET role = ?2 WHERE name = ?1",
                params![name, role],
            )?;
            Ok(n > 0)
        })
    }

    fn user_quota<'a>(
        &'a self,
        name: &'a str,
        quota: Quota,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        let name = name.to_string();
        self.with(move |c| {
            let n = c.execute(
                "UPDATE users SET quota_bytes = ?2, quota_items = ?3 WHERE name = ?1",
                params![name, col(quota.bytes), col(quota.items)],
            )?;
            Ok(n > 0)
        })
    }

    fn user_remove<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        let name = name.to_string();
        self.with(move |c| Ok(c.execute("DELETE FROM users WHERE name = ?1", [name])? > 0))
    }

    fn users(&self) -> BoxFut<'_, Result<Vec<UserInfo>, MetaError>> {
        self.with(|c| {
            let sql = format!("SELECT {USER_COLUMNS} FROM users ORDER BY name");
            let mut st = c.prepare_cached(&sql)?;
            let rows = st.query_map([], user)?;
            rows.collect()
        })
    }

    fn secret<'a>(
        &'a self,
        name: &'a str,
        fresh: Vec<u8>,
    ) -> BoxFut<'a, Result<Vec<u8>, MetaError>> {
        let name = name.to_string();
        self.with(move |c| {
            c.prepare_cached(
                "INSERT OR IGNORE INTO secrets (name, value, created) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![name, fresh, now()])?;
            c.prepare_cached("SELECT value FROM secrets WHERE name = ?1")?
                .query_row([name], |r| r.get(0))
        })
    }

    fn secret_set<'a>(
        &'a self,
        name: &'a str,
        value: Vec<u8>,
    ) -> BoxFut<'a, Result<(), MetaError>> {
        let name = name.to_string();
        self.with(move |c| {
            c.prepare_cached(
                "INSERT INTO secrets (name, value, created) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value, created = excluded.created",
            )?
            .execute(params![name, value, now()])?;
            Ok(())
        })
    }
}
