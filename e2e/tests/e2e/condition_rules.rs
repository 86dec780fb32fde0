//! OCM condition rules: CEL expressions over the live object set a
//! manifest condition on the spoke, aggregated into a work condition; an
//! expression that fails gives a False condition naming it, and the other
//! rules still report.

use ferry_api::manifest_work::{ManifestWork, UpdateStrategyType};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, cel_rule, config_map, manifest_condition, manifest_work, strategy_config,
    work_condition,
};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cel_rules_set_manifest_and_work_conditions_and_a_failing_expression_is_named() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let mut work = manifest_work(
        "cluster-a",
        "rules",
        vec![config_map(
            "default",
            "settings",
            json!({"mode": "on", "size": "3"}),
        )],
    );
    let mut config = strategy_config(
        "",
        "configmaps",
        "default",
        "settings",
        UpdateStrategyType::Update,
    );
    let mut configured = cel_rule(
        "Configured",
        &["object.data.mode == 'on'", "int(object.data.size) > 2"],
    );
    configured.message_expression = r#"result ? "mode is " + object.data.mode : """#.into();
    config.condition_rules = vec![
        configured,
        cel_rule("Broken", &["object.data.missing == 'x'"]),
        cel_rule("Off", &["object.data.mode == 'off'"]),
    ];
    work.spec.manifest_configs = vec![config];
    let works = fleet.create_work(&work).await.expect("create");
    let evaluated = |w: &ManifestWork| {
        ["Configured", "Broken", "Off"]
            .iter()
            .all(|t| manifest_condition(w, 0, t).is_some())
    };
    let work = wait_until(&works, "rules", "rules evaluated", APPLY_TIMEOUT, evaluated)
        .await
        .expect("evaluated");

    let configured = manifest_condition(&work, 0, "Configured").expect("condition");
    assert_eq!(
        (
            configured.status.as_str(),
            configured.reason.as_str(),
            configured.message.as_str()
        ),
        ("True", "ConditionRuleEvaluated", "mode is on")
    );
    let off = manifest_condition(&work, 0, "Off").expect("condition");
    assert_eq!(
        (off.status.as_str(), off.message.as_str()),
        ("False", "Manifest is not Off")
    );
    let broken = manifest_condition(&work, 0, "Broken").expect("condition");
    assert_eq!(broken.status, "False");
    assert_eq!(broken.reason, "ConditionRuleExpressionError");
    assert!(
        broken.message.contains("object.data.missing == 'x'"),
        "names the failing expression: {}",
        broken.message
    );
    // The rule conditions are aggregated onto the work, as in OCM.
    let work_configured = work_condition(&work, "Configured").expect("work condition");
    assert_eq!(
        (
            work_configured.status.as_str(),
            work_configured.reason.as_str()
        ),
        ("True", "ConditionRulesAggregated")
    );
    assert_eq!(
        work_condition(&work, "Broken")
            .expect("work condition")
            .status,
        "False"
    );
    // Applying is not affected by the rules.
    assert_eq!(
        manifest_condition(&work, 0, "Applied")
            .expect("condition")
            .status,
        "True"
    );
    fleet.stop().await;
}
