//! The names ferry writes onto Kubernetes objects and that other parties
//! (agents, users, `kubectl-ferry`, the tests) read back: API groups, labels,
//! annotations, finalizers, taints and token audiences. Each is defined here
//! once. Condition types and field managers, which the agent writes too, are
//! defined in [`ferry_semantics::contract`]; the agent's bookkeeping
//! annotations in [`ferry_semantics::hash`].
//!
//! The `group = "…"` attribute of each `#[derive(CustomResource)]` must be a
//! literal, so the types repeat [`WORK_GROUP`] and [`CLUSTER_GROUP`] there; a
//! test checks they agree.

/// API group of ManifestWork, ManifestWorkReplicaSet and RolloutApproval
/// (and of ManagedCluster before it moved to [`CLUSTER_GROUP`]).
pub const WORK_GROUP: &str = "work.ferry.dev";
/// API group of ManagedCluster, Placement, PlacementDecision and the
/// cluster sets.
pub const CLUSTER_GROUP: &str = "cluster.ferry.dev";

/// The RBAC verb on `manifestworks` (group [`WORK_GROUP`]) a requester
/// needs to write a work, or a replica set, naming an executor; the
/// resource name checked is the executor's user name,
/// `system:serviceaccount:<namespace>:<name>` (OCM's rule, in ferry's group).
pub const EXECUTE_AS_VERB: &str = "execute-as";

/// Label on a ManagedCluster naming the one `ExclusiveClusterSetLabel`
/// ManagedClusterSet it belongs to (OCM's `cluster.open-cluster-management.io/clusterset`).
pub const CLUSTER_SET_LABEL: &str = "cluster.ferry.dev/clusterset";
/// The well-known set of every cluster (a `LabelSelector` set matching all),
/// which the hub creates at startup.
pub const GLOBAL_CLUSTER_SET: &str = "global";
/// The well-known `ExclusiveClusterSetLabel` set the hub creates at startup
/// and puts every cluster without a set label into.
pub const DEFAULT_CLUSTER_SET: &str = "default";
/// The virtual subresource of `managedclustersets` (group [`CLUSTER_GROUP`])
/// on which a requester needs `create` to bind a set into a namespace; the
/// resource name checked is the set's name (OCM's rule, in ferry's group).
pub const BIND_SUBRESOURCE: &str = "bind";

/// Annotation on a Placement: with value `true`, the user confirms that an
/// empty decision may replace the last decisions. Without it, a placement
/// whose every chosen cluster is lost at once (a ManagedClusterSetBinding
/// deleted, every bound set emptied, a selector that stops matching every
/// cluster) keeps its last decisions, so no work is deleted, and says so in
/// its `PlacementDecisionsHeld` condition (docs/fleet-distribution.md).
pub const CONFIRM_EMPTY_DECISIONS_ANNOTATION: &str = "cluster.ferry.dev/confirm-empty-decisions";
/// Label on a PlacementDecision naming its Placement.
pub const PLACEMENT_LABEL: &str = "cluster.ferry.dev/placement";
/// Label on a PlacementDecision holding its decision group's index.
pub const DECISION_GROUP_INDEX_LABEL: &str = "cluster.ferry.dev/decision-group-index";
/// Label on a PlacementDecision holding its decision group's name.
pub const DECISION_GROUP_NAME_LABEL: &str = "cluster.ferry.dev/decision-group-name";
/// Key of the taint a disconnected cluster carries.
pub const UNREACHABLE_TAINT: &str = "cluster.ferry.dev/unreachable";
/// ManagedCluster annotation: the cluster's maintenance windows, a JSON
/// list of `{"schedule": "0 2 * * SAT", "duration": "4h", "timeZone":
/// "Europe/Berlin"}` (see `ferry_fleet_semantics::maintenance_windows`).
/// A rollout writes a new revision to the cluster only inside one of them;
/// absent, the cluster is always open. Unparsable: closed.
pub const MAINTENANCE_WINDOWS_ANNOTATION: &str = "cluster.ferry.dev/maintenance-windows";

