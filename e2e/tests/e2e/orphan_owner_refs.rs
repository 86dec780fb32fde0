//! Objects a work will orphan carry no owner reference to its
//! AppliedManifestWork while the work lives (as in OCM), so deleting that
//! record by hand cannot garbage-collect what the user asked to keep; setting
//! or removing `Orphan`, or a `SelectivelyOrphan` rule, drops or adds the
//! reference at the next apply of the changed work.

use ferry_api::manifest_work::{
    DeleteOption, ManifestWork, OrphaningRule, PropagationPolicy, SelectivelyOrphan,
};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::spoke_actor::read_json;
use ferry_e2e::helpers::wait::wait_deleted;
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map, manifest_work, wait_applied};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

const CLUSTER: &str = "cluster-a";

/// Whether `object` carries an owner reference to an AppliedManifestWork.
fn marked(object: &Value) -> bool {
    object["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| r["kind"] == "AppliedManifestWork")
}

async fn set_delete_option(works: &Api<ManifestWork>, option: Value) {
    works
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"deleteOption": option}})),
        )
        .await
        .expect("change deleteOption");
    wait_applied(works, "w").await.expect("applied");
}

#[tokio::test]
async fn orphaned_objects_carry_no_owner_reference_and_follow_delete_option_changes() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let mut work = manifest_work(
        CLUSTER,
        "w",
        vec![
            config_map("default", "kept", json!({"a": "1"})),
            config_map("default", "other", json!({"a": "1"})),
        ],
    );
    work.spec.delete_option = Some(DeleteOption {
        propagation_policy: PropagationPolicy::Orphan,
        selectively_orphans: None,
        ttl_seconds_after_finished: None,
    });
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "w").await.expect("applied");
    let spoke = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    for name in ["kept", "other"] {
        assert!(
            !marked(&read_json(&spoke, name).await),
            "{name}: Orphan leaves no owner reference"
        );
    }

    set_delete_option(&works, json!({"propagationPolicy": "Foreground"})).await;
    for name in ["kept", "other"] {
        assert!(
            marked(&read_json(&spoke, name).await),
            "{name}: Foreground adds the owner reference"
        );
    }

    set_delete_option(
        &works,
        json!({"propagationPolicy": "SelectivelyOrphan", "selectivelyOrphans": {
            "orphaningRules": [{"resource": "configmaps", "namespace": "default", "name": "kept"}]}}),
    )
    .await;
    assert!(
        !marked(&read_json(&spoke, "kept").await),
        "a matching SelectivelyOrphan rule drops the owner reference"
    );
    assert!(
        marked(&read_json(&spoke, "other").await),
        "an object no rule matches keeps it"
    );
    fleet.stop().await;
}

#[tokio::test]
async fn an_object_whose_orphaning_rule_was_removed_is_deleted_with_its_work() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let mut work = manifest_work(
        CLUSTER,
        "w",
        vec![
            config_map("default", "kept", json!({"a": "1"})),
            config_map("default", "other", json!({"a": "1"})),
        ],
    );
    work.spec.delete_option = Some(DeleteOption {
        propagation_policy: PropagationPolicy::SelectivelyOrphan,
        selectively_orphans: Some(SelectivelyOrphan {
            orphaning_rules: vec![OrphaningRule {
                group: String::new(),
                resource: "configmaps".into(),
                namespace: "default".into(),
                name: "kept".into(),
            }],
        }),
        ttl_seconds_after_finished: None,
    });
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "w").await.expect("applied");
    let spoke = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    assert!(
        !marked(&read_json(&spoke, "kept").await),
        "orphaned at first"
    );

    // The rule goes away (OCM's "clean the resource when orphan deletion
    // option is removed"): the object is the work's to delete again.
    set_delete_option(&works, Value::Null).await;
    works
        .delete("w", &DeleteParams::default())
        .await
        .expect("delete work");
    wait_deleted(&works, "w", "the work deleted", APPLY_TIMEOUT)
        .await
        .expect("the work goes away");
    for name in ["kept", "other"] {
        wait_deleted(&spoke, name, "the object deleted", APPLY_TIMEOUT)
            .await
            .unwrap_or_else(|e| panic!("{name} is deleted with its work: {e}"));
    }
    fleet.stop().await;
}
