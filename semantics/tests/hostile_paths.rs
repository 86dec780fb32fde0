//! Whatever a user writes as an ignore or feedback path, parsing it and
//! using it on any object returns a result or a clear error: never a panic.
//! Inputs are random strings and near-miss mutations of real paths.

use ferry_semantics::paths::{IgnorePath, get, locate, remove_all};
use ferry_semantics::{IgnoreCondition, IgnoreRule, SsaInput, plan_server_side_apply};
use proptest::prelude::*;
use serde_json::{Value, json};

const SEEDS: &[&str] = &[
    "$.spec.replicas",
    ".spec.template.spec.containers[?@.name=='app'].image",
    "$.metadata.annotations['a.b/c']",
    "$.data[*]",
    "$..image",
    "$.spec.ports[0].port",
];

fn object() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "annotations": {"a.b/c": "x"}},
        "spec": {"replicas": 3, "ports": [{"port": 80}],
            "template": {"spec": {"containers": [{"name": "app", "image": "nginx"}, {"name": "side"}]}}},
        "data": {"k": "v"}})
}

fn near_miss() -> impl Strategy<Value = String> {
    (
        prop::sample::select(SEEDS),
        prop::collection::vec((any::<prop::sample::Index>(), any::<char>()), 0..4),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(seed, edits, cut)| {
            let mut chars: Vec<char> = seed.chars().collect();
            for (at, c) in edits {
                let i = at.index(chars.len());
                chars[i] = c;
            }
            let end = cut.index(chars.len() + 1);
            chars[..end].iter().collect()
        })
}

fn exercise(raw: &str) {
    let Ok(path) = IgnorePath::parse(raw) else {
        return;
    };
    let mut live = object();
    for pointer in locate(&live, &path) {
        let _ = get(&live, &pointer);
    }
    let rules = vec![IgnoreRule {
        condition: IgnoreCondition::OnSpokeChange,
        paths: vec![path.clone()],
    }];
    let _ = plan_server_side_apply(&SsaInput {
        desired: &object(),
        live: Some(&live),
        rules: &rules,
        manager: "ferry-agent",
    });
    remove_all(&mut live, &[path]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn random_strings_as_paths_never_panic(raw in "\\PC{0,40}") {
        exercise(&raw);
    }

    #[test]
    fn near_misses_of_real_paths_never_panic(raw in near_miss()) {
        exercise(&raw);
    }
}
