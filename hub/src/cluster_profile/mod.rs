//! The cluster inventory: the hub publishes a ClusterProfile (SIG
//! Multicluster KEP-4322, `multicluster.x-k8s.io/v1alpha1`, the CRD of
//! `sigs.k8s.io/cluster-inventory-api` v0.1.0) for every ManagedCluster, so
//! multi-cluster tools that read the inventory see ferry's clusters, their
//! cluster set and whether their agent is connected.

/// The shell: watches, server-side applies, deletes and the CRD check.
pub mod controller;
/// The pure part: the profile a cluster should have, and what differs.
pub mod render;

pub use controller::{ClusterProfileOptions, run_cluster_profile_controller};
