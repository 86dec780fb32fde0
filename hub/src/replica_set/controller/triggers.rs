//! Which replica sets a change of another object concerns: the mappers of
//! the controller's watches.

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::runtime::predicates;
use kube::runtime::reflector::{ObjectRef, Store};

use ferry_api::contract::REPLICA_SET_LABEL;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::replica_set::ManifestWorkReplicaSet;

/// The replica set a replica-set label (`<namespace>.<name>`) names.
pub(super) fn owner_of(
    labels: &BTreeMap<String, String>,
) -> Option<ObjectRef<ManifestWorkReplicaSet>> {
    labels
        .get(REPLICA_SET_LABEL)
        .and_then(|v| v.split_once('.'))
        .map(|(namespace, name)| ObjectRef::new(name).within(namespace))
}

/// The replica sets in `namespace` referring to `placement`.
pub(super) fn referring(
    replica_sets: &Store<ManifestWorkReplicaSet>,
    namespace: &str,
    placement: &str,
) -> Vec<ObjectRef<ManifestWorkReplicaSet>> {
    replica_sets
        .state()
        .iter()
        .filter(|rs| rs.namespace().as_deref() == Some(namespace))
        .filter(|rs| rs.spec.placement_refs.iter().any(|r| r.name == placement))
        .map(|rs| ObjectRef::from_obj(&**rs))
        .collect()
}

/// What of a cluster the replica sets react to: its labels (overrides,
/// placeholders), whether it is unreachable (the rollout stops waiting
/// for it) and its maintenance windows.
pub(super) fn labels_and_reachability(cluster: &ManagedCluster) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    predicates::labels(cluster).hash(&mut hasher);
    super::super::gates::is_unreachable(Some(cluster)).hash(&mut hasher);
    // A window opening or closing by a change of the annotation (the
    // opening by time alone comes from the decision's requeue).
    cluster
        .annotations()
        .get(ferry_api::contract::MAINTENANCE_WINDOWS_ANNOTATION)
        .hash(&mut hasher);
    Some(hasher.finish())
}

/// The replica sets a cluster change may concern: those whose rendering
/// may read a cluster's labels (overrides or a `${CLUSTER_LABEL:`
/// placeholder), and those whose rollout is under way (a cluster becoming
/// unreachable no longer holds it).
pub(super) fn using_labels(
    replica_sets: &Store<ManifestWorkReplicaSet>,
) -> Vec<ObjectRef<ManifestWorkReplicaSet>> {
    replica_sets
        .state()
        .iter()
        .filter(|rs| {
            !rs.spec.overrides.is_empty()
                || serde_json::to_string(&rs.spec.manifest_work_template)
                    .is_ok_and(|t| t.contains("${CLUSTER_LABEL:"))
                || rs.status.as_ref().is_none_or(|s| {
                    !s.conditions.iter().any(|c| {
                        c.type_ == ferry_semantics::contract::PLACEMENT_ROLLED_OUT
                            && c.reason == "Complete"
                    })
                })
        })
        .map(|rs| ObjectRef::from_obj(&**rs))
        .collect()
}
