//! The sealed manifest entry:
//!
//! ```yaml
//! apiVersion: sealing.ferry.dev/v1alpha1
//! kind: SealedSecret
//! metadata: {name: db, namespace: app}
//! spec:
//!   recipients: [{cluster: spoke-a, keyId: k-3f9a1c2b8d7e6f50}]
//!   ciphertext: "-----BEGIN AGE ENCRYPTED FILE-----…"
//! ```
//!
//! Everywhere but inside the agent that opens it, the entry is the `v1`
//! Secret it names (same name and namespace): that is what the agent
//! applies, what manifest configs and delete options select, and what the
//! executor must be allowed to write. The recipients list is what the
//! sealer saw (the clusters and key ids), for people and for the agent's
//! "not a recipient" report; it is not trusted for anything else: only the
//! ciphertext decides who can open it.

use serde_json::{Value, json};

/// `apiVersion` of a sealed manifest entry.
pub const SEALED_API_VERSION: &str = "sealing.ferry.dev/v1alpha1";
/// `kind` of a sealed manifest entry.
pub const SEALED_KIND: &str = "SealedSecret";
/// Largest armoured ciphertext an entry may carry: a Secret holds at most
/// 1 MiB of data, and the armour and JSON around it add about a third.
pub const MAX_CIPHERTEXT_BYTES: usize = 1_500_000;
/// Most recipients one entry may be sealed to (one replica set template
/// for a large fleet); each costs the agent one X25519 agreement at most.
pub const MAX_RECIPIENTS: usize = 2_000;
/// Longest cluster name or key id a recipient entry may hold.
const MAX_RECIPIENT_FIELD: usize = 253;

/// One cluster key an entry was sealed to, as the sealer saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipient {
    /// The cluster's name.
    pub cluster: String,
    /// The id of the key ([`super::key_id`]).
    pub key_id: String,
}

/// A sealed manifest entry, read and bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedEnvelope {
    /// Name of the Secret it carries.
    pub name: String,
    /// Namespace of the Secret it carries.
    pub namespace: String,
    /// The keys it was sealed to.
    pub recipients: Vec<Recipient>,
    /// The age file, ASCII-armoured.
    pub ciphertext: String,
}

/// Why an entry is not a well-formed sealed Secret. Each message says what
/// to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// `metadata.name` is missing.
    #[error("a SealedSecret needs metadata.name (the Secret's name)")]
    MissingName,
    /// `metadata.namespace` is missing: a Secret lives in a namespace, and
    /// the hub checks the executor against it.
    #[error("SealedSecret {0} needs metadata.namespace (the Secret's namespace)")]
    MissingNamespace(String),
    /// `spec.ciphertext` is missing or not armoured age.
    #[error(
        "SealedSecret {0} needs spec.ciphertext, an ASCII-armoured age file \
         (-----BEGIN AGE ENCRYPTED FILE-----); seal it with `kubectl ferry seal`"
    )]
    MissingCiphertext(String),
    /// The ciphertext is larger than [`MAX_CIPHERTEXT_BYTES`].
    #[error("SealedSecret {name}: spec.ciphertext holds {size} bytes, more than the {max} allowed")]
    TooLarge {
        /// The entry's `namespace/name`.
        name: String,
        /// Its size in bytes.
        size: usize,
        /// The bound.
        max: usize,
    },
    /// `spec.recipients` is missing, empty, too long or malformed.
    #[error(
        "SealedSecret {name}: spec.recipients {problem} (a list of 1 to {max} {{cluster, keyId}})"
    )]
    Recipients {
        /// The entry's `namespace/name`.
        name: String,
        /// What is wrong with the list.
        problem: String,
        /// The bound.
        max: usize,
    },
}

/// Whether manifest `value` is a sealed entry (by its apiVersion and kind).
pub fn is_sealed(value: &Value) -> bool {
    value.get("apiVersion").and_then(Value::as_str) == Some(SEALED_API_VERSION)
        && value.get("kind").and_then(Value::as_str) == Some(SEALED_KIND)
}

fn text<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

impl SealedEnvelope {
    /// Reads and bounds sealed entry `value` (one [`is_sealed`] says is
    /// sealed). Fails with the first thing that is wrong with it.
    pub fn parse(value: &Value) -> Result<Self, EnvelopeError> {
        let name = text(value, "/metadata/name").ok_or(EnvelopeError::MissingName)?;
        let namespace = text(value, "/metadata/namespace")
            .ok_or_else(|| EnvelopeError::MissingNamespace(name.to_string()))?;
        let full = format!("{namespace}/{name}");
        let ciphertext = text(value, "/spec/ciphertext")
            .ok_or_else(|| EnvelopeError::MissingCiphertext(full.clone()))?;
        if ciphertext.len() > MAX_CIPHERTEXT_BYTES {
            return Err(EnvelopeError::TooLarge {
                name: full,
                size: ciphertext.len(),
                max: MAX_CIPHERTEXT_BYTES,
            });
        }
        if !ciphertext
            .trim_start()
            .starts_with("-----BEGIN AGE ENCRYPTED FILE-----")
        {
            return Err(EnvelopeError::MissingCiphertext(full));
        }
        let recipients = recipients(value, &full)?;
        Ok(Self {
            name: name.to_string(),
            namespace: namespace.to_string(),
            recipients,
            ciphertext: ciphertext.to_string(),
        })
    }

