//! Reconcile phase 4: the works themselves. The clusters the rollout plan
//! starts get their rendering of the template (a few writes at a time),
//! and clusters no longer chosen lose their work.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::warn;

use super::error::{ReplicaSetError, failed};
use super::render::Rendered;
use ferry_api::contract::{
    PLACEMENT_NAME_LABEL, REPLICA_SET_LABEL, REVISION_ANNOTATION, REVISION_DIGEST_ANNOTATION,
    TEMPLATE_APPLIED_AT_ANNOTATION,
};
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

/// Works written at once by one reconcile.
const CONCURRENT_WRITES: usize = 16;

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

/// Whether the API server refused a work for what it is (invalid, denied by
/// admission, too large, its namespace missing): writing the same work again
/// gets the same answer, so it fails only its cluster.
fn refused(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(e) if matches!(e.code, 400 | 403 | 404 | 413 | 422))
}

/// The labels of a generated work: the replica set's own (as OCM copies
/// them), then ferry's, which win on a clash.
pub fn work_labels(rs: &ManifestWorkReplicaSet, placement: &str) -> BTreeMap<String, String> {
    let mut labels = rs.labels().clone();
    labels.insert(REPLICA_SET_LABEL.to_string(), owner_label(rs));
    labels.insert(PLACEMENT_NAME_LABEL.to_string(), placement.to_string());
    labels
}

