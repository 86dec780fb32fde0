//! Bad input gets a clear condition and loses nothing: an invalid JSONPath, a
//! manifest without a name, and a path that matches nothing (not an error, but
//! visible); the other manifests of the work apply regardless.

use ferry_api::manifest_work::{IgnoreCondition, ManifestWork};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, manifest_condition, manifest_work, ssa_config,
};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_paths_and_nameless_manifests_fail_alone_with_clear_reasons() {
    // The hub's webhook refuses these works when they are written; without
    // it they stand for works stored before it existed, which the agent must
    // still handle.
    let fleet = Fleet::start(FleetOptions {
        admission: false,
        ..FleetOptions::with_spokes(&["cluster-a"])
    })
    .await
    .expect("fleet starts");
    let cm = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"}, "data": {"a": "1"}})
    };
    let mut work = manifest_work(
        "cluster-a",
        "bad",
        vec![
            cm("bad-path"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default"}, "data": {"a": "1"}}),
            cm("no-match"),
            cm("fine"),
        ],
    );
    work.spec.manifest_configs = vec![
        ssa_config(
            "",
            "configmaps",
            "default",
            "bad-path",
            false,
            &[(IgnoreCondition::OnSpokePresent, &["$.data[?(@.x=="])],
        ),
        ssa_config(
            "",
            "configmaps",
            "default",
            "no-match",
            false,
            &[(IgnoreCondition::OnSpokePresent, &["$.spec.nothing.here"])],
        ),
    ];
    let works = fleet
        .create_work(&work)
        .await
        .expect("the hub accepts the work");
    let all_reported =
        |w: &ManifestWork| (0..4).all(|i| manifest_condition(w, i, "Applied").is_some());
    let work = wait_until(
        &works,
        "bad",
        "all manifests reported",
        APPLY_TIMEOUT,
        all_reported,
    )
    .await
    .expect("reported");

    let bad_path = manifest_condition(&work, 0, "Applied").expect("condition");
    assert_eq!(
        (bad_path.status.as_str(), bad_path.reason.as_str()),
        ("False", "InvalidIgnorePath")
    );
    assert!(
        bad_path.message.contains("$.data[?(@.x=="),
        "names the path: {}",
        bad_path.message
    );

    let nameless = manifest_condition(&work, 1, "Applied").expect("condition");
    assert_eq!(
        (nameless.status.as_str(), nameless.reason.as_str()),
        ("False", "InvalidManifest")
    );
    assert!(
        nameless.message.contains("metadata.name"),
        "{}",
        nameless.message
    );

    let no_match = manifest_condition(&work, 2, "Applied").expect("condition");
    assert_eq!(
        no_match.status, "True",
        "a path that matches nothing is not an error"
    );
    assert!(
        no_match.message.contains("$.spec.nothing.here"),
        "but it is visible: {}",
        no_match.message
    );

    let fine = manifest_condition(&work, 3, "Applied").expect("condition");
    assert_eq!(fine.status, "True");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    assert!(spoke.get_opt("fine").await.expect("read").is_some());
    assert!(spoke.get_opt("no-match").await.expect("read").is_some());
    assert!(
        spoke.get_opt("bad-path").await.expect("read").is_none(),
        "not applied with a broken rule"
    );
    fleet.stop().await;
}
