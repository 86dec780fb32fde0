//! Placement: choosing ManagedClusters by labels, claims and taints, and
//! writing the choice to PlacementDecisions (OCM's Placement API under
//! `cluster.ferry.dev/v1alpha1`; the types are in `ferry_api::placement`).

/// A placement's predicates compiled into a cluster filter.
pub mod compile;
/// The controller: chooses clusters and writes decisions and status.
pub mod controller;

pub use controller::run_placement_controller;
