//! Resolves manifest kinds to API resources with kube's discovery, caching
//! answers and asking the API server again when a kind is unknown (it may be a
//! CRD that was just installed).

use std::collections::HashMap;

use kube::Client;
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, pinned_kind};
use tokio::sync::RwLock;

/// A kind could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The spoke API server does not serve this kind.
    #[error(
        "the cluster does not serve kind {kind} in {api_version}; install its CRD or fix apiVersion/kind"
    )]
    UnknownKind {
        /// apiVersion as written.
        api_version: String,
        /// Kind as written.
        kind: String,
    },
    /// Discovery itself failed (API server unreachable, for example).
    #[error("discovering {api_version} {kind}: {source}")]
    Discovery {
        /// apiVersion as written.
        api_version: String,
        /// Kind as written.
        kind: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// Cached kind resolution for one spoke.
pub struct KindResolver {
    client: Client,
    cache: RwLock<HashMap<GroupVersionKind, (ApiResource, ApiCapabilities)>>,
}

impl KindResolver {
    /// A resolver with an empty cache.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            cache: RwLock::new(HashMap::new()),
        }
    }

    /// The resource and scope of `gvk`. Unknown kinds are looked up afresh on
    /// every call so a CRD installed since is found.
    pub async fn resolve(
        &self,
        gvk: &GroupVersionKind,
    ) -> Result<(ApiResource, ApiCapabilities), ResolveError> {
        if let Some(hit) = self.cache.read().await.get(gvk) {
            return Ok(hit.clone());
        }
        match pinned_kind(&self.client, gvk).await {
            Ok(found) => {
                self.cache.write().await.insert(gvk.clone(), found.clone());
                Ok(found)
            }
            Err(kube::Error::Discovery(_)) => Err(self.unknown(gvk)),
            // A group/version the server lacks answers with a plain-text 404,
            // not a Status object, so only the code is reliable here.
            Err(kube::Error::Api(status)) if status.code == 404 => Err(self.unknown(gvk)),
            Err(source) => Err(ResolveError::Discovery {
                api_version: gvk.api_version(),
                kind: gvk.kind.clone(),
                source,
            }),
        }
    }

    /// Drops a cached answer, e.g. after the server said the resource is gone.
    pub async fn forget(&self, gvk: &GroupVersionKind) {
        self.cache.write().await.remove(gvk);
    }

    fn unknown(&self, gvk: &GroupVersionKind) -> ResolveError {
        ResolveError::UnknownKind {
            api_version: gvk.api_version(),
            kind: gvk.kind.clone(),
        }
    }
}
