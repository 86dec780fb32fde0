//! `ferry-hub render`: the ManifestWork each chosen cluster of a replica set
//! would get (overrides applied), as YAML, without writing anything. The
//! clusters come from the Placements' decisions and their labels from the
//! ManagedClusters, or, offline, from the command line.

use std::collections::BTreeMap;

use kube::api::{Api, ListParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use super::render::{RenderFailure, render_for_cluster};
use super::work_writes::work_labels;
use ferry_api::contract::PLACEMENT_LABEL;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::placement::PlacementDecision;
use ferry_api::replica_set::ManifestWorkReplicaSet;

/// A cluster the replica set would give a work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChosenCluster {
    /// Its name (and the namespace of its work).
    pub name: String,
    /// The placement that chose it.
    pub placement: String,
    /// Its ManagedCluster labels.
    pub labels: BTreeMap<String, String>,
}

/// Why a dry run could not read what it needs.
#[derive(Debug, thiserror::Error)]
pub enum DryRunError {
    /// A read from the hub failed.
    #[error("reading {what}: {source}")]
    Api {
        /// What was read.
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A rendered work could not be written as YAML.
    #[error("writing the work of cluster {cluster} as YAML: {source}")]
    Yaml {
        /// The cluster.
        cluster: String,
        /// The YAML error.
        #[source]
        source: serde_yaml::Error,
    },
}

/// The clusters the replica set's placements chose (the first placement in
/// spec order wins a cluster, as in the controller), with their labels
/// read from the hub.
pub async fn chosen_clusters(
    client: &Client,
    rs: &ManifestWorkReplicaSet,
) -> Result<Vec<ChosenCluster>, DryRunError> {
    let namespace = rs.namespace().unwrap_or_default();
    let decisions: Api<PlacementDecision> = Api::namespaced(client.clone(), &namespace);
    let managed: Api<ManagedCluster> = Api::all(client.clone());
    let mut chosen: BTreeMap<String, String> = BTreeMap::new();
    for reference in &rs.spec.placement_refs {
        let listed = decisions
            .list(&ListParams::default().labels(&format!("{PLACEMENT_LABEL}={}", reference.name)))
            .await
            .map_err(|source| DryRunError::Api {
                what: format!("the decisions of placement {namespace}/{}", reference.name),
                source,
            })?;
        for d in listed.items.iter().filter_map(|d| d.status.as_ref()) {
            for decision in &d.decisions {
                chosen
                    .entry(decision.cluster_name.clone())
                    .or_insert_with(|| reference.name.clone());
            }
        }
    }
    let mut out = Vec::with_capacity(chosen.len());
    for (name, placement) in chosen {
        let labels = managed
            .get_opt(&name)
            .await
            .map_err(|source| DryRunError::Api {
                what: format!("ManagedCluster {name}"),
                source,
            })?
            .map(|c| c.labels().clone())
            .unwrap_or_default();
        out.push(ChosenCluster {
            name,
            placement,
            labels,
        });
    }
    Ok(out)
}

/// The ManifestWork `cluster` would get, or why it would get none.
pub fn work_for(
    rs: &ManifestWorkReplicaSet,
    cluster: &ChosenCluster,
) -> Result<serde_json::Value, RenderFailure> {
    let spec = render_for_cluster(&rs.spec, &cluster.name, &cluster.labels)?;
    Ok(json!({
        "apiVersion": ManifestWork::api_version(&()),
        "kind": ManifestWork::kind(&()),
        "metadata": {
            "name": rs.name_any(),
            "namespace": cluster.name,
            "labels": work_labels(rs, &cluster.placement),
        },
        "spec": spec,
    }))
}

/// Every cluster's work as a YAML stream; a cluster whose rendering fails
/// appears as a comment naming the failure. Returns the YAML and the
/// number of failed clusters.
pub fn render_yaml(
    rs: &ManifestWorkReplicaSet,
    clusters: &[ChosenCluster],
) -> Result<(String, usize), DryRunError> {
    let mut out = String::new();
    let mut failed = 0;
    for cluster in clusters {
        match work_for(rs, cluster) {
            Ok(work) => {
                let yaml = serde_yaml::to_string(&work).map_err(|source| DryRunError::Yaml {
                    cluster: cluster.name.clone(),
                    source,
                })?;
                out.push_str("---\n");
                out.push_str(&yaml);
            }
            Err(error) => {
                failed += 1;
                out.push_str(&format!(
                    "---\n# cluster {}: no work: {}\n",
                    cluster.name,
                    error.to_string().replace('\n', " ")
                ));
            }
        }
    }
    Ok((out, failed))
}
