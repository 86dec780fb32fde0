//! Any text as an ignore path: parsing returns a path or an error, and a
//! parsed path can be located, planned and removed on an object without a
//! panic.
#![no_main]

use ferry_semantics::paths::{IgnorePath, get, locate, remove_all};
use ferry_semantics::{IgnoreCondition, IgnoreRule, SsaInput, plan_server_side_apply};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|text: &str| {
    let Ok(path) = IgnorePath::parse(text) else {
        return;
    };
    let desired = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "annotations": {"a.b/c": "x"}},
        "spec": {"replicas": 3, "template": {"spec": {"containers": [
            {"name": "app", "image": "nginx", "ports": [{"containerPort": 80}]},
            {"name": "side"}]}}},
        "data": {"k": "v", "list": [1, "two", null, {"x": [true]}]}});
    let mut live = desired.clone();
    for pointer in locate(&live, &path) {
        let _ = get(&live, &pointer);
    }
    let rules = vec![IgnoreRule {
        condition: IgnoreCondition::OnSpokePresent,
        paths: vec![path.clone()],
    }];
    let _ = plan_server_side_apply(&SsaInput {
        desired: &desired,
        live: Some(&live),
        rules: &rules,
        manager: "ferry-agent",
    });
    remove_all(&mut live, &[path]);
});
