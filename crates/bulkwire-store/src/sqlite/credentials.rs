//! Tokens, users and secrets ([`CredentialStore`]).

use super::{now, SqliteMeta};
use crate::{token_id, BoxFut, CredentialStore, MetaError, Token, UserInfo, UserSet};
use rusqlite::{params, OptionalExtension};

impl CredentialStore for SqliteMeta {
    fn token_add(&self, digest: [u8; 32], label: String) -> BoxFut<'_, Result<Token, MetaError>> {
        let writes = self.writes.clone();
        self.with(move |c| {
            let t = Token {
                id: token_id(&digest),
                label,
                created: now(),
            };
            c.prepare_cached(
                "INSERT INTO tokens (id, digest, label, created) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![t.id, &digest[..], t.label, t.created])?;
            writes.add(1);
            Ok(t)
        })
    }

    fn token_known(&self, digest: [u8; 32]) -> BoxFut<'_, Result<bool, MetaError>> {
        self.with(move |c| {
            c.prepare_cached("SELECT 1 FROM tokens WHERE digest = ?1")?
                .exists([&digest[..]])
        })
    }

    fn tokens(&self) -> BoxFut<'_, Result<Vec<Token>, MetaError>> {
        self.with(|c| {
            let mut st = c.prepare("SELECT id, label, created FROM tokens ORDER BY created, id")?;
            let rows = st.query_map([], |r| {
                Ok(Token {
                    id: r.get(0)?,
                    label: r.get(1)?,
                    created: r.get(2)?,
                })
            })?;
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
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        let (name, hash) = (name.to_string(), hash.to_string());
        self.with(move |c| {
            let n = match mode {
                UserSet::Create => c.execute(
                    "INSERT INTO users (name, hash, created) VALUES (?1, ?2, ?3)
                     ON CONFLICT (name) DO NOTHING",
                    params![name, hash, now()],
                )?,
                UserSet::Update => c.execute(
                    "UPDATE users SET hash = ?2 WHERE name = ?1",
                    params![name, hash],
                )?,
                UserSet::Upsert => c.execute(
                    "INSERT INTO users (name, hash, created) VALUES (?1, ?2, ?3)
                     ON CONFLICT (name) DO UPDATE SET hash = excluded.hash",
                    params![name, hash, now()],
                )?,
            };
            Ok(n > 0)
        })
    }

    fn user_hash<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<Option<String>, MetaError>> {
        let name = name.to_string();
        self.with(move |c| {
            c.prepare_cached("SELECT hash FROM users WHERE name = ?1")?
                .query_row([name], |r| r.get(0))
                .optional()
        })
    }

    fn user_remove<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        let name = name.to_string();
        self.with(move |c| Ok(c.execute("DELETE FROM users WHERE name = ?1", [name])? > 0))
    }

    fn users(&self) -> BoxFut<'_, Result<Vec<UserInfo>, MetaError>> {
        self.with(|c| {
            let mut st = c.prepare("SELECT name, created FROM users ORDER BY name")?;
            let rows = st.query_map([], |r| {
                Ok(UserInfo {
                    name: r.get(0)?,
                    created: r.get(1)?,
                })
            })?;
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