    /// The entry as a manifest.
    pub fn to_manifest(&self) -> Value {
        let recipients: Vec<Value> = self
            .recipients
            .iter()
            .map(|r| json!({"cluster": r.cluster, "keyId": r.key_id}))
            .collect();
        json!({
            "apiVersion": SEALED_API_VERSION,
            "kind": SEALED_KIND,
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {"recipients": recipients, "ciphertext": self.ciphertext},
        })
    }

    /// The key ids it names, sorted, without repeats.
    pub fn key_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.recipients.iter().map(|r| r.key_id.clone()).collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

fn recipients(value: &Value, full: &str) -> Result<Vec<Recipient>, EnvelopeError> {
    let problem = |problem: &str| EnvelopeError::Recipients {
        name: full.to_string(),
        problem: problem.to_string(),
        max: MAX_RECIPIENTS,
    };
    let list = value
        .pointer("/spec/recipients")
        .and_then(Value::as_array)
        .ok_or_else(|| problem("is missing"))?;
    if list.is_empty() {
        return Err(problem("is empty"));
    }
    if list.len() > MAX_RECIPIENTS {
        return Err(problem(&format!("has {} entries", list.len())));
    }
    list.iter()
        .enumerate()
        .map(|(index, entry)| {
            let field = |key: &str| {
                entry
                    .get(key)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty() && s.len() <= MAX_RECIPIENT_FIELD)
                    .map(str::to_string)
                    .ok_or_else(|| {
                        problem(&format!(
                            "[{index}] needs {key}, 1 to {MAX_RECIPIENT_FIELD} characters"
                        ))
                    })
            };
            Ok(Recipient {
                cluster: field("cluster")?,
                key_id: field("keyId")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(ciphertext: &str, recipients: Value) -> Value {
        json!({"apiVersion": SEALED_API_VERSION, "kind": SEALED_KIND,
               "metadata": {"name": "db", "namespace": "app"},
               "spec": {"recipients": recipients, "ciphertext": ciphertext}})
    }

    const ARMOUR: &str =
        "-----BEGIN AGE ENCRYPTED FILE-----\nAAAA\n-----END AGE ENCRYPTED FILE-----\n";

    #[test]
    fn a_well_formed_entry_round_trips() {
        let value = entry(
            ARMOUR,
            json!([{"cluster": "a", "keyId": "k-1"}, {"cluster": "b", "keyId": "k-1"}]),
        );
        assert!(is_sealed(&value));
        let envelope = SealedEnvelope::parse(&value).expect("valid");
        assert_eq!(envelope.key_ids(), vec!["k-1".to_string()]);
        assert_eq!(envelope.to_manifest(), value);
    }

    #[test]
    fn malformed_entries_say_what_to_fix() {
        let no_ns = json!({"apiVersion": SEALED_API_VERSION, "kind": SEALED_KIND,
                           "metadata": {"name": "db"}, "spec": {}});
        assert_eq!(
            SealedEnvelope::parse(&no_ns),
            Err(EnvelopeError::MissingNamespace("db".into()))
        );
        let plain = entry("not armour", json!([{"cluster": "a", "keyId": "k"}]));
        assert!(matches!(
            SealedEnvelope::parse(&plain),
            Err(EnvelopeError::MissingCiphertext(_))
        ));
        let none = entry(ARMOUR, json!([]));
        assert!(
            SealedEnvelope::parse(&none)
                .expect_err("empty")
                .to_string()
                .contains("is empty")
        );
        let many: Vec<Value> = (0..=MAX_RECIPIENTS)
            .map(|i| json!({"cluster": format!("c{i}"), "keyId": "k"}))
            .collect();
        assert!(SealedEnvelope::parse(&entry(ARMOUR, Value::Array(many))).is_err());
        let huge = format!(
            "-----BEGIN AGE ENCRYPTED FILE-----\n{}",
            "A".repeat(MAX_CIPHERTEXT_BYTES)
        );
        assert!(matches!(
            SealedEnvelope::parse(&entry(&huge, json!([{"cluster": "a", "keyId": "k"}]))),
            Err(EnvelopeError::TooLarge { .. })
        ));
        let bad = entry(ARMOUR, json!([{"cluster": "a"}]));
        assert!(
            SealedEnvelope::parse(&bad)
                .expect_err("no key id")
                .to_string()
                .contains("keyId")
        );
    }
}
