//! Admission of the fleet kinds: the API server itself (CEL rules in the
//! CRDs, no hub running) refuses a ManifestWorkReplicaSet or Placement with
//! an unusable rollout, placement reference or override, with a message
//! naming the field and what is wrong, and admits a replica set using every
//! field correctly (issue 13, admission).

use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_hub::crds::install_crds;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

const NAMESPACE: &str = "default";

fn api(client: &kube::Client, group: &str, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, "v1alpha1", kind);
    Api::namespaced_with(client.clone(), NAMESPACE, &ApiResource::from_gvk(&gvk))
}

fn object(group: &str, kind: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1alpha1"),
        "kind": kind,
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }))
    .expect("an object")
}

/// A valid replica set spec with `change` merged into it (top level).
fn replica_set(change: Value) -> Value {
    let mut spec = json!({
        "manifestWorkTemplate": {"workload": {"manifests": [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "cfg", "namespace": "default"}, "data": {"a": "1"}}
        ]}},
        "placementRefs": [{"name": "everywhere"}],
    });
    if let (Some(spec), Some(change)) = (spec.as_object_mut(), change.as_object()) {
        spec.extend(change.clone());
    }
    spec
}

fn rollout(strategy: Value) -> Value {
    replica_set(json!({"placementRefs": [{"name": "everywhere", "rolloutStrategy": strategy}]}))
}

fn override_with(op: Value) -> Value {
    replica_set(json!({"overrides": [{
        "name": "o",
        "resourceIdentifier": {"kind": "ConfigMap", "namespace": "default", "name": "cfg"},
        "jsonPatch": [op],
    }]}))
}

/// The API server's message for a create it refused; panics when it was
/// accepted, which is the failure the caller tests for.
async fn refusal(api: &Api<DynamicObject>, obj: &DynamicObject) -> String {
    match api.create(&PostParams::default(), obj).await {
        Err(kube::Error::Api(status)) => status.message.clone(),
        Err(other) => panic!("expected an API refusal, got {other}"),
        Ok(_) => panic!(
            "{} was admitted: {:?}",
            obj.metadata.name.clone().unwrap_or_default(),
            obj.data
        ),
    }
}

