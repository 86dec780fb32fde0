//! Why a replica set could not be brought up to date.

use kube::ResourceExt;

use ferry_api::replica_set::ManifestWorkReplicaSet;

/// A replica set could not be brought up to date; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaSetError {
    /// The API server refused a write or read.
    #[error("{action} for ManifestWorkReplicaSet {replica_set}: {source}")]
    Api {
        /// What was being done.
        action: String,
        /// `<namespace>/<name>`.
        replica_set: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Foreground deletion waits for these works to be gone.
    #[error("{0} generated works still being deleted")]
    WorksRemaining(usize),
    /// The caches have not listed everything yet.
    #[error("the decision and work caches are not ready")]
    NotReady,
}

/// The error of a failed API call about `rs`, while doing `action`.
pub fn failed(
    rs: &ManifestWorkReplicaSet,
    action: impl Into<String>,
) -> impl FnOnce(kube::Error) -> ReplicaSetError {
    let action = action.into();
    let replica_set = format!("{}/{}", rs.namespace().unwrap_or_default(), rs.name_any());
    move |source| ReplicaSetError::Api {
        action,
        replica_set,
        source,
    }
}
