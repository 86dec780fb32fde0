//! Why the cluster-set controller could not bring an object up to date.

/// A set, binding or cluster could not be brought up to date; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum ClusterSetError {
    /// The API server refused a write.
    #[error("{action}: {source}")]
    Write {
        /// What was being written, naming the object.
        action: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The watches have not listed everything yet (or stopped).
    #[error("the cluster, set and binding caches are not ready")]
    NotReady,
}
