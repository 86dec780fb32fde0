//! Sealing a Secret manifest to the keys of the clusters meant to open it
//! (what `kubectl ferry seal` does): one age file with one stanza per key,
//! so one entry serves every cluster it names.

use std::io::Write as _;

use age::armor::{ArmoredWriter, Format};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use super::envelope::{MAX_CIPHERTEXT_BYTES, MAX_RECIPIENTS, Recipient, SealedEnvelope};
use super::key_id::{KeyIdError, key_id, parse_recipient};

/// `secret` with its `stringData` moved into `data`, base64-encoded (a
/// key in both takes stringData's value, as the API server does): what
/// the spoke stores, so the agent's drift checks compare like with like.
fn with_string_data_encoded(secret: &Value) -> Value {
    let mut secret = without_server_fields(secret);
    let Some(Value::Object(strings)) = secret.as_object_mut().and_then(|o| o.remove("stringData"))
    else {
        return secret;
    };
    if !secret.get("data").is_some_and(Value::is_object) {
        secret["data"] = Value::Object(serde_json::Map::new());
    }
    if let Some(Value::Object(data)) = secret.get_mut("data") {
        for (key, value) in strings {
            let text = value
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| value.to_string());
            data.insert(key, Value::String(STANDARD.encode(text)));
        }
    }
    secret
}

/// `secret` with only the metadata an author writes (name, namespace,
/// labels, annotations but kubectl's last-applied copy) and no `status`:
/// what `kubectl get secret -o yaml` adds (uid, resourceVersion,
/// timestamps, managed fields, owners) belongs to the cluster it was read
/// from, and a stale resourceVersion would make the spoke refuse the write.
fn without_server_fields(secret: &Value) -> Value {
    let mut secret = secret.clone();
    if let Some(object) = secret.as_object_mut() {
        object.remove("status");
    }
    if let Some(Value::Object(metadata)) = secret.get_mut("metadata") {
        metadata.retain(|key, _| {
            matches!(
                key.as_str(),
                "name" | "namespace" | "labels" | "annotations"
            )
        });
        if let Some(Value::Object(annotations)) = metadata.get_mut("annotations") {
            annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    }
    secret
}

/// One cluster key to seal to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealTo {
    /// The cluster's name.
    pub cluster: String,
    /// Its public key, `age1…`.
    pub public_key: String,
}

/// Why a Secret cannot be sealed.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The manifest is not a `v1` Secret.
    #[error("only a v1 Secret can be sealed, this manifest is {0}")]
    NotASecret(String),
    /// The Secret has no name or no namespace.
    #[error("the Secret needs metadata.name and metadata.namespace to be sealed")]
    Unnamed,
    /// No keys to seal to, or too many.
    #[error("a Secret is sealed to 1 to {max} cluster keys, {count} given")]
    Recipients {
        /// How many were given.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// A public key is not an age X25519 key.
    #[error("cluster {cluster}: {source}")]
    BadKey {
        /// The cluster the key is of.
        cluster: String,
        /// Why it is not a key.
        source: KeyIdError,
    },
    /// The sealed entry would be larger than an entry may be.
    #[error("the sealed Secret would take {size} bytes, more than the {max} an entry may hold")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The bound.
        max: usize,
    },
    /// age could not encrypt.
    #[error("cannot encrypt: {0}")]
    Encrypt(String),
}

/// Seals Secret manifest `secret` to every key of `to` and returns the
/// sealed manifest entry (see [`super::envelope`]). Fails when the manifest
/// is not a named, namespaced `v1` Secret, a key is not an age key, or the
/// result would exceed the entry's bound.
pub fn seal(secret: &Value, to: &[SealTo]) -> Result<Value, SealError> {
    let kind = secret.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = secret
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if (api_version, kind) != ("v1", "Secret") {
        return Err(SealError::NotASecret(format!("{api_version} {kind}")));
    }
    let field = |pointer: &str| {
        secret
            .pointer(pointer)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let (Some(name), Some(namespace)) = (field("/metadata/name"), field("/metadata/namespace"))
    else {
        return Err(SealError::Unnamed);
    };
    if to.is_empty() || to.len() > MAX_RECIPIENTS {
        return Err(SealError::Recipients {
            count: to.len(),
            max: MAX_RECIPIENTS,
        });
    }
    let keys = to
        .iter()
        .map(|t| {
            parse_recipient(&t.public_key).map_err(|source| SealError::BadKey {
                cluster: t.cluster.clone(),
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let plaintext = serde_json::to_vec(&with_string_data_encoded(secret))
        .map_err(|e| SealError::Encrypt(e.to_string()))?;
    let encryptor = age::Encryptor::with_recipients(keys.iter().map(|k| k as &dyn age::Recipient))
        .map_err(|e| SealError::Encrypt(e.to_string()))?;
    let mut armoured = Vec::with_capacity(plaintext.len() * 2);
    let write = |armoured: &mut Vec<u8>| -> std::io::Result<()> {
        let mut writer =
            encryptor.wrap_output(ArmoredWriter::wrap_output(armoured, Format::AsciiArmor)?)?;
        writer.write_all(&plaintext)?;
        writer.finish()?.finish()?;
        Ok(())
    };
    write(&mut armoured).map_err(|e| SealError::Encrypt(e.to_string()))?;
    if armoured.len() > MAX_CIPHERTEXT_BYTES {
        return Err(SealError::TooLarge {
            size: armoured.len(),
            max: MAX_CIPHERTEXT_BYTES,
        });
    }
    let ciphertext = String::from_utf8(armoured).map_err(|e| SealError::Encrypt(e.to_string()))?;
    let recipients = to
        .iter()
        .map(|t| Recipient {
            cluster: t.cluster.clone(),
            key_id: key_id(&t.public_key),
        })
        .collect();
    Ok(SealedEnvelope {
        name,
        namespace,
        recipients,
        ciphertext,
    }
    .to_manifest())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_the_server_added_is_not_sealed_and_string_data_becomes_data() {
        let read = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db", "namespace": "app", "uid": "u", "resourceVersion": "7",
                         "creationTimestamp": "t", "managedFields": [], "labels": {"a": "b"},
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": "1"}},
            "stringData": {"p": "x"}, "data": {"q": "eQ=="}});
        let clean = with_string_data_encoded(&read);
        assert_eq!(
            clean,
            json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db", "namespace": "app", "labels": {"a": "b"}, "annotations": {"keep": "1"}},
            "data": {"q": "eQ==", "p": "eA=="}})
        );
    }
}
