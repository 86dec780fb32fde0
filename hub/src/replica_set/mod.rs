//! ManifestWorkReplicaSet: one ManifestWork template made into a
//! ManifestWork on every cluster its Placements choose.

pub mod controller;
pub mod dry_run;
pub mod render;
pub mod rollout;
pub mod types;

pub use controller::run_replica_set_controller;
pub use types::ManifestWorkReplicaSet;
