//! Signatures as the Standard Webhooks specification
//! (<https://www.standardwebhooks.com/>, "Signature scheme") has them, so
//! that receivers check them with its libraries: `webhook-id`,
//! `webhook-timestamp` (seconds since the epoch) and `webhook-signature:
//! v1,<base64 of HMAC-SHA256 over "id.timestamp.body">`, the key being the
//! bytes of the `whsec_` secret. Hook calls are signed the same way.

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

pub const WEBHOOK_ID: &str = "webhook-id";
pub const WEBHOOK_TIMESTAMP: &str = "webhook-timestamp";
pub const WEBHOOK_SIGNATURE: &str = "webhook-signature";

/// Signs with one endpoint's secret.
#[derive(Clone)]
pub struct Signer {
    key: Vec<u8>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer(<hidden>)")
    }
}

impl Signer {
    /// From a `whsec_…` secret (checked at start-up).
    pub fn new(secret: &str) -> Result<Signer, String> {
        Ok(Signer {
            key: super::config::secret_key(secret)?,
        })
    }

    /// The `webhook-signature` value of a message.
    pub fn sign(&self, id: &str, timestamp: u64, body: &[u8]) -> String {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key)
            .expect("HMAC takes a key of any length");
        m.update(id.as_bytes());
        m.update(b".");
        m.update(timestamp.to_string().as_bytes());
        m.update(b".");
        m.update(body);
        let mac = m.finalize().into_bytes();
        format!(
            "v1,{}",
            base64::engine::general_purpose::STANDARD.encode(mac)
        )
    }

    /// The three headers of a message sent now.
    pub fn headers(&self, id: &str, body: &[u8]) -> [(&'static str, String); 3] {
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        [
            (WEBHOOK_ID, id.to_string()),
            (WEBHOOK_TIMESTAMP, ts.to_string()),
            (WEBHOOK_SIGNATURE, self.sign(id, ts, body)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The specification's own example (its README, "Signature scheme"):
    /// the secret, message id, timestamp and body it gives, and the
    /// signature it says they make.
    #[test]
    fn signs_the_specifications_example() {
        let s = Signer::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            s.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }
}
