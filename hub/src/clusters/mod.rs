//! ManagedClusters as the hub keeps them.

/// Labels and claims that placements select on.
/// What an agent's Hello says of its cluster, bounded.
pub mod agent_report;
pub mod labels;
/// ManagedClusters carried over from the group earlier hubs used.
pub mod legacy_group;
/// Whether each cluster's agent is connected, and the sweep for clusters
/// of replicas whose Lease lapsed.
pub mod liveness;
/// Each replica's own Lease, which vouches for the sessions it holds.
pub mod replica_lease;
/// The replica's one ManagedCluster cache and the feed of its changes.
pub mod shared;
/// The unreachable taint, in step with each cluster's connection.
pub mod taints;
