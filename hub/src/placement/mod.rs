//! Placement: choosing ManagedClusters by labels, claims and taints, and
//! writing the choice to PlacementDecisions (OCM's Placement API under
//! `cluster.ferry.dev/v1alpha1`).

pub mod compile;
pub mod controller;

pub use controller::run_placement_controller;
