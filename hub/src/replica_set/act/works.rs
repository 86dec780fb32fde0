//! Writes the works a decision starts and deletes the works it lets go.

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::warn;

use super::super::error::{ReplicaSetError, failed};
use super::super::work_writes::{
    Refusal, Refused, RefusedBy, WorkWrites, owner_label, spec_hash, work_labels,
};
use ferry_api::contract::{
    REPLICA_SET_LABEL, REVISION_ANNOTATION, REVISION_DIGEST_ANNOTATION,
    TEMPLATE_APPLIED_AT_ANNOTATION,
};
use ferry_api::manifest_work::{ManifestWork, ManifestWorkSpec};
use ferry_api::replica_set::ManifestWorkReplicaSet;

/// Works written at once by one reconcile.
const CONCURRENT_WRITES: usize = 16;

/// Whether the API server refused a work for what it is (invalid, denied by
/// admission, too large, its namespace missing): writing the same work again
/// gets the same answer, so it fails only its cluster.
fn refused(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(e) if matches!(e.code, 400 | 403 | 404 | 413 | 422))
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
    let refusals = if rs.spec.paused {
        Refused::new()
    } else {
        write_started(client, rs, works, now).await?
    };
    relabel(client, rs, works, wanted).await?;
    for cluster in &works.delete {
        if let Some(work) = works.existing.get(cluster)
            && !wanted.contains_key(cluster)
            && work.meta().deletion_timestamp.is_none()
        {
            delete_work(client, rs, cluster).await?;
        }
    }
    Ok(refusals)
}

/// What every work written by one reconcile is annotated with: when, and
/// the revision it holds (the stable one while rolling back: the cohort and
/// the fleet summary read it back).
struct Stamp<'a> {
    applied_at: String,
    revision: &'a str,
    digest: &'a str,
}

/// Writes the works of the clusters `works.start` names, a few at a time
/// (one template change reaches a thousand clusters in a few seconds, not
/// one round trip each), and returns those refused for what they are.
/// Fails, after the other writes, on the first other failure.
async fn write_started(
    client: &Client,
    rs: &ManifestWorkReplicaSet,
    works: &WorkWrites,
    now: Timestamp,
) -> Result<Refused, ReplicaSetError> {
    let stamp = Stamp {
        applied_at: now
            .strftime(ferry_semantics::contract::MILLI_TIME_FORMAT)
            .to_string(),
        revision: &works.revision,
        digest: &works.digest,
    };
    let stamp = &stamp;
    let writes = works
        .start
        .iter()
        .cloned()
        .filter_map(|(cluster, placement)| {
            let spec = works.specs.get(&cluster)?.as_ref().ok()?.clone();
            Some((cluster, placement, spec))
        });
    let results: Vec<(String, u64, Result<(), Write>)> = futures::stream::iter(writes)
        .map(|(cluster, placement, spec)| async move {
            let hash = spec_hash(&spec);
            let result = write_one(client, rs, works, &cluster, &placement, spec, stamp).await;
            (cluster, hash, result)
        })
        .buffer_unordered(CONCURRENT_WRITES)
        .collect()
        .await;
    let mut refusals = Refused::new();
    let mut first_error = None;
    for (cluster, spec_hash, result) in results {
        let (by, message) = match result {
            Ok(()) => continue,
            Err(Write::Clash(message)) => {
                warn!(replica_set = %owner_label(rs), %cluster, %message, "a work of that name is not this replica set's");
                (RefusedBy::NameClash, message)
            }
            Err(Write::Api(error)) if refused(&error) => {
                warn!(replica_set = %owner_label(rs), %cluster, %error, "the hub API server refused the work");
                (RefusedBy::HubApiServer, error.to_string())
            }
            Err(Write::Api(error)) => {
                first_error.get_or_insert(failed(
                    rs,
                    format!("writing the ManifestWork of cluster {cluster}"),
                )(error));
                continue;
            }
        };
        refusals.insert(
            cluster,
            Refusal {
                spec_hash,
                by,
                message,
                at: now,
            },
        );
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(refusals),
    }
}

/// Writes `spec` as `rs`'s work on `cluster` (of `placement`), stamped.
/// A work this replica set did not write is never overwritten: one not in
/// its own (labelled) set is read first, and a stranger's stays as it is.
async fn write_one(
    client: &Client,
    rs: &ManifestWorkReplicaSet,
    works: &WorkWrites,
    cluster: &str,
    placement: &str,
    spec: ManifestWorkSpec,
    stamp: &Stamp<'_>,
) -> Result<(), Write> {
    let api: Api<ManifestWork> = Api::namespaced(client.clone(), cluster);
    if !works.existing.contains_key(cluster)
        && let Some(message) = foreign(&api, rs).await.map_err(Write::Api)?
    {
        return Err(Write::Clash(message));
    }
    let work = json!({
        "apiVersion": ManifestWork::api_version(&()),
        "kind": ManifestWork::kind(&()),
        "metadata": {
            "name": rs.name_any(),
            "namespace": cluster,
            "labels": work_labels(rs, placement),
            "annotations": {
                TEMPLATE_APPLIED_AT_ANNOTATION: stamp.applied_at,
                REVISION_ANNOTATION: stamp.revision,
                REVISION_DIGEST_ANNOTATION: stamp.digest,
            },
        },
        "spec": spec,
    });
    let params = PatchParams::apply(ferry_semantics::contract::REPLICA_SET_FIELD_MANAGER).force();
    api.patch(&rs.name_any(), &params, &Patch::Apply(&work))
        .await
        .map(|_| ())
        .map_err(Write::Api)
}

/// A label added to the replica set reaches works that get no new
/// template: a merge patch of the labels alone, which neither restarts the
/// rollout nor touches the spec. Fails when a patch is refused.
async fn relabel(
    client: &Client,
    rs: &ManifestWorkReplicaSet,
    works: &WorkWrites,
    wanted: &BTreeMap<String, String>,
) -> Result<(), ReplicaSetError> {
    let started: std::collections::BTreeSet<&str> =
        works.start.iter().map(|(c, _)| c.as_str()).collect();
    for (cluster, work) in &works.existing {
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
    Ok(())
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
