//! A resumable upload's state, as saved in its row of the metadata store
//! (`UploadRow::state`, JSON): everything a node needs to go on, so that
//! any node can continue any upload (DESIGN.md "Storage").
//!
//! The SHA-256 of the whole file is kept as the hash's running state
//! (`sha2`'s serializable state: the eight chaining words, the block
//! count and the unhashed bytes of the last partial block, ~105 bytes),
//! saved (or noted on the spool, see [`UploadState::note`]) with every
//! durable offset. Resuming costs nothing but reading it
//! back; the alternative, hashing the stored parts in order at completion,
//! would read the whole file again.

use crate::error::{ApiError, Kind};
use crate::store::Spool;
use serde::{Deserialize, Serialize};
use sha2::digest::common::hazmat::{SerializableState, SerializedState};
use sha2::Sha256;

/// The JSON state of one resumable upload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadState {
    /// Where the bytes are (the janitor reads this key).
    pub spool: Spool,
    /// The total length; `None` while deferred (tus
    /// `creation-defer-length`, an IETF upload not yet complete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<u64>,
    /// The running SHA-256 of the durable bytes, serialized, in hex;
    /// empty (and absent from the JSON) when it lags, see `behind`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sha256: String,
    /// The running SHA-256 when it lags behind the offset: a request may
    /// answer before its hash has caught up with its bytes (on a store
    /// whose spool can be read back), and the next writer hashes the rest
    /// from the spool (`hash::hasher_at_offset`). A separate key, so
    /// that a build which knows only `sha256` refuses such a state rather
    /// than take it for the hash at the offset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256_behind: Option<HashBehind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filetype: Option<String>,
    /// `Upload-Metadata` as sent, echoed by `HEAD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<String>,
    /// `partial`, or the partial uploads' ids of a final one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concat: Option<ConcatState>,
    /// Every byte is in and the blob is final.
    #[serde(default)]
    pub complete: bool,
    /// The blob belongs to a media row (a complete upload that is not a
    /// partial one): the janitor then removes only this row.
    #[serde(default)]
    pub media: bool,
    /// What the creating principal's credential allowed, for whichever
    /// node takes the later requests: the owner's quota when it was made
    /// (checked again exactly when the media row commits) and a JWT's
    /// upload limits.
    #[serde(default, skip_serializing_if = "Granted::is_empty")]
    pub granted: Granted,
    /// When the last `upload.progress` was due (seconds since the epoch):
    /// kept in the row, so that every node and request of the upload
    /// keeps to one per `[events] progress_interval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_at: Option<u64>,
}

/// A principal's upload rules and quota, as a resumable upload keeps them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Granted {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_types: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_items: Option<u64>,
}

impl Granted {
    pub fn of(who: &crate::principal::Principal) -> Granted {
        Granted {
            max_bytes: who.rules.max_bytes,
            content_types: who.rules.content_types.clone(),
            quota_bytes: who.quota.bytes,
            quota_items: who.quota.items,
        }
    }

    fn is_empty(&self) -> bool {
        *self == Granted::default()
    }

    pub fn rules(&self) -> crate::principal::UploadRules {
        crate::principal::UploadRules {
            max_bytes: self.max_bytes,
            content_types: self.content_types.clone(),
            quota_bytes: self.quota_bytes,
        }
    }

    pub fn quota(&self) -> crate::store::Quota {
        crate::store::Quota {
            bytes: self.quota_bytes,
            items: self.quota_items,
        }
    }
}

/// A saved running hash and the offset it stands at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HashBehind {
    pub at: u64,
    /// Serialized, in hex, as `sha256`.
    pub state: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConcatState {
    Partial,
    Final(Vec<String>),
}

impl UploadState {
    pub fn new(spool: Spool, length: Option<u64>) -> UploadState {
        UploadState {
            spool,
            length,
            sha256: save_hash(&Sha256::default()),
            sha256_behind: None,
            filename: None,
            filetype: None,
            metadata: None,
            concat: None,
            complete: false,
            media: false,
            granted: Granted::default(),
            progress_at: None,
        }
    }

    pub fn parse(id: &str, json: &str) -> Result<UploadState, ApiError> {
        serde_json::from_str(json)
            .map_err(|e| ApiError::storage(format!("upload {id}: unreadable state: {e}")))
    }

    pub fn to_json(&self) -> String {
        // A struct of strings, numbers and lists: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn offset(&self) -> u64 {
        self.spool.len
    }

    pub fn is_final(&self) -> bool {
        matches!(self.concat, Some(ConcatState::Final(_)))
    }

    pub fn is_partial(&self) -> bool {
        self.concat == Some(ConcatState::Partial)
    }

    /// Where [`UploadState::hasher`] stands: the offset, or before it.
    pub fn hashed_to(&self) -> u64 {
        self.sha256_behind
            .as_ref()
            .map_or(self.offset(), |b| b.at.min(self.offset()))
    }

    /// The running hash at [`UploadState::hashed_to`].
    pub fn hasher(&self) -> Result<Sha256, ApiError> {
        let hex = self
            .sha256_behind
            .as_ref()
            .map_or(&self.sha256, |b| &b.state);
        let broken = || ApiError::storage("an upload's saved hash state is unreadable");
        let bytes = hex::decode(hex).map_err(|_| broken())?;
        let st = SerializedState::<Sha256>::try_from(&bytes[..]).map_err(|_| broken())?;
        Sha256::deserialize(&st).map_err(|_| broken())
    }

    /// The hash at the offset.
    pub fn set_hasher(&mut self, h: &Sha256) {
        self.sha256 = save_hash(h);
        self.sha256_behind = None;
    }

