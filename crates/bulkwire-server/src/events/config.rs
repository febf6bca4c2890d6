//! The configuration of events, webhooks and hooks: `[events]`,
//! `[[webhooks]]` and `[hooks]` in the TOML file (DESIGN.md "Telling the
//! application"). Every bound has a finite default; a secret is never
//! printed.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Every event type, for checking `[[webhooks]] events`.
pub const EVENT_TYPES: [&str; 6] = [
    "media.created",
    "media.deleted",
    "upload.created",
    "upload.terminated",
    "upload.expired",
    "upload.progress",
];

/// The `[events]` table: how long events are kept and how webhooks are
/// delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventsConfig {
    /// How long an event is kept once written (seconds or `"7d"`); one a
    /// delivery still waits for, or that failed, is kept until it is
    /// delivered or retried.
    #[serde(deserialize_with = "bulkwire_units::de::secs")]
    pub retention: u64,
    /// Least time between two `upload.progress` events of one resumable
    /// upload (seconds). Absent: no progress events.
    #[serde(deserialize_with = "bulkwire_units::de::opt_secs")]
    pub progress_interval: Option<u64>,
    /// Longest a webhook delivery may take, connecting included (seconds).
    #[serde(deserialize_with = "bulkwire_units::de::secs")]
    pub webhook_timeout: u64,
    /// Longest wait between two tries of one delivery (seconds): waits
    /// start under 2 s and double up to this.
    #[serde(deserialize_with = "bulkwire_units::de::secs")]
    pub webhook_retry_max: u64,
    /// Age of an event past which a delivery that keeps failing is marked
    /// failed (seconds or `"3d"`).
    #[serde(deserialize_with = "bulkwire_units::de::secs")]
    pub webhook_max_age: u64,
    /// Deliveries to one endpoint in flight at once, per node.
    pub webhook_concurrency: usize,
    /// Most bytes of a receiver's answer read (the rest is not waited
    /// for): the answer is only a status.
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub webhook_answer_bytes: u64,
    /// Most events in one page of `GET /v1/events`.
    pub feed_limit: usize,
}

impl Default for EventsConfig {
    fn default() -> Self {
        EventsConfig {
            retention: 7 * 86_400,
            progress_interval: None,
            webhook_timeout: 10,
            webhook_retry_max: 60,
            webhook_max_age: 3 * 86_400,
            webhook_concurrency: 16,
            webhook_answer_bytes: 64 << 10,
            feed_limit: 1000,
        }
    }
}

impl EventsConfig {
    pub fn retention(&self) -> Duration {
        Duration::from_secs(self.retention)
    }
    pub fn webhook_timeout(&self) -> Duration {
        Duration::from_secs(self.webhook_timeout)
    }
    pub fn webhook_retry_max(&self) -> Duration {
        Duration::from_secs(self.webhook_retry_max)
    }
    pub fn webhook_max_age(&self) -> Duration {
        Duration::from_secs(self.webhook_max_age)
    }
    pub fn progress_interval(&self) -> Option<Duration> {
        self.progress_interval.map(Duration::from_secs)
    }

    pub fn validate(&self) -> Result<(), String> {
        let zero = [
            ("retention", self.retention),
            ("webhook_timeout", self.webhook_timeout),
            ("webhook_retry_max", self.webhook_retry_max),
            ("webhook_max_age", self.webhook_max_age),
            ("webhook_concurrency", self.webhook_concurrency as u64),
            ("webhook_answer_bytes", self.webhook_answer_bytes),
            ("feed_limit", self.feed_limit as u64),
        ];
        if let Some((n, _)) = zero.iter().find(|(_, v)| *v == 0) {
            return Err(format!("events.{n} must be > 0"));
        }
        if self.progress_interval == Some(0) {
            return Err("events.progress_interval must be > 0 (leave it out for none)".into());
        }
        Ok(())
    }
}