/// Carries out `works` for `rs`: writes the works of the clusters in
/// `works.start` (cluster, placement) unless `rs` is paused, each annotated
/// as holding `works.revision` (the hash) and `works.digest`, then deletes
/// the existing works of the clusters in `works.delete` (those the
/// deletion budget lets go) that are no longer `wanted`. A work the API
/// server refuses for what it is fails only its cluster: the refusals are
/// returned and the other writes go on. Fails on any other refused write or
/// deletion, after the other writes.
pub async fn deploy(
    client: &Client,
    rs: &ManifestWorkReplicaSet,
    works: &WorkWrites,
    wanted: &BTreeMap<String, String>,
    now: Timestamp,
) -> Result<Refused, ReplicaSetError> {
    let (start, rendered, existing, delete) =
        (&works.start, &works.specs, &works.existing, &works.delete);
    let (revision, digest) = (works.revision.as_str(), works.digest.as_str());
    let params = PatchParams::apply(ferry_semantics::contract::REPLICA_SET_FIELD_MANAGER).force();
    let mut refusals = Refused::new();
    if !rs.spec.paused {
        let applied_at = now
            .strftime(ferry_semantics::contract::MILLI_TIME_FORMAT)
            .to_string();
        // Which revision each work holds (the stable one while rolling
        // back): the cohort and the fleet summary read it back.
        let (applied_at, params) = (&applied_at, &params);
        // Written a few at a time: one template change reaches a
        // thousand clusters in a few seconds, not one round trip each.
        let writes = start.iter().cloned().filter_map(|(cluster, placement)| {
            let spec = rendered.get(&cluster)?.as_ref().ok()?.clone();
            Some((cluster, placement, spec))
        });
        let results: Vec<(String, u64, Result<(), Write>)> = futures::stream::iter(writes)
            .map(|(cluster, placement, spec)| async move {
                let hash = spec_hash(&spec);
                let api: Api<ManifestWork> = Api::namespaced(client.clone(), &cluster);
                // A work this replica set did not write is never
                // overwritten: one not in its own (labelled) set is
                // read first, and a stranger's stays as it is.
                if !existing.contains_key(&cluster) {
                    match foreign(&api, rs).await {
                        Ok(None) => {}
                        Ok(Some(message)) => {
                            return (cluster, hash, Err(Write::Clash(message)));
                        }
                        Err(error) => return (cluster, hash, Err(Write::Api(error))),
                    }
                }
                let work = json!({
                    "apiVersion": ManifestWork::api_version(&()),
                    "kind": ManifestWork::kind(&()),
                    "metadata": {
                        "name": rs.name_any(),
                        "namespace": cluster,
                        "labels": work_labels(rs, &placement),
                        "annotations": {
                            TEMPLATE_APPLIED_AT_ANNOTATION: applied_at,
                            REVISION_ANNOTATION: revision,
                            REVISION_DIGEST_ANNOTATION: digest,
                        },
                    },
                    "spec": spec,
                });
                let result = api
                    .patch(&rs.name_any(), params, &Patch::Apply(&work))
                    .await
                    .map(|_| ())
                    .map_err(Write::Api);
                (cluster, hash, result)
            })
            .buffer_unordered(CONCURRENT_WRITES)
            .collect()
            .await;
        let mut first_error = None;
        for (cluster, spec_hash, result) in results {
            match result {
                Ok(()) => {}
                Err(Write::Clash(message)) => {
                    warn!(replica_set = %owner_label(rs), %cluster, %message, "a work of that name is not this replica set's");
                    refusals.insert(
                        cluster,
                        Refusal {
                            spec_hash,
                            by: RefusedBy::NameClash,
                            message,
                            at: now,
                        },
                    );
                }
                Err(Write::Api(error)) if refused(&error) => {
                    warn!(replica_set = %owner_label(rs), %cluster, %error, "the hub API server refused the work");
                    refusals.insert(
                        cluster,
                        Refusal {
                            spec_hash,
                            by: RefusedBy::HubApiServer,
                            message: error.to_string(),
                            at: now,
                        },
                    );
                }
                Err(Write::Api(error)) => {
                    first_error.get_or_insert(failed(
                        rs,
                        format!("writing the ManifestWork of cluster {cluster}"),
                    )(error));
                }
            }
        }
        if let Some(error) = first_error {
            return Err(error);
        }
    }
    // A label added to the replica set reaches works that get no new
    // template: a merge patch of the labels alone, which neither restarts
    // the rollout nor touches the spec.
    let started: std::collections::BTreeSet<&str> = start.iter().map(|(c, _)| c.as_str()).collect();
    for (cluster, work) in existing {
        let Some(placement) = wanted.get(cluster) else {
            continue;
        };
        if started.contains(cluster.as_str()) || work.meta().deletion_timestamp.is_some() {
            continue;
        }
        let labels = work_labels(rs, placement);
        let stale: BTreeMap<&String, &String> = labels
            .iter()
            .filter(|(k, v)| work.labels().get(*k) != Some(*v))
            .collect();
        if stale.is_empty() {
            continue;
        }
        let api: Api<ManifestWork> = Api::namespaced(client.clone(), cluster);
        let patch = json!({"metadata": {"labels": stale}});
        let merge = PatchParams {
            field_manager: Some(ferry_semantics::contract::REPLICA_SET_FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        match api
            .patch(&rs.name_any(), &merge, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(source) => {
                return Err(failed(
                    rs,
                    format!("labelling the ManifestWork of cluster {cluster}"),
                )(source));
            }
        }
    }
    for cluster in delete {
        if let Some(work) = existing.get(cluster)
            && !wanted.contains_key(cluster)
            && work.meta().deletion_timestamp.is_none()
        {
            delete_work(client, rs, cluster).await?;
        }
    }
    Ok(refusals)
}

/// Why one work was not written.
enum Write {
    /// A work of that name exists and another party wrote it.
    Clash(String),
    /// The API server refused the read or the write.
    Api(kube::Error),
}

/// Whether `rs`'s work in `api`'s namespace is in the way of a stranger's:
/// Some(message naming it) when a work of that name exists that `rs` did
/// not write (its replica-set label names another owner or none). Fails
/// when the read is refused.
async fn foreign(
    api: &Api<ManifestWork>,
    rs: &ManifestWorkReplicaSet,
) -> Result<Option<String>, kube::Error> {
    let Some(work) = api.get_opt(&rs.name_any()).await? else {
        return Ok(None);
    };
    let owner = owner_label(rs);
    let written_by = work.labels().get(REPLICA_SET_LABEL);
    if written_by == Some(&owner) {
        return Ok(None);
    }
    Ok(Some(format!(
        "ManifestWork {}/{} exists and was not written by this replica set ({}); it is left untouched: rename the replica set or remove that work",
        work.namespace().unwrap_or_default(),
        work.name_any(),
        match written_by {
            Some(other) => format!("it belongs to replica set {other}"),
            None => "no replica set wrote it".to_string(),
        }
    )))
}

/// Deletes the work `rs` generated on `cluster`; one already gone is fine.
pub async fn delete_work(
    client: &Client,
    rs: &ManifestWorkReplicaSet,
    cluster: &str,
) -> Result<(), ReplicaSetError> {
    let api: Api<ManifestWork> = Api::namespaced(client.clone(), cluster);
    match api.delete(&rs.name_any(), &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(source) => Err(failed(
            rs,
            format!("deleting the ManifestWork of cluster {cluster}"),
        )(source)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
