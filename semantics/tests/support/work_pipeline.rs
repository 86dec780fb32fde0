//! Runs one work through every pure step the agent takes before and while it
//! writes, the way its reconcile does: identify each manifest, order them,
//! pick each one's config and strategy, plan the write (server-side apply on
//! create and on an existing object, or a three-way merge), hash it, and
//! read feedback and availability from it. Shared by the property test
//! `hostile_works.rs` and the fuzz target `work_planning`, so both hold the
//! same pipeline to the same invariants. Panics only when an invariant fails.

use ferry_proto::v1;
use ferry_semantics::availability::health;
use ferry_semantics::feedback::{evaluate_feedback, static_problems};
use ferry_semantics::paths::IgnorePath;
use ferry_semantics::strategy::{Strategy, strategy_of};
use ferry_semantics::{
    IgnoreCondition, NoSchema, SsaInput, apply_order, identify, merge_patch, object_hash,
    plan_server_side_apply, three_way_merge,
};
use serde_json::{Value, json};

/// A stand-in for discovery: the agent asks the API server for a kind's
/// resource name; any plural works for matching configs here.
fn resource_of(kind: &str) -> String {
    format!("{}s", kind.to_ascii_lowercase())
}

/// What the spoke might hold: the manifest as another manager left it.
fn drifted(desired: &Value) -> Value {
    let mut live = desired.clone();
    if let Some(object) = live.as_object_mut() {
        object.insert("status".into(), json!({"replicas": 1, "ready": true}));
        object
            .entry("metadata")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(|m| m.insert("resourceVersion".into(), json!("7")));
    }
    live
}

/// Every step for every manifest of `spec`; panics on a broken invariant.
pub fn run_work(spec: &v1::WorkSpec) {
    let parsed: Vec<_> = spec
        .manifests_json
        .iter()
        .map(|raw| identify(raw))
        .collect();
    let identities: Vec<_> = parsed
        .iter()
        .map(|p| p.as_ref().ok().map(|(_, id)| id))
        .collect();
    let mut order = apply_order(&identities);
    order.sort_unstable();
    assert_eq!(
        order,
        (0..parsed.len()).collect::<Vec<_>>(),
        "the apply order names every manifest exactly once"
    );
    for result in &parsed {
        let (desired, identity) = match result {
            Ok(found) => found,
            Err(error) => {
                assert!(!error.to_string().is_empty(), "an error says what is wrong");
                assert_eq!(error.reason(), "InvalidManifest");
                continue;
            }
        };
        assert!(!identity.name.is_empty() && !identity.kind.is_empty());
        let resource = resource_of(&identity.kind);
        let namespace = identity.namespace.clone().unwrap_or_default();
        let config = ferry_semantics::config_match::options_for(
            &spec.manifest_configs,
            &identity.group,
            &resource,
            &namespace,
            &identity.name,
        );
        if let Some(config) = &config {
            let problems = static_problems(&config.feedback_rules);
            assert!(problems.iter().all(|p| !p.to_string().is_empty()));
        }
        let live = drifted(desired);
        let (strategy, _) = match strategy_of(config.as_ref()) {
            Ok(found) => found,
            Err(error) => {
                assert!(!error.to_string().is_empty(), "an error says what is wrong");
                assert!(matches!(
                    error.reason(),
                    "InvalidIgnorePath" | "InvalidManifestConfig"
                ));
                continue;
            }
        };
        match &strategy {
            Strategy::ServerSideApply { manager, rules, .. } => {
                for live in [None, Some(&live)] {
                    let plan = plan_server_side_apply(&SsaInput {
                        desired,
                        live,
                        rules,
                        manager,
                    });
                    assert_eq!(plan.object_hash.len(), 64, "sha256 in hex");
                }
                let present: Vec<IgnorePath> = rules
                    .iter()
                    .filter(|r| r.condition == IgnoreCondition::OnSpokePresent)
                    .flat_map(|r| r.paths.iter().cloned())
                    .collect();
                assert_eq!(object_hash(desired, &present).len(), 64);
            }
            Strategy::Update | Strategy::CreateOnly => {
                let merged = three_way_merge(Some(desired), desired, &live, &NoSchema);
                let _ = merge_patch(&live, &merged);
                let first = three_way_merge(None, desired, &live, &NoSchema);
                let _ = merge_patch(&live, &first);
            }
            Strategy::ReadOnly | Strategy::ReportOnly { .. } => {}
        }
        if let Some(config) = config {
            let outcome = evaluate_feedback(
                (&identity.group, &identity.kind),
                &live,
                &config.feedback_rules,
            );
            assert!(outcome.problems.iter().all(|p| !p.to_string().is_empty()));
        }
        if let Some(health) = health(&identity.group, &identity.kind, &live) {
            assert!(!health.message.is_empty(), "health names the numbers");
        }
    }
}
