//! The CustomResourceDefinitions of ferry's resources, rendered from the Rust
//! types. The hub installs them and checks the copies under `deploy/crds/`
//! against them (`ferry_hub::crds`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::cluster_set::{ManagedClusterSet, ManagedClusterSetBinding};
use crate::managed_cluster::ManagedCluster;
use crate::manifest_work::ManifestWork;
use crate::placement::{Placement, PlacementDecision};
use crate::replica_set::ManifestWorkReplicaSet;
use crate::rollout_approval::RolloutApproval;

/// Every CRD the hub serves, with the file name it is checked in under.
pub fn hub_crds() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        ("manifestworks.yaml", ManifestWork::crd()),
        ("managedclusters.yaml", ManagedCluster::crd()),
        ("placements.yaml", Placement::crd()),
        ("placementdecisions.yaml", PlacementDecision::crd()),
        (
            "manifestworkreplicasets.yaml",
            ManifestWorkReplicaSet::crd(),
        ),
        ("managedclustersets.yaml", ManagedClusterSet::crd()),
        (
            "managedclustersetbindings.yaml",
            ManagedClusterSetBinding::crd(),
        ),
        ("rolloutapprovals.yaml", RolloutApproval::crd()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_keep_unknown_fields_as_embedded_resources() {
        let crd = ManifestWork::crd();
        let schema = serde_json::to_value(&crd.spec.versions[0].schema).expect("json");
        let item = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["workload"]["properties"]
            ["manifests"]["items"];
        assert_eq!(item["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(item["x-kubernetes-embedded-resource"], true);
    }
}
