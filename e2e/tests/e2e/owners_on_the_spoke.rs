//! Tenancy reaches the spoke (issue 48, item 1): every team's works meet in
//! one cluster namespace and one agent, and the agent keeps their owners
//! apart. Run as the tenants would (impersonated users holding only the
//! README's tenant rights, each in its own namespace, both bound to
//! `global`), on real control planes with a real agent:
//!
//! - team B's replica set names team A's in `dependsOn` with a readiness
//!   rule over team A's feedback: its work waits exactly as for a work that
//!   does not exist (same reason, same message but the name), and neither
//!   the feedback nor an error about it reaches team B;
//! - team A deletes its replica set: its objects go at once, not held for
//!   team B's work that names it.
//!
//! That the owner the agent is told (the replica-set label) cannot be
//! forged by whoever writes works in the cluster's namespace is
//! `hub_owned_writes::a_cluster_namespace_writer_cannot_set_or_change_the_owner_label_of_a_work`.

use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::placement_helpers::create_placement;
use ferry_e2e::helpers::tenant_rbac::grant_work_resources;
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, dependencies_ready, feedback_value,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use serde_json::{Value, json};

const SPOKE: &str = "spoke-a";
const TEAM_A: &str = "team-a";
const TEAM_B: &str = "team-b";
/// Team A's secret, reported to team A as status feedback (its own right).
const SECRET: &str = "s3cret-value-of-team-a";
/// A readiness rule that holds exactly when team A's feedback starts with
/// `s`: one bit of team A's secret per replica set, before the fix.
const PROBE_RULE: &str = "work.status.resourceStatus.manifests.exists(m, \
    has(m.statusFeedback) && m.statusFeedback.values.exists(v, \
    v.name == 'token' && v.fieldValue.string.startsWith('s')))";

async fn create_namespace(client: &Client, name: &str) {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
}

/// A namespace for `team`, bound to `global`, with a Placement `all`, and a
/// client of user `team` holding only the tenant's rights there.
async fn tenant(fleet: &Fleet, team: &str) -> Client {
    let hub = &fleet.hub_client;
    create_namespace(hub, team).await;
    create_placement(hub, team, "all", json!({})).await;
    grant_work_resources(
        hub,
        team,
        "replica-sets",
        team,
        &["manifestworkreplicasets"],
    )
    .await;
    fleet.hub.client_as(team).await.expect("tenant client")
}

/// Creates replica set `namespace/name` as `client`, placing `manifests`
/// (with `configs`) and naming `depends_on` in its template.
async fn create_replica_set(
    client: &Client,
    namespace: &str,
    name: &str,
    manifests: Vec<Value>,
    configs: Value,
    depends_on: Value,
) {
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "manifestWorkTemplate": {
                "workload": {"manifests": manifests},
                "manifestConfigs": configs,
                "dependsOn": depends_on,
            },
            "placementRefs": [{"name": "all", "rolloutStrategy": {"type": "All"}}],
        },
    }))
    .expect("replica set");
    Api::<ManifestWorkReplicaSet>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &rs)
        .await
        .unwrap_or_else(|e| panic!("the tenant creates {namespace}/{name}: {e}"));
}

/// The `DependenciesReady` reason and message of the work `name` on the
/// spoke once it reports the condition False.
async fn waiting(works: &Api<ManifestWork>, name: &str) -> (String, String) {
    let work = wait_until(works, name, "DependenciesReady=False", APPLY_TIMEOUT, |w| {
        dependencies_ready(w).is_some_and(|(status, _, _)| status == "False")
    })
    .await
    .unwrap_or_else(|e| panic!("{name} waits for its dependencies: {e}"));
    let (_, reason, message) = dependencies_ready(&work).expect("condition");
    (reason, message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_teams_work_is_invisible_to_depends_on_and_cannot_hold_its_deletion() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[SPOKE]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let team_a = tenant(&fleet, TEAM_A).await;
    let team_b = tenant(&fleet, TEAM_B).await;
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), SPOKE);

    // Team A reports its secret to itself.
    create_replica_set(
        &team_a,
        TEAM_A,
        "vault",
        vec![config_map("default", "vault", json!({"token": SECRET}))],
        json!([{
            "resourceIdentifier": {"resource": "configmaps", "namespace": "default", "name": "vault"},
            "feedbackRules": [{"type": "JSONPaths", "jsonPaths": [{"name": "token", "path": ".data.token"}]}],
        }]),
        json!([]),
    )
    .await;
    wait_until(&works, "vault", "feedback", APPLY_TIMEOUT, |w| {
        feedback_value(w, 0, "token").and_then(|v| v.string.as_deref()) == Some(SECRET)
    })
    .await
    .expect("team A sees its own feedback");

    // Team B probes it by name, with a rule true for the secret, and, as
    // the control, names a work no one has with the same rule.
    for (name, dependency) in [("probe", "vault"), ("control", "nothing-by-this-name")] {
        create_replica_set(
            &team_b,
            TEAM_B,
            name,
            vec![config_map(
                "default",
                &format!("b-{name}"),
                json!({"v": "1"}),
            )],
            json!([]),
            json!([{"name": dependency, "celExpression": PROBE_RULE}]),
        )
        .await;
    }
    let (probe_reason, probe_message) = waiting(&works, "probe").await;
    let (control_reason, control_message) = waiting(&works, "control").await;
    println!("probe: {probe_reason}: {probe_message}");
    assert_eq!(probe_reason, "DependencyMissing", "{probe_message}");
    assert_eq!(probe_reason, control_reason);
    assert_eq!(
        probe_message.replace("vault", "X"),
        control_message.replace("nothing-by-this-name", "X"),
        "another team's work reads exactly like a missing one"
    );
    assert!(!probe_message.contains(SECRET), "{probe_message}");
    let spoke = Api::<ConfigMap>::namespaced(fleet.spoke(SPOKE).client.clone(), "default");
    assert!(
        spoke.get_opt("b-probe").await.expect("read").is_none(),
        "team B's probe was applied: its rule read team A's status"
    );

    // Team A's deletion is not held by team B's work naming it: the agent
    // releases it at once (the hold would last the agent's 300 s timeout).
    Api::<ManifestWorkReplicaSet>::namespaced(team_a.clone(), TEAM_A)
        .delete("vault", &DeleteParams::background())
        .await
        .expect("team A deletes its replica set");
    wait_deleted(&spoke, "vault", "team A's ConfigMap", APPLY_TIMEOUT)
        .await
        .expect("team A's objects go without waiting for team B");
    // And team B's probe still waits, as for any missing work.
    let (reason, _) = waiting(&works, "probe").await;
    assert_eq!(reason, "DependencyMissing");
    fleet.stop().await;
}
