//! The fleet-layer defects of issue 23, each proved on real control planes
//! with real agents: a cluster moving between decision groups keeps its
//! work (no delete reaches the spoke); a failed mandatory decision group
//! holds the rollout and says so; a work the hub API server refuses fails
//! only its cluster and the status names it; a missing Placement deletes
//! nothing and says so in `PlacementVerified`; generated works carry the
//! replica set's labels.

use std::collections::BTreeMap;

use ferry_api::contract::{
    DECISION_GROUP_NAME_LABEL, PLACEMENT_LABEL, PLACEMENT_NAME_LABEL, REPLICA_SET_LABEL,
};
use ferry_api::manifest_work::{Condition, ManifestWork};
use ferry_api::placement::{Placement, PlacementDecision};
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::audit::list_writes;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::placement_helpers::create_placement;
use ferry_e2e::helpers::placement_helpers::label_cluster;
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map, wait_applied};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const NAMESPACE: &str = "default";

fn template(name: &str, namespace: &str, version: &str) -> Value {
    json!({"workload": {"manifests": [config_map(namespace, name, json!({"version": version}))]}})
}

async fn create_replica_set(hub: &Client, name: &str, labels: Value, spec: Value) {
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": spec,
    }))
    .expect("replica set");
    Api::<ManifestWorkReplicaSet>::namespaced(hub.clone(), NAMESPACE)
        .create(&PostParams::default(), &rs)
        .await
        .expect("create ManifestWorkReplicaSet");
}

/// Merges `spec` into the replica set's spec; returns its new generation.
async fn patch_spec(hub: &Client, name: &str, spec: Value) -> i64 {
    Api::<ManifestWorkReplicaSet>::namespaced(hub.clone(), NAMESPACE)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": spec})),
        )
        .await
        .expect("patch replica set")
        .metadata
        .generation
        .unwrap_or(0)
}

fn condition<'a>(rs: &'a ManifestWorkReplicaSet, type_: &str) -> Option<&'a Condition> {
    rs.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// Waits until the replica set's `type_` condition, written for
/// `generation`, satisfies `cond`; returns that condition.
async fn wait_condition(
    hub: &Client,
    name: &str,
    type_: &'static str,
    generation: i64,
    cond: impl Fn(&Condition) -> bool,
) -> Condition {
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), NAMESPACE);
    let rs = wait_until(&sets, name, type_, APPLY_TIMEOUT * 2, |rs| {
        condition(rs, type_).is_some_and(|c| c.observed_generation == generation && cond(c))
    })
    .await
    .unwrap_or_else(|e| panic!("{type_} of {name}: {e}"));
    condition(&rs, type_).expect("condition").clone()
}

fn version(cm: &ConfigMap) -> Option<&str> {
    cm.data.as_ref()?.get("version").map(String::as_str)
}

async fn wait_version(fleet: &Fleet, spoke: &str, name: &str, wanted: &'static str) -> ConfigMap {
    let on_spoke: Api<ConfigMap> = Api::namespaced(fleet.spoke(spoke).client.clone(), NAMESPACE);
    wait_until(&on_spoke, name, wanted, APPLY_TIMEOUT, |cm| {
        version(cm) == Some(wanted)
    })
    .await
    .unwrap_or_else(|e| panic!("{spoke}/{name} at {wanted}: {e}"))
}

/// The spoke's ConfigMap `name` and the hub's work `name` for it, waited
/// for at `wanted`.
async fn uids(fleet: &Fleet, spoke: &str, name: &str, wanted: &'static str) -> (String, String) {
    let cm = wait_version(fleet, spoke, name, wanted).await;
    let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), spoke);
    let work = wait_applied(&works, name).await.expect("work applied");
    assert!(work.metadata.deletion_timestamp.is_none());
    (
        work.uid().expect("work uid"),
        cm.uid().expect("configmap uid"),
    )
}

/// The group each cluster is in, by the placement's PlacementDecisions.
async fn groups_of(hub: &Client, placement: &str) -> BTreeMap<String, String> {
    let decisions: Api<PlacementDecision> = Api::namespaced(hub.clone(), NAMESPACE);
    let list = decisions
        .list(&ListParams::default().labels(&format!("{PLACEMENT_LABEL}={placement}")))
        .await
        .expect("list PlacementDecisions");
    let mut out = BTreeMap::new();
    for d in list.items {
        let group = d.labels()[DECISION_GROUP_NAME_LABEL].clone();
        for c in d.status.iter().flat_map(|s| s.decisions.iter()) {
            out.insert(c.cluster_name.clone(), group.clone());
        }
    }
    out
}

