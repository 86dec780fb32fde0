//! The ManifestWork spec one cluster gets from a replica set: the overrides
//! whose cluster selector matches the cluster's labels applied to the
//! template, and the placeholders substituted (semantics' `overrides`).
//! Shared by the controller and `ferry-hub render`.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::ResourceExt;

use ferry_fleet_semantics::overrides::{Override, RenderError, ResourceIdentifier, render};

use crate::placement::compile::compile_selector;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::ManifestWorkSpec;
use ferry_api::placement::ClusterSelector;
use ferry_api::replica_set::{ClusterOverride, ManifestWorkReplicaSetSpec};

/// Why a cluster's work cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderFailure {
    /// An override's cluster selector is invalid.
    #[error("override {name:?}: {reason}")]
    Selector {
        /// The override.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A patch or a placeholder failed.
    #[error("{0}")]
    Render(#[from] RenderError),
    /// The rendered spec is no longer a ManifestWorkSpec.
    #[error("the rendered work is not a ManifestWork spec: {0}")]
    Shape(String),
}

fn semantic(o: &ClusterOverride) -> Override {
    let id = &o.resource_identifier;
    Override {
        name: o.name.clone(),
        resource_identifier: ResourceIdentifier {
            group: id.group.clone(),
            resource: id.resource.clone(),
            kind: id.kind.clone(),
            namespace: id.namespace.clone(),
            name: id.name.clone(),
        },
        json_patch: o
            .json_patch
            .iter()
            .map(|op| serde_json::to_value(op).unwrap_or_default())
            .collect(),
    }
}

/// Each chosen cluster's work spec, or why it cannot be rendered.
pub type Rendered = BTreeMap<String, Result<ManifestWorkSpec, RenderFailure>>;

/// Reconcile phase 2: each `wanted` cluster's own work spec, the template
/// of `spec` with its overrides and placeholders for the cluster's labels
/// (from `clusters`, by name); a failure fails that cluster only.
pub fn render_chosen(
    spec: &ManifestWorkReplicaSetSpec,
    wanted: &BTreeMap<String, String>,
    clusters: &BTreeMap<String, Arc<ManagedCluster>>,
) -> Rendered {
    wanted
        .keys()
        .map(|cluster| {
            let labels = clusters
                .get(cluster)
                .map(|c| c.labels().clone())
                .unwrap_or_default();
            (cluster.clone(), render_for_cluster(spec, cluster, &labels))
        })
        .collect()
}

/// The work spec `cluster` (with `labels`) gets from `spec`; fails naming
/// the override (and operation) or the label placeholder at fault.
pub fn render_for_cluster(
    spec: &ManifestWorkReplicaSetSpec,
    cluster: &str,
    labels: &BTreeMap<String, String>,
) -> Result<ManifestWorkSpec, RenderFailure> {
    let mut chosen = Vec::new();
    for o in &spec.overrides {
        let selector = compile_selector(
            "clusterSelector",
            &ClusterSelector {
                label_selector: Some(o.cluster_selector.clone()),
                claim_selector: None,
            },
        )
        .map_err(|e| RenderFailure::Selector {
            name: o.name.clone(),
            reason: e.to_string(),
        })?;
        if selector.matches(labels, &BTreeMap::new()) {
            chosen.push(semantic(o));
        }
    }
    let template = serde_json::to_value(&spec.manifest_work_template)
        .map_err(|e| RenderFailure::Shape(e.to_string()))?;
    let rendered = render(&template, cluster, labels, &chosen)?;
    let mut work: ManifestWorkSpec =
        serde_json::from_value(rendered).map_err(|e| RenderFailure::Shape(e.to_string()))?;
    // A replica set's work on a cluster is named like the replica set
    // (`deploy`), so the work a dependency replica set puts on this
    // cluster has the dependency's name: the agent keeps the order there.
    work.depends_on.extend(spec.depends_on.iter().cloned());
    Ok(work)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::replica_set::{JsonPatchOperation, OverrideResourceIdentifier};
    use serde_json::json;

    fn spec() -> ManifestWorkReplicaSetSpec {
        serde_json::from_value(json!({
            "manifestWorkTemplate": {"workload": {"manifests": [
                {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "cfg", "namespace": "default"},
                 "data": {"cluster": "${CLUSTER_NAME}"}}
            ]}},
            "overrides": [{
                "name": "eu",
                "clusterSelector": {"matchLabels": {"region": "eu"}},
                "resourceIdentifier": {"kind": "ConfigMap", "namespace": "default", "name": "cfg"},
                "jsonPatch": [{"op": "add", "path": "/data/region", "value": "${CLUSTER_LABEL:region}"}]
            }]
        }))
        .expect("valid")
    }

    fn data(spec: &ManifestWorkSpec) -> serde_json::Value {
        serde_json::to_value(spec).expect("valid")["workload"]["manifests"][0]["data"].clone()
    }

    #[test]
    fn only_clusters_the_selector_matches_get_the_override() {
        let eu = BTreeMap::from([("region".to_string(), "eu".to_string())]);
        let us = BTreeMap::from([("region".to_string(), "us".to_string())]);
        let spec = spec();
        assert_eq!(
            data(&render_for_cluster(&spec, "a", &eu).expect("valid")),
            json!({"cluster": "a", "region": "eu"})
        );
        assert_eq!(
            data(&render_for_cluster(&spec, "b", &us).expect("valid")),
            json!({"cluster": "b"})
        );
    }

    #[test]
    fn the_work_waits_for_the_dependency_replica_sets_works_of_its_cluster() {
        let mut spec = spec();
        spec.manifest_work_template.depends_on =
            vec![serde_json::from_value(json!({"name": "crds"})).expect("valid")];
        spec.depends_on = vec![
            serde_json::from_value(json!({"name": "db", "condition": "Complete"})).expect("valid"),
        ];
        let work = render_for_cluster(&spec, "a", &BTreeMap::new()).expect("valid");
        let names: Vec<(&str, &str)> = work
            .depends_on
            .iter()
            .map(|d| (d.name.as_str(), d.condition_type()))
            .collect();
        assert_eq!(names, [("crds", "Available"), ("db", "Complete")]);
    }

    #[test]
    fn a_bad_operation_names_the_override() {
        let mut spec = spec();
        spec.overrides[0].json_patch = vec![JsonPatchOperation {
            op: "remove".into(),
            path: "/data/missing".into(),
            ..JsonPatchOperation::default()
        }];
        spec.overrides[0].resource_identifier = OverrideResourceIdentifier {
            kind: "ConfigMap".into(),
            namespace: "default".into(),
            name: "cfg".into(),
            ..OverrideResourceIdentifier::default()
        };
        let eu = BTreeMap::from([("region".to_string(), "eu".to_string())]);
        let err = render_for_cluster(&spec, "a", &eu).expect_err("fails");
        assert!(
            err.to_string()
                .starts_with("override \"eu\": jsonPatch[0] (remove /data/missing) failed"),
            "{err}"
        );
    }
}
