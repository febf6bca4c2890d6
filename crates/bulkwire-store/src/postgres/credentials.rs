//! Tokens, users and secrets ([`CredentialStore`]).

use super::error::db;
use super::{rows, PgMeta};
use crate::{token_id, BoxFut, CredentialStore, MetaError, Token, UserInfo, UserSet};

const TOKEN_ADD: &str = "INSERT INTO tokens (id, digest, label) VALUES ($1, $2, $3)
     RETURNING floor(extract(epoch FROM created))::bigint";
const TOKEN_KNOWN: &str = "SELECT EXISTS (SELECT 1 FROM tokens WHERE digest = $1)";
const TOKENS: &str = "SELECT id, label, floor(extract(epoch FROM created))::bigint
     FROM tokens ORDER BY created, id";
const TOKEN_REVOKE: &str = "DELETE FROM tokens WHERE id = $1";
const USER_CREATE: &str =
    "INSERT INTO users (name, hash) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING";
const USER_UPDATE: &str = "UPDATE users SET hash = $2 WHERE name = $1";
const USER_UPSERT: &str = "INSERT INTO users (name, hash) VALUES ($1, $2)
     ON CONFLICT (name) DO UPDATE SET hash = excluded.hash";
const USER_HASH: &str = "SELECT hash FROM users WHERE name = $1";
const USER_REMOVE: &str = "DELETE FROM users WHERE name = $1";
const USERS: &str =
    "SELECT name, floor(extract(epoch FROM created))::bigint FROM users ORDER BY name";
const SECRET_INIT: &str =
    "INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING";
const SECRET_GET: &str = "SELECT value FROM secrets WHERE name = $1";
const SECRET_SET: &str = "INSERT INTO secrets (name, value) VALUES ($1, $2)
     ON CONFLICT (name) DO UPDATE SET value = excluded.value, created = now()";

impl CredentialStore for PgMeta {
    fn token_add(&self, digest: [u8; 32], label: String) -> BoxFut<'_, Result<Token, MetaError>> {
        Box::pin(async move {
            let id = token_id(&digest);
            let created = self.value(TOKEN_ADD, &[&id, &&digest[..], &label]).await?;
            Ok(Token { id, label, created })
        })
    }

    fn token_known(&self, digest: [u8; 32]) -> BoxFut<'_, Result<bool, MetaError>> {
        Box::pin(async move { self.value(TOKEN_KNOWN, &[&&digest[..]]).await })
    }

    fn tokens(&self) -> BoxFut<'_, Result<Vec<Token>, MetaError>> {
        Box::pin(async move {
            rows(self.query(TOKENS, &[]).await?, |r| {
                Ok(Token {
                    id: r.try_get(0)?,
                    label: r.try_get(1)?,
                    created: r.try_get(2)?,
                })
            })
        })
    }

    fn token_revoke<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(async move { Ok(self.execute(TOKEN_REVOKE, &[&id]).await? > 0) })
    }

    fn user_set<'a>(
        &'a self,
        name: &'a str,
        hash: &'a str,
        mode: UserSet,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        let sql = match mode {
            UserSet::Create => USER_CREATE,
            UserSet::Update => USER_UPDATE,
            UserSet::Upsert => USER_UPSERT,
        };
        Box::pin(async move { Ok(self.execute(sql, &[&name, &hash]).await? > 0) })
    }

    fn user_hash<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<Option<String>, MetaError>> {
        Box::pin(async move {
            let row = self.query_opt(USER_HASH, &[&name]).await?;
            row.map(|r| r.try_get(0)).transpose().map_err(db)
        })
    }

    fn user_remove<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(async move { Ok(self.execute(USER_REMOVE, &[&name]).await? > 0) })
    }

    fn users(&self) -> BoxFut<'_, Result<Vec<UserInfo>, MetaError>> {
        Box::pin(async move {
            rows(self.query(USERS, &[]).await?, |r| {
                Ok(UserInfo {
                    name: r.try_get(0)?,
                    created: r.try_get(1)?,
                })
            })
        })
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