/// Waits until the placement has chosen `clusters` clusters.
async fn wait_selected(hub: &Client, placement: &str, clusters: i32) {
    let placements: Api<Placement> = Api::namespaced(hub.clone(), NAMESPACE);
    wait_until(
        &placements,
        placement,
        "every spoke chosen",
        APPLY_TIMEOUT,
        |p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.number_of_selected_clusters == clusters)
        },
    )
    .await
    .expect("every spoke is chosen");
}

fn canary_placement() -> Value {
    json!({"decisionStrategy": {"groupStrategy": {"decisionGroups": [
        {"groupName": "canary", "groupClusterSelector": {"labelSelector": {"matchLabels": {"ring": "canary"}}}}
    ]}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_moving_between_decision_groups_keeps_its_work_and_no_delete_reaches_the_spoke() {
    let spokes = ["spoke-a", "spoke-b"];
    let mut options = FleetOptions::with_spokes(&spokes);
    options.audit_spokes = true;
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let hub = fleet.hub_client.clone();
    label_cluster(&hub, "spoke-a", json!({"ring": "canary"})).await;
    label_cluster(&hub, "spoke-b", json!({"ring": "main"})).await;
    create_placement(&hub, NAMESPACE, "staged", canary_placement()).await;
    wait_selected(&hub, "staged", 2).await;
    create_replica_set(
        &hub,
        "steady",
        json!({}),
        json!({
            "manifestWorkTemplate": template("steady", NAMESPACE, "v1"),
            "placementRefs": [{"name": "staged", "rolloutStrategy": {"type": "All"}}],
        }),
    )
    .await;
    let mut before = BTreeMap::new();
    for spoke in spokes {
        before.insert(spoke, uids(&fleet, spoke, "steady", "v1").await);
    }
    let groups = groups_of(&hub, "staged").await;
    assert_eq!(groups["spoke-a"], "canary", "{groups:?}");
    assert_eq!(groups["spoke-b"], "", "{groups:?}");

    // The two clusters swap groups: the first decision object goes from
    // spoke-a to spoke-b and the second the other way.
    label_cluster(&hub, "spoke-a", json!({"ring": "main"})).await;
    label_cluster(&hub, "spoke-b", json!({"ring": "canary"})).await;
    let deadline = tokio::time::Instant::now() + APPLY_TIMEOUT;
    loop {
        let groups = groups_of(&hub, "staged").await;
        if groups.get("spoke-b").map(String::as_str) == Some("canary")
            && groups.get("spoke-a").map(String::as_str) == Some("")
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the clusters never swapped groups: {groups:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // A new template after the swap: once both spokes hold it, the replica
    // set has acted on the swapped decisions.
    patch_spec(
        &hub,
        "steady",
        json!({"manifestWorkTemplate": template("steady", NAMESPACE, "v2")}),
    )
    .await;
    for spoke in spokes {
        let after = uids(&fleet, spoke, "steady", "v2").await;
        assert_eq!(
            before[spoke], after,
            "{spoke}: the work (hub UID, spoke UID) was deleted and made again"
        );
        let audit = fleet.spoke(spoke).control_plane.info.audit_log.clone();
        let deletes: Vec<String> = list_writes(&audit)
            .into_iter()
            .filter(|w| w.starts_with("\"delete\"") && w.contains("configmaps/steady"))
            .collect();
        assert!(deletes.is_empty(), "{spoke}: {deletes:?}");
    }
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_mandatory_group_holds_the_rollout_whatever_max_failures_allows() {
    let spokes = ["spoke-a", "spoke-b"];
    let fleet = Fleet::start(FleetOptions::with_spokes(&spokes))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    label_cluster(&hub, "spoke-a", json!({"ring": "canary"})).await;
    // The template's namespace exists on spoke-b only: the canary cannot
    // apply it and fails at its progressDeadline.
    Api::<Namespace>::all(fleet.spoke("spoke-b").client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "held"}})).expect("namespace"),
        )
        .await
        .expect("create namespace");
    create_placement(&hub, NAMESPACE, "staged", canary_placement()).await;
    wait_selected(&hub, "staged", 2).await;
    create_replica_set(
        &hub,
        "guarded",
        json!({}),
        json!({
            "manifestWorkTemplate": template("guarded", "held", "v1"),
            "placementRefs": [{"name": "staged", "rolloutStrategy": {"type": "Progressive",
                "progressive": {"mandatoryDecisionGroups": [{"groupName": "canary"}],
                    "progressDeadline": "3s", "maxFailures": "100%"}}}],
        }),
    )
    .await;
    let held = wait_condition(&hub, "guarded", "PlacementRolledOut", 1, |c| {
        c.status == "False" && c.reason == "MandatoryGroupFailed"
    })
    .await;
    assert!(
        held.message.contains("canary") && held.message.contains("spoke-a"),
        "{}",
        held.message
    );
    // The status is written after the writes of the same reconcile, which
    // started nobody outside the mandatory group.
    let works_a: Api<ManifestWork> = Api::namespaced(hub.clone(), "spoke-a");
    assert!(works_a.get_opt("guarded").await.expect("read").is_some());
    let works_b: Api<ManifestWork> = Api::namespaced(hub.clone(), "spoke-b");
    assert!(
        works_b.get_opt("guarded").await.expect("read").is_none(),
        "spoke-b got the template past a failed mandatory group"
    );
    // The condition is steady: written again, it still holds the rollout.
    let generation = patch_spec(
        &hub,
        "guarded",
        json!({"manifestWorkTemplate": template("guarded", "held", "v2")}),
    )
    .await;
    wait_condition(&hub, "guarded", "PlacementRolledOut", generation, |c| {
        c.reason == "MandatoryGroupFailed"
    })
    .await;
    assert!(works_b.get_opt("guarded").await.expect("read").is_none());
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_the_hub_refuses_fails_only_its_cluster_and_the_status_names_it() {
    let spokes = ["spoke-a", "spoke-b"];
    let fleet = Fleet::start(FleetOptions::with_spokes(&spokes))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    label_cluster(&hub, "spoke-b", json!({"broken": "yes"})).await;
    create_placement(&hub, NAMESPACE, "both", json!({})).await;
    wait_selected(&hub, "both", 2).await;
    create_replica_set(
        &hub,
        "refused",
        json!({}),
        json!({
            "manifestWorkTemplate": template("refused", NAMESPACE, "v1"),
            "placementRefs": [{"name": "both", "rolloutStrategy": {"type": "All"}}],
        }),
    )
    .await;
    wait_condition(&hub, "refused", "PlacementRolledOut", 1, |c| {
        c.reason == "Complete"
    })
    .await;
    // v2, and an override that leaves spoke-b's manifest without a name:
    // the hub API server refuses that work.
    let generation = patch_spec(
        &hub,
        "refused",
        json!({
            "manifestWorkTemplate": template("refused", NAMESPACE, "v2"),
            "overrides": [{"name": "nameless", "clusterSelector": {"matchLabels": {"broken": "yes"}},
                "resourceIdentifier": {"kind": "ConfigMap", "namespace": NAMESPACE, "name": "refused"},
                "jsonPatch": [{"op": "remove", "path": "/metadata/name"}]}],
        }),
    )
    .await;
    let on_a: Api<ConfigMap> = Api::namespaced(fleet.spoke("spoke-a").client.clone(), NAMESPACE);
    if wait_until(&on_a, "refused", "v2", APPLY_TIMEOUT, |cm| {
        version(cm) == Some("v2")
    })
    .await
    .is_err()
    {
        let rs = Api::<ManifestWorkReplicaSet>::namespaced(hub.clone(), NAMESPACE)
            .get("refused")
            .await
            .expect("replica set");
        let work = Api::<ManifestWork>::namespaced(hub.clone(), "spoke-a")
            .get_opt("refused")
            .await
            .expect("work");
        panic!(
            "spoke-a never got v2; replica set status {:?}; its work {:?}",
            rs.status, work
        );
    }
    let rolled = wait_condition(&hub, "refused", "PlacementRolledOut", generation, |c| {
        c.reason == "Failed" && c.message.contains("refused")
    })
    .await;
    assert!(
        rolled
            .message
            .contains("cluster spoke-b: the hub API server refused its work")
            && rolled.message.contains("1 clusters failed (spoke-b)")
            && !rolled.message.contains("spoke-a"),
        "{}",
        rolled.message
    );
    // spoke-b keeps the last work it was given.
    let on_b: Api<ConfigMap> = Api::namespaced(fleet.spoke("spoke-b").client.clone(), NAMESPACE);
    let Some(cm) = on_b.get_opt("refused").await.expect("read spoke-b") else {
        let works: Vec<_> = futures::future::join_all(spokes.iter().map(|s| {
            let api: Api<ManifestWork> = Api::namespaced(hub.clone(), s);
            async move { api.get_opt("refused").await }
        }))
        .await;
        let rs = Api::<ManifestWorkReplicaSet>::namespaced(hub.clone(), NAMESPACE)
            .get("refused")
            .await
            .expect("replica set");
        panic!(
            "spoke-b lost its object; works {works:#?}; replica set status {:#?}",
            rs.status
        );
    };
    assert_eq!(version(&cm), Some("v1"));
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), NAMESPACE);
    let rs = sets.get("refused").await.expect("replica set");
    assert_eq!(rs.status.expect("status").summary.updated, 1);
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_placement_deletes_nothing_says_so_and_reconciliation_resumes_when_it_is_back() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["spoke-a"]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    create_placement(&hub, NAMESPACE, "everywhere", json!({})).await;
    create_replica_set(
        &hub,
        "kept",
        json!({}),
        json!({
            "manifestWorkTemplate": template("kept", NAMESPACE, "v1"),
            "placementRefs": [{"name": "everywhere", "rolloutStrategy": {"type": "All"}}],
        }),
    )
    .await;
    let before = uids(&fleet, "spoke-a", "kept", "v1").await;

    let placements: Api<Placement> = Api::namespaced(hub.clone(), NAMESPACE);
    placements
        .delete("everywhere", &DeleteParams::default())
        .await
        .expect("delete placement");
    wait_condition(&hub, "kept", "PlacementVerified", 1, |c| {
        c.status == "False" && c.reason == "PlacementDecisionNotFound"
    })
    .await;
    // Its decisions go too (owner references), the signal this waits for.
    let decisions: Api<PlacementDecision> = Api::namespaced(hub.clone(), NAMESPACE);
    let deadline = tokio::time::Instant::now() + APPLY_TIMEOUT;
    while !decisions
        .list(&ListParams::default().labels(&format!("{PLACEMENT_LABEL}=everywhere")))
        .await
        .expect("list decisions")
        .items
        .is_empty()
    {
        assert!(tokio::time::Instant::now() < deadline, "the decisions stay");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // A new generation, reconciled with the placement and its decisions
    // gone: the condition says why, and nothing was written or deleted.
    let generation = patch_spec(
        &hub,
        "kept",
        json!({"manifestWorkTemplate": template("kept", NAMESPACE, "v2")}),
    )
    .await;
    let verified = wait_condition(&hub, "kept", "PlacementVerified", generation, |c| {
        c.status == "False"
    })
    .await;
    assert_eq!(verified.reason, "PlacementDecisionNotFound");
    assert!(
        verified.message.contains("everywhere") && verified.message.contains("not found"),
        "{}",
        verified.message
    );
    assert_eq!(uids(&fleet, "spoke-a", "kept", "v1").await, before);

    // The placement comes back: the rollout resumes on the same work.
    create_placement(&hub, NAMESPACE, "everywhere", json!({})).await;
    assert_eq!(uids(&fleet, "spoke-a", "kept", "v2").await, before);
    wait_condition(&hub, "kept", "PlacementVerified", generation, |c| {
        c.status == "True"
    })
    .await;

    // Deleting the replica set itself still deletes its work.
    Api::<ManifestWorkReplicaSet>::namespaced(hub.clone(), NAMESPACE)
        .delete("kept", &DeleteParams::default())
        .await
        .expect("delete replica set");
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), "spoke-a");
    wait_deleted(&works, "kept", "the replica set's work", APPLY_TIMEOUT)
        .await
        .expect("the work goes with its replica set");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_works_carry_the_replica_set_labels_and_ferry_labels_win() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["spoke-a"]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    create_placement(&hub, NAMESPACE, "everywhere", json!({})).await;
    create_replica_set(
        &hub,
        "labelled",
        json!({"app": "shop", "team": "payments", REPLICA_SET_LABEL: "forged", PLACEMENT_NAME_LABEL: "forged"}),
        json!({
            "manifestWorkTemplate": template("labelled", NAMESPACE, "v1"),
            "placementRefs": [{"name": "everywhere", "rolloutStrategy": {"type": "All"}}],
        }),
    )
    .await;
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), "spoke-a");
    let work = wait_applied(&works, "labelled").await.expect("applied");
    let labels = work.labels();
    assert_eq!(labels.get("app").map(String::as_str), Some("shop"));
    assert_eq!(labels.get("team").map(String::as_str), Some("payments"));
    assert_eq!(
        labels.get(REPLICA_SET_LABEL).map(String::as_str),
        Some("default.labelled")
    );
    assert_eq!(
        labels.get(PLACEMENT_NAME_LABEL).map(String::as_str),
        Some("everywhere")
    );
    // "Every work of app shop" by label.
    let all: Api<ManifestWork> = Api::all(hub.clone());
    let selected = all
        .list(&ListParams::default().labels("app=shop"))
        .await
        .expect("list works");
    assert_eq!(selected.items.len(), 1);

    // A label added later reaches the work without a new template.
    Api::<ManifestWorkReplicaSet>::namespaced(hub.clone(), NAMESPACE)
        .patch(
            "labelled",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tier": "gold"}}})),
        )
        .await
        .expect("label replica set");
    let relabelled = wait_until(&works, "labelled", "tier label", APPLY_TIMEOUT, |w| {
        w.labels().get("tier").map(String::as_str) == Some("gold")
    })
    .await
    .expect("the new label reaches the work");
    assert_eq!(relabelled.uid(), work.uid());
    assert_eq!(relabelled.spec, work.spec);
    fleet.stop().await;
}
