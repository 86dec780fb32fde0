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
    /// A write's precondition failed: the replica set changed since the
    /// decision was made from it (a newer leader recorded something, or
    /// someone edited it), so nothing more of that decision is carried
    /// out; the next reconcile decides from the newer object.
    #[error(
        "ManifestWorkReplicaSet {replica_set} changed since resourceVersion {version} this decision was made from ({action}): nothing more of it is carried out"
    )]
    Superseded {
        /// What was being done.
        action: String,
        /// `<namespace>/<name>`.
        replica_set: String,
        /// The resourceVersion the decision was made from.
        version: String,
    },
}

/// The error of a failed write to `rs` made with its resourceVersion as a
/// precondition, while doing `action`: [`ReplicaSetError::Superseded`] on
/// a conflict, else [`ReplicaSetError::Api`].
pub fn failed_fenced(
    rs: &ManifestWorkReplicaSet,
    action: impl Into<String>,
) -> impl FnOnce(kube::Error) -> ReplicaSetError {
    let action = action.into();
    let replica_set = format!("{}/{}", rs.namespace().unwrap_or_default(), rs.name_any());
    let version = rs.resource_version().unwrap_or_default();
    move |source| match source {
        kube::Error::Api(status) if status.code == 409 => ReplicaSetError::Superseded {
            action,
            replica_set,
            version,
        },
        source => ReplicaSetError::Api {
            action,
            replica_set,
            source,
        },
    }
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