async fn hub() -> (ControlPlane, kube::Client) {
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane starts");
    let client = hub.client().await.expect("client");
    install_crds(&client)
        .await
        .expect("crds (with their CEL rules) are accepted");
    (hub, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_replica_sets_and_placements_are_refused_naming_the_field() {
    let (hub, client) = hub().await;
    let sets = api(&client, "work.ferry.dev", "ManifestWorkReplicaSet");
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "no-refs",
            replica_set(json!({"placementRefs": []})),
            "placementRefs needs at least one placement",
        ),
        (
            "dup-refs",
            replica_set(json!({"placementRefs": [{"name": "p"}, {"name": "p"}]})),
            "placementRefs names a placement twice",
        ),
        (
            "bad-type",
            rollout(json!({"type": "Fast"})),
            "rolloutStrategy.type must be All, Progressive or ProgressivePerGroup, not Fast",
        ),
        (
            "conc-zero",
            rollout(json!({"type": "Progressive", "progressive": {"maxConcurrency": 0}})),
            "maxConcurrency must be a count of at least 1 or a percentage from 1% to 100%",
        ),
        (
            "conc-pct",
            rollout(json!({"type": "Progressive", "progressive": {"maxConcurrency": "150%"}})),
            "maxConcurrency must be a count of at least 1 or a percentage from 1% to 100%",
        ),
        (
            "fail-neg",
            rollout(json!({"type": "All", "all": {"maxFailures": -1}})),
            "maxFailures must be a count of at least 0 or a percentage from 0% to 100%",
        ),
        (
            "fail-word",
            rollout(
                json!({"type": "ProgressivePerGroup", "progressivePerGroup": {"maxFailures": "some"}}),
            ),
            "maxFailures must be a count of at least 0 or a percentage from 0% to 100%",
        ),
        (
            "soak",
            rollout(json!({"type": "All", "all": {"minSuccessTime": "soon"}})),
            "minSuccessTime soon is not a duration like 30s, 5m or 1h30m",
        ),
        (
            "deadline",
            rollout(json!({"type": "Progressive", "progressive": {"progressDeadline": "forever"}})),
            "progressDeadline forever is not None or a duration like 30s, 5m or 1h30m",
        ),
        (
            "cascade",
            replica_set(json!({"cascadeDeletionPolicy": "Orphan"})),
            "cascadeDeletionPolicy must be Background or Foreground, not Orphan",
        ),
        (
            "op",
            override_with(json!({"op": "delete", "path": "/data/a"})),
            "jsonPatch op must be add, remove, replace, move, copy or test, not delete",
        ),
        (
            "path",
            override_with(json!({"op": "remove", "path": "data/a"})),
            "jsonPatch path data/a is not a JSON pointer",
        ),
        (
            "tilde",
            override_with(json!({"op": "remove", "path": "/data/a~2"})),
            "jsonPatch path /data/a~2 is not a JSON pointer",
        ),
        (
            "from",
            override_with(json!({"op": "move", "path": "/data/b"})),
            "jsonPatch op move needs from, a JSON pointer",
        ),
        (
            "target",
            replica_set(json!({"overrides": [{"name": "o",
            "resourceIdentifier": {"namespace": "default", "name": "cfg"},
            "jsonPatch": [{"op": "remove", "path": "/data/a"}]}]})),
            "resourceIdentifier needs kind or resource",
        ),
        (
            "dup-override",
            replica_set(json!({"overrides": [
            {"name": "o", "resourceIdentifier": {"kind": "ConfigMap", "name": "cfg"}},
            {"name": "o", "resourceIdentifier": {"kind": "ConfigMap", "name": "cfg"}}]})),
            "overrides names an override twice",
        ),
    ];
    let mut wrong = Vec::new();
    for (name, spec, expected) in &cases {
        let message = refusal(
            &sets,
            &object(
                "work.ferry.dev",
                "ManifestWorkReplicaSet",
                name,
                spec.clone(),
            ),
        )
        .await;
        if !message.contains(expected) {
            wrong.push(format!("{name}: expected {expected:?} in {message:?}"));
        }
    }
    let placements = api(&client, "cluster.ferry.dev", "Placement");
    for (name, value) in [
        ("zero", json!(0)),
        ("pct", json!("0%")),
        ("word", json!("half")),
    ] {
        let message = refusal(
            &placements,
            &object(
                "cluster.ferry.dev",
                "Placement",
                name,
                json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": value}}}),
            ),
        )
        .await;
        let expected = "clustersPerDecisionGroup must be a count of at least 1 or a percentage from 1% to 100%";
        if !message.contains(expected) {
            wrong.push(format!(
                "placement {name}: expected {expected:?} in {message:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_set_using_every_field_correctly_is_admitted() {
    let (hub, client) = hub().await;
    let sets = api(&client, "work.ferry.dev", "ManifestWorkReplicaSet");
    let spec = replica_set(json!({
        "placementRefs": [
            {"name": "canary", "rolloutStrategy": {"type": "Progressive", "progressive": {
                "maxConcurrency": "50%", "maxFailures": 0, "minSuccessTime": "1h30m",
                "progressDeadline": "None", "mandatoryDecisionGroups": [{"groupName": "first"}]}}},
            {"name": "rest", "rolloutStrategy": {"type": "ProgressivePerGroup", "progressivePerGroup": {
                "maxFailures": "10%", "progressDeadline": "250ms"}}},
            {"name": "all", "rolloutStrategy": {"type": "All", "all": {"maxFailures": "2"}}},
        ],
        "cascadeDeletionPolicy": "Foreground",
        "overrides": [{
            "name": "eu",
            "clusterSelector": {"matchLabels": {"region": "eu"}},
            "resourceIdentifier": {"resource": "configmaps", "namespace": "default", "name": "cfg"},
            "jsonPatch": [
                {"op": "add", "path": "/data/region", "value": "${CLUSTER_LABEL:region}"},
                {"op": "copy", "from": "/data/a", "path": "/data/a~1copy"},
                {"op": "test", "path": "/data/a", "value": "1"},
                {"op": "remove", "path": "/data/b"},
            ],
        }],
    }));
    sets.create(
        &PostParams::default(),
        &object("work.ferry.dev", "ManifestWorkReplicaSet", "good", spec),
    )
    .await
    .expect("a valid replica set is admitted");
    let placements = api(&client, "cluster.ferry.dev", "Placement");
    placements
        .create(
            &PostParams::default(),
            &object(
                "cluster.ferry.dev",
                "Placement",
                "good",
                json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": "25%"}}}),
            ),
        )
        .await
        .expect("a valid placement is admitted");
    hub.stop().await;
}
