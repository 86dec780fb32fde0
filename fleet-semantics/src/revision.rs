//! The identity of a replica set's revision: what rolls out (the template
//! with its overrides) named by its sha256 digest, so a revision, the works
//! that hold it, and an approval of it all name the same thing however often
//! the replica set's other fields (`paused`, placements) change. Names and
//! annotations carry a short prefix of the digest (the revision hash); an
//! approval names the whole digest, so it lets through exactly one revision.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use ferry_semantics::hash::canonical_json;

/// Hex digits of a revision hash: 40 bits, so two revisions of one replica
/// set collide only after about a million revisions. Good enough to name a
/// ControllerRevision; not what an approval names ([`revision_digest`]).
pub const REVISION_HASH_LEN: usize = 10;

/// Hex digits of a revision digest: the whole sha256.
pub const REVISION_DIGEST_LEN: usize = 64;

/// The revision digest of a template and its overrides: the lowercase hex
/// sha256 of their canonical JSON ([`REVISION_DIGEST_LEN`] digits). Key
/// order and whitespace do not change it. Never fails.
pub fn revision_digest(template: &Value, overrides: &Value) -> String {
    let text = canonical_json(&json!({"template": template, "overrides": overrides}));
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The revision hash of a template and its overrides: the first
/// [`REVISION_HASH_LEN`] digits of their [`revision_digest`]. Never fails.
pub fn revision_hash(template: &Value, overrides: &Value) -> String {
    let mut digest = revision_digest(template, overrides);
    digest.truncate(REVISION_HASH_LEN);
    digest
}

/// Whether `text` has the form of a revision digest: exactly
/// [`REVISION_DIGEST_LEN`] lowercase hex digits.
pub fn is_revision_digest(text: &str) -> bool {
    text.len() == REVISION_DIGEST_LEN
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_does_not_change_the_hash_and_content_does() {
        let a = revision_hash(&json!({"a": 1, "b": [1, 2]}), &json!([]));
        let b = revision_hash(&json!({"b": [1, 2], "a": 1}), &json!([]));
        assert_eq!(a, b);
        assert_eq!(a.len(), REVISION_HASH_LEN);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, revision_hash(&json!({"a": 2, "b": [1, 2]}), &json!([])));
        assert_ne!(
            a,
            revision_hash(&json!({"a": 1, "b": [1, 2]}), &json!([{"name": "o"}]))
        );
    }

    #[test]
    fn the_digest_is_the_whole_sha256_and_the_hash_its_prefix() {
        let template = json!({"a": 1});
        let digest = revision_digest(&template, &json!([]));
        assert!(is_revision_digest(&digest), "{digest}");
        assert!(digest.starts_with(&revision_hash(&template, &json!([]))));
        assert!(!is_revision_digest(&revision_hash(&template, &json!([]))));
        assert!(!is_revision_digest(&digest.to_uppercase()));
        assert!(!is_revision_digest(&format!("{}g", &digest[1..])));
    }
}
