//! A Placement's decisions are published in SIG Multicluster's
//! vendor-neutral shape (KEP-5313, `multicluster.x-k8s.io/v1alpha1`
//! PlacementDecision, issue 33), read here as a consumer of the cluster
//! inventory reads them: the CRDs installed from the upstream Go module
//! (not ferry's copy) after the hub started, slices found by the upstream
//! `decision-key` label and read untyped; each names ClusterProfiles that
//! exist. The slices follow the placement (fewer clusters, then none when
//! the placement is deleted), a slice deleted or edited by hand is put
//! back, and the hub says it publishes.

use std::collections::BTreeSet;
use std::time::Duration;

use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::placement::Placement;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::hub_metric;
use ferry_e2e::helpers::cluster_inventory::{
    PLACEMENT_DECISION_CRD, cluster_profiles, install_cluster_profile_crd, install_module_crd,
    inventory_placement_decisions,
};
use ferry_e2e::helpers::namespaces::create_namespace;
use ferry_e2e::helpers::placement_helpers::create_placement;
use ferry_e2e::helpers::wait::wait_until;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;

/// Where the hub publishes ClusterProfiles: the slices refer there.
const INVENTORY: &str = "ferry";
/// The placement's namespace: the slices are written beside it.
const NAMESPACE: &str = "default";
const PLACEMENT: &str = "web";
/// Long enough for a CRD check (every 10 s) or a sweep (every 30 s) on a
/// loaded machine.
const TIMEOUT: Duration = Duration::from_secs(90);

/// (namespace, name) of a ClusterProfile a slice refers to.
type ProfileRef = (String, String);
/// A slice as a consumer reads it: its name and its profile references.
type Slice = (String, Vec<ProfileRef>);

