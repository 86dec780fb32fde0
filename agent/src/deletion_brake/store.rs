//! Reads and writes the brake's ledger: one ConfigMap in the agent's
//! namespace on the spoke. Writes carry the resourceVersion they read, so a
//! release written meanwhile is never overwritten, and they happen before
//! the deletion they admit.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};

use super::ledger::Ledger;
use ferry_api::contract::{DELETION_BRAKE_LEDGER, RELEASE_DELETIONS_ANNOTATION};
use ferry_semantics::contract::AGENT_FIELD_MANAGER;

/// The ledger's key in the ConfigMap's data.
pub const LEDGER_KEY: &str = "ledger.json";

/// Why the ledger could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The API server refused or failed the read.
    #[error("cannot read ConfigMap {namespace}/{DELETION_BRAKE_LEDGER}: {source}")]
    Read {
        /// The ledger's namespace.
        namespace: String,
        /// What the API server said.
        source: kube::Error,
    },
    /// The API server refused or failed the write.
    #[error("cannot write ConfigMap {namespace}/{DELETION_BRAKE_LEDGER}: {source}")]
    Write {
        /// The ledger's namespace.
        namespace: String,
        /// What the API server said.
        source: kube::Error,
    },
    /// Someone else wrote the ConfigMap since it was read.
    #[error("ConfigMap {namespace}/{DELETION_BRAKE_LEDGER} changed while the agent was writing it")]
    Conflict {
        /// The ledger's namespace.
        namespace: String,
    },
    /// The ledger is not what the agent writes (edited by hand?).
    #[error(
        "ConfigMap {namespace}/{DELETION_BRAKE_LEDGER} holds no readable ledger ({source}); deleting it resets the brake"
    )]
    Corrupt {
        /// The ledger's namespace.
        namespace: String,
        /// Why it does not parse.
        source: serde_json::Error,
    },
}

/// The ledger as read, with what a write back needs.
#[derive(Debug, Clone, Default)]
pub struct Stored {
    /// The ledger (empty when there is no ConfigMap yet).
    pub ledger: Ledger,
    /// The release annotation's value, empty when unset.
    pub release: String,
    /// The field manager that last wrote the release annotation.
    pub release_manager: String,
    /// The ConfigMap as read (None: not created yet).
    object: Option<ConfigMap>,
}

/// The ledger's ConfigMap in one namespace.
#[derive(Clone)]
pub struct LedgerStore {
    api: Api<ConfigMap>,
    namespace: String,
}

impl LedgerStore {
    /// The ledger in `namespace` on the spoke of `client`.
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
        }
    }

    /// The namespace the ledger lives in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Reads the ledger; an absent ConfigMap is an empty ledger.
    pub async fn read(&self) -> Result<Stored, StoreError> {
        let object = self
            .api
            .get_opt(DELETION_BRAKE_LEDGER)
            .await
            .map_err(|source| StoreError::Read {
                namespace: self.namespace.clone(),
                source,
            })?;
        let Some(object) = object else {
            return Ok(Stored::default());
        };
        let ledger = match object.data.as_ref().and_then(|d| d.get(LEDGER_KEY)) {
            Some(text) => serde_json::from_str(text).map_err(|source| StoreError::Corrupt {
                namespace: self.namespace.clone(),
                source,
            })?,
            None => Ledger::default(),
        };
        let release = object
            .annotations()
            .get(RELEASE_DELETIONS_ANNOTATION)
            .cloned()
            .unwrap_or_default();
        Ok(Stored {
            ledger,
            release,
            release_manager: release_manager(&object),
            object: Some(object),
        })
    }

    /// Writes `ledger` over what `read` returned, failing with `Conflict`
    /// when the ConfigMap changed since.
    pub async fn write(&self, read: &Stored, ledger: &Ledger) -> Result<(), StoreError> {
        let text = serde_json::to_string(ledger).map_err(|source| StoreError::Corrupt {
            namespace: self.namespace.clone(),
            source,
        })?;
        let params = PostParams {
            field_manager: Some(AGENT_FIELD_MANAGER.to_string()),
            ..PostParams::default()
        };
        let result = match &read.object {
            Some(object) => {
                let mut object = object.clone();
                object
                    .data
                    .get_or_insert_with(BTreeMap::new)
                    .insert(LEDGER_KEY.to_string(), text);
                self.api
                    .replace(DELETION_BRAKE_LEDGER, &params, &object)
                    .await
                    .map(|_| ())
            }
            None => {
                let object = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(DELETION_BRAKE_LEDGER.to_string()),
                        namespace: Some(self.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    data: Some(BTreeMap::from([(LEDGER_KEY.to_string(), text)])),
                    ..ConfigMap::default()
                };
                self.api.create(&params, &object).await.map(|_| ())
            }
        };
        match result {
            Ok(()) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => Err(StoreError::Conflict {
                namespace: self.namespace.clone(),
            }),
            Err(source) => Err(StoreError::Write {
                namespace: self.namespace.clone(),
                source,
            }),
        }
    }
}

/// The field manager whose managed fields hold the release annotation.
fn release_manager(object: &ConfigMap) -> String {
    object
        .managed_fields()
        .iter()
        .filter(|entry| {
            entry.fields_v1.as_ref().is_some_and(|fields| {
                fields.0["f:metadata"]["f:annotations"]
                    .get(format!("f:{RELEASE_DELETIONS_ANNOTATION}"))
                    .is_some()
            })
        })
        .filter_map(|entry| entry.manager.clone())
        .next_back()
        .unwrap_or_default()
}
