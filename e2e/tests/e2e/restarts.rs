//! Restarting the hub or an agent loses no update and sends no needless
//! writes to the spoke (issue 5, item 2).

use std::time::Duration;

use ferry_api::managed_cluster::ManagedCluster;
use ferry_e2e::harness::audit::{count_writes, list_writes};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, edit_manifests, is_applied_at_current_generation, manifest_work,
    wait_applied,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde_json::json;

async fn reconnected(fleet: &Fleet, previous_session: &str) {
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    let new_session = |c: &ManagedCluster| {
        c.status
            .as_ref()
            .is_some_and(|s| s.connected && s.session_id != previous_session)
    };
    wait_until(
        &clusters,
        "cluster-a",
        "a new session",
        APPLY_TIMEOUT,
        new_session,
    )
    .await
    .expect("the agent reconnects");
}

async fn session_of(fleet: &Fleet) -> String {
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    let cluster = clusters.get("cluster-a").await.expect("read");
    cluster.status.map(|s| s.session_id).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_and_agent_restarts_lose_no_update_and_send_no_needless_writes() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.audit_spokes = true;
    options.heartbeat = Duration::from_secs(1);
    // The work is edited while the hub is down. The hub's admission webhook
    // fails closed, so with it and a single hub such an edit is refused; this
    // test is about what becomes of edits the API server did accept.
    options.admission = false;
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    let audit = fleet
        .spoke("cluster-a")
        .control_plane
        .info
        .audit_log
        .clone();
    let config_maps: Api<ConfigMap> =
        Api::namespaced(fleet.spoke("cluster-a").client.clone(), "default");
    let work = manifest_work(
        "cluster-a",
        "durable",
        vec![
            config_map("default", "one", json!({"v": "1"})),
            config_map("default", "two", json!({"v": "1"})),
        ],
    );
    let works = fleet.create_work(&work).await.expect("create");
    wait_applied(&works, "durable").await.expect("applied");

    // An edit made while the hub is down arrives once it is back.
    fleet.stop_hub().await;
    edit_manifests(&works, "durable", |m| m[1]["data"]["v"] = json!("2"))
        .await
        .expect("edit while the hub is down");
    fleet.start_hub().await.expect("hub restarts");
    wait_until(
        &works,
        "durable",
        "edit applied",
        APPLY_TIMEOUT,
        is_applied_at_current_generation,
    )
    .await
    .expect("the edit made during the hub's absence is applied");
    let two = config_maps.get("two").await.expect("read");
    assert_eq!(two.data.expect("data")["v"], "2");

    // Applied at the current generation means the agent's pass, writes
    // included, is over: restart each side and count what reaches the spoke.
    let before = count_writes(&audit);
    let session = session_of(&fleet).await;
    fleet.stop_hub().await;
    fleet.start_hub().await.expect("hub restarts");
    reconnected(&fleet, &session).await;
    // A restarted agent reports a work only once its pass over it (reads
    // and any writes) is over.
    fleet
        .restart_agent_until_it_reports("cluster-a", APPLY_TIMEOUT)
        .await
        .expect("the restarted agent reports the work");
    let after = count_writes(&audit);
    let writes = list_writes(&audit);
    assert_eq!(
        after - before,
        0,
        "restarts wrote to the spoke: {:?}",
        &writes[before.min(writes.len())..]
    );
    let status = works.get("durable").await.expect("read");
    assert!(is_applied_at_current_generation(&status));
    fleet.stop().await;
}
