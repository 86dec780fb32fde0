//! The identity of a replica set's revision: what rolls out (the template
//! with its overrides) named by a short hash, so a revision, the works that
//! hold it, and an approval of it all name the same thing however often the
//! replica set's other fields (`paused`, placements) change.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use ferry_semantics::hash::canonical_json;

/// Hex digits of a revision hash: 40 bits, so two revisions of one replica
/// set collide only after about a million revisions.
pub const REVISION_HASH_LEN: usize = 10;

/// The revision hash of a template and its overrides: the first
/// [`REVISION_HASH_LEN`] lowercase hex digits of the sha256 of their
/// canonical JSON. Key order and whitespace do not change it. Never fails.
pub fn revision_hash(template: &Value, overrides: &Value) -> String {
    let text = canonical_json(&json!({"template": template, "overrides": overrides}));
    let digest = Sha256::digest(text.as_bytes());
    digest
        .iter()
        .take(REVISION_HASH_LEN / 2)
        .map(|b| format!("{b:02x}"))
        .collect()
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
}
