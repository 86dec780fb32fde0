//! Names both sides of ferry's API contract use: condition types, field
//! managers, and the timestamp format of Kubernetes `metav1.Time`. Each is
//! defined here once, so the hub, the agent and the tests cannot drift apart.

/// Condition type: the manifest or work was written to the spoke.
pub const APPLIED: &str = "Applied";
/// Condition type: the resource exists on the spoke (for a work: every
/// resource does), as OCM defines `Available`.
pub const AVAILABLE: &str = "Available";
/// Condition type: the resource (or some resource of a work) has not reached
/// its desired state yet; for a work also while a manifest is not applied.
pub const PROGRESSING: &str = "Progressing";
/// Condition type: the resource (or some resource of a work) failed or
/// cannot reach its desired state.
pub const DEGRADED: &str = "Degraded";
/// Condition type: the manifest finished (set by a `Complete` condition
/// rule), or every manifest of a work with such rules did; a completed work
/// is no longer updated (OCM's `Complete`).
pub const COMPLETE: &str = "Complete";
/// Condition type: the work is being deleted and some of its objects are
/// still on the cluster.
pub const DELETING: &str = "Deleting";
/// Condition type: the manifest's status feedback rules were all evaluated.
pub const FEEDBACK_SYNCED: &str = "StatusFeedbackSynced";
/// Condition type of a manifest that is a sealed Secret, and of a work
/// holding any: True once the agent opened it (docs/sealed-secrets.md).
pub const SEALED: &str = "Sealed";
/// Condition type (ferry's) on a work with `spec.dependsOn`: True once every
/// work it depends on was ready when the agent applied the work's current
/// generation; False, with one of the `REASON_DEPENDENCY_*` reasons below,
/// while the agent holds the generation back. Absent without `dependsOn`.
pub const DEPENDENCIES_READY: &str = "DependenciesReady";
/// Reason of `DependenciesReady=True`.
pub const REASON_DEPENDENCIES_READY: &str = "DependenciesReady";
/// Reason of `DependenciesReady=False`: a work it depends on exists on the
/// cluster but its named condition is not True yet; the message names the
/// work and the condition.
pub const REASON_WAITING_FOR_DEPENDENCY: &str = "WaitingForDependency";
/// Reason of `DependenciesReady=False`: a work it depends on is not on this
/// cluster (not created yet, or deleted); the message names it.
pub const REASON_DEPENDENCY_MISSING: &str = "DependencyMissing";
/// Reason of `DependenciesReady=False`: the work is part of a cycle of
/// `dependsOn` (the message names the works in order); it is never applied
/// until the cycle is broken.
pub const REASON_DEPENDENCY_CYCLE: &str = "DependencyCycle";
/// Reason of `DependenciesReady=False`: a dependency's `celExpression` did
/// not compile, failed, gave something other than a bool, or ran past its
/// time bound; the message names the work and says which. The work waits
/// until the expression (or the dependency's status) changes.
pub const REASON_DEPENDENCY_RULE_ERROR: &str = "DependencyRuleError";
/// Reason of `Applied=False` on a work whose current generation waits for
/// its dependencies (its `DependenciesReady` condition says which).
pub const REASON_DEPENDENCIES_NOT_READY: &str = "DependenciesNotReady";
/// Reason of `Deleting=True` while a deleted work keeps its objects because
/// works of the same cluster still depend on it (the message names them),
/// for at most the agent's dependents deletion timeout.
pub const REASON_WAITING_FOR_DEPENDENTS: &str = "WaitingForDependents";
/// Reason of `Deleting=True` while the agent's deletion brake keeps a
/// deleted work's objects: more was deleted on the cluster within the
/// brake's window than its budget allows. The message gives the budget and
/// how a platform admin releases the hold on the spoke.
pub const REASON_DELETION_BRAKE_HELD: &str = "DeletionBrakeHeld";

/// Field manager of the agent's own writes, and of server-side apply when a
/// work names no manager.
pub const AGENT_FIELD_MANAGER: &str = "ferry-agent";
/// Field manager of the hub's writes (work status, CRDs, its webhook
/// registration).
pub const HUB_FIELD_MANAGER: &str = "ferry-hub";

/// `strftime` format of a Kubernetes `metav1.Time`: RFC 3339 in UTC with
/// whole seconds, the only form the API server stores.
pub const KUBE_TIME_FORMAT: &str = "%Y-%m-%dT%H:%M:%SZ";

/// RFC 3339 in UTC with milliseconds, for times ferry compares to the
/// millisecond (gate openings, when a template was applied): read back at
/// whole seconds, a 10 s hold was released after as little as 9 s.
pub const MILLI_TIME_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.3fZ";

