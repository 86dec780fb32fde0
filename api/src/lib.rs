//! ferry's Kubernetes API: the custom resources the hub serves, the CRDs made
//! from them, and the names ferry writes on objects. Only types: no client,
//! so a tool that reads ferry's objects (`kubectl-ferry`) does not build the
//! hub.
#![forbid(unsafe_code)]

/// The API server's own checks of a ManifestWork (CEL rules and bounds).
pub mod cel_rules;
/// What a cluster name may be (a DNS-1123 label).
pub mod cluster_name;
/// The `ManagedClusterSet` and `ManagedClusterSetBinding` resources.
pub mod cluster_set;
/// The labels, annotations, finalizers and groups ferry writes, defined once.
pub mod contract;
/// Every CRD, rendered from the types.
pub mod crds;
/// The `ManagedCluster` resource: one per spoke cluster.
pub mod managed_cluster;
/// The `ManifestWork` resource: manifests for one cluster.
pub mod manifest_work;
/// The `Placement` and `PlacementDecision` resources.
pub mod placement;
/// The `ManifestWorkReplicaSet` resource: one template for many clusters.
pub mod replica_set;
/// A status report bounded on the wire, before it travels and where it
/// arrives.
pub mod report_bounds;
/// The `RolloutApproval` resource: an approval of one rollout gate.
pub mod rollout_approval;
/// An agent's status report turned into ManifestWork status, bounded: what
/// the hub writes, and what a dependency's CEL readiness rule reads.
pub mod status_from_wire;
/// Who owns a ManifestWork: the tenant its agent keeps it apart for.
pub mod work_owner;
