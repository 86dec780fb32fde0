//! ManifestWorks on the hub.

/// Deletion: the finalizer, the `Deleting` condition and its release.
pub mod deletion;
/// Kubernetes Events on works for the transitions the hub writes.
pub mod events;
/// The in-memory index of works by cluster that sessions read.
pub mod index;
/// Deleting completed works after `ttlSecondsAfterFinished`.
pub mod ttl;
