//! Migration from OCM's work agent: a cluster whose objects OCM's agent
//! applied (server-side apply as `work-agent`, an owner reference to OCM's
//! AppliedManifestWork) moves to ferry without a conflict or a recreation.
//! The ferry work sets OCM's field manager; the agent, run with
//! `--adopt-ocm-objects`, applies over the same object (same UID), marks it
//! as its own and drops the owner reference to OCM's AppliedManifestWork,
//! so removing OCM's agent and its records cannot delete it.

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::spoke_actor::read_json;
use ferry_e2e::helpers::work_helpers::{
    config_map, manifest_condition, manifest_work, ssa_config, wait_applied,
};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

const CLUSTER: &str = "cluster-a";
/// OCM's work agent's server-side apply field manager.
const OCM_FIELD_MANAGER: &str = "work-agent";

fn owner_kinds(object: &Value) -> Vec<String> {
    object["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "{} {}",
                r["apiVersion"].as_str().unwrap_or_default(),
                r["kind"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

#[tokio::test]
async fn objects_applied_by_ocms_agent_are_adopted_without_conflict_or_recreation() {
    let fleet = Fleet::start(FleetOptions {
        adopt_ocm_objects: true,
        ..FleetOptions::with_spokes(&[CLUSTER])
    })
    .await
    .expect("fleet starts");
    let spoke = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    // What OCM's agent leaves: its apply, its owner reference; one object
    // the ferry work applies with OCM's field manager, one with the
    // default Update strategy.
    let mut before = Vec::new();
    for name in ["migrated-ssa", "migrated-update"] {
        let mut ocm_applied = config_map("default", name, json!({"a": "1"}));
        ocm_applied["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "work.open-cluster-management.io/v1",
            "kind": "AppliedManifestWork",
            "name": "0123abcd-hello-work",
            "uid": "8b1f3c9e-0000-4000-8000-000000000001"}]);
        let applied = spoke
            .patch(
                name,
                &PatchParams::apply(OCM_FIELD_MANAGER),
                &Patch::Apply(&ocm_applied),
            )
            .await
            .expect("OCM's agent applied it");
        before.push(applied.metadata.uid.expect("uid"));
    }

    let mut work = manifest_work(
        CLUSTER,
        "hello-work",
        vec![
            config_map("default", "migrated-ssa", json!({"a": "1"})),
            config_map("default", "migrated-update", json!({"a": "1"})),
        ],
    );
    let mut config = ssa_config("", "configmaps", "default", "migrated-ssa", false, &[]);
    if let Some(ssa) = config
        .update_strategy
        .as_mut()
        .and_then(|s| s.server_side_apply.as_mut())
    {
        ssa.field_manager = OCM_FIELD_MANAGER.into();
    }
    work.spec.manifest_configs = vec![config];
    let works = fleet.create_work(&work).await.expect("create work");
    let reported = wait_applied(&works, "hello-work")
        .await
        .expect("applied with no conflict");
    for (ordinal, (name, uid)) in ["migrated-ssa", "migrated-update"]
        .into_iter()
        .zip(before)
        .enumerate()
    {
        let ordinal = i32::try_from(ordinal).expect("small");
        let applied = manifest_condition(&reported, ordinal, "Applied").expect("Applied");
        assert_eq!(applied.status, "True", "{name}: {applied:?}");
        let after = read_json(&spoke, name).await;
        assert_eq!(
            after["metadata"]["uid"].as_str(),
            Some(uid.as_str()),
            "{name}: the same object, not recreated"
        );
        assert_eq!(after["data"]["a"], "1");
        assert_eq!(
            owner_kinds(&after),
            vec!["work.ferry.dev/v1alpha1 AppliedManifestWork".to_string()],
            "{name}: ferry's mark only, OCM's is gone"
        );
    }
    fleet.stop().await;
}
