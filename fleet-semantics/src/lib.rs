//! The pure rules of ferry's fleet layer: which clusters a Placement chooses
//! and how they are grouped, cluster-set membership, rollout and gate
//! arithmetic, cohorts, revision hashes and per-cluster overrides. No IO: the
//! hub's controllers and kubectl-ferry hand facts in and act on what comes
//! back. The agent never links this crate; it applies single works and needs
//! only `ferry-semantics`.
#![forbid(unsafe_code)]

pub mod cel_cost;
pub mod cluster_sets;
pub mod cohort;
pub mod decision_rewrite;
pub mod deletion_budget;
pub mod lost_grant;
pub mod maintenance_windows;
pub mod overrides;
pub mod placement;
pub mod revision;
pub mod rollout;
pub mod rollout_gates;
