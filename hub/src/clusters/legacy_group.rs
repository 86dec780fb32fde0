//! Carrying ManagedClusters over from the group earlier hubs served them
//! in (`work.ferry.dev`) to `cluster.ferry.dev`, before anything reads
//! them: every legacy cluster without a namesake in the new group is
//! created there with its labels, annotations and spec (acceptance,
//! taints), then given its status (claims and the deletion brake's hold
//! included). A
//! cluster already in the new group is never touched, so running it again
//! (every start, every replica) changes nothing, and the legacy objects are
//! left for the operator to delete with their CRD.
//!
//! Agents keep their identity: a cluster's name, acceptance and labels are
//! what the hub checks on connect, and they arrive unchanged. The carry
//! fails as a whole (the hub does not start) rather than leave some
//! clusters behind: placements would read the ones missing as gone.

use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tracing::info;

use ferry_api::managed_cluster::{LEGACY_GROUP, ManagedCluster};

/// Why the legacy clusters could not be carried over.
#[derive(Debug, thiserror::Error)]
pub enum LegacyClustersError {
    /// Whether the legacy kind is served could not be learnt.
    #[error("asking the API server whether it serves managedclusters.{LEGACY_GROUP}: {0}")]
    Discovery(#[source] kube::Error),
    /// The legacy clusters could not be listed (other than their CRD not
    /// being served, which means there is nothing to carry).
    #[error("listing managedclusters.{LEGACY_GROUP} to carry them to cluster.ferry.dev: {0}")]
    List(#[source] kube::Error),
    /// A legacy cluster is not one this hub can read.
    #[error("ManagedCluster {name} in {LEGACY_GROUP} cannot be carried over: {reason}")]
    Unreadable {
        /// The cluster.
        name: String,
        /// What did not fit.
        reason: String,
    },
    /// The API server refused a write of the carried cluster.
    #[error("carrying ManagedCluster {name} to cluster.ferry.dev: {source}")]
    Write {
        /// The cluster.
        name: String,
        /// The refusal.
        #[source]
        source: kube::Error,
    },
}

/// The legacy ManagedCluster resource (`managedclusters.work.ferry.dev`).
pub fn legacy_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(LEGACY_GROUP, "v1alpha1", "ManagedCluster"),
        "managedclusters",
    )
}

/// What of a legacy cluster goes to the new group: the object to create
/// (name, labels, annotations, spec) and its status, if it has one. Fails
/// when the object is not a ManagedCluster this hub can read.
pub fn carried(legacy: &DynamicObject) -> Result<(ManagedCluster, Option<Value>), String> {
    let name = legacy.name_any();
    if name.is_empty() {
        return Err("it has no name".into());
    }
    let spec = legacy
        .data
        .get("spec")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let spec = serde_json::from_value(spec).map_err(|e| format!("its spec: {e}"))?;
    let mut cluster = ManagedCluster::new(&name, spec);
    cluster.metadata.labels = legacy.metadata.labels.clone();
    cluster.metadata.annotations = legacy.metadata.annotations.clone();
    let status = legacy.data.get("status").filter(|s| !s.is_null()).cloned();
    if let Some(status) = &status {
        serde_json::from_value::<ferry_api::managed_cluster::ManagedClusterStatus>(status.clone())
            .map_err(|e| format!("its status: {e}"))?;
    }
    Ok((cluster, status))
}

