//! ManifestWorkReplicaSet: one ManifestWork template made into a
//! ManifestWork on every cluster its Placements choose.

pub mod controller;
pub mod dry_run;
pub mod render;
pub mod rollout;

pub use controller::run_replica_set_controller;
