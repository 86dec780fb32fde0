//! Gather: what one reconcile of a placement reads, taken from the
//! controller's caches at once, with the time it is decided at.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use ferry_api::cluster_set::{ManagedClusterSet, ManagedClusterSetBinding};
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::placement::{Placement, PlacementDecision};

/// A placement's decisions: cluster name to (group name, group index).
pub type Previous = BTreeMap<String, (String, usize)>;

/// Everything [`super::decide::decide`] reads.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The placement, as the cache holds it.
    pub placement: Arc<Placement>,
    /// Every ManagedCluster.
    pub clusters: Vec<Arc<ManagedCluster>>,
    /// Every PlacementDecision (its own, and other placements' for
    /// `Balance`).
    pub decisions: Vec<Arc<PlacementDecision>>,
    /// Every ManagedClusterSet.
    pub sets: Vec<Arc<ManagedClusterSet>>,
    /// Every ManagedClusterSetBinding.
    pub bindings: Vec<Arc<ManagedClusterSetBinding>>,
    /// The decisions this controller last wrote for the placement, when it
    /// remembers them: the decision cache may not show its latest writes
    /// yet, and scheduling from an older view would move clusters between
    /// groups.
    pub written: Option<Previous>,
    /// Now.
    pub now: Timestamp,
}