/// One `[[webhooks]]` entry: where events of the listed types are POSTed,
/// signed with its secret (Standard Webhooks).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// `http://` or `https://`; also the endpoint's name in the store (its
    /// deliveries and mark), in metrics and in `bulkwire events list`.
    pub url: String,
    /// Event types sent, or `["*"]` (the default) for all.
    #[serde(default = "all_types")]
    pub events: Vec<String>,
    /// `whsec_` and the base64 of 24 to 64 random bytes
    /// (`bulkwire events secret` makes one).
    pub secret: String,
}

fn all_types() -> Vec<String> {
    vec!["*".to_string()]
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("url", &self.url)
            .field("events", &self.events)
            .field("secret", &"<hidden>")
            .finish()
    }
}

impl Webhook {
    pub fn validate(&self) -> Result<(), String> {
        check_url("webhooks.url", &self.url)?;
        if self.events.is_empty() {
            return Err(format!(
                "webhooks.events of {} is empty: list types or \"*\"",
                self.url
            ));
        }
        if let Some(t) = self
            .events
            .iter()
            .find(|t| *t != "*" && !EVENT_TYPES.contains(&t.as_str()))
        {
            return Err(format!(
                "webhooks.events of {}: unknown type {t:?}; the types are {}, or \"*\"",
                self.url,
                EVENT_TYPES.join(", ")
            ));
        }
        secret_key(&self.secret).map_err(|e| format!("webhooks.secret of {}: {e}", self.url))?;
        Ok(())
    }
}

/// What a hook that fails or does not answer in time means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookFailure {
    /// The upload is refused, 503 with `Retry-After`: nothing the
    /// application did not see gets in.
    #[default]
    Closed,
    /// The upload goes on as if the hook had said nothing.
    Open,
}

/// The `[hooks]` table: URLs the server asks before an upload takes
/// storage (`pre_create`) and before its row commits (`pre_finish`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HooksConfig {
    pub pre_create: Option<String>,
    pub pre_finish: Option<String>,
    /// Signs hook calls as webhooks are signed; needed with either hook.
    pub secret: Option<String>,
    /// Longest a hook call may take, connecting included (seconds).
    #[serde(deserialize_with = "bulkwire_units::de::secs")]
    pub hook_timeout: u64,
    /// `closed` (the default) or `open`.
    pub hook_failure: HookFailure,
    /// Hook calls in flight at once (per node); a call beyond waits for
    /// one, within `hook_timeout`.
    pub hook_concurrency: usize,
    /// Most bytes of a hook's answer read; a longer answer is a failure.
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub hook_answer_bytes: u64,
}

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            pre_create: None,
            pre_finish: None,
            secret: None,
            hook_timeout: 5,
            hook_failure: HookFailure::Closed,
            hook_concurrency: 256,
            hook_answer_bytes: 64 << 10,
        }
    }
}

impl std::fmt::Debug for HooksConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HooksConfig")
            .field("pre_create", &self.pre_create)
            .field("pre_finish", &self.pre_finish)
            .field("secret", &self.secret.as_ref().map(|_| "<hidden>"))
            .field("hook_timeout", &self.hook_timeout)
            .field("hook_failure", &self.hook_failure)
            .field("hook_concurrency", &self.hook_concurrency)
            .field("hook_answer_bytes", &self.hook_answer_bytes)
            .finish()
    }
}

impl HooksConfig {
    pub fn any(&self) -> bool {
        self.pre_create.is_some() || self.pre_finish.is_some()
    }

    pub fn hook_timeout(&self) -> Duration {
        Duration::from_secs(self.hook_timeout)
    }

    pub fn validate(&self) -> Result<(), String> {
        for (k, u) in [
            ("pre_create", &self.pre_create),
            ("pre_finish", &self.pre_finish),
        ] {
            if let Some(u) = u {
                check_url(&format!("hooks.{k}"), u)?;
            }
        }
        match (&self.secret, self.any()) {
            (Some(s), _) => secret_key(s).map_err(|e| format!("hooks.secret: {e}"))?,
            (None, true) => {
                return Err("hooks.secret is needed with a hook: receivers check the \
                            signature (bulkwire events secret makes one)"
                    .into())
            }
            (None, false) => Vec::new(),
        };
        let zero = [
            ("hook_timeout", self.hook_timeout),
            ("hook_concurrency", self.hook_concurrency as u64),
            ("hook_answer_bytes", self.hook_answer_bytes),
        ];
        if let Some((n, _)) = zero.iter().find(|(_, v)| *v == 0) {
            return Err(format!("hooks.{n} must be > 0"));
        }
        Ok(())
    }
}