/// Carries every legacy ManagedCluster without a namesake in
/// `cluster.ferry.dev` over; returns how many were carried. Nothing to do
/// (one discovery request, no error) when the legacy kind is not served. Fails on the first
/// cluster it cannot read or write, having carried those before it.
pub async fn carry_over_legacy_clusters(client: &Client) -> Result<usize, LegacyClustersError> {
    // Discovery first (every user may read it): a hub whose API server
    // never served the legacy kind asks nothing more, and needs no right
    // on it.
    let served = match client
        .list_api_group_resources(&format!("{LEGACY_GROUP}/v1alpha1"))
        .await
    {
        Ok(list) => list.resources.iter().any(|r| r.name == "managedclusters"),
        Err(kube::Error::Api(status)) if status.code == 404 => false,
        Err(error) => return Err(LegacyClustersError::Discovery(error)),
    };
    if !served {
        return Ok(0);
    }
    let legacy: Api<DynamicObject> = Api::all_with(client.clone(), &legacy_resource());
    let listed = match legacy.list(&ListParams::default()).await {
        Ok(listed) => listed.items,
        // Its CRD went between the two requests.
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(0),
        Err(error) => return Err(LegacyClustersError::List(error)),
    };
    let current: Api<ManagedCluster> = Api::all(client.clone());
    let mut moved = 0;
    for object in &listed {
        let name = object.name_any();
        let (cluster, status) =
            carried(object).map_err(|reason| LegacyClustersError::Unreadable {
                name: name.clone(),
                reason,
            })?;
        let write = |source| LegacyClustersError::Write {
            name: name.clone(),
            source,
        };
        match current.create(&PostParams::default(), &cluster).await {
            Ok(_) => {}
            // Already carried (by another replica, or a start before).
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(error) => return Err(write(error)),
        }
        if let Some(status) = status {
            // A merge patch: the status is then the hub's as any status it
            // wrote, whichever way it writes it next.
            current
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": status})),
                )
                .await
                .map_err(write)?;
        }
        moved += 1;
    }
    if moved > 0 {
        info!(
            carried = moved,
            legacy = listed.len(),
            "ManagedClusters carried over from {LEGACY_GROUP} to cluster.ferry.dev; delete the old CRD (managedclusters.{LEGACY_GROUP}) once every hub replica runs this version"
        );
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legacy(value: Value) -> DynamicObject {
        serde_json::from_value(value).expect("object")
    }

    #[test]
    fn a_legacy_cluster_is_carried_with_its_labels_spec_and_status_and_nothing_of_its_old_identity()
    {
        let object = legacy(json!({
            "apiVersion": "work.ferry.dev/v1alpha1",
            "kind": "ManagedCluster",
            "metadata": {
                "name": "edge-1",
                "uid": "0d4c",
                "resourceVersion": "812",
                "creationTimestamp": "2026-11-01T00:00:00Z",
                "labels": {"region": "eu"},
                "annotations": {"note": "kept"},
                "managedFields": [{"manager": "ferry-hub"}],
            },
            "spec": {
                "hubAcceptsClient": false,
                "taints": [{"key": "k", "effect": "NoSelect"}],
            },
            "status": {"connected": true, "agentVersion": "0.1.0"},
        }));
        let (cluster, status) = carried(&object).expect("carried");
        assert_eq!(cluster.name_any(), "edge-1");
        assert_eq!(
            cluster.labels().get("region").map(String::as_str),
            Some("eu")
        );
        assert_eq!(
            cluster.annotations().get("note").map(String::as_str),
            Some("kept")
        );
        assert!(!cluster.spec.hub_accepts_client);
        assert_eq!(cluster.spec.taints.len(), 1);
        assert_eq!(cluster.metadata.uid, None);
        assert_eq!(cluster.metadata.resource_version, None);
        assert_eq!(cluster.metadata.managed_fields, None);
        let body = serde_json::to_value(&cluster).expect("serialises");
        assert_eq!(body["apiVersion"], "cluster.ferry.dev/v1alpha1");
        assert_eq!(status.expect("status")["agentVersion"], "0.1.0");
    }

    #[test]
    fn a_cluster_without_spec_is_accepted_as_before_and_a_bad_one_is_named() {
        let (cluster, status) =
            carried(&legacy(json!({"metadata": {"name": "old"}}))).expect("carried");
        assert!(cluster.spec.hub_accepts_client);
        assert_eq!(status, None);
        let bad = carried(&legacy(
            json!({"metadata": {"name": "x"}, "spec": {"taints": "none"}}),
        ))
        .expect_err("refused");
        assert!(bad.starts_with("its spec: "), "{bad}");
    }
}
