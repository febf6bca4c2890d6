//! Credentials (see `bulkwire-server`'s `auth`) and the server's secrets:
//! tokens are kept as SHA-256 digests, users as password hashes in PHC
//! string format.

use super::MetaError;
use crate::BoxFut;

/// A stored token as listed (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub id: String,
    pub label: String,
    pub created: i64,
}

/// A stored user as listed (never the hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub created: i64,
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
    fn token_add(&self, digest: [u8; 32], label: String) -> BoxFut<'_, Result<Token, MetaError>>;

    /// True if a token with this digest is stored (one indexed lookup).
    fn token_known(&self, digest: [u8; 32]) -> BoxFut<'_, Result<bool, MetaError>>;

    fn tokens(&self) -> BoxFut<'_, Result<Vec<Token>, MetaError>>;

    /// Removes the token with this id; `false` if there was none.
    fn token_revoke<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<bool, MetaError>>;

    /// Creates or updates a user (see [`UserSet`]); `false` when the mode's
    /// condition failed (exists already / does not exist).
    fn user_set<'a>(
        &'a self,
        name: &'a str,
        hash: &'a str,
        mode: UserSet,
    ) -> BoxFut<'a, Result<bool, MetaError>>;

    /// A user's stored password hash.
    fn user_hash<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<Option<String>, MetaError>>;

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
