//! The hub shows what the agent applied: work and manifest `Applied`
//! conditions with `observedGeneration`, and each manifest's identity; a
//! manifest's conditions follow its object, not its position (OCM).

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::work_helpers::{
    config_map, edit_and_wait, manifest_condition, manifest_work, wait_applied, work_condition,
};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_shows_applied_true_with_observed_generation_equal_to_generation() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let work = manifest_work(
        "cluster-a",
        "status",
        vec![
            config_map("default", "one", json!({"a": "1"})),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "two", "namespace": "default"},
                   "stringData": {"b": "2"}}),
        ],
    );
    let works = fleet.create_work(&work).await.expect("create work");
    let work = wait_applied(&works, "status").await.expect("work applied");

    let generation = work.metadata.generation.expect("generation");
    let applied = work_condition(&work, "Applied").expect("work Applied");
    assert_eq!(applied.status, "True");
    assert_eq!(applied.reason, "AppliedManifestWorkComplete");
    assert_eq!(applied.observed_generation, generation);
    assert!(!applied.last_transition_time.is_empty());

    let manifests = &work
        .status
        .as_ref()
        .expect("status")
        .resource_status
        .as_ref()
        .expect("resources")
        .manifests;
    assert_eq!(manifests.len(), 2);
    let first = &manifests[0].resource_meta;
    assert_eq!(
        (
            first.ordinal,
            first.version.as_str(),
            first.kind.as_str(),
            first.resource.as_str(),
            first.name.as_str(),
            first.namespace.as_str()
        ),
        (0, "v1", "ConfigMap", "configmaps", "one", "default")
    );
    assert_eq!(manifests[1].resource_meta.resource, "secrets");
    for ordinal in 0..2 {
        let c = manifest_condition(&work, ordinal, "Applied").expect("manifest Applied");
        assert_eq!(
            (c.status.as_str(), c.observed_generation),
            ("True", generation)
        );
    }
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifest_conditions_follow_their_object_when_an_edit_moves_the_manifests() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let work = manifest_work(
        "cluster-a",
        "moved",
        vec![config_map("default", "kept", json!({"a": "1"}))],
    );
    let works = fleet.create_work(&work).await.expect("create work");
    let first = wait_applied(&works, "moved").await.expect("applied");
    let kept_since = manifest_condition(&first, 0, "Applied")
        .expect("Applied")
        .last_transition_time
        .clone();
    // Transition times have a resolution of a second: wait until the clock
    // is past the first one, so a time of the edit differs from it.
    let since: k8s_openapi::jiff::Timestamp = kept_since.parse().expect("a time");
    while k8s_openapi::jiff::Timestamp::now().as_second() <= since.as_second() {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // OCM's "update work": a new object takes position 0, the old one moves.
    let edited = edit_and_wait(&works, "moved", |m| {
        m.insert(
            0,
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": "added", "namespace": "default"}}),
        );
    })
    .await
    .expect("edit applied");
    let added = manifest_condition(&edited, 0, "Applied").expect("Applied of the new object");
    let kept = manifest_condition(&edited, 1, "Applied").expect("Applied of the moved object");
    assert_eq!(
        kept.last_transition_time, kept_since,
        "the moved object keeps its own transition time"
    );
    assert_ne!(
        added.last_transition_time, kept_since,
        "the new object does not inherit the time of the one that sat at its position"
    );
    fleet.stop().await;
}
