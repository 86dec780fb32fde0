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
//!   team B's work that names it;
//! - team A deletes every replica set it has on a spoke whose deletion
//!   brake allows half of its objects per window: team A's deletions stop
//!   at its fair share of the brake's budget, and team B's deletion then
//!   still goes at once (the brake's budget is shared fairly by owner, so
//!   one team's mass deletion never holds another's).
//!
//! That the owner the agent is told (the replica-set label) cannot be
//! forged by whoever writes works in the cluster's namespace is
//! `hub_owned_writes::a_cluster_namespace_writer_cannot_set_or_change_the_owner_label_of_a_work`.

use std::time::Duration;

use ferry_agent::DeletionBrakeOptions;
use ferry_agent::deletion_brake::decide::Limits;
use ferry_api::contract::DELETION_BRAKE_LEDGER;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::brake_ledger::ledger_of;
use ferry_e2e::helpers::tenant_rbac::tenant;
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, dependencies_ready, feedback_value, wait_applied,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
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
    let team_a = tenant(&fleet, TEAM_A, "all", json!({})).await;
    let team_b = tenant(&fleet, TEAM_B, "all", json!({})).await;
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

/// Team A's replica sets (one ConfigMap each): 6 of the spoke's 8 objects.
const TEAM_A_SETS: usize = 6;
/// Team B's: the other 2.
const TEAM_B_SETS: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_teams_mass_deletion_never_holds_another_teams_deletion_on_the_spoke() {
    let mut options = FleetOptions::with_spokes(&[SPOKE]);
    // Half of the 8 objects per window: 4, of which team A is sure of 3
    // and team B of 1. The window outlasts the test.
    options.deletion_brake = Some(DeletionBrakeOptions {
        namespace: "default".into(),
        limits: Limits {
            percent: 50,
            floor: 0,
            window: Duration::from_secs(3600),
        },
    });
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let team_a = tenant(&fleet, TEAM_A, "all", json!({})).await;
    let team_b = tenant(&fleet, TEAM_B, "all", json!({})).await;
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), SPOKE);
    let sets = [
        (&team_a, TEAM_A, "a", TEAM_A_SETS),
        (&team_b, TEAM_B, "b", TEAM_B_SETS),
    ];
    for (client, team, prefix, count) in sets {
        for i in 0..count {
            let name = format!("{prefix}-{i}");
            let manifests = vec![config_map("default", &name, json!({"k": "v"}))];
            create_replica_set(client, team, &name, manifests, json!([]), json!([])).await;
        }
    }
    for (_, _, prefix, count) in sets {
        for i in 0..count {
            wait_applied(&works, &format!("{prefix}-{i}"))
                .await
                .expect("applied on the spoke");
        }
    }
    let spoke = fleet.spoke(SPOKE).client.clone();
    let config_maps = Api::<ConfigMap>::namespaced(spoke.clone(), "default");

    // Team A deletes everything it has on the spoke.
    let team_a_sets = Api::<ManifestWorkReplicaSet>::namespaced(team_a.clone(), TEAM_A);
    for i in 0..TEAM_A_SETS {
        team_a_sets
            .delete(&format!("a-{i}"), &DeleteParams::background())
            .await
            .expect("team A deletes its replica set");
    }
    let ledger = wait_until(
        &config_maps,
        DELETION_BRAKE_LEDGER,
        "every deletion of team A decided",
        APPLY_TIMEOUT,
        |c| {
            let ledger = ledger_of(c);
            let decided = ledger.admitted.iter().filter(|a| a.owner == TEAM_A).count()
                + ledger.held.iter().filter(|h| h.owner == TEAM_A).count();
            decided == TEAM_A_SETS
        },
    )
    .await
    .expect("the agent decides on team A's deletions");
    let ledger = ledger_of(&ledger);
    assert_eq!(
        (ledger.admitted.len(), ledger.held.len()),
        (3, 3),
        "team A's fair share goes, the rest is held: {ledger:?}"
    );

    // Team B's own deletion is not held behind team A's.
    Api::<ManifestWorkReplicaSet>::namespaced(team_b.clone(), TEAM_B)
        .delete("b-0", &DeleteParams::background())
        .await
        .expect("team B deletes its replica set");
    wait_deleted(&config_maps, "b-0", "team B's ConfigMap", APPLY_TIMEOUT)
        .await
        .expect("team B's deletion goes at once");
    let ledger = ledger_of(
        &config_maps
            .get(DELETION_BRAKE_LEDGER)
            .await
            .expect("the ledger"),
    );
    assert!(
        ledger
            .admitted
            .iter()
            .any(|a| a.work == "b-0" && a.owner == TEAM_B),
        "{ledger:?}"
    );
    assert_eq!(ledger.held.len(), 3, "team A's holds stay: {ledger:?}");
    assert!(
        config_maps.get_opt("b-1").await.expect("read").is_some(),
        "team B's other objects stay"
    );
}
