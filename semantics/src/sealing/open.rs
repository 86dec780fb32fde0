//! Opening a sealed entry with a cluster's keys (the agent, at apply
//! time). Bounded before any key is tried: the armoured text by the
//! entry's bound, the number of key stanzas by [`MAX_RECIPIENTS`] (each
//! costs one X25519 agreement), the plaintext by the entry's bound. What
//! comes out must be the `v1` Secret the entry names, so the name the hub
//! judged (executor, manifest configs, delete options) is the name written.

use std::io::Read as _;

use age::armor::ArmoredReader;
use serde_json::Value;

use super::envelope::{MAX_CIPHERTEXT_BYTES, MAX_RECIPIENTS, SealedEnvelope};

/// Why an entry does not open. Each says what the cluster holds or what
/// is wrong, never anything of the plaintext.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// None of this cluster's keys is among the entry's recipients.
    #[error(
        "not sealed to this cluster: sealed to key ids [{}], this cluster holds [{}]; \
         seal it again for this cluster (kubectl ferry seal)",
        sealed_to.join(", "), held.join(", ")
    )]
    NotARecipient {
        /// The key ids the entry names.
        sealed_to: Vec<String>,
        /// The key ids this cluster holds.
        held: Vec<String>,
    },
    /// The entry names a key of this cluster, yet no key opens it or the
    /// ciphertext does not authenticate: it was changed after sealing, or
    /// sealed to another key than the one it names.
    #[error(
        "the ciphertext does not open with this cluster's keys [{}] ({reason}): it was changed \
         after sealing or sealed to another key; seal it again",
        held.join(", ")
    )]
    Undecryptable {
        /// What age reported.
        reason: String,
        /// The key ids this cluster holds.
        held: Vec<String>,
    },
    /// The armoured text is not an age file, or has more key stanzas than
    /// an entry may.
    #[error("the ciphertext is not a well-formed age file: {0}")]
    Malformed(String),
    /// It opened, but holds something other than the Secret the entry names.
    #[error(
        "the sealed content is not the v1 Secret {expected} the entry names ({found}); \
         seal the Secret under its own name"
    )]
    NotTheNamedSecret {
        /// `namespace/name` of the entry.
        expected: String,
        /// What it holds, without its data.
        found: String,
    },
}

impl OpenError {
    /// The condition reason for this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotARecipient { .. } => "NotARecipient",
            Self::Undecryptable { .. } => "CannotOpen",
            Self::Malformed(_) => "MalformedCiphertext",
            Self::NotTheNamedSecret { .. } => "NotTheNamedSecret",
        }
    }
}

