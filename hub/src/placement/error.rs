//! Why a placement reconcile failed.

use kube::ResourceExt;

use ferry_api::placement::Placement;

/// A placement could not be brought up to date; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// The API server refused a write.
    #[error("{action} for placement {namespace}/{placement}: {source}")]
    Write {
        /// What was being written.
        action: String,
        /// Namespace of the placement.
        namespace: String,
        /// The placement's name.
        placement: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// An object the decision was made from changed since it was read (a
    /// newer leader wrote it, or this controller's cache was behind): the
    /// write was refused and nothing after it done; decided again.
    #[error(
        "{action} for placement {namespace}/{placement}: superseded, the object changed since it was read; deciding again"
    )]
    Superseded {
        /// What was being written.
        action: String,
        /// Namespace of the placement.
        namespace: String,
        /// The placement's name.
        placement: String,
    },
    /// The watches have not listed everything yet (or stopped).
    #[error("the cluster and decision caches are not ready")]
    NotReady,
}

/// The error of a failed write for `placement` while doing `action`:
/// [`PlacementError::Superseded`] when a precondition failed (a conflict),
/// else [`PlacementError::Write`].
pub fn failed(
    placement: &Placement,
    action: impl Into<String>,
) -> impl FnOnce(kube::Error) -> PlacementError {
    let action = action.into();
    let namespace = placement.namespace().unwrap_or_default();
    let name = placement.name_any();
    move |source| match source {
        kube::Error::Api(status) if status.code == 409 => PlacementError::Superseded {
            action,
            namespace,
            placement: name,
        },
        source => PlacementError::Write {
            action,
            namespace,
            placement: name,
            source,
        },
    }
}
