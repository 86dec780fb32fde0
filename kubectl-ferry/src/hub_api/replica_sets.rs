//! A replica set on the hub: read once, as stored (untyped, so fields a
//! newer hub adds are kept on a write back) and decoded from that when a
//! command needs its typed view; its ControllerRevisions, its works and its
//! placements' decision groups; pausing, approving and undoing it.

use std::collections::BTreeMap;

use ferry_api::contract::{PLACEMENT_LABEL, REPLICA_SET_LABEL};
use ferry_api::manifest_work::ManifestWork;
use ferry_api::placement::PlacementDecision;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_api::rollout_approval::{RolloutApproval, RolloutApprovalSpec};
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use crate::error::CliError;
use crate::rollout::{GateChoice, ReplicaSetRef, approval_name};
use crate::rollout_view::Wave;

/// `manifestworkreplicasets.work.ferry.dev`, as errors name it.
const REPLICA_SETS: &str = "manifestworkreplicasets.work.ferry.dev";

fn replica_sets(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::erase::<ManifestWorkReplicaSet>(&()),
    )
}

/// The label value naming the replica set on its works and revisions.
fn owner(rs: &ReplicaSetRef) -> String {
    format!("{}.{}", rs.namespace, rs.name)
}

fn to_value(object: impl serde::Serialize) -> Result<Value, CliError> {
    serde_json::to_value(object).map_err(|e| CliError::Print(e.to_string()))
}

/// The replica set named by `rs`, as stored; [`CliError::ReplicaSetNotFound`]
/// when there is none.
pub async fn stored_replica_set(client: &Client, rs: &ReplicaSetRef) -> Result<Value, CliError> {
    let action = format!("get manifestworkreplicaset {}/{}", rs.namespace, rs.name);
    match replica_sets(client, &rs.namespace).get_opt(&rs.name).await {
        Ok(Some(object)) => to_value(object),
        Ok(None) => Err(CliError::ReplicaSetNotFound {
            namespace: rs.namespace.clone(),
            name: rs.name.clone(),
        }),
        Err(error) => Err(CliError::from_kube(&action, REPLICA_SETS, error)),
    }
}

/// The ControllerRevisions of `rs` (labelled with it, in its namespace).
pub async fn list_revisions(client: &Client, rs: &ReplicaSetRef) -> Result<Vec<Value>, CliError> {
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), &rs.namespace);
    let action = format!("list controllerrevisions in namespace {}", rs.namespace);
    let listed = api
        .list(&ListParams::default().labels(&format!("{REPLICA_SET_LABEL}={}", owner(rs))))
        .await
        .map_err(|e| CliError::from_kube(&action, "controllerrevisions.apps", e))?;
    listed.items.into_iter().map(to_value).collect()
}

/// The works `rs` generated, in every cluster's namespace, as stored.
pub async fn list_replica_set_works(
    client: &Client,
    rs: &ReplicaSetRef,
) -> Result<Vec<Value>, CliError> {
    let resource = ApiResource::erase::<ManifestWork>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let listed = api
        .list(&ListParams::default().labels(&format!("{REPLICA_SET_LABEL}={}", owner(rs))))
        .await
        .map_err(|e| {
            CliError::from_kube(
                "list manifestworks in all namespaces",
                "manifestworks.work.ferry.dev",
                e,
            )
        })?;
    listed.items.into_iter().map(to_value).collect()
}

/// Writes `replica_set` (as read, changed) back; its resourceVersion makes
/// a concurrent change fail the write rather than be lost, as
/// [`CliError::ChangedSinceRead`] (read again and decide again). Other
/// refusals and transport failures are their own errors.
pub async fn replace_replica_set(
    client: &Client,
    rs: &ReplicaSetRef,
    replica_set: Value,
) -> Result<(), CliError> {
    let object: DynamicObject =
        serde_json::from_value(replica_set).map_err(|e| CliError::Print(e.to_string()))?;
    let action = format!("update manifestworkreplicaset {}/{}", rs.namespace, rs.name);
    match replica_sets(client, &rs.namespace)
        .replace(&rs.name, &PostParams::default(), &object)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Err(CliError::ChangedSinceRead {
            namespace: rs.namespace.clone(),
            name: rs.name.clone(),
        }),
        Err(error) => Err(CliError::from_kube(&action, REPLICA_SETS, error)),
    }
}

/// The replica set named by `rs`, decoded; [`CliError::ReplicaSetNotFound`]
/// when there is none, [`CliError::Undecodable`] when this build cannot
/// read it.
pub async fn typed_replica_set(
    client: &Client,
    rs: &ReplicaSetRef,
) -> Result<ManifestWorkReplicaSet, CliError> {
    decode(
        stored_replica_set(client, rs).await?,
        &format!("manifestworkreplicaset {}/{}", rs.namespace, rs.name),
    )
}

