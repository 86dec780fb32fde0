//! An agent on a crowded spoke watches only ferry's objects (issue 32):
//! every object the real `ferry-agent` writes carries
//! `work.ferry.dev/managed=true`, and its kind's drift watch asks the spoke's
//! API server for that label, so objects ferry does not manage never reach
//! it, while drift of its own objects is still corrected at once. Objects it
//! never wrote (ReadOnly, not there yet) are watched by name and still seen
//! at once; a label someone removes comes back.

use std::time::Duration;

use ferry_api::manifest_work::{ManifestWork, UpdateStrategyType};
use ferry_e2e::harness::agent_process::AgentProcess;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::{scrape, sum_of, wait_metric_above};
use ferry_e2e::helpers::spoke_actor::merge_as;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_condition, manifest_work, strategy_config, wait_applied,
};
use ferry_semantics::release::{MANAGED_LABEL, MANAGED_LABEL_VALUE};
use kube::api::{DynamicObject, PostParams};
use serde_json::json;

/// How long a counter may take to move once what it counts has happened
/// (a deadline for a signal, not a performance assertion).
const METRIC_TIMEOUT: Duration = Duration::from_secs(60);

const WATCHES: &str = "ferry_agent_watches_open{kind=\"v1/ConfigMap\"}";
const RECEIVED: &str = "ferry_agent_watch_objects_received_total{kind=\"v1/ConfigMap\"}";

/// Unrelated ConfigMaps created on the spoke while the agent watches.
const UNRELATED: usize = 60;

fn labelled(object: &DynamicObject) -> bool {
    object
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_LABEL))
        .is_some_and(|v| v == MANAGED_LABEL_VALUE)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unrelated_objects_never_reach_the_agent_and_unlabelled_ones_are_watched_by_name() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    // The binary, with its /metrics, serves the spoke; resync far away, so
    // everything seen below is seen by a watch.
    fleet.stop_agent("cluster-a").await;
    let agent = AgentProcess::start(&fleet, "cluster-a", None, &["--resync-seconds", "3600"])
        .await
        .expect("ferry-agent starts");
    let metrics = agent.probe_addr;
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));

    // 1. What ferry writes carries its label, and its kind has one watch.
    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "ours",
            vec![config_map("default", "ours", json!({"k": "hub"}))],
        ))
        .await
        .expect("create work");
    wait_applied(&works, "ours").await.expect("applied");
    let ours = spoke.get("ours").await.expect("read ours");
    assert!(labelled(&ours), "labels: {:?}", ours.metadata.labels);
    wait_metric_above(metrics, WATCHES, 0.0, METRIC_TIMEOUT)
        .await
        .expect("the kind is watched");
    let text = scrape(metrics).await.expect("scrape");
    assert_eq!(
        sum_of(&text, WATCHES),
        1.0,
        "one label-selected watch:\n{text}"
    );
    let before = sum_of(&text, RECEIVED);
    assert!(before >= 1.0, "the watch's list delivered ours:\n{text}");

    // 2. A crowd of unrelated objects, then a drift of ours. One watch
    // stream delivers in order: once the drift is corrected, an unfiltered
    // watch would have delivered every unrelated create before it.
    for i in 0..UNRELATED {
        spoke
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("unrelated-{i}"), "namespace": "default"},
                    "data": {"i": i.to_string()}}))
                .expect("object"),
            )
            .await
            .expect("create an unrelated object");
    }
    merge_as(
        &spoke,
        "ours",
        "kubectl-edit",
        &json!({"data": {"k": "drifted"}}),
    )
    .await
    .expect("drift ours");
    wait_until(&spoke, "ours", "drift corrected", APPLY_TIMEOUT, |o| {
        o.data["data"]["k"] == "hub"
    })
    .await
    .expect("the drift is corrected");
    let text = scrape(metrics).await.expect("scrape");
    let received = sum_of(&text, RECEIVED) - before;
    assert!(
        (1.0..10.0).contains(&received),
        "the agent received {received} objects for one drift among {UNRELATED} unrelated creates:\n{text}"
    );

    // 3. Someone removes ferry's label: the object leaves the selector, the
    // agent hears of it and puts the label back.
    merge_as(
        &spoke,
        "ours",
        "kubectl-label",
        &json!({"metadata": {"labels": {MANAGED_LABEL: null}}}),
    )
    .await
    .expect("remove the label");
    wait_until(&spoke, "ours", "label restored", APPLY_TIMEOUT, labelled)
        .await
        .expect("the label comes back");

    // 4. Objects ferry never writes carry no label and are watched by name:
    // one ReadOnly object there, one not yet created.
    spoke
        .create(
            &PostParams::default(),
            &serde_json::from_value(config_map("default", "observed", json!({"v": "spoke"})))
                .expect("object"),
        )
        .await
        .expect("pre-create");
    let mut work = manifest_work(
        "cluster-a",
        "ro",
        vec![
            config_map("default", "observed", json!({"v": "hub"})),
            config_map("default", "later", json!({"v": "hub"})),
        ],
    );
    work.spec.manifest_configs = ["observed", "later"]
        .iter()
        .map(|name| {
            strategy_config(
                "",
                "configmaps",
                "default",
                name,
                UpdateStrategyType::ReadOnly,
            )
        })
        .collect();
    fleet.create_work(&work).await.expect("create ro");
    let reason = |w: &ManifestWork, i: i32| {
        manifest_condition(w, i, "Applied").map(|c| (c.status.clone(), c.reason.clone()))
    };
    let found = |w: &ManifestWork| {
        reason(w, 0) == Some(("True".into(), "ReadOnly".into()))
            && reason(w, 1) == Some(("False".into(), "ObjectNotFound".into()))
    };
    wait_until(&works, "ro", "both reported", APPLY_TIMEOUT, found)
        .await
        .expect("reported");
    let text = scrape(metrics).await.expect("scrape");
    assert_eq!(
        sum_of(&text, WATCHES),
        3.0,
        "the label-selected watch and one watch by name per unlabelled object:\n{text}"
    );
    // Created by someone else, without ferry's label: seen by its own watch.
    spoke
        .create(
            &PostParams::default(),
            &serde_json::from_value(config_map("default", "later", json!({"v": "spoke"})))
                .expect("object"),
        )
        .await
        .expect("create later");
    let seen = |w: &ManifestWork| reason(w, 1) == Some(("True".into(), "ReadOnly".into()));
    wait_until(&works, "ro", "the created object seen", APPLY_TIMEOUT, seen)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "the agent sees the object created by name: {e}; log:\n{}",
                agent.log()
            )
        });
    let observed = spoke.get("observed").await.expect("read");
    assert!(
        !labelled(&observed),
        "ReadOnly never writes, not even the label"
    );
    fleet.stop().await;
}
