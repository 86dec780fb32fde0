//! ManifestWorks on the hub.

/// Deletion: the finalizer, the `Deleting` condition and its release.
pub mod deletion;
/// The in-memory index of works by cluster that sessions read.
pub mod index;
/// Deleting completed works after `ttlSecondsAfterFinished`.
pub mod ttl;
