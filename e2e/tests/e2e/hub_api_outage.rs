//! The hub survives its own API server going away and works it cannot
//! decode (issue 9, item 1): its ManifestWork watch treats errors as
//! transient, agents keep being served from the index meanwhile, and the
//! watch picks up changes once the API server is back.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::{hub_metric, scrape};
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, edit_and_wait, edit_manifests, manifest_work, wait_applied,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Api, Client};
use serde_json::json;

const SESSIONS: &str = "ferry_hub_agent_sessions";
const WATCH_ERRORS: &str = "ferry_hub_watch_errors_total";
const WORKS_CRD: &str = "manifestworks.work.ferry.dev";
/// A version of the ManifestWork CRD the hub does not know, served only
/// while the test writes through it.
const UNKNOWN_VERSION: &str = "v1alpha2";

/// Polls the hub's `/metrics` until `metric` (summed over its labels)
/// satisfies `cond`, and returns its value: metrics cannot be watched.
async fn wait_metric(
    probes: SocketAddr,
    metric: &str,
    what: &str,
    cond: impl Fn(f64) -> bool,
) -> f64 {
    let deadline = Instant::now() + APPLY_TIMEOUT;
    loop {
        let value = hub_metric(probes, metric).await.expect("scrape the hub");
        if cond(value) {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {metric} is still {value} after {APPLY_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls the hub's `/metrics` until `cond` holds for the whole exposition.
async fn wait_exposition(probes: SocketAddr, what: &str, cond: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + APPLY_TIMEOUT;
    loop {
        let text = scrape(probes).await.expect("scrape the hub");
        if cond(&text) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not seen within {APPLY_TIMEOUT:?}; /metrics is:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_data(maps: &Api<ConfigMap>, name: &str, value: &str) {
    wait_until(
        maps,
        name,
        &format!("ConfigMap {name} with v={value}"),
        APPLY_TIMEOUT,
        |cm: &ConfigMap| {
            cm.data
                .as_ref()
                .and_then(|d| d.get("v"))
                .is_some_and(|v| v == value)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

fn config_maps(fleet: &Fleet, spoke: &str) -> Api<ConfigMap> {
    Api::namespaced(fleet.spoke(spoke).client.clone(), "default")
}

/// This process's resident set (hub, agents and this test, which runs alone
/// in its process: see `own_process`), in KiB.
fn process_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_serves_agents_through_an_outage_of_its_api_server_and_its_watch_recovers() {
    // It prints this process's memory: run it where no other test runs.
    if !crate::own_process::alone(
        module_path!(),
        "the_hub_serves_agents_through_an_outage_of_its_api_server_and_its_watch_recovers",
    )
    .await
    {
        return;
    }
    let mut options = FleetOptions::with_spokes(&["outage-a", "outage-b"]);
    options.heartbeat = Duration::from_secs(2);
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    let probes = fleet.hub_probes_addr;
    let maps_a = config_maps(&fleet, "outage-a");
    let maps_b = config_maps(&fleet, "outage-b");

    let works_a = fleet
        .create_work(&manifest_work(
            "outage-a",
            "wa",
            vec![config_map("default", "a", json!({"v": "1"}))],
        ))
        .await
        .expect("create wa");
    let works_b = fleet
        .create_work(&manifest_work(
            "outage-b",
            "wb",
            vec![config_map("default", "b", json!({"v": "1"}))],
        ))
        .await
        .expect("create wb");
    wait_applied(&works_a, "wa").await.expect("wa applied");
    wait_applied(&works_b, "wb").await.expect("wb applied");
    let errors_before = hub_metric(probes, WATCH_ERRORS).await.expect("scrape");

    // Agent B connects afresh, so its token's review is fresh in the hub's
    // cache when it reconnects during the outage (the hub cannot review a
    // token while its API server is away), then goes away.
    fleet.stop_agent("outage-b").await;
    wait_metric(probes, SESSIONS, "agent B gone", |n| n == 1.0).await;
    fleet.start_agent("outage-b");
    wait_metric(probes, SESSIONS, "agent B back", |n| n == 2.0).await;
    fleet.stop_agent("outage-b").await;
    wait_metric(probes, SESSIONS, "agent B gone again", |n| n == 1.0).await;

    // A work agent B does not have yet. The hub's single watch delivers
    // events in order, so once the later edit of wa reached spoke A the
    // index holds wb2 too.
    fleet
        .create_work(&manifest_work(
            "outage-b",
            "wb2",
            vec![config_map("default", "b2", json!({"v": "1"}))],
        ))
        .await
        .expect("create wb2");
    edit_manifests(&works_a, "wa", |m| m[0]["data"]["v"] = json!("2"))
        .await
        .expect("edit wa");
    wait_data(&maps_a, "a", "2").await;

    let rss_before = process_rss_kib();
    fleet.kill_hub_control_plane().await;
    let outage = Instant::now();

    // Agent B reconnects while the hub's API server is down and is served
    // from the index: it gets wb2.
    fleet.start_agent("outage-b");
    wait_data(&maps_b, "b2", "1").await;
    let served_after = outage.elapsed();
    // The outage lasts until the hub's two watches (index and deletion)
    // failed and were retried with their growing backoff several times
    // (some seconds), and the hub is still there serving both agents.
    let errors_during = wait_metric(
        probes,
        WATCH_ERRORS,
        "watch errors during the outage",
        |n| n >= errors_before + 12.0,
    )
    .await;
    assert!(
        fleet.hub_is_running(),
        "the hub task ended during the outage"
    );
    assert_eq!(hub_metric(probes, SESSIONS).await.expect("scrape"), 2.0);
    let outage_length = outage.elapsed();

    fleet
        .start_hub_control_plane()
        .await
        .expect("the hub control plane starts again");
    let back = Instant::now();
    // A change made right after the API server is back reaches the spoke
    // only if the hub's watch recovered.
    edit_manifests(&works_a, "wa", |m| m[0]["data"]["v"] = json!("3"))
        .await
        .expect("edit wa after the outage");
    wait_data(&maps_a, "a", "3").await;
    let reached = back.elapsed();
    wait_applied(&works_a, "wa")
        .await
        .expect("wa's status is written again");
    edit_and_wait(&works_b, "wb", |m| m[0]["data"]["v"] = json!("2"))
        .await
        .expect("wb edited and applied after the outage");
    wait_data(&maps_b, "b", "2").await;
    assert!(fleet.hub_is_running(), "the hub task ended");
    let errors_after = hub_metric(probes, WATCH_ERRORS).await.expect("scrape");
    assert!(errors_after > errors_before);

    println!(
        "hub API outage of {:.1} s: agent B reconnected and got wb2 {:.2} s into it; \
         {} watch errors counted; a work edited after the API server came back reached \
         its spoke {} ms later; process RSS (hub, agents, test) {} KiB before, {} KiB after",
        outage_length.as_secs_f64(),
        served_after.as_secs_f64(),
        errors_during - errors_before,
        reached.as_millis(),
        rss_before,
        process_rss_kib(),
    );
    fleet.stop().await;
}

fn works_crd_api(client: &Client) -> Api<CustomResourceDefinition> {
    Api::all(client.clone())
}

fn works_at(client: &Client, namespace: &str, version: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("work.ferry.dev", version, "ManifestWork"),
        "manifestworks",
    );
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// Stores a ManifestWork in a shape the Rust types cannot decode, the way
/// it can happen for real: through a CRD version the hub does not know
/// (served for a moment with a schema that accepts anything; the API server
/// stores it under the storage version unchanged). The version is removed
/// again afterwards, leaving the CRD as the hub installed it.
async fn store_undecodable(client: &Client, namespace: &str, names: &[&str]) {
    let crds = works_crd_api(client);
    let version = serde_json::from_value(json!({
        "name": UNKNOWN_VERSION,
        "served": true,
        "storage": false,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
        "subresources": {"status": {}},
    }))
    .expect("a CRD version");
    let mut crd = crds.get(WORKS_CRD).await.expect("read the CRD");
    crd.spec.versions.push(version);
    crds.replace(WORKS_CRD, &PostParams::default(), &crd)
        .await
        .expect("serve an unknown version");
    let api = works_at(client, namespace, UNKNOWN_VERSION);
    for name in names {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("work.ferry.dev/{UNKNOWN_VERSION}"),
            "kind": "ManifestWork",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"workload": {"manifests": "not-a-list"}},
        }))
        .expect("an object");
        // The new version is served a moment after the CRD update.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match api.create(&PostParams::default(), &object).await {
                Ok(_) => break,
                Err(kube::Error::Api(status))
                    if status.code == 404 && Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("storing {namespace}/{name} through {UNKNOWN_VERSION}: {e}"),
            }
        }
    }
    let mut crd = crds.get(WORKS_CRD).await.expect("read the CRD");
    crd.spec.versions.retain(|v| v.name != UNKNOWN_VERSION);
    crds.replace(WORKS_CRD, &PostParams::default(), &crd)
        .await
        .expect("stop serving the unknown version");
}

fn undecodable_series(namespace: &str, name: &str) -> String {
    format!("ferry_hub_undecodable_works{{work_namespace=\"{namespace}\",name=\"{name}\"}} 1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_the_hub_cannot_decode_is_skipped_and_named_while_other_works_flow() {
    const CLUSTER: &str = "undecodable-a";
    let mut options = FleetOptions::with_spokes(&[CLUSTER]);
    options.heartbeat = Duration::from_secs(2);
    // The hub's webhook would refuse the shape this test stores; it models a
    // work written while the webhook was not there to refuse it.
    options.admission = false;
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let probes = fleet.hub_probes_addr;
    let hub = fleet.hub_client.clone();
    let maps = config_maps(&fleet, CLUSTER);

    let works = fleet
        .create_work(&manifest_work(
            CLUSTER,
            "before",
            vec![config_map("default", "before", json!({"v": "1"}))],
        ))
        .await
        .expect("create before");
    wait_applied(&works, "before")
        .await
        .expect("before applied");

    store_undecodable(&hub, CLUSTER, &["broken", "broken-deleted"]).await;
    // The stored shape is really one the Rust types refuse.
    let crd = works_crd_api(&hub).get(WORKS_CRD).await.expect("read CRD");
    assert_eq!(crd.spec.versions.len(), 1, "the CRD is restored");
    let stored = works_at(&hub, CLUSTER, "v1alpha1")
        .get("broken")
        .await
        .expect("read as an untyped object");
    assert_eq!(stored.data["spec"]["workload"]["manifests"], "not-a-list");
    match works.get("broken").await {
        Err(kube::Error::SerdeError(_)) => {}
        other => panic!("expected a decode error reading broken, got {other:?}"),
    }

    // The hub names it and keeps going: other works are created, edited
    // and applied.
    wait_exposition(probes, "the undecodable work named in metrics", |text| {
        text.contains(&undecodable_series(CLUSTER, "broken"))
    })
    .await;
    fleet
        .create_work(&manifest_work(
            CLUSTER,
            "after",
            vec![config_map("default", "after", json!({"v": "1"}))],
        ))
        .await
        .expect("create after");
    wait_applied(&works, "after").await.expect("after applied");
    edit_and_wait(&works, "before", |m| m[0]["data"]["v"] = json!("2"))
        .await
        .expect("before edited");
    wait_data(&maps, "before", "2").await;
    assert!(fleet.hub_is_running(), "the hub task ended");

    // The deletion controller reads metadata only, so the undecodable work
    // gets ferry's finalizer, and deleting it goes through: its agent never
    // held it, so the hub lets it go.
    let untyped = works_at(&hub, CLUSTER, "v1alpha1");
    wait_until(
        &untyped,
        "broken-deleted",
        "ferry's finalizer on an undecodable work",
        APPLY_TIMEOUT,
        |w: &DynamicObject| {
            w.metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == ferry_api::contract::CLEANUP_FINALIZER)
        },
    )
    .await
    .expect("finalizer added");
    untyped
        .delete("broken-deleted", &DeleteParams::default())
        .await
        .expect("delete broken-deleted");
    wait_deleted(
        &untyped,
        "broken-deleted",
        "an undecodable work deleted",
        APPLY_TIMEOUT,
    )
    .await
    .expect("the undecodable work goes");

    // Repaired, it reaches the spoke and is no longer named.
    let fixed = json!({"spec": {"workload": {"manifests": [config_map("default", "fixed", json!({"v": "1"}))]}}});
    untyped
        .patch("broken", &PatchParams::default(), &Patch::Merge(&fixed))
        .await
        .expect("repair broken");
    wait_applied(&works, "broken")
        .await
        .expect("broken applied once repaired");
    wait_data(&maps, "fixed", "1").await;
    wait_exposition(probes, "the repaired work no longer named", |text| {
        !text.contains(&undecodable_series(CLUSTER, "broken"))
    })
    .await;
    assert!(fleet.hub_is_running(), "the hub task ended");
    fleet.stop().await;
}
