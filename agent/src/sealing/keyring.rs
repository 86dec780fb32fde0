//! The keys this agent holds: read from the key Secret on the spoke at
//! each session's start (made there on the first one, and again when a
//! rotation is asked for), kept in memory for opening, and published to
//! the hub in the Hello. The private keys are never sent.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_proto::v1;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, ResourceExt as _};
use tokio::sync::RwLock;
use tracing::{info, warn};

use super::keys::{HeldKey, KEYS_SECRET, StoredKeys, plan};

/// Prefix of the annotations the keys' state lives in.
const ANNOTATION_PREFIX: &str = "sealing.ferry.dev/";

/// Why the keys could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum KeyringError {
    /// Reading the key Secret failed.
    #[error("reading Secret {namespace}/{KEYS_SECRET}: {source}")]
    Read {
        /// The agent's namespace.
        namespace: String,
        /// The API error.
        source: kube::Error,
    },
    /// Writing the key Secret failed (a conflict included: the next
    /// session's start reads it again).
    #[error("writing Secret {namespace}/{KEYS_SECRET}: {source}")]
    Write {
        /// The agent's namespace.
        namespace: String,
        /// The API error.
        source: kube::Error,
    },
}

/// The sealing keys of this cluster's agent.
pub struct Keyring {
    /// Where the key Secret lives; None: this agent holds no keys (sealed
    /// entries do not open, and the Hello publishes none).
    secrets: Option<Api<Secret>>,
    namespace: String,
    held: RwLock<Arc<Vec<HeldKey>>>,
}

impl Keyring {
    /// Keys kept in Secret [`KEYS_SECRET`] of spoke namespace `namespace`.
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            secrets: Some(Api::namespaced(client, namespace)),
            namespace: namespace.to_string(),
            held: RwLock::default(),
        }
    }

    /// A keyring holding no keys, for agents built without one.
    pub fn none() -> Self {
        Self {
            secrets: None,
            namespace: String::new(),
            held: RwLock::default(),
        }
    }

    /// The keys held now, the current one first.
    pub async fn held(&self) -> Arc<Vec<HeldKey>> {
        self.held.read().await.clone()
    }

    /// The public keys to publish in the Hello.
    pub async fn published(&self) -> Vec<v1::SealingKey> {
        self.held()
            .await
            .iter()
            .map(|k| v1::SealingKey {
                key_id: k.id.clone(),
                public_key: k.public_key.clone(),
                retiring: k.retiring,
            })
            .collect()
    }

    /// Reads the key Secret, makes and writes a key when one is needed
    /// (see [`plan`]) and holds the result. On failure the keys held
    /// before stay held, and it says why.
    pub async fn refresh(&self) -> Result<(), KeyringError> {
        let Some(secrets) = &self.secrets else {
            return Ok(());
        };
        self.refresh_from(secrets).await
    }

    async fn refresh_from(&self, secrets: &Api<Secret>) -> Result<(), KeyringError> {
        let live = secrets
            .get_opt(KEYS_SECRET)
            .await
            .map_err(|source| KeyringError::Read {
                namespace: self.namespace.clone(),
                source,
            })?;
        let stored = live.as_ref().map(stored_keys);
        let plan = plan(stored.as_ref(), age::x25519::Identity::generate());
        for name in &plan.unreadable {
            warn!(secret = KEYS_SECRET, entry = %name, "entry is not an age secret key; left unused");
        }
        if let Some(next) = &plan.write {
            let write = match live {
                Some(mut secret) => {
                    apply_stored(&mut secret, next);
                    secrets
                        .replace(KEYS_SECRET, &PostParams::default(), &secret)
                        .await
                }
                None => {
                    let mut secret = Secret {
                        metadata: ObjectMeta {
                            name: Some(KEYS_SECRET.into()),
                            namespace: Some(self.namespace.clone()),
                            ..ObjectMeta::default()
                        },
                        type_: Some("Opaque".into()),
                        ..Secret::default()
                    };
                    apply_stored(&mut secret, next);
                    secrets.create(&PostParams::default(), &secret).await
                }
            };
            write.map_err(|source| KeyringError::Write {
                namespace: self.namespace.clone(),
                source,
            })?;
            info!(current = %plan.held[0].id, "made a new sealing key");
        }
        *self.held.write().await = Arc::new(plan.held);
        Ok(())
    }
}

/// What Secret `secret` says of the keys.
fn stored_keys(secret: &Secret) -> StoredKeys {
    let entries = secret
        .data
        .iter()
        .flatten()
        .map(|(name, bytes)| (name.clone(), String::from_utf8_lossy(&bytes.0).into_owned()))
        .collect();
    let annotations = secret
        .annotations()
        .iter()
        .filter(|(key, _)| key.starts_with(ANNOTATION_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    StoredKeys {
        entries,
        annotations,
    }
}

/// Writes `stored` into `secret`: its data, and its sealing annotations
/// (others' annotations are kept).
fn apply_stored(secret: &mut Secret, stored: &StoredKeys) {
    let data: BTreeMap<String, ByteString> = stored
        .entries
        .iter()
        .map(|(name, text)| (name.clone(), ByteString(text.clone().into_bytes())))
        .collect();
    secret.data = Some(data);
    secret.string_data = None;
    let annotations = secret.annotations_mut();
    annotations.retain(|key, _| !key.starts_with(ANNOTATION_PREFIX));
    annotations.extend(stored.annotations.clone());
}
