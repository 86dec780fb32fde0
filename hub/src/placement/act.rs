//! Act: the placement controller's only writes. Each write of an object
//! the decision read carries the resourceVersion it was read at (a new
//! decision object is created, never applied over one that appeared
//! since), so a leader that decided from an older view (paused and resumed
//! after another took over) is refused its first write and writes nothing
//! after it: it cannot reverse the newer leader's decisions.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::warn;

use super::decide::DecisionWrites;
use super::error::{PlacementError, failed};
use crate::conditions::same_conditions;
use crate::events::{HubEvent, HubEvents};
use ferry_api::placement::{Placement, PlacementDecision, PlacementDecisionSpec, PlacementStatus};
use ferry_semantics::contract::PLACEMENT_FIELD_MANAGER;

/// Writes `status` as `placement`'s status, unless it already says so (but
/// for transition times), with the resourceVersion `placement` was read at.
/// Fails with [`PlacementError::Superseded`] when the placement changed
/// since, and when the API server refuses the write.
pub async fn write_status(
    client: &Client,
    placement: &Placement,
    status: &PlacementStatus,
) -> Result<(), PlacementError> {
    let current = placement.status.clone().unwrap_or_default();
    if same_status(&current, status) {
        return Ok(());
    }
    let api: Api<Placement> =
        Api::namespaced(client.clone(), &placement.namespace().unwrap_or_default());
    let patch = json!({
        "apiVersion": Placement::api_version(&()),
        "kind": Placement::kind(&()),
        "metadata": {"resourceVersion": placement.resource_version()},
        "status": status,
    });
    api.patch_status(
        &placement.name_any(),
        &PatchParams::apply(PLACEMENT_FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(failed(placement, "writing the status"))?;
    Ok(())
}

/// Compares status without the transition times the API server rounds.
fn same_status(a: &PlacementStatus, b: &PlacementStatus) -> bool {
    let without = |s: &PlacementStatus| PlacementStatus {
        conditions: Vec::new(),
        ..s.clone()
    };
    without(a) == without(b) && same_conditions(&a.conditions, &b.conditions)
}

/// Carries out `writes` for `placement`, in their order (see
/// [`DecisionWrites`]). Fails at the first write refused:
/// [`PlacementError::Superseded`] when an object changed since it was read
/// (or appeared), else [`PlacementError::Write`].
pub async fn write_decisions(
    client: &Client,
    placement: &Placement,
    writes: &DecisionWrites,
) -> Result<(), PlacementError> {
    let namespace = placement.namespace().unwrap_or_default();
    let api: Api<PlacementDecision> = Api::namespaced(client.clone(), &namespace);
    let params = PatchParams::apply(PLACEMENT_FIELD_MANAGER).force();
    let owner = placement.controller_owner_ref(&());
    // Each object's version as of the last write this pass made to it.
    let mut versions: BTreeMap<String, String> = writes.versions.clone();
    for (object, labels) in &writes.objects {
        let written = match versions.get(object) {
            Some(version) => {
                let body = json!({
                    "apiVersion": PlacementDecision::api_version(&()),
                    "kind": PlacementDecision::kind(&()),
                    "metadata": {
                        "name": object,
                        "namespace": namespace,
                        "labels": labels,
                        "ownerReferences": owner.iter().collect::<Vec<_>>(),
                        "resourceVersion": version,
                    },
                    "spec": {},
                });
                api.patch(object, &params, &Patch::Apply(&body)).await
            }
            None => {
                let decision = PlacementDecision {
                    metadata: ObjectMeta {
                        name: Some(object.clone()),
                        namespace: Some(namespace.clone()),
                        labels: Some(labels.clone()),
                        owner_references: owner.clone().map(|o| vec![o]),
                        ..ObjectMeta::default()
                    },
                    spec: PlacementDecisionSpec::default(),
                    status: None,
                };
                let params = PostParams {
                    field_manager: Some(PLACEMENT_FIELD_MANAGER.into()),
                    ..PostParams::default()
                };
                api.create(&params, &decision).await
            }
        }
        .map_err(failed(
            placement,
            format!("writing PlacementDecision {object}"),
        ))?;
        if let Some(version) = written.resource_version() {
            versions.insert(object.clone(), version);
        }
    }
    for (object, clusters) in &writes.lists {
        let decisions: Vec<serde_json::Value> = clusters
            .iter()
            .map(|c| json!({"clusterName": c, "reason": ""}))
            .collect();
        let body = json!({
            "apiVersion": PlacementDecision::api_version(&()),
            "kind": PlacementDecision::kind(&()),
            "metadata": {"resourceVersion": versions.get(object)},
            "status": {"decisions": decisions},
        });
        let written = api
            .patch_status(object, &params, &Patch::Apply(&body))
            .await
            .map_err(failed(
                placement,
                format!("writing the decisions of {object}"),
            ))?;
        if let Some(version) = written.resource_version() {
            versions.insert(object.clone(), version);
        }
    }
    for object in &writes.deletes {
        let delete = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: versions.get(object).cloned(),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(object, &delete).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(source) => {
                return Err(failed(
                    placement,
                    format!("deleting PlacementDecision {object}"),
                )(source));
            }
        }
    }
    Ok(())
}

/// Publishes the Warning Event of a hold that begins now, saying
/// `message` (queued: a full queue drops it; the status says it too).
pub fn announce_hold(events: &HubEvents, placement: &Placement, message: String) {
    warn!(placement = %placement.name_any(), %message, "every chosen cluster lost at once; decisions held");
    events.publish(
        HubEvent::new(true, "DecisionsHeld", "HoldDecisions", &message),
        &placement.object_ref(&()),
    );
}