/// Each webhook alone, no URL twice (the URL names its deliveries).
pub fn validate_webhooks(hooks: &[Webhook]) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for h in hooks {
        h.validate()?;
        if !seen.insert(h.url.as_str()) {
            return Err(format!(
                "webhooks: {} is listed twice; list its event types in one entry",
                h.url
            ));
        }
    }
    Ok(())
}

fn check_url(key: &str, u: &str) -> Result<(), String> {
    let rest = u
        .strip_prefix("https://")
        .or_else(|| u.strip_prefix("http://"));
    match rest {
        Some(r) if !r.is_empty() && !r.starts_with('/') && !r.contains(' ') => Ok(()),
        _ => Err(format!(
            "{key} {u:?} must be an http:// or https:// URL (https://app.example.com/hooks)"
        )),
    }
}

/// Bytes of a secret, least and most (Standard Webhooks: 24 to 64).
const SECRET_BYTES: std::ops::RangeInclusive<usize> = 24..=64;

/// The key of a `whsec_…` secret (Standard Webhooks, "Signature scheme").
pub fn secret_key(s: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    let b64 = s
        .strip_prefix("whsec_")
        .ok_or("must start with whsec_ (bulkwire events secret makes one)")?;
    let key = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| format!("is not whsec_ and base64: {e}"))?;
    if !SECRET_BYTES.contains(&key.len()) {
        return Err(format!(
            "holds {} bytes; a secret holds {} to {}",
            key.len(),
            SECRET_BYTES.start(),
            SECRET_BYTES.end()
        ));
    }
    Ok(key)
}

/// A new secret: `whsec_` and 32 random bytes in base64.
pub fn new_secret() -> String {
    use base64::Engine;
    let key: [u8; 32] = rand::random();
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_whsec_base64_of_24_to_64_bytes() {
        let s = new_secret();
        assert_eq!(secret_key(&s).unwrap().len(), 32);
        assert!(secret_key("c2VjcmV0").unwrap_err().contains("whsec_"));
        assert!(secret_key("whsec_c2VjcmV0")
            .unwrap_err()
            .contains("6 bytes"));
        assert!(secret_key("whsec_!!").is_err());
    }

    #[test]
    fn webhooks_name_their_faults() {
        let ok = Webhook {
            url: "http://127.0.0.1:9/hook".into(),
            events: all_types(),
            secret: new_secret(),
        };
        assert_eq!(validate_webhooks(std::slice::from_ref(&ok)), Ok(()));
        let twice = validate_webhooks(&[ok.clone(), ok.clone()]).unwrap_err();
        assert!(twice.contains("listed twice"), "{twice}");
        let typo = Webhook {
            events: vec!["media.create".into()],
            ..ok.clone()
        };
        assert!(typo.validate().unwrap_err().contains("\"media.create\""));
        let ftp = Webhook {
            url: "ftp://x".into(),
            ..ok
        };
        assert!(ftp.validate().unwrap_err().contains("webhooks.url"));
        assert!(!format!("{ftp:?}").contains("whsec_"));
    }

    #[test]
    fn a_hook_needs_a_secret_and_bounds() {
        let mut h = HooksConfig {
            pre_create: Some("http://127.0.0.1:9/pre".into()),
            ..Default::default()
        };
        assert!(h.validate().unwrap_err().contains("hooks.secret"));
        h.secret = Some(new_secret());
        assert_eq!(h.validate(), Ok(()));
        h.hook_timeout = 0;
        assert!(h.validate().unwrap_err().contains("hook_timeout"));
        assert!(!format!("{h:?}").contains("whsec_"));
    }
}
