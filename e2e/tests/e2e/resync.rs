//! After a disconnect the hub sends exactly what changed while the agent was
//! away, counted from the hub's own metrics (issue 5, item 1).

use std::time::Duration;

use ferry_api::managed_cluster::ManagedCluster;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::hub_metric;
use ferry_e2e::harness::link::LinkState;
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, edit_manifests, is_applied_at_current_generation, manifest_work,
    wait_applied,
};
use kube::Api;
use serde_json::json;

const UPSERTS: &str = "ferry_hub_work_upserts_sent_total";
const DELETES: &str = "ferry_hub_work_deletes_sent_total";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnecting_agent_receives_exactly_the_changes_made_while_it_was_away() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.heartbeat = Duration::from_secs(1);
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let one = |name: &str| {
        manifest_work(
            "cluster-a",
            name,
            vec![config_map("default", name, json!({"v": "1"}))],
        )
    };
    let works = fleet.create_work(&one("kept")).await.expect("create");
    fleet.create_work(&one("changed")).await.expect("create");
    fleet.create_work(&one("dropped")).await.expect("create");
    for name in ["kept", "changed", "dropped"] {
        wait_applied(&works, name).await.expect("applied");
    }

    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    fleet.spoke("cluster-a").link.set(LinkState::Cut);
    let disconnected = |c: &ManagedCluster| c.status.as_ref().is_some_and(|s| !s.connected);
    wait_until(
        &clusters,
        "cluster-a",
        "disconnected",
        APPLY_TIMEOUT,
        disconnected,
    )
    .await
    .expect("the hub sees the agent go");
    let upserts = hub_metric(fleet.hub_probes_addr, UPSERTS)
        .await
        .expect("scrape");
    let deletes = hub_metric(fleet.hub_probes_addr, DELETES)
        .await
        .expect("scrape");

    fleet
        .create_work(&one("created"))
        .await
        .expect("create while away");
    edit_manifests(&works, "changed", |m| m[0]["data"]["v"] = json!("2"))
        .await
        .expect("edit while away");
    works
        .delete("dropped", &Default::default())
        .await
        .expect("delete while away");
    fleet.spoke("cluster-a").link.set(LinkState::Up);

    for name in ["created", "changed"] {
        wait_until(
            &works,
            name,
            "applied after the reconnect",
            APPLY_TIMEOUT,
            is_applied_at_current_generation,
        )
        .await
        .expect("applied");
    }
    wait_deleted(&works, "dropped", "deleted work released", APPLY_TIMEOUT)
        .await
        .expect("released");
    let sent_upserts = hub_metric(fleet.hub_probes_addr, UPSERTS)
        .await
        .expect("scrape")
        - upserts;
    let sent_deletes = hub_metric(fleet.hub_probes_addr, DELETES)
        .await
        .expect("scrape")
        - deletes;
    assert_eq!(
        sent_upserts, 2.0,
        "one upsert for the new work, one for the edited one; none for the unchanged"
    );
    assert_eq!(sent_deletes, 1.0, "one delete for the deleted work");
    fleet.stop().await;
}
