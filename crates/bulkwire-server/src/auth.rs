//! Credentials for `/v1`: `Authorization: Bearer TOKEN` (RFC 6750 §2.1) or
//! `Basic` (RFC 7617) for a configured user.
//!
//! Only SHA-256 digests are kept in memory, and on disk for the generated
//! token; comparison goes over every stored digest without an early exit,
//! so timing does not tell which one matched or how far a guess got.

use crate::config::User;
use base64::Engine;
use sha2::{Digest, Sha256};
use std::io;
use std::path::Path;

/// File in the data directory holding the generated token's digest.
pub const TOKEN_FILE: &str = "token.sha256";

type Digest32 = [u8; 32];

fn digest(b: &[u8]) -> Digest32 {
    Sha256::digest(b).into()
}

/// Equality without an early exit.
fn same(a: &Digest32, b: &Digest32) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The accepted credentials, built at start-up.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    tokens: Vec<Digest32>,
    /// (name, digest of password).
    users: Vec<(String, Digest32)>,
}

impl Auth {
    /// From configured tokens and users; when both are empty, from the
    /// digest stored in `data/token.sha256`, creating a random token there
    /// first if none exists. Returns the new token (to print once) if one
    /// was created.
    pub fn load_or_create(
        data: &Path,
        tokens: &[String],
        users: &[User],
    ) -> io::Result<(Auth, Option<String>)> {
        let mut auth = Auth {
            tokens: tokens.iter().map(|t| digest(t.as_bytes())).collect(),
            users: users
                .iter()
                .map(|u| (u.name.clone(), digest(u.password.as_bytes())))
                .collect(),
        };
        if !auth.tokens.is_empty() || !auth.users.is_empty() {
            return Ok((auth, None));
        }
        let path = data.join(TOKEN_FILE);
        match std::fs::read_to_string(&path) {
            Ok(s) => {
                auth.tokens = parse_digests(&s).map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{}: {e}", path.display()),
                    )
                })?;
                Ok((auth, None))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let token = hex::encode(rand::random::<[u8; 32]>());
                let d = digest(token.as_bytes());
                write_private(&path, format!("{}\n", hex::encode(d)).as_bytes())?;
                auth.tokens.push(d);
                Ok((auth, Some(token)))
            }
            Err(e) => Err(e),
        }
    }

    /// True when the `Authorization` header value is accepted.
    pub fn check(&self, header: Option<&[u8]>) -> bool {
        let Some(h) = header else { return false };
        let Some((scheme, cred)) = split_scheme(h) else {
            return false;
        };
        if scheme.eq_ignore_ascii_case(b"bearer") {
            self.check_token(cred)
        } else if scheme.eq_ignore_ascii_case(b"basic") {
            self.check_basic(cred)
        } else {
            false
        }
    }

    fn check_token(&self, token: &[u8]) -> bool {
        let d = digest(token);
        self.tokens.iter().fold(false, |ok, t| ok | same(t, &d))
    }

    /// Checks a user's name and password (Basic here; XML-RPC and SOAP
    /// handlers will call this too).
    pub fn check_user(&self, name: &str, password: &[u8]) -> bool {
        let d = digest(password);
        self.users
            .iter()
            .fold(false, |ok, (n, p)| ok | (n == name && same(p, &d)))
    }

    fn check_basic(&self, cred: &[u8]) -> bool {
        let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(cred) else {
            return false;
        };
        let Some(colon) = raw.iter().position(|&b| b == b':') else {
            return false;
        };
        let Ok(name) = std::str::from_utf8(&raw[..colon]) else {
            return false;
        };
        self.check_user(name, &raw[colon + 1..])
    }
}

/// `scheme SP credentials`, with surrounding whitespace trimmed.
fn split_scheme(h: &[u8]) -> Option<(&[u8], &[u8])> {
    let sp = h.iter().position(|&b| b == b' ')?;
    let cred = h[sp + 1..].trim_ascii();
    (!cred.is_empty()).then_some((&h[..sp], cred))
}

fn parse_digests(s: &str) -> Result<Vec<Digest32>, String> {
    let mut out = Vec::new();
    for line in s.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut d = [0u8; 32];
        hex::decode_to_slice(line, &mut d).map_err(|e| format!("bad token digest: {e}"))?;
        out.push(d);
    }
    if out.is_empty() {
        return Err("no token digest".into());
    }
    Ok(out)
}

/// Writes a file only the owner can read (0600 on Unix).
fn write_private(path: &Path, data: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let mut f = o.open(path)?;
    f.write_all(data)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(s: &str) -> Vec<u8> {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(s)
        )
        .into_bytes()
    }

    #[test]
    fn bearer_and_basic() {
        let d = tempfile::tempdir().unwrap();
        let users = [User::parse("bob:s3:cret").unwrap()];
        let (a, new) = Auth::load_or_create(d.path(), &["tok".into()], &users).unwrap();
        assert!(new.is_none());
        assert!(!d.path().join(TOKEN_FILE).exists());
        assert!(a.check(Some(b"Bearer tok")));
        assert!(a.check(Some(b"bearer  tok ")));
        assert!(!a.check(Some(b"Bearer tok2")));
        assert!(!a.check(Some(b"Bearer")));
        assert!(!a.check(None));
        assert!(a.check(Some(&basic("bob:s3:cret"))));
        assert!(!a.check(Some(&basic("bob:s3"))));
        assert!(!a.check(Some(&basic("eve:s3:cret"))));
        assert!(!a.check(Some(b"Basic !!!")));
        assert!(!a.check(Some(b"Digest x")));
    }

    #[test]
    fn generated_token_is_stored_hashed_and_reused() {
        let d = tempfile::tempdir().unwrap();
        let (a, tok) = Auth::load_or_create(d.path(), &[], &[]).unwrap();
        let tok = tok.expect("a token on first start");
        let stored = std::fs::read_to_string(d.path().join(TOKEN_FILE)).unwrap();
        assert!(!stored.contains(&tok));
        assert_eq!(stored.trim(), hex::encode(Sha256::digest(tok.as_bytes())));
        assert!(a.check(Some(format!("Bearer {tok}").as_bytes())));
        let (b, again) = Auth::load_or_create(d.path(), &[], &[]).unwrap();
        assert!(again.is_none());
        assert!(b.check(Some(format!("Bearer {tok}").as_bytes())));
    }
}
