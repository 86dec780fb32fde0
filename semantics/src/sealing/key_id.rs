//! The id a cluster's public sealing key is known by: short, stable, and
//! derived from the key itself, so nobody can publish one key under
//! another's id.

use sha2::{Digest, Sha256};

/// Most sealing keys one cluster publishes at once (its current key and
/// those retiring beside it); the hub refuses a Hello naming more.
pub const MAX_CLUSTER_KEYS: usize = 4;

/// Why a public key is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyIdError {
    /// The text is not an age X25519 recipient (`age1…`).
    #[error("{0:?} is not an age X25519 public key (age1…): {1}")]
    NotARecipient(String, String),
}

/// The key id of age recipient `recipient` (its `age1…` text):
/// `k-` and the first 16 hex digits of its SHA-256. Never fails.
pub fn key_id(recipient: &str) -> String {
    let digest = Sha256::digest(recipient.as_bytes());
    let mut id = String::with_capacity(18);
    id.push_str("k-");
    for byte in &digest[..8] {
        id.push_str(&format!("{byte:02x}"));
    }
    id
}

/// Parses `text` as an age X25519 recipient. Fails with why it is not one
/// (bounded: the text is cut in the message).
pub fn parse_recipient(text: &str) -> Result<age::x25519::Recipient, KeyIdError> {
    text.parse::<age::x25519::Recipient>().map_err(|reason| {
        let shown: String = text.chars().take(80).collect();
        KeyIdError::NotARecipient(shown, reason.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_id_is_short_and_stable() {
        let identity = age::x25519::Identity::generate();
        let recipient = identity.to_public().to_string();
        let id = key_id(&recipient);
        assert_eq!(id.len(), 18);
        assert!(id.starts_with("k-"));
        assert_eq!(id, key_id(&recipient));
        assert_ne!(
            id,
            key_id(&age::x25519::Identity::generate().to_public().to_string())
        );
        assert!(parse_recipient(&recipient).is_ok());
    }

    #[test]
    fn a_non_key_is_refused_with_a_bounded_message() {
        let err = parse_recipient(&"x".repeat(10_000)).expect_err("not a key");
        assert!(err.to_string().len() < 400, "{err}");
    }
}
