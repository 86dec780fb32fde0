//! Placements in the cluster inventory: the hub publishes each Placement's
//! decisions as vendor-neutral PlacementDecisions (SIG Multicluster
//! KEP-5313, `multicluster.x-k8s.io/v1alpha1`, the CRD of
//! `sigs.k8s.io/cluster-inventory-api` v0.1.0) beside ferry's own, their
//! clusters as references to the ClusterProfiles the hub publishes, so
//! tools written to the standard read where a ferry placement puts work.

/// The shell: watches, server-side applies, deletes and the CRD check.
pub mod controller;
/// The pure part: the slices a placement should have, and what differs.
pub mod render;

pub use controller::run_inventory_decision_controller;
