//! ManagedClusters as the hub keeps them.

/// Labels and claims that placements select on.
pub mod labels;
/// Whether each cluster's agent is connected, and the sweep for silent ones.
pub mod liveness;
/// The unreachable taint, in step with each cluster's connection.
pub mod taints;
