//! Credentials (see `bulkwire-server`'s `auth`) and the server's secrets:
//! tokens are kept as SHA-256 digests, users as password hashes in PHC
//! string format.

use super::MetaError;
use crate::BoxFut;

/// A token to store (its digest aside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToken {
    /// A note shown by `bulkwire token list`.
    pub label: String,
    /// Who owns what it makes.
    pub owner: String,
    /// Its scopes as the server writes them (`upload,read`); the store
    /// keeps them as text.
    pub scopes: String,
    /// Seconds since the Unix epoch after which it is refused; `None` never.
    pub expires: Option<i64>,
}

/// A stored token (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub id: String,
    pub label: String,
    pub created: i64,
    pub owner: String,
    pub scopes: String,
    pub expires: Option<i64>,
    /// Its last use, to the minute (see [`CredentialStore::token_used`]).
    pub last_used: Option<i64>,
}

/// A stored user as listed (never the hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub created: i64,
    /// `author`, `editor` or `admin`, as the server names roles.
    pub role: String,
    /// The user's own quota, before the role's.
    pub quota: super::Quota,
}

/// A stored user with its password hash (PHC string), for a login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredUser {
    pub hash: String,
    pub info: UserInfo,
}

/// How [`CredentialStore::user_set`] treats an existing user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserSet {
    /// Only a new user (`user add`).
    Create,
    /// Only an existing user (`user passwd`).
    Update,
    /// Either (`--user` on the command line, which wins).
    Upsert,
}

/// The id of a token with this digest.
pub fn token_id(digest: &[u8; 32]) -> String {
    hex::encode(&digest[..8])
}

/// Tokens, users and named secrets.
pub trait CredentialStore: Send + Sync + 'static {
    /// Stores a token digest; its id is the digest's first 16 hex digits.
    fn token_add(&self, digest: [u8; 32], token: NewToken) -> BoxFut<'_, Result<Token, MetaError>>;

    /// The token with this digest, if stored (one indexed lookup); its
    /// expiry is the caller's to check.
    fn token_find(&self, digest: [u8; 32]) -> BoxFut<'_, Result<Option<Token>, MetaError>>;

    /// Records a use of token `id` now, unless one was recorded within the
    /// last minute (a busy token costs one write a minute, not one a
    /// request).
    fn token_used<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<(), MetaError>>;

    fn tokens(&self) -> BoxFut<'_, Result<Vec<Token>, MetaError>>;

    /// Removes the token with this id; `false` if there was none.
    fn token_revoke<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<bool, MetaError>>;

    /// Creates or updates a user's password (see [`UserSet`]); a user
    /// created gets `role` (an update keeps the role it has). `false` when
    /// the mode's condition failed (exists already / does not exist).
    fn user_set<'a>(
        &'a self,
        name: &'a str,
        hash: &'a str,
        mode: UserSet,
        role: &'a str,
    ) -> BoxFut<'a, Result<bool, MetaError>>;

    /// A user, with their password hash.
    fn user_get<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<Option<StoredUser>, MetaError>>;

    /// Changes a user's role; `false` when there is no such user.
    fn user_role<'a>(&'a self, name: &'a str, role: &'a str)
        -> BoxFut<'a, Result<bool, MetaError>>;

    /// Sets a user's own quota (`None` parts clear it); `false` when there
    /// is no such user.
    fn user_quota<'a>(
        &'a self,
        name: &'a str,
        quota: super::Quota,
    ) -> BoxFut<'a, Result<bool, MetaError>>;

    fn user_remove<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<bool, MetaError>>;

    fn users(&self) -> BoxFut<'_, Result<Vec<UserInfo>, MetaError>>;

    /// The secret `name` (e.g. the key that signs media links): the stored
    /// value, or `fresh`, stored first, when there is none. Every node that
    /// shares the store reads the same value.
    fn secret<'a>(
        &'a self,
        name: &'a str,
        fresh: Vec<u8>,
    ) -> BoxFut<'a, Result<Vec<u8>, MetaError>>;

    /// Replaces the secret `name` (a key rotation).
    fn secret_set<'a>(&'a self, name: &'a str, value: Vec<u8>)
        -> BoxFut<'a, Result<(), MetaError>>;
}
