//! The hub publishes Kubernetes Events on ManifestWorks for transitions (issue
//! 10, item 5): a work that applies gets an `Applied` event, a failing
//! manifest a Warning with its reason, a deleted work a `Deleting` event, a
//! work the agent is told to evict an event on its ManagedCluster; a status
//! write that changes no condition adds none.

use std::time::Duration;

use ferry_api::manifest_work::{
    FeedbackRule, FeedbackType, ManifestWork, NamedJsonPath, UpdateStrategyType,
};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::link::LinkState;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, feedback_value, manifest_condition, manifest_work, strategy_config,
    wait_applied,
};
use ferry_hub::events::{
    REASON_APPLIED, REASON_DELETING, REASON_WORK_EVICTED, REPORTING_CONTROLLER,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

/// The hub's Events about the work with `uid` in namespace `cluster`.
async fn events_of(client: &Client, cluster: &str, uid: &str) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(client.clone(), cluster);
    events
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid)
                && e.reporting_controller.as_deref() == Some(REPORTING_CONTROLLER)
        })
        .collect()
}

/// Waits until the work with `uid` has an Event that `wanted` accepts;
/// Events are published after the status write, by a task of their own.
async fn wait_event(
    client: &Client,
    cluster: &str,
    uid: &str,
    what: &str,
    wanted: impl Fn(&Event) -> bool,
) -> Event {
    let deadline = tokio::time::Instant::now() + APPLY_TIMEOUT;
    loop {
        let events = events_of(client, cluster, uid).await;
        if let Some(event) = events.into_iter().find(|e| wanted(e)) {
            return event;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {what} event within {APPLY_TIMEOUT:?}: {:#?}",
            events_of(client, cluster, uid).await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn has_reason(event: &Event, reason: &str) -> bool {
    event.reason.as_deref() == Some(reason)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applying_and_deleting_a_work_are_events_and_a_write_without_transition_is_none() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let mut work = manifest_work(
        "cluster-a",
        "observed",
        vec![config_map("default", "observed", json!({"x": "1"}))],
    );
    // A label someone else sets on the spoke comes back as feedback: a
    // status write that changes no condition.
    let mut config = strategy_config(
        "",
        "configmaps",
        "default",
        "observed",
        UpdateStrategyType::Update,
    );
    config.feedback_rules = vec![FeedbackRule {
        type_: FeedbackType::JsonPaths,
        json_paths: vec![NamedJsonPath {
            name: "touched".into(),
            path: ".metadata.labels.touched".into(),
            version: None,
        }],
    }];
    work.spec.manifest_configs = vec![config];
    let works = fleet.create_work(&work).await.expect("create");
    let applied = wait_applied(&works, "observed").await.expect("applied");
    let uid = applied.uid().expect("uid");

    let event = wait_event(&hub, "cluster-a", &uid, "Applied", |e| {
        has_reason(e, REASON_APPLIED)
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    assert_eq!(event.action.as_deref(), Some("Apply"));
    assert!(
        event
            .reporting_instance
            .as_deref()
            .is_some_and(|i| !i.is_empty()),
        "{event:?}"
    );

    let spoke: Api<ConfigMap> = Api::namespaced(fleet.spoke("cluster-a").client.clone(), "default");
    spoke
        .patch(
            "observed",
            &PatchParams::apply("someone-else"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "observed", "labels": {"touched": "yes"}}})),
        )
        .await
        .expect("label on the spoke");
    wait_until(
        &works,
        "observed",
        "the label as feedback",
        APPLY_TIMEOUT,
        |w: &ManifestWork| {
            feedback_value(w, 0, "touched").is_some_and(|v| v.string.as_deref() == Some("yes"))
        },
    )
    .await
    .expect("feedback written");

    // The agent's link is frozen while the work is deleted, so the hub
    // writes `Deleting` (waiting for the agent) before the agent can
    // release the work; a fast agent would otherwise release it first and
    // the work would go with only a `Released` event.
    fleet.spoke("cluster-a").link.set(LinkState::Frozen);
    works
        .delete("observed", &DeleteParams::default())
        .await
        .expect("delete");
    // Events are published in the order they were queued, so once the
    // Deleting event is there, any event of the feedback write is too.
    let deleting = wait_event(&hub, "cluster-a", &uid, "Deleting", |e| {
        has_reason(e, REASON_DELETING)
    })
    .await;
    assert_eq!(deleting.action.as_deref(), Some("Delete"));
    fleet.spoke("cluster-a").link.set(LinkState::Up);

    let applied_events: Vec<Event> = events_of(&hub, "cluster-a", &uid)
        .await
        .into_iter()
        .filter(|e| has_reason(e, REASON_APPLIED))
        .collect();
    assert_eq!(applied_events.len(), 1, "{applied_events:#?}");
    assert!(
        applied_events[0].series.is_none(),
        "the feedback write repeated the Applied event: {applied_events:#?}"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_manifest_is_a_warning_event_with_its_reason() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let work = manifest_work(
        "cluster-a",
        "failing",
        vec![
            config_map("default", "fine", json!({"x": "1"})),
            json!({"apiVersion": "gadgets.example.com/v1", "kind": "Gadget",
                   "metadata": {"name": "g", "namespace": "default"}}),
        ],
    );
    let works = fleet.create_work(&work).await.expect("create");
    let reported = wait_until(
        &works,
        "failing",
        "the Gadget reported",
        APPLY_TIMEOUT,
        |w: &ManifestWork| manifest_condition(w, 1, "Applied").is_some(),
    )
    .await
    .expect("reported");
    let uid = reported.uid().expect("uid");
    let warning = wait_event(&fleet.hub_client, "cluster-a", &uid, "UnknownKind", |e| {
        has_reason(e, "UnknownKind")
    })
    .await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    let note = warning.note.clone().unwrap_or_default();
    assert!(
        note.contains("Gadget") && note.contains("default/g"),
        "the note names the manifest: {note}"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_the_agent_is_told_to_evict_is_an_event_on_its_managed_cluster() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let work = manifest_work(
        "cluster-a",
        "forgotten",
        vec![config_map("default", "forgotten", json!({"k": "v"}))],
    );
    let works = fleet.create_work(&work).await.expect("create work");
    let uid = wait_applied(&works, "forgotten")
        .await
        .expect("applied")
        .uid()
        .expect("uid");
    // The work disappears while no hub watches (as in eviction.rs): the
    // restarted hub does not know it, so it tells the agent to evict it.
    fleet
        .forget_work(&works, "forgotten")
        .await
        .expect("work forgotten");

    // A cluster-scoped object's Events live in namespace default.
    let events: Api<Event> = Api::namespaced(fleet.hub_client.clone(), "default");
    let deadline = tokio::time::Instant::now() + APPLY_TIMEOUT;
    let evicted = loop {
        let found = events
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some(REASON_WORK_EVICTED)
                    && e.regarding.as_ref().is_some_and(|r| {
                        r.kind.as_deref() == Some("ManagedCluster")
                            && r.name.as_deref() == Some("cluster-a")
                    })
            });
        if let Some(event) = found {
            break event;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no WorkEvicted event within {APPLY_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        evicted.note.as_deref().is_some_and(|n| n.contains(&uid)),
        "the note names the work: {evicted:?}"
    );
    fleet.stop().await;
}