/// Placement condition type: the placement chose as many clusters as it asks for.
pub const PLACEMENT_SATISFIED: &str = "PlacementSatisfied";
/// Placement condition type: the placement's spec cannot be used as written.
pub const PLACEMENT_MISCONFIGURED: &str = "PlacementMisconfigured";
/// Reason of `PlacementSatisfied=False` (OCM's): no ManagedClusterSet is
/// bound to the placement's namespace (or none of `spec.clusterSets` is).
pub const NO_MANAGED_CLUSTER_SET_BINDINGS: &str = "NoManagedClusterSetBindings";
/// Reason of `PlacementSatisfied=False` (OCM's): every set the placement
/// may choose from holds no cluster.
pub const ALL_MANAGED_CLUSTER_SETS_EMPTY: &str = "AllManagedClusterSetsEmpty";
/// Placement condition type (ferry's): True while the placement keeps its
/// last decisions because every cluster it chose was lost at once (a
/// binding deleted, every bound set emptied, a selector matching nothing);
/// the reason names the cause (`NoManagedClusterSetBindings`,
/// `AllManagedClusterSetsEmpty`, `NoManagedClusterMatched`). Absent when
/// nothing is held.
pub const PLACEMENT_DECISIONS_HELD: &str = "PlacementDecisionsHeld";
/// ManifestWorkReplicaSet condition type (ferry's): True while deletions of
/// generated works wait for the deletion budget; the message names how many
/// and the first few clusters. Absent when none wait.
pub const DELETIONS_WAITING: &str = "DeletionsWaiting";
/// ManifestWorkReplicaSet condition type (ferry's): True while clusters
/// wait for their maintenance window before a new revision is written to
/// them; the message names how many, and the first few with when their
/// window opens. Absent when none wait.
pub const WAITING_FOR_MAINTENANCE_WINDOW: &str = "WaitingForMaintenanceWindow";
/// ManagedClusterSet condition type (OCM's): True when no cluster belongs
/// to the set.
pub const CLUSTER_SET_EMPTY: &str = "ClusterSetEmpty";
/// Reason of `ClusterSetEmpty=True` (OCM's).
pub const NO_CLUSTER_MATCHED: &str = "NoClusterMatched";
/// Reason of `ClusterSetEmpty=False` (OCM's).
pub const CLUSTERS_SELECTED: &str = "ClustersSelected";
/// ManagedClusterSetBinding condition type (OCM's): True when the set it
/// names exists.
pub const BOUND: &str = "Bound";
/// Reason of `Bound=True` (OCM's).
pub const CLUSTER_SET_BOUND: &str = "ClusterSetBound";
/// Reason of `Bound=False` (OCM's): the set the binding names does not exist.
pub const CLUSTER_SET_NOT_FOUND: &str = "ClusterSetNotFound";
/// Field manager of the hub's cluster-set controller (set and binding
/// status, the well-known sets, the default set label on clusters).
pub const CLUSTER_SET_FIELD_MANAGER: &str = "ferry-clustersets";
/// Field manager of the hub's placement controller (PlacementDecisions,
/// Placement status, the unreachable taint on ManagedClusters).
pub const PLACEMENT_FIELD_MANAGER: &str = "ferry-placement";
/// ManifestWorkReplicaSet condition type: every referenced placement has
/// decisions and its rollout strategy can be used.
pub const PLACEMENT_VERIFIED: &str = "PlacementVerified";
/// Reason of `PlacementVerified=False` (OCM's): a referenced Placement is
/// missing (nothing is written or deleted until it is back) or has no
/// PlacementDecisions.
pub const PLACEMENT_DECISION_NOT_FOUND: &str = "PlacementDecisionNotFound";
/// ManifestWorkReplicaSet condition type: every chosen cluster holds the
/// current template and succeeded (False with reason Progressing, Paused,
/// Failed, RolledBack or MandatoryGroupFailed otherwise).
pub const PLACEMENT_ROLLED_OUT: &str = "PlacementRolledOut";
/// Reason of `PlacementRolledOut=False` (ferry's): a cluster of a mandatory
/// decision group failed, which holds the rollout whatever `maxFailures`
/// allows.
pub const MANDATORY_GROUP_FAILED: &str = "MandatoryGroupFailed";
/// Reason of `PlacementRolledOut=False` (ferry's): the rollout failed past
/// `maxFailures` with `failureStrategy: rollbackAll`, and the clusters it
/// reached were put back on the last stable revision.
pub const ROLLED_BACK: &str = "RolledBack";
/// ManifestWorkReplicaSet condition type: every generated work is applied
/// (OCM's spelling).
pub const MANIFESTWORK_APPLIED: &str = "ManifestworkApplied";
/// ManifestWorkReplicaSet condition type (ferry addition, present when the
/// spec has overrides or a cluster's work cannot be rendered): every chosen
/// cluster's work was rendered (False with reason OverrideFailed, naming
/// each failing cluster and override, otherwise).
pub const OVERRIDES_RENDERED: &str = "OverridesRendered";
/// Field manager of the works a ManifestWorkReplicaSet generates and of its
/// status.
pub const REPLICA_SET_FIELD_MANAGER: &str = "ferry-replicaset";

/// Reason on a manifest's `Applied=False`: another work on the same cluster
/// owns the object (it is older) and wants different values for some of its
/// fields; this work writes none of them.
pub const REASON_CONFLICTS_WITH_WORK: &str = "ConflictsWithWork";

/// Reason on a manifest's `Applied=False`: ferry rewrote the object too often
/// in a short window on its own initiative (drift correction) because another
/// writer keeps changing it; the agent backs off and names that writer.
pub const REASON_WRITE_LOOP: &str = "WriteLoopBackoff";
