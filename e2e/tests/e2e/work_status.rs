//! The hub shows what the agent applied: work and manifest `Applied`
//! conditions with `observedGeneration`, and each manifest's identity.

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::work_helpers::{
    config_map, manifest_condition, manifest_work, wait_applied, work_condition,
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
