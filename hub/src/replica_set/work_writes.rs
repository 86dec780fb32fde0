//! Reconcile phase 4: the works themselves. The clusters the rollout plan
//! starts get their rendering of the template (a few writes at a time),
//! and clusters no longer chosen lose their work.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;

use super::render::Rendered;
use ferry_api::contract::{PLACEMENT_NAME_LABEL, REPLICA_SET_LABEL};
use ferry_api::manifest_work::{ManifestWork, ManifestWorkSpec};
use ferry_api::replica_set::ManifestWorkReplicaSet;

/// The works one reconcile writes and deletes; absent from a decision
/// while a referenced placement is missing.
#[derive(Debug)]
pub struct WorkWrites {
    /// The clusters written now, each with its placement.
    pub start: Vec<(String, String)>,
    /// What each of them is written (the stable revision's rendering while
    /// rolling back); a cluster whose rendering failed is not written.
    pub specs: Rendered,
    /// The revision hash the written works hold.
    pub revision: String,
    /// That revision's whole digest.
    pub digest: String,
    /// The works these writes may touch (relabel, delete): the generated
    /// ones but those of unbound clusters, which are left as they are.
    pub existing: BTreeMap<String, Arc<ManifestWork>>,
    /// The clusters whose works are deleted now (within the budget).
    pub delete: Vec<String>,
}

/// The label value naming a replica set: namespaces hold no dots, so the
/// first dot splits it back.
pub fn owner_label(rs: &ManifestWorkReplicaSet) -> String {
    format!("{}.{}", rs.namespace().unwrap_or_default(), rs.name_any())
}

/// A work the hub API server refused to store, remembered so the rollout
/// counts its cluster failed until the cluster's rendering changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// [`spec_hash`] of the rendering refused.
    pub spec_hash: u64,
    /// Who refused it: the hub API server, or ferry's own check.
    pub by: RefusedBy,
    /// The API server's answer.
    pub message: String,
    /// When it was refused: the write is tried again [`REFUSAL_RETRY`]
    /// later, for an answer that can change (a namespace made, a policy
    /// changed).
    pub at: Timestamp,
}

/// Who kept a work from being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusedBy {
    /// The hub API server refused to store it (invalid, denied by
    /// admission, too large, its namespace missing).
    HubApiServer,
    /// ferry did not write it: a work of that name belongs to another owner.
    NameClash,
}

impl Refusal {
    /// The refusal in words that say who refused, for status messages:
    /// `the hub API server refused its work: …` or `ferry did not write its
    /// work: …`.
    pub fn describe(&self) -> String {
        match self.by {
            RefusedBy::HubApiServer => {
                format!("the hub API server refused its work: {}", self.message)
            }
            RefusedBy::NameClash => format!("ferry did not write its work: {}", self.message),
        }
    }
}

/// How long a refused work counts its cluster failed before it is written
/// again (sooner when the cluster's rendering changes).
pub const REFUSAL_RETRY: SignedDuration = SignedDuration::from_mins(5);

/// Refused works by cluster.
pub type Refused = BTreeMap<String, Refusal>;

/// A hash of a rendered work spec, to tell whether a refusal is about the
/// current rendering.
pub fn spec_hash(spec: &ManifestWorkSpec) -> u64 {
    let mut hasher = DefaultHasher::new();
    serde_json::to_string(spec)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

/// The labels of a generated work: the replica set's own (as OCM copies
/// them), then ferry's, which win on a clash.
pub fn work_labels(rs: &ManifestWorkReplicaSet, placement: &str) -> BTreeMap<String, String> {
    let mut labels = rs.labels().clone();
    labels.insert(REPLICA_SET_LABEL.to_string(), owner_label(rs));
    labels.insert(PLACEMENT_NAME_LABEL.to_string(), placement.to_string());
    labels
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn works_carry_the_replica_set_labels_and_ferry_labels_win() {
        let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "app", "namespace": "ns", "labels": {
                "app": "shop", REPLICA_SET_LABEL: "forged", PLACEMENT_NAME_LABEL: "forged"}},
            "spec": {"manifestWorkTemplate": {}},
        }))
        .expect("replica set");
        let labels = work_labels(&rs, "prod");
        assert_eq!(labels.get("app").map(String::as_str), Some("shop"));
        assert_eq!(
            labels.get(REPLICA_SET_LABEL).map(String::as_str),
            Some("ns.app")
        );
        assert_eq!(
            labels.get(PLACEMENT_NAME_LABEL).map(String::as_str),
            Some("prod")
        );
    }
}
