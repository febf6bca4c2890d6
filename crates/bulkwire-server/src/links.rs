//! Media links that work for whoever holds them: capabilities, like S3's presigned URLs.
//!
//! A link is the media's own path with a signature: `/v1/media/{id}?sig=S`, or with an expiry
//! `/v1/media/{id}?exp=T&sig=S` (`T` in Unix seconds, when `link_ttl` is set). `S` is the first
//! 128 bits of HMAC-SHA256 (RFC 2104) over the id and the expiry under the server's link key,
//! base64url without padding (RFC 4648 §5). The key is 256 random bits made at the first start
//! and kept in the metadata store (`CredentialStore::secret`), so every node signs and verifies the
//! same links; `bulkwire link rotate` replaces it, which revokes every link at once (nodes reload
//! it every `auth_cache_ms`). Deleting the media revokes its links: they then answer 404.
//!
//! An image's variant has links of its own: `/v1/media/{id}/variant?w=…&h=…&fit=…&format=…&sig=S`,
//! `S` over the id and those parameters (in that order, as given) under another context, so that
//! a link holder can neither ask for another size nor use the item's own `sig` for a variant
//! (each variant URL handed out carries its own).
//!
//! A link grants `GET` and `HEAD` of that one item and nothing else: not the list, not a delete,
//! not an upload (those still need credentials). A bad or expired signature is 403 before the id
//! is looked up, so a link never tells whether an id exists.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The metadata store's name for the key.
pub const KEY_NAME: &str = "link-key";
/// Bytes of MAC kept in a link: 128 bits, as many presigned-URL schemes.
const MAC_BYTES: usize = 16;
/// Domain separation: this key signs nothing else, but a future link kind must not collide.
const CONTEXT: &[u8] = b"bulkwire media link v1\0";
/// A variant link's context: its signature never verifies as an item's, nor the other way round.
const VARIANT_CONTEXT: &[u8] = b"bulkwire variant link v1\0";

/// The link key, as loaded (and reloaded) from the metadata store.
pub struct Links {
    key: RwLock<Arc<Vec<u8>>>,
    ttl: Option<Duration>,
}

/// Why a link was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// No `sig`, a malformed one, or one that does not match.
    Bad,
    /// A valid signature whose expiry has passed.
    Expired,
}

impl Links {
    pub fn new(key: Vec<u8>, ttl: Option<Duration>) -> Links {
        Links {
            key: RwLock::new(Arc::new(key)),
            ttl,
        }
    }

    /// A fresh random key for a first start.
    pub fn fresh_key() -> Vec<u8> {
        rand::random::<[u8; 32]>().to_vec()
    }

    /// Takes a key read from the store (after a rotation elsewhere).
    pub fn set_key(&self, key: Vec<u8>) {
        let mut k = self.key.write().unwrap_or_else(|e| e.into_inner());
        if **k != key {
            *k = Arc::new(key);
        }
    }

    fn key(&self) -> Arc<Vec<u8>> {
        self.key.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The link's path and query for media `id`, valid from now for `link_ttl` (or forever).
    pub fn path(&self, id: &str) -> String {
        let exp = self.ttl.map(|t| unix_now().saturating_add(t.as_secs()));
        let sig = self.sign(id, exp.unwrap_or(0));
        match exp {
            Some(e) => format!("/v1/media/{id}?exp={e}&sig={sig}"),
            None => format!("/v1/media/{id}?sig={sig}"),
        }
    }

    /// The link's path and query for variant `params` (`w=…&h=…&fit=…&format=…`, as the
    /// variant's parser writes them) of media `id`.
    pub fn variant_path(&self, id: &str, params: &str) -> String {
        let exp = self.ttl.map(|t| unix_now().saturating_add(t.as_secs()));
        let sig = self.sign_with(
            VARIANT_CONTEXT,
            &format!("{id}\0{params}"),
            exp.unwrap_or(0),
        );
        match exp {
            Some(e) => format!("/v1/media/{id}/variant?{params}&exp={e}&sig={sig}"),
            None => format!("/v1/media/{id}/variant?{params}&sig={sig}"),
        }
    }

    /// A link to the bytes of upload `id` before its row commits, for the
    /// `pre_finish` hook (`crate::hooks`): valid for `ttl`, and signed over
    /// another name than a media link, so neither stands for the other.
    pub fn finishing_path(&self, id: &str, ttl: Duration) -> String {
        let exp = unix_now().saturating_add(ttl.as_secs().max(1));
        let sig = self.sign(&finishing_name(id), exp);
        format!("{FINISHING}{id}?exp={exp}&sig={sig}")
    }

    /// Checks a [`Links::finishing_path`] query for `id`.
    pub fn verify_finishing(&self, id: &str, query: &str) -> Result<(), Refused> {
        if !query.split('&').any(|kv| kv.starts_with("exp=")) {
            return Err(Refused::Bad);
        }
        self.verify(&finishing_name(id), query)
    }

    fn sign(&self, id: &str, exp: u64) -> String {
        self.sign_with(CONTEXT, id, exp)
    }

    fn sign_with(&self, context: &[u8], subject: &str, exp: u64) -> String {
        use base64::Engine;
        let mac = self.mac(context, subject, exp).finalize().into_bytes();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&mac[..MAC_BYTES])
    }