    /// The hash at `at`, which may be behind the offset.
    pub fn set_hasher_at(&mut self, h: &Sha256, at: u64) {
        if at >= self.offset() {
            return self.set_hasher(h);
        }
        self.sha256 = String::new();
        self.sha256_behind = Some(HashBehind {
            at,
            state: save_hash(h),
        });
    }
}

/// What a durable point writes on a spool that keeps notes
/// (`SpoolWriter::sync_noted`), durable with its bytes: the part of the
/// state an append moves. The answer then goes before the row is saved;
/// whoever loads the row takes a note that is ahead of it
/// ([`UploadState::take_note`]), so a row that a crash (or a failed save)
/// left behind loses nothing acknowledged.
#[derive(Debug, Serialize, Deserialize)]
struct Note {
    len: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sha256_behind: Option<HashBehind>,
}

impl UploadState {
    /// The note for this state's durable point (~250 bytes of JSON).
    pub fn note(&self) -> Vec<u8> {
        let n = Note {
            len: self.spool.len,
            sha256: self.sha256.clone(),
            sha256_behind: self.sha256_behind.clone(),
        };
        serde_json::to_vec(&n).unwrap_or_default()
    }

    /// Takes `note` if it is ahead of this state (a durable point whose
    /// row was not saved); true if it was. A complete upload takes none.
    pub fn take_note(&mut self, id: &str, note: &[u8]) -> Result<bool, ApiError> {
        let n: Note = serde_json::from_slice(note)
            .map_err(|e| ApiError::storage(format!("upload {id}: unreadable spool note: {e}")))?;
        if self.complete || n.len <= self.spool.len {
            return Ok(false);
        }
        if self.length.is_some_and(|l| n.len > l) {
            let m = format!("upload {id}: its spool note is past Upload-Length");
            return Err(ApiError::storage(m));
        }
        let mut st = self.clone();
        st.spool.len = n.len;
        st.sha256 = n.sha256;
        st.sha256_behind = n.sha256_behind;
        // The hash fields must name a state (at or before the offset).
        st.hasher()?;
        *self = st;
        Ok(true)
    }
}

fn save_hash(h: &Sha256) -> String {
    hex::encode(h.serialize())
}

/// 410 for an upload past its expiry (the janitor removes it soon).
pub fn gone(id: &str) -> ApiError {
    ApiError::new(Kind::Gone, format!("upload {id} has expired"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest;

    #[test]
    fn the_hash_resumes_exactly_at_any_offset() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 256) as u8).collect();
        let whole = hex::encode(Sha256::digest(&data));
        for cut in [0, 1, 63, 64, 65, 4097, 9999] {
            let mut st = UploadState::new(Spool::default(), None);
            let mut h = st.hasher().unwrap();
            h.update(&data[..cut]);
            st.set_hasher(&h);
            let json = st.to_json();
            let mut h = UploadState::parse("x", &json).unwrap().hasher().unwrap();
            h.update(&data[cut..]);
            assert_eq!(hex::encode(h.finalize()), whole, "cut at {cut}");
        }
    }

    #[test]
    fn a_lagging_hash_round_trips_and_has_no_sha256_key() {
        let data = [7u8; 5000];
        let mut st = UploadState::new(Spool::default(), None);
        st.spool.len = 5000;
        let mut h = Sha256::default();
        h.update(&data[..1000]);
        st.set_hasher_at(&h, 1000);
        let json = st.to_json();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert!(v.get("sha256").is_none(), "{json}");
        let back = UploadState::parse("x", &json).unwrap();
        assert_eq!(back.hashed_to(), 1000);
        let mut h = back.hasher().unwrap();
        h.update(&data[1000..]);
        assert_eq!(h.finalize(), Sha256::digest(data));
        st.set_hasher(&Sha256::default());
        assert_eq!(st.hashed_to(), 5000);
        assert!(st.to_json().contains("\"sha256\""));
    }

    /// A note ahead of the row moves its offset and hash, and nothing
    /// else; one at or behind it, or on a complete upload, changes
    /// nothing; one past the length or with a broken hash is an error.
    #[test]
    fn a_note_is_taken_only_when_it_is_ahead() {
        let mut row = UploadState::new(Spool::default(), Some(9000));
        row.filename = Some("f".into());
        let mut ahead = row.clone();
        ahead.spool.len = 4000;
        let mut h = Sha256::default();
        h.update([1u8; 1000]);
        ahead.set_hasher_at(&h, 1000);
        let note = ahead.note();
        let mut st = row.clone();
        assert!(st.take_note("x", &note).unwrap());
        assert_eq!(st, ahead);
        assert_eq!(st.hashed_to(), 1000);
        assert!(!st.take_note("x", &note).unwrap(), "not ahead any more");
        let mut done = row.clone();
        done.complete = true;
        assert!(!done.take_note("x", &note).unwrap());
        let mut short = row.clone();
        short.length = Some(3000);
        assert!(short.take_note("x", &note).is_err(), "past Upload-Length");
        let broken = br#"{"len":5000,"sha256":"00"}"#;
        assert!(row.clone().take_note("x", broken).is_err());
        assert!(row.clone().take_note("x", b"{").is_err());
    }

    #[test]
    fn state_keeps_every_field_and_the_janitor_keys() {
        let mut st = UploadState::new(Spool::default(), Some(5));
        st.concat = Some(ConcatState::Final(vec!["a".into()]));
        st.filename = Some("f".into());
        st.media = true;
        let json = st.to_json();
        assert_eq!(UploadState::parse("x", &json).unwrap(), st);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["media"], true);
        assert_eq!(v["spool"]["len"], 0);
        assert!(UploadState::parse("x", "{}").is_err());
    }
}