/// Label on a generated ManifestWork naming its replica set as
/// `<namespace>.<name>`.
pub const REPLICA_SET_LABEL: &str = "work.ferry.dev/manifestworkreplicaset";
/// Label on a generated ManifestWork naming the Placement that chose its
/// cluster.
pub const PLACEMENT_NAME_LABEL: &str = "work.ferry.dev/placement";
/// Annotation on a generated work: when it got its current template.
pub const TEMPLATE_APPLIED_AT_ANNOTATION: &str = "work.ferry.dev/template-applied-at";
/// Annotation on a generated work: the revision it holds, as the revision
/// hash of the template and overrides it was rendered from
/// (`ferry_fleet_semantics::revision::revision_hash`).
pub const REVISION_ANNOTATION: &str = "work.ferry.dev/revision";
/// Annotation on a generated work: the whole digest of the revision it
/// holds (`ferry_fleet_semantics::revision::revision_digest`), of which
/// [`REVISION_ANNOTATION`] is the first 10 digits. Whether a work already
/// holds the revision rolling out is judged by it when present: two
/// templates sharing the short hash are found in seconds.
pub const REVISION_DIGEST_ANNOTATION: &str = "work.ferry.dev/revision-digest";
/// Annotation that releases held deletions once per new value, which says
/// who released and why (`<user>: <why>`): on a ManifestWorkReplicaSet it
/// lets the removals its deletion budget holds go (only a platform role may
/// set it, policy `deletion-releases.work.ferry.dev`); on the agent's
/// ledger ConfigMap ([`DELETION_BRAKE_LEDGER`]) on a spoke it lets the
/// deletions the agent's brake holds go (docs/deletion-brake.md).
pub const RELEASE_DELETIONS_ANNOTATION: &str = "work.ferry.dev/release-deletions";
/// Name of the ConfigMap on a spoke (in the agent's namespace) where the
/// agent's deletion brake records what it admitted, holds and was released.
pub const DELETION_BRAKE_LEDGER: &str = "ferry-deletion-brake";
/// Namespace label: with value `true`, every ManifestWork and
/// ManifestWorkReplicaSet written in that namespace must name an executor
/// (policy `manifestwork-executor-required.work.ferry.dev`). Put it on
/// tenant namespaces and on the cluster namespaces tenants may write.
pub const REQUIRE_EXECUTOR_LABEL: &str = "work.ferry.dev/require-executor";
/// Namespace label: with value `true`, no ManifestWork or
/// ManifestWorkReplicaSet template written in that namespace may carry a
/// plain `v1` Secret, only sealed ones (policy
/// `manifestwork-sealed-secrets-required.work.ferry.dev`), so no Secret's
/// data is stored on the hub in the clear. Put it on tenant namespaces and
/// on the cluster namespaces tenants may write.
pub const REQUIRE_SEALED_SECRETS_LABEL: &str = "work.ferry.dev/require-sealed-secrets";
/// Finalizer on a replica set: its works are removed before it goes.
pub const REPLICA_SET_FINALIZER: &str = "work.ferry.dev/manifestworkreplicaset-cleanup";
/// The finalizer that keeps a deleted work until its objects are released.
pub const CLEANUP_FINALIZER: &str = "work.ferry.dev/cleanup";

/// Label on the hub Secrets that agent tokens are bound to; its value is the
/// ServiceAccount the token is for. Deleting such a Secret revokes its token.
pub const TOKEN_BINDING_LABEL: &str = "work.ferry.dev/agent-token-for";
/// The audience ferry's agent tokens are issued for: such a token is useless
/// against the hub's Kubernetes API, and other tokens are useless here.
pub const AGENT_TOKEN_AUDIENCE: &str = "ferry-hub";
/// Default name of the ServiceAccount agents authenticate as, in their
/// cluster's namespace (the hub's `--agent-service-account`).
pub const AGENT_SERVICE_ACCOUNT: &str = "ferry-agent";

/// Annotation a platform admin sets to `true` on one of ferry's CRDs before
/// deleting it: without it the hub's admission policy refuses the deletion,
/// which would delete every object of the CRD on the hub and, through the
/// agents, what they applied on every cluster.
pub const CONFIRM_DELETION_ANNOTATION: &str = "work.ferry.dev/confirm-deletion";

/// Label the join puts on a cluster's namespace on the hub (value: the
/// cluster's name): deleting a namespace so labelled is refused until it is
/// annotated [`CONFIRM_DELETION_ANNOTATION`]`=true`.
pub const CLUSTER_NAMESPACE_LABEL: &str = "work.ferry.dev/cluster-namespace";

#[cfg(test)]
mod tests {
    use kube::Resource;

    use super::*;
    use crate::cluster_set::{ManagedClusterSet, ManagedClusterSetBinding};
    use crate::managed_cluster::ManagedCluster;
    use crate::manifest_work::ManifestWork;
    use crate::placement::{Placement, PlacementDecision};
    use crate::replica_set::ManifestWorkReplicaSet;

    // The derive attributes cannot name the constants; this keeps them equal.
    #[test]
    fn the_types_use_the_contract_groups() {
        assert_eq!(ManifestWork::group(&()), WORK_GROUP);
        assert_eq!(ManagedCluster::group(&()), CLUSTER_GROUP);
        assert_eq!(crate::managed_cluster::LEGACY_GROUP, WORK_GROUP);
        assert_eq!(ManifestWorkReplicaSet::group(&()), WORK_GROUP);
        assert_eq!(Placement::group(&()), CLUSTER_GROUP);
        assert_eq!(PlacementDecision::group(&()), CLUSTER_GROUP);
        assert_eq!(ManagedClusterSet::group(&()), CLUSTER_GROUP);
        assert_eq!(ManagedClusterSetBinding::group(&()), CLUSTER_GROUP);
    }
}
