//! A tenant's CEL on the agent cannot take the agent's memory or its
//! threads (issue 48, item 3). The `cel` crate can be neither measured nor
//! stopped while it runs: a nested `map` builds 10^8 values in a few hundred
//! bytes of expression and the agent, shared by every team on the cluster,
//! was OOM-killed; nested comprehensions held the rule pool's threads for
//! hours. What an expression may allocate and what it may cost to run are
//! now bounded before it runs (`ferry_semantics::cel_bounds`):
//!
//! - the hub's webhook refuses, to the tenant (an impersonated user with
//!   only the README's tenant rights), a work whose condition rule may
//!   allocate or cost over the limits whatever the data, naming the rule and
//!   the estimate, and a replica set whose template holds one;
//! - with no webhook in the way (it fails open), the agent refuses to run a
//!   rule whose allocation or cost grows with the square of its data: the
//!   rule's condition is False naming the refusal, the manifest is applied,
//!   and the agent goes on serving the cluster's other works.

use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::tenant_rbac::grant_work_resources;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, cel_rule, config_map, config_map_work_with_rules, manifest_condition,
    manifest_work, wait_applied,
};
use kube::api::{Api, PostParams};
use serde_json::json;

const CLUSTER: &str = "cluster-a";
const TENANT: &str = "mallory";

/// Seven nested `map`s of ten-element lists around an eighth: 10^8 values.
fn nested_map() -> String {
    let ten = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]";
    let mut expression = ten.to_string();
    for level in 0..7 {
        expression = format!("{ten}.map(m{level}, {expression})");
    }
    format!("size({expression}) > 0")
}

/// Nine nested `all` over ten-element lists: 10^9 iterations, minutes of
/// a thread.
fn nested_all() -> String {
    let ten = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]";
    let mut expression = "true".to_string();
    for level in 0..9 {
        expression = format!("{ten}.all(a{level}, {expression})");
    }
    expression
}

/// Every pair of the ConfigMap's keys, concatenated: memory quadratic in
/// its data.
const QUADRATIC: &str = "object.data.map(k, object.data.map(j, k + j)).size() > 0";

/// Every pair of the ConfigMap's keys compared: time quadratic in its data.
const QUADRATIC_TIME: &str = "object.data.all(k, object.data.all(j, k == j || k != j))";

/// A work of one ConfigMap `name` with a condition rule `Hostile` of
/// `expression`.
fn hostile_work(name: &str, expression: &str) -> ManifestWork {
    let data: serde_json::Map<String, serde_json::Value> =
        (0..50).map(|i| (format!("k{i}"), json!("v"))).collect();
    config_map_work_with_rules(
        CLUSTER,
        name,
        serde_json::Value::Object(data),
        vec![cel_rule("Hostile", &[expression])],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_rule_that_could_exhaust_the_agents_memory_or_threads_is_refused_at_admission() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    grant_work_resources(&hub, CLUSTER, "tenant-works", TENANT, &["manifestworks"]).await;
    grant_work_resources(
        &hub,
        "default",
        "tenant-sets",
        TENANT,
        &["manifestworkreplicasets"],
    )
    .await;
    let tenant = fleet.hub.client_as(TENANT).await.expect("tenant client");

    let refused = Api::<ManifestWork>::namespaced(tenant.clone(), CLUSTER)
        .create(
            &PostParams::default(),
            &hostile_work("exhaust", &nested_map()),
        )
        .await
        .expect_err("the webhook refuses the work");
    let message = refused.to_string();
    assert!(
        message.contains("conditionRules[0] (Hostile)") && message.contains("may allocate"),
        "{message}"
    );
    let refused = Api::<ManifestWork>::namespaced(tenant.clone(), CLUSTER)
        .create(&PostParams::default(), &hostile_work("spin", &nested_all()))
        .await
        .expect_err("the webhook refuses the work");
    let message = refused.to_string();
    assert!(
        message.contains("conditionRules[0] (Hostile)") && message.contains("may cost"),
        "{message}"
    );

    let template = hostile_work("exhaust", &nested_map()).spec;
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "exhaust", "namespace": "default"},
        "spec": {"manifestWorkTemplate": template, "placementRefs": [{"name": "all"}]},
    }))
    .expect("replica set");
    let refused = Api::<ManifestWorkReplicaSet>::namespaced(tenant, "default")
        .create(&PostParams::default(), &rs)
        .await
        .expect_err("the webhook refuses the replica set");
    let message = refused.to_string();
    assert!(
        message.contains("manifestWorkTemplate.manifestConfigs[0]")
            && message.contains("may allocate"),
        "{message}"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_webhook_the_agent_refuses_to_run_the_rule_and_serves_the_other_works() {
    let mut options = FleetOptions::with_spokes(&[CLUSTER]);
    // The webhook fails open: the agent's own check is the last line.
    options.admission = false;
    let fleet = Fleet::start(options).await.expect("fleet starts");
    for (name, expression, says) in [
        ("quadratic", QUADRATIC, "may allocate without a bound"),
        (
            "quadratic-time",
            QUADRATIC_TIME,
            "may run for a time without a bound",
        ),
    ] {
        let works = fleet
            .create_work(&hostile_work(name, expression))
            .await
            .expect("created with no webhook");
        let work = wait_until(&works, name, "the rule reported", APPLY_TIMEOUT, |w| {
            manifest_condition(w, 0, "Hostile").is_some()
        })
        .await
        .expect("the agent reports the rule");
        let hostile = manifest_condition(&work, 0, "Hostile").expect("condition");
        assert_eq!(
            (hostile.status.as_str(), hostile.reason.as_str()),
            ("False", "ConditionRuleExpressionError")
        );
        assert!(
            hostile.message.contains("refused before it runs") && hostile.message.contains(says),
            "{name}: {}",
            hostile.message
        );
        wait_applied(&works, name)
            .await
            .expect("the manifest is applied");
    }

    // Another team's work on the same agent applies as usual.
    let other = fleet
        .create_work(&manifest_work(
            CLUSTER,
            "other-team",
            vec![config_map("default", "other-team", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&other, "other-team").await.expect("applied");
    fleet.stop().await;
}
