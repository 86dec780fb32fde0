//! Cluster sets: OCM's ManagedClusterSet and ManagedClusterSetBinding under
//! `cluster.ferry.dev/v1alpha1` (types in `ferry_api::cluster_set`). A
//! Placement chooses only among the clusters of the sets bound to its
//! namespace; this module compiles the sets for that, and runs the
//! controller that keeps the well-known sets, the default set label and the
//! set and binding status.

/// The controller's writes.
mod act;
/// The controller: well-known sets, default label, set and binding status.
pub mod controller;
/// Set and binding status decided from what the controller read.
mod decide;
/// The controller's error.
mod error;
/// Sets compiled into label matchers; the clusters a placement may use.
pub mod membership;

pub use controller::run_cluster_set_controller;