/// Every slice of the placement's decision, as a consumer finds it: by the
/// upstream decision-key label, ordered by the decision-index label.
async fn published(slices: &Api<DynamicObject>) -> Vec<Slice> {
    let mut found: Vec<(u64, Slice)> = slices
        .list(
            &ListParams::default()
                .labels(&format!("multicluster.x-k8s.io/decision-key={PLACEMENT}")),
        )
        .await
        .expect("list PlacementDecisions")
        .items
        .into_iter()
        .map(|s| {
            let index = s
                .labels()
                .get("multicluster.x-k8s.io/decision-index")
                .and_then(|i| i.parse().ok())
                .unwrap_or(u64::MAX);
            let refs = s.data["decisions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| {
                    let r = &d["clusterProfileRef"];
                    (
                        r["namespace"].as_str().unwrap_or_default().to_string(),
                        r["name"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect();
            (index, (s.name_any(), refs))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, slice)| slice).collect()
}

/// Polls what a consumer reads until `wanted` holds (the consumer's view is
/// a list across slices, so there is no single object to watch).
async fn wait_published(
    slices: &Api<DynamicObject>,
    what: &str,
    wanted: impl Fn(&[Slice]) -> bool,
) -> Vec<Slice> {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let now = published(slices).await;
        if wanted(&now) {
            return now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {TIMEOUT:?}; published: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The profiles the slices refer to, as a set of (namespace, name).
fn referenced(slices: &[Slice]) -> BTreeSet<ProfileRef> {
    slices.iter().flat_map(|(_, r)| r.iter().cloned()).collect()
}

fn profile_ref(cluster: &str) -> ProfileRef {
    (INVENTORY.to_string(), cluster.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placements_decisions_are_published_in_the_vendor_neutral_shape_and_follow_it() {
    let mut options = FleetOptions::with_spokes(&["cluster-a", "cluster-b"]);
    options.cluster_profile_namespace = Some(INVENTORY.into());
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let client = fleet.hub_client.clone();
    let clusters: Api<ManagedCluster> = Api::all(client.clone());
    for name in ["cluster-a", "cluster-b"] {
        wait_until(&clusters, name, "connected", TIMEOUT, |c| {
            c.status.as_ref().is_some_and(|s| s.connected)
        })
        .await
        .expect("the hub serves its agents without the inventory CRDs");
    }
    create_placement(&client, NAMESPACE, PLACEMENT, json!({})).await;
    let placements: Api<Placement> = Api::namespaced(client.clone(), NAMESPACE);
    wait_until(&placements, PLACEMENT, "two clusters", TIMEOUT, |p| {
        p.status
            .as_ref()
            .is_some_and(|s| s.number_of_selected_clusters == 2)
    })
    .await
    .expect("the placement chooses both clusters");
    assert_eq!(
        hub_metric(
            fleet.hub_probes_addr,
            "ferry_hub_inventory_decisions_publishing"
        )
        .await
        .expect("scrape the hub"),
        0.0,
        "nothing is published while the CRD is not served"
    );

    // The upstream CRDs and the profiles' namespace, after the hub started:
    // the hub finds them at run time.
    install_cluster_profile_crd(&client)
        .await
        .expect("install the ClusterProfile CRD");
    install_module_crd(&client, PLACEMENT_DECISION_CRD)
        .await
        .expect("install the PlacementDecision CRD");
    create_namespace(&client, INVENTORY).await;
    let slices = inventory_placement_decisions(&client, NAMESPACE);
    let both: BTreeSet<_> = ["cluster-a", "cluster-b"].map(profile_ref).into();
    let now = wait_published(&slices, "both clusters published", |s| {
        referenced(s) == both
    })
    .await;
    assert_eq!(now.len(), 1, "two clusters fit in one slice: {now:?}");
    // Every reference resolves to a ClusterProfile, as a consumer follows it.
    let profiles = cluster_profiles(&client, INVENTORY);
    for (namespace, name) in &both {
        assert_eq!(namespace, INVENTORY);
        wait_until(&profiles, name, "published", TIMEOUT, |_| true)
            .await
            .unwrap_or_else(|e| panic!("the profile {name} a slice refers to: {e}"));
    }
    let (slice, _) = &now[0];
    let object = slices.get(slice).await.expect("read the slice");
    assert_eq!(object.data["schedulerName"], "ferry");
    assert_eq!(
        object.labels().get("multicluster.x-k8s.io/decision-index"),
        Some(&"0".to_string())
    );
    assert!(
        object
            .owner_references()
            .iter()
            .any(|o| o.kind == "Placement" && o.name == PLACEMENT && o.controller == Some(true)),
        "the Placement owns its slices: {:?}",
        object.owner_references()
    );
    assert_eq!(
        hub_metric(
            fleet.hub_probes_addr,
            "ferry_hub_inventory_decisions_publishing"
        )
        .await
        .expect("scrape the hub"),
        1.0
    );

    // Edited by hand (as an administrator: tenants are refused, see
    // hub_owned_writes::): put back.
    slices
        .patch(
            slice,
            &PatchParams::default(),
            &Patch::Merge(json!({"decisions": []})),
        )
        .await
        .expect("an administrator edits the slice");
    wait_published(&slices, "the edit undone", |s| referenced(s) == both).await;
    // Deleted by hand: written again.
    slices
        .delete(slice, &DeleteParams::default())
        .await
        .expect("an administrator deletes the slice");
    wait_published(&slices, "the deleted slice written again", |s| {
        referenced(s) == both
    })
    .await;

    // The placement narrows to one cluster: the slice follows.
    placements
        .patch(
            PLACEMENT,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"numberOfClusters": 1}})),
        )
        .await
        .expect("narrow the placement");
    let one = wait_published(&slices, "one cluster published", |s| {
        let r = referenced(s);
        r.len() == 1 && r.is_subset(&both)
    })
    .await;
    let chosen: Vec<String> = placements
        .get(PLACEMENT)
        .await
        .expect("read the placement")
        .status
        .iter()
        .flat_map(|s| s.decision_groups.iter())
        .flat_map(|g| g.decisions.clone())
        .collect();
    assert_eq!(
        one.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        chosen,
        "one slice per decision object of the placement, by the same name"
    );

    // The placement deleted: its slices go (the garbage collector does not
    // run on this control plane; the hub's sweep does it).
    placements
        .delete(PLACEMENT, &DeleteParams::default())
        .await
        .expect("delete the placement");
    wait_published(&slices, "no slice left", <[_]>::is_empty).await;
}