    fn mac(&self, context: &[u8], subject: &str, exp: u64) -> Hmac<Sha256> {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key())
            .expect("HMAC takes a key of any length");
        m.update(context);
        m.update(subject.as_bytes());
        m.update(b"\0");
        m.update(exp.to_string().as_bytes());
        m
    }

    /// Checks the query of a request for media `id`: `Ok` when it carries a valid, unexpired
    /// signature. The comparison is constant-time.
    pub fn verify(&self, id: &str, query: &str) -> Result<(), Refused> {
        self.verify_with(CONTEXT, id, query)
    }

    /// Checks the query of a request for variant `params` of media `id` (what the variant's
    /// parser made of the same query, written as [`Links::variant_path`] takes it).
    pub fn verify_variant(&self, id: &str, params: &str, query: &str) -> Result<(), Refused> {
        self.verify_with(VARIANT_CONTEXT, &format!("{id}\0{params}"), query)
    }

    fn verify_with(&self, context: &[u8], subject: &str, query: &str) -> Result<(), Refused> {
        use base64::Engine;
        let (mut exp, mut sig) = (None, None);
        for kv in query.split('&') {
            match kv.split_once('=') {
                Some(("exp", v)) => exp = Some(v.parse::<u64>().map_err(|_| Refused::Bad)?),
                Some(("sig", v)) => sig = Some(v),
                _ => {}
            }
        }
        let sig = sig.ok_or(Refused::Bad)?;
        let given = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(sig)
            .map_err(|_| Refused::Bad)?;
        if given.len() != MAC_BYTES {
            return Err(Refused::Bad);
        }
        self.mac(context, subject, exp.unwrap_or(0))
            .verify_truncated_left(&given)
            .map_err(|_| Refused::Bad)?;
        match exp {
            Some(e) if e <= unix_now() => Err(Refused::Expired),
            _ => Ok(()),
        }
    }
}

/// The expiry a link's query names (Unix seconds), if any; for a query
/// [`Links::verify`] passed.
pub fn expiry(query: &str) -> Option<u64> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("exp="))
        .and_then(|v| v.parse().ok())
}

/// Whether a query names a signature at all (then it is a link request, good or bad).
pub fn has_sig(query: Option<&str>) -> bool {
    query.is_some_and(|q| q.split('&').any(|kv| kv.starts_with("sig=")))
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Where the `pre_finish` hook reads an upload's bytes.
pub const FINISHING: &str = "/v1/finishing/";

fn finishing_name(id: &str) -> String {
    format!("finishing/{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(path: &str) -> &str {
        path.split_once('?').unwrap().1
    }

    #[test]
    fn a_link_verifies_for_its_id_only() {
        let l = Links::new(vec![7; 32], None);
        let p = l.path("abc");
        assert!(p.starts_with("/v1/media/abc?sig="), "{p}");
        assert_eq!(l.verify("abc", query(&p)), Ok(()));
        assert_eq!(l.verify("abd", query(&p)), Err(Refused::Bad));
        assert_eq!(l.verify("abc", ""), Err(Refused::Bad));
        assert_eq!(l.verify("abc", "sig=%%%"), Err(Refused::Bad));
        assert_eq!(l.verify("abc", "sig=AAAA"), Err(Refused::Bad));
    }

    #[test]
    fn a_tampered_signature_or_expiry_is_refused() {
        let l = Links::new(vec![7; 32], Some(Duration::from_secs(3600)));
        let p = l.path("abc");
        let q = query(&p);
        assert_eq!(l.verify("abc", q), Ok(()));
        let (exp, sig) = q.split_once('&').unwrap();
        let e: u64 = exp.strip_prefix("exp=").unwrap().parse().unwrap();
        let later = format!("exp={}&{sig}", e + 1);
        assert_eq!(l.verify("abc", &later), Err(Refused::Bad));
        let mut flipped = sig.to_string().into_bytes();
        let last = flipped.len() - 2;
        flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
        let flipped = format!("{exp}&{}", String::from_utf8(flipped).unwrap());
        assert_eq!(l.verify("abc", &flipped), Err(Refused::Bad));
        assert_eq!(l.verify("abc", sig), Err(Refused::Bad), "expiry dropped");
    }

    #[test]
    fn an_expired_link_is_told_apart_only_after_its_signature_holds() {
        let l = Links::new(vec![7; 32], None);
        let past = 1_000u64;
        let sig = l.sign("abc", past);
        assert_eq!(
            l.verify("abc", &format!("exp={past}&sig={sig}")),
            Err(Refused::Expired)
        );
    }

    #[test]
    fn a_new_key_revokes_every_link() {
        let l = Links::new(vec![7; 32], None);
        let p = l.path("abc");
        l.set_key(vec![8; 32]);
        assert_eq!(l.verify("abc", query(&p)), Err(Refused::Bad));
        assert_eq!(l.verify("abc", query(&l.path("abc"))), Ok(()));
    }

    #[test]
    fn a_variant_link_names_its_parameters_and_no_other() {
        let l = Links::new(vec![7; 32], None);
        let params = "w=300&h=300&fit=cover&format=webp";
        let p = l.variant_path("abc", params);
        assert!(p.starts_with("/v1/media/abc/variant?w=300&"), "{p}");
        let q = query(&p);
        assert_eq!(l.verify_variant("abc", params, q), Ok(()));
        let other = "w=2048&h=2048&fit=cover&format=webp";
        assert_eq!(l.verify_variant("abc", other, q), Err(Refused::Bad));
        assert_eq!(l.verify_variant("abd", params, q), Err(Refused::Bad));
        // The item's own link does not make variants, nor a variant's the item.
        let item = l.path("abc");
        assert_eq!(
            l.verify_variant("abc", params, query(&item)),
            Err(Refused::Bad)
        );
        assert_eq!(l.verify("abc", q), Err(Refused::Bad));
    }

    #[test]
    fn sig_detection() {
        assert!(has_sig(Some("sig=x")));
        assert!(has_sig(Some("exp=1&sig=x")));
        assert!(!has_sig(Some("signature=x")));
        assert!(!has_sig(None));
    }
}
