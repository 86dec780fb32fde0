//! Every read of the hub, and the writes that steer a replica set: the
//! fleet's objects and Events, a replica set's records, who the caller is.
//! The only other code that talks to an API server is [`crate::client`]
//! (connecting), the dashboard's live caches (`dashboard::live`, watches)
//! and `release_deletions::act` (the release written on the spoke, and the
//! wait for the hub to show it). Everything else is pure
//! (objects to rows and text) and unit-tested.

/// ManagedClusters, sets, placements, works, replica sets and Events,
/// listed page by page.
pub mod fleet;
/// Who the caller is (a SelfSubjectReview).
pub mod identity;
/// One replica set: read, its revisions, works and waves; pause, approve,
/// undo.
pub mod replica_sets;
