//! Placement: choosing ManagedClusters by labels, claims and taints, and
//! writing the choice to PlacementDecisions (OCM's Placement API under
//! `cluster.ferry.dev/v1alpha1`; the types are in `ferry_api::placement`).
//!
//! The controller has three rooms: `gather.rs` reads a snapshot (with
//! `now`), `decide.rs` decides from it alone (pure, tested), `act.rs` makes
//! the only writes, fenced by the resourceVersions the decision read.

/// Act: the decisions and status written, fenced.
pub mod act;
/// A placement's predicates compiled into a cluster filter.
pub mod compile;
/// The controller: watches, and each reconcile's gather, decide, act.
pub mod controller;
/// Decide: the schedule, holds and writes of one reconcile (pure).
pub mod decide;
/// Why a reconcile failed.
pub mod error;
/// Gather: what one reconcile reads.
pub mod gather;

pub use controller::run_placement_controller;
pub use error::PlacementError;