/// The works `rs` generated, decoded, by cluster.
pub async fn generated_works(
    client: &Client,
    rs: &ReplicaSetRef,
) -> Result<BTreeMap<String, ManifestWork>, CliError> {
    let mut works = BTreeMap::new();
    for value in list_replica_set_works(client, rs).await? {
        let namespace = value["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = value["metadata"]["name"].as_str().unwrap_or_default();
        let what = format!("manifestwork {namespace}/{name}");
        let work: ManifestWork = decode(value, &what)?;
        if let Some(cluster) = work.metadata.namespace.clone() {
            works.insert(cluster, work);
        }
    }
    Ok(works)
}

/// `value` read as a `K`; [`CliError::Undecodable`] naming `what` when it
/// is not one.
fn decode<K: serde::de::DeserializeOwned>(value: Value, what: &str) -> Result<K, CliError> {
    serde_json::from_value(value).map_err(|e| CliError::Undecodable {
        what: what.to_string(),
        reason: e.to_string(),
    })
}

/// The PlacementDecisions of placement `placement` in `namespace` (those
/// labelled with it); fails with the API server's answer.
pub async fn placement_decisions(
    client: &Client,
    namespace: &str,
    placement: &str,
) -> Result<Vec<PlacementDecision>, CliError> {
    let api: Api<PlacementDecision> = Api::namespaced(client.clone(), namespace);
    api.list(&ListParams::default().labels(&format!("{PLACEMENT_LABEL}={placement}")))
        .await
        .map(|list| list.items)
        .map_err(|e| {
            CliError::from_kube(
                &format!("list placementdecisions in namespace {namespace}"),
                "placementdecisions.cluster.ferry.dev",
                e,
            )
        })
}

/// The decision groups of each placement of `rs`, from its
/// PlacementDecisions, in group order.
pub async fn waves(
    client: &Client,
    rs: &ManifestWorkReplicaSet,
) -> Result<BTreeMap<String, Vec<Wave>>, CliError> {
    let namespace = rs.namespace().unwrap_or_default();
    let mut out = BTreeMap::new();
    for reference in &rs.spec.placement_refs {
        let decisions = placement_decisions(client, &namespace, &reference.name).await?;
        let mut groups: BTreeMap<usize, Wave> = BTreeMap::new();
        for decision in decisions {
            let (index, name) = decision.decision_group();
            let wave = groups.entry(index).or_insert_with(|| Wave {
                index,
                name,
                clusters: Vec::new(),
            });
            wave.clusters
                .extend(decision.cluster_names().map(str::to_string));
        }
        out.insert(reference.name.clone(), groups.into_values().collect());
    }
    Ok(out)
}

/// Merge-patches `spec.paused` of replica set `rs` with `client`'s
/// credentials; fails with the API server's answer (the CLI and the
/// dashboard each say it their way).
pub async fn patch_paused(
    client: &Client,
    rs: &ReplicaSetRef,
    paused: bool,
) -> Result<(), kube::Error> {
    let api: Api<ManifestWorkReplicaSet> = Api::namespaced(client.clone(), &rs.namespace);
    api.patch(
        &rs.name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"paused": paused}})),
    )
    .await
    .map(|_| ())
}

/// Sets `spec.paused` of the replica set.
pub async fn set_paused(client: &Client, rs: &ReplicaSetRef, paused: bool) -> Result<(), CliError> {
    let verb = if paused { "pause" } else { "resume" };
    patch_paused(client, rs, paused).await.map_err(|e| match e {
        kube::Error::Api(s)
            if s.code == 404 && s.details.as_ref().is_some_and(|d| !d.name.is_empty()) =>
        {
            CliError::ReplicaSetNotFound {
                namespace: rs.namespace.clone(),
                name: rs.name.clone(),
            }
        }
        e => CliError::from_kube(
            &format!(
                "{verb} (patch) manifestworkreplicaset {}/{}",
                rs.namespace, rs.name
            ),
            REPLICA_SETS,
            e,
        ),
    })
}

/// Creates the approval of `choice` by `user` with `comment`, named by
/// [`approval_name`] so approving twice finds the first approval; returns
/// its name, and whether it existed already. Fails with the API server's
/// answer (the CLI and the dashboard each say it their way).
pub async fn create_approval(
    client: &Client,
    rs: &ReplicaSetRef,
    choice: &GateChoice,
    user: &str,
    comment: &str,
) -> Result<(String, bool), kube::Error> {
    let name = approval_name(&rs.name, choice);
    let mut approval = RolloutApproval::new(
        &name,
        RolloutApprovalSpec {
            replica_set: rs.name.clone(),
            placement: choice.placement.clone(),
            after_group: choice.after_group.clone(),
            revision: choice.revision.clone(),
            approved_by: user.to_string(),
            comment: comment.to_string(),
        },
    );
    approval.metadata.namespace = Some(rs.namespace.clone());
    let api: Api<RolloutApproval> = Api::namespaced(client.clone(), &rs.namespace);
    match api.create(&PostParams::default(), &approval).await {
        Ok(_) => Ok((name, false)),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok((name, true)),
        Err(e) => Err(e),
    }
}

/// Creates the approval of `choice` by `user` with `comment`; returns its
/// name, and whether it existed already.
pub async fn approve(
    client: &Client,
    rs: &ReplicaSetRef,
    choice: &GateChoice,
    user: &str,
    comment: &str,
) -> Result<(String, bool), CliError> {
    create_approval(client, rs, choice, user, comment)
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 403 => CliError::ApproveForbidden {
                namespace: rs.namespace.clone(),
                message: s.message,
            },
            e => CliError::from_kube(
                &format!("create rolloutapprovals in namespace {}", rs.namespace),
                "rolloutapprovals.work.ferry.dev",
                e,
            ),
        })
}