/// Opens `envelope` with `keys` (this cluster's key ids and identities)
/// and returns the Secret manifest inside. Fails with why it does not open.
pub fn open(
    envelope: &SealedEnvelope,
    keys: &[(String, age::x25519::Identity)],
) -> Result<Value, OpenError> {
    let held: Vec<String> = keys.iter().map(|(id, _)| id.clone()).collect();
    let mut binary = Vec::new();
    ArmoredReader::new(envelope.ciphertext.as_bytes())
        .take(MAX_CIPHERTEXT_BYTES as u64)
        .read_to_end(&mut binary)
        .map_err(|e| OpenError::Malformed(e.to_string()))?;
    let stanzas = stanza_count(&binary);
    if stanzas > MAX_RECIPIENTS {
        return Err(OpenError::Malformed(format!(
            "{stanzas} key stanzas, more than the {MAX_RECIPIENTS} allowed"
        )));
    }
    let decryptor = age::Decryptor::new_buffered(binary.as_slice())
        .map_err(|e| OpenError::Malformed(e.to_string()))?;
    let named = envelope.key_ids().iter().any(|id| held.contains(id));
    let reader = match decryptor.decrypt(keys.iter().map(|(_, k)| k as &dyn age::Identity)) {
        Ok(reader) => reader,
        Err(age::DecryptError::NoMatchingKeys) if !named => {
            return Err(OpenError::NotARecipient {
                sealed_to: envelope.key_ids(),
                held,
            });
        }
        Err(e) => {
            return Err(OpenError::Undecryptable {
                reason: e.to_string(),
                held,
            });
        }
    };
    let mut plaintext = Vec::new();
    reader
        .take(MAX_CIPHERTEXT_BYTES as u64)
        .read_to_end(&mut plaintext)
        .map_err(|e| OpenError::Undecryptable {
            reason: e.to_string(),
            held: held.clone(),
        })?;
    let expected = format!("{}/{}", envelope.namespace, envelope.name);
    let secret: Value =
        serde_json::from_slice(&plaintext).map_err(|_| OpenError::NotTheNamedSecret {
            expected: expected.clone(),
            found: "not JSON".into(),
        })?;
    let field = |pointer: &str| {
        secret
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let found = format!(
        "{} {} {}/{}",
        field("/apiVersion"),
        field("/kind"),
        field("/metadata/namespace"),
        field("/metadata/name")
    );
    if (field("/apiVersion"), field("/kind")) != ("v1", "Secret")
        || field("/metadata/name") != envelope.name
        || field("/metadata/namespace") != envelope.namespace
    {
        let found: String = found.chars().take(300).collect();
        return Err(OpenError::NotTheNamedSecret { expected, found });
    }
    Ok(secret)
}

/// Key stanzas in an age file's header (`-> ` lines before the `--- ` MAC
/// line), counted without parsing it.
fn stanza_count(binary: &[u8]) -> usize {
    let header_end = binary
        .windows(5)
        .position(|w| w == b"\n--- ")
        .unwrap_or(binary.len());
    binary[..header_end]
        .windows(4)
        .filter(|w| *w == b"\n-> ")
        .count()
}

#[cfg(test)]
mod tests {
    use super::super::key_id::key_id;
    use super::super::seal::{SealTo, seal};
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn key() -> (String, age::x25519::Identity, String) {
        let identity = age::x25519::Identity::generate();
        let public = identity.to_public().to_string();
        (key_id(&public), identity, public)
    }

    fn secret(value: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "db", "namespace": "app"},
               "stringData": {"password": value}})
    }

    /// What opening [`secret`]'s seal gives: stringData as data.
    fn stored(value: &str) -> Value {
        use base64::Engine as _;
        let encoded = base64::engine::general_purpose::STANDARD.encode(value);
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "db", "namespace": "app"},
               "data": {"password": encoded}})
    }

    fn sealed_to(
        secret: &Value,
        keys: &[&(String, age::x25519::Identity, String)],
    ) -> SealedEnvelope {
        let to: Vec<SealTo> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| SealTo {
                cluster: format!("c{i}"),
                public_key: k.2.clone(),
            })
            .collect();
        SealedEnvelope::parse(&seal(secret, &to).expect("sealed")).expect("parses")
    }

    #[test]
    fn every_recipient_opens_it_and_nobody_else() {
        let (a, b, c) = (key(), key(), key());
        let envelope = sealed_to(&secret("hunter22"), &[&a, &b]);
        assert!(!envelope.ciphertext.contains("hunter22"));
        for k in [&a, &b] {
            let opened = open(&envelope, &[(k.0.clone(), k.1.clone())]).expect("opens");
            assert_eq!(opened, stored("hunter22"));
        }
        let err = open(&envelope, &[(c.0.clone(), c.1.clone())]).expect_err("not a recipient");
        assert_eq!(err.reason(), "NotARecipient");
        assert!(err.to_string().contains(&c.0), "{err}");
        assert!(err.to_string().contains(&a.0), "{err}");
    }

    #[test]
    fn a_retiring_key_beside_the_new_one_still_opens_old_entries() {
        let (old, new) = (key(), key());
        let envelope = sealed_to(&secret("s3cret!"), &[&old]);
        let keys = vec![
            (new.0.clone(), new.1.clone()),
            (old.0.clone(), old.1.clone()),
        ];
        assert_eq!(open(&envelope, &keys).expect("opens"), stored("s3cret!"));
    }

    #[test]
    fn a_changed_ciphertext_is_refused_and_says_so() {
        let k = key();
        let mut envelope = sealed_to(&secret("hunter22"), &[&k]);
        // Flip one character of the payload (the line before the footer).
        let lines: Vec<&str> = envelope.ciphertext.lines().collect();
        let at = lines.len() - 2;
        let mut changed: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        let mut chars: Vec<char> = changed[at].chars().collect();
        chars[0] = if chars[0] == 'A' { 'B' } else { 'A' };
        changed[at] = chars.into_iter().collect();
        envelope.ciphertext = changed.join("\n") + "\n";
        let err = open(&envelope, &[(k.0.clone(), k.1.clone())]).expect_err("tampered");
        assert!(
            matches!(
                err,
                OpenError::Undecryptable { .. } | OpenError::Malformed(_)
            ),
            "{err}"
        );
        assert!(!err.to_string().contains("hunter22"));
    }

    #[test]
    fn a_secret_sealed_under_another_name_is_refused() {
        let k = key();
        let mut envelope = sealed_to(&secret("x"), &[&k]);
        envelope.name = "other".into();
        let err = open(&envelope, &[(k.0.clone(), k.1.clone())]).expect_err("renamed");
        assert_eq!(err.reason(), "NotTheNamedSecret");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn any_secret_round_trips(value in ".{0,200}", recipients in 1usize..4) {
            let keys: Vec<_> = (0..recipients).map(|_| key()).collect();
            let refs: Vec<_> = keys.iter().collect();
            let envelope = sealed_to(&secret(&value), &refs);
            let last = keys.last().expect("one");
            prop_assert_eq!(open(&envelope, &[(last.0.clone(), last.1.clone())]).expect("opens"), stored(&value));
        }
    }
}
