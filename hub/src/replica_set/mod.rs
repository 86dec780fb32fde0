//! ManifestWorkReplicaSet: one ManifestWork template made into a
//! ManifestWork on every cluster its Placements choose. The controller
//! gathers a snapshot, decides from it (pure: decisions, render, plan,
//! budget, status, one file each) and acts: `act/` holds every write.

/// Act: every write (works, revisions, records and status).
pub mod act;
/// Phase 1b: decided clusters outside the namespace's bound sets refused.
pub mod bound;
/// Phase 4 too: the deletion budget.
pub mod budget;
/// Phase 1: the clusters the placements chose.
pub mod chosen;
/// The controller: watches, finalizer, and the phases in order.
pub mod controller;
/// Decide, then act: the reconcile as a pure decision the controller carries out.
pub mod decide;
/// Replica-set `dependsOn`: clusters held for their dependencies, cycles.
pub mod depends;
/// `ferry-hub render`: a replica set's works, without writing them.
pub mod dry_run;
/// Why a replica set could not be brought up to date.
pub mod error;
/// The bounded fleet summary: per revision, failing clusters, feedback values.
pub mod fleet_summary;
/// Phase 3 too: the gates and cohort holding clusters back.
pub mod gates;
/// Phase 3 too: gates' health expressions on a bounded blocking pool.
pub mod health_pool;
/// Two namespaces' replica sets of one name: the older holds it.
pub mod name_clash;
/// Phase 3: the rollout plan.
pub mod plan;
/// Phase 2: each cluster's work spec, overrides and placeholders applied.
pub mod render;
/// The revision part of the status: current, stable, rollback, summary.
pub mod revision_status;
/// Revisions kept as ControllerRevisions: which to store, renumber and
/// prune (pure; `act/revisions.rs` writes them).
pub mod revisions;
/// `failureStrategy`: abort, or roll back to the stable revision.
pub mod rollback;
/// A rollout strategy resolved, and each cluster's state in it.
pub mod rollout;
/// What the alerts read of a rollout: halted, rolled back, gates holding.
pub mod rollout_signals;
/// Phase 5: the status, counted.
pub mod status;
/// Maintenance windows: which clusters may start now.
pub mod windows;
/// What a decision writes and deletes of the works, and the labels they
/// carry (pure; `act/works.rs` writes them).
pub mod work_writes;

pub use controller::run_replica_set_controller;
