//! Speed of the pure apply semantics on a realistic Deployment: hashing,
//! planning a server-side apply with ignored fields, the three-way merge and
//! the "would a write change anything" check that keeps steady state silent.
#![allow(missing_docs)]

use ferry_semantics::{
    IgnoreCondition, IgnorePath, IgnoreRule, NoSchema, SsaInput, is_subset, merge_patch,
    object_hash, plan_server_side_apply, three_way_merge,
};
use serde_json::{Value, json};

fn main() {
    divan::main();
}

fn deployment(image: &str, containers: usize) -> Value {
    let containers: Vec<Value> = (0..containers)
        .map(|i| {
            json!({"name": format!("c{i}"), "image": image,
                "env": (0..10).map(|e| json!({"name": format!("E{e}"), "value": "x"})).collect::<Vec<_>>(),
                "ports": [{"containerPort": 8000 + i, "protocol": "TCP"}]})
        })
        .collect();
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
            "annotations": {"example.com/owner": "team-a"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}}}})
}

fn live_of(desired: &Value) -> Value {
    let mut live = desired.clone();
    live["metadata"]["uid"] = json!("u");
    live["metadata"]["resourceVersion"] = json!("42");
    live["metadata"]["managedFields"] = json!([{
        "manager": "ferry-agent", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
            "k:{\"name\":\"c0\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}}
    }]);
    live["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"] =
        json!("/dev/termination-log");
    live["status"] = json!({"replicas": 3, "readyReplicas": 3});
    live
}

fn rules() -> Vec<IgnoreRule> {
    let path = |p: &str| IgnorePath::parse(p).expect("valid path");
    vec![
        IgnoreRule {
            condition: IgnoreCondition::OnSpokePresent,
            paths: vec![path(".spec.replicas")],
        },
        IgnoreRule {
            condition: IgnoreCondition::OnSpokeChange,
            paths: vec![path("$.spec.template.spec.containers[?@.name=='c0'].image")],
        },
    ]
}

#[divan::bench(args = [1, 10])]
fn object_hash_of_a_deployment(bencher: divan::Bencher, containers: usize) {
    let manifest = deployment("nginx:1.27", containers);
    let paths = vec![IgnorePath::parse(".spec.replicas").expect("valid path")];
    bencher.bench(|| object_hash(divan::black_box(&manifest), &paths));
}

#[divan::bench(args = [1, 10])]
fn plan_server_side_apply_with_ignored_fields(bencher: divan::Bencher, containers: usize) {
    let desired = deployment("nginx:1.28", containers);
    let live = live_of(&deployment("nginx:1.27", containers));
    let rules = rules();
    bencher.bench(|| {
        plan_server_side_apply(&SsaInput {
            desired: divan::black_box(&desired),
            live: Some(&live),
            rules: &rules,
            manager: "ferry-agent",
        })
    });
}

#[divan::bench(args = [1, 10])]
fn three_way_merge_and_patch(bencher: divan::Bencher, containers: usize) {
    let last = deployment("nginx:1.27", containers);
    let desired = deployment("nginx:1.28", containers);
    let live = live_of(&last);
    bencher.bench(|| {
        let merged = three_way_merge(Some(&last), divan::black_box(&desired), &live, &NoSchema);
        merge_patch(&live, &merged)
    });
}

#[divan::bench(args = [1, 10])]
fn steady_state_subset_check(bencher: divan::Bencher, containers: usize) {
    let desired = deployment("nginx:1.27", containers);
    let live = live_of(&desired);
    bencher.bench(|| is_subset(divan::black_box(&desired), &live, &NoSchema));
}
