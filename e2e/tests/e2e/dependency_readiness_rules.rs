//! `spec.dependsOn[].celExpression`: a work waits until a CEL rule over its
//! dependency's reported status holds, enforced by the real agent against a
//! real spoke. An app waits for its database's Deployment to report two of
//! three replicas ready through status feedback (no condition of the
//! database work changes on the way from one to two, and the agent's resync
//! is an hour: the status change wakes the app), a rule that does not compile
//! says so, and a tenant's expression built to run for seconds is stopped
//! at its time bound and reported while other works still apply. The hub
//! API server refuses a dependency with both a condition and a rule, and a
//! rule on a replica set's own `dependsOn`. Tenants act through
//! impersonation with a namespaced Role.

use ferry_api::manifest_work::{ManifestWork, WorkDependency};
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::image::workspace_dir;
use ferry_e2e::helpers::tenant_rbac::grant_work_resources;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, dependencies_ready, feedback_value, manifest_work, wait_applied,
    waits_for_dependencies_with,
};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde::Deserialize;
use serde_json::json;

const CLUSTER: &str = "cluster-a";
const TENANT: &str = "tenant";

/// True once `db`'s Deployment reports two ready replicas (a quorum of
/// three).
const QUORUM_READY: &str = "work.status.resourceStatus.manifests.exists(m, \
    m.resourceMeta.kind == 'Deployment' && has(m.statusFeedback) && \
    m.statusFeedback.values.exists(v, v.name == 'ReadyReplicas' && v.fieldValue.integer >= 2))";

fn ruled(work: &str, expression: &str) -> WorkDependency {
    WorkDependency {
        name: work.into(),
        condition: None,
        cel_expression: Some(expression.into()),
    }
}

/// The example's work `db`: a three-replica Deployment whose well-known
/// status (ReadyReplicas among it) is fed back.
fn database() -> ManifestWork {
    example_works().remove(0)
}

/// Writes the Deployment status a controller would (no kubelet or
/// deployment controller runs on a test spoke).
async fn report_ready_replicas(fleet: &Fleet, ready: i64) {
    let status = json!({"status": {"observedGeneration": 1, "replicas": 3,
        "readyReplicas": ready, "availableReplicas": ready, "updatedReplicas": 3}});
    fleet
        .spoke(CLUSTER)
        .api("apps/v1", "Deployment", Some("default"))
        .patch_status("db", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("write the Deployment's status");
}

/// The works of `examples/depends-on-readiness-rule.yaml`: `db` and `app`.
fn example_works() -> Vec<ManifestWork> {
    let path = workspace_dir().join("examples/depends-on-readiness-rule.yaml");
    let text = std::fs::read_to_string(&path).expect("read the example");
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| ManifestWork::deserialize(doc).expect("a ManifestWork"))
        .collect()
}

#[test]
fn the_example_is_the_database_and_the_app_this_module_runs() {
    let works = example_works();
    let names: Vec<_> = works.iter().map(|w| w.metadata.name.as_deref()).collect();
    assert_eq!(names, [Some("db"), Some("app")]);
    assert_eq!(works[0].spec.manifest_configs[0].feedback_rules.len(), 1);
    // The rule the tests below wait on is the example's, character for
    // character (YAML's folded scalar joins its lines with spaces).
    assert_eq!(works[1].spec.depends_on, vec![ruled("db", QUORUM_READY)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_waits_until_its_databases_feedback_satisfies_its_rule() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let [mut db, mut app] = <[ManifestWork; 2]>::try_from(example_works()).expect("two works");
    db.metadata.namespace = Some(CLUSTER.into());
    let works = fleet.create_work(&db).await.expect("create db");
    wait_applied(&works, "db").await.expect("db applied");
    report_ready_replicas(&fleet, 1).await;
    wait_until(&works, "db", "db reports 1 ready", APPLY_TIMEOUT, |w| {
        feedback_value(w, 0, "ReadyReplicas").and_then(|v| v.integer) == Some(1)
    })
    .await
    .expect("feedback of 1 ready replica");

    app.metadata.namespace = Some(CLUSTER.into());
    fleet.create_work(&app).await.expect("create app");
    wait_until(
        &works,
        "app",
        "app waits for db's rule",
        APPLY_TIMEOUT,
        |w| {
            waits_for_dependencies_with(
                w,
                "WaitingForDependency",
                "work db to satisfy its readiness rule",
            )
        },
    )
    .await
    .expect("app waits while db has 1 ready replica");
    let config_maps = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    assert!(
        config_maps.get_opt("app").await.expect("read").is_none(),
        "app was applied while db had 1 ready replica"
    );
    let db_before = works.get("db").await.expect("db");

    report_ready_replicas(&fleet, 2).await;
    let app = wait_applied(&works, "app")
        .await
        .expect("app applied once db has 2 ready replicas");
    let ready = dependencies_ready(&app).expect("DependenciesReady");
    assert_eq!(
        (ready.0.as_str(), ready.1.as_str()),
        ("True", "DependenciesReady")
    );
    config_maps
        .get("app")
        .await
        .expect("app's ConfigMap on the spoke");
    // The wake came from feedback, not from a condition of db: its work
    // conditions' statuses were the same with 1 and 2 ready replicas.
    let db_after = works.get("db").await.expect("db");
    let statuses = |w: &ManifestWork| -> Vec<(String, String)> {
        w.status
            .as_ref()
            .map(|s| {
                s.conditions
                    .iter()
                    .map(|c| (c.type_.clone(), c.status.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(statuses(&db_before), statuses(&db_after));
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_bad_slow_or_runaway_rule_is_refused_or_reported_and_starves_nothing() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    grant_work_resources(
        &fleet.hub_client,
        CLUSTER,
        "tenant-works",
        TENANT,
        &["manifestworks"],
    )
    .await;
    let tenant = fleet.hub.client_as(TENANT).await.expect("tenant client");
    let tenant_works: Api<ManifestWork> = Api::namespaced(tenant, CLUSTER);
    let works = fleet.create_work(&database()).await.expect("create db");
    wait_applied(&works, "db").await.expect("db applied");

    // Both a condition and a rule: refused by the hub API server.
    let mut both = manifest_work(
        CLUSTER,
        "both",
        vec![config_map("default", "both", json!({}))],
    );
    both.spec.depends_on = vec![WorkDependency {
        condition: Some("Available".into()),
        ..ruled("db", "true")
    }];
    let error = tenant_works
        .create(&PostParams::default(), &both)
        .await
        .expect_err("condition and celExpression together are refused");
    assert!(
        error
            .to_string()
            .contains("by its condition or by its celExpression, not both"),
        "{error}"
    );

    // A rule that does not compile: the work waits and says why.
    let mut broken = manifest_work(
        CLUSTER,
        "broken",
        vec![config_map("default", "broken", json!({}))],
    );
    broken.spec.depends_on = vec![ruled("db", "work.status.(")];
    tenant_works
        .create(&PostParams::default(), &broken)
        .await
        .expect("the tenant creates a work with a broken rule");
    wait_until(
        &works,
        "broken",
        "the broken rule is reported",
        APPLY_TIMEOUT,
        |w| waits_for_dependencies_with(w, "DependencyRuleError", "does not compile"),
    )
    .await
    .expect("a rule that does not compile is reported");

    // A rule built to run for minutes: refused at admission, naming what
    // it may cost (the agent would refuse it too, before it starts).
    let range = format!("{:?}", (0..40).collect::<Vec<i64>>());
    let runaway = format!(
        "{range}.all(a, {range}.all(b, {range}.all(c, {range}.all(d, a + b + c + d >= 0))))"
    );
    let mut refused = manifest_work(
        CLUSTER,
        "runaway",
        vec![config_map("default", "runaway", json!({}))],
    );
    refused.spec.depends_on = vec![ruled("db", &runaway)];
    let error = tenant_works
        .create(&PostParams::default(), &refused)
        .await
        .expect_err("a rule over the cost limit is refused");
    assert!(
        error.to_string().contains("dependsOn[0] db celExpression")
            && error.to_string().contains("may cost"),
        "{error}"
    );

    // A rule as slow as the agent's bounds allow (seconds in this debug
    // build): stopped at its time bound, reported, and not run again on
    // every status change.
    let range = format!("{:?}", (0..80).collect::<Vec<i64>>());
    let slow = format!("{range}.all(a, {range}.all(b, {range}.all(c, a + b + c >= 0)))");
    assert_eq!(ferry_semantics::cel_bounds::refusal(&slow), None);
    let mut hog = manifest_work(
        CLUSTER,
        "hog",
        vec![config_map("default", "hog", json!({}))],
    );
    hog.spec.depends_on = vec![ruled("db", &slow)];
    tenant_works
        .create(&PostParams::default(), &hog)
        .await
        .expect("the tenant creates a work with a slow rule");
    wait_until(
        &works,
        "hog",
        "the slow rule is stopped",
        APPLY_TIMEOUT,
        |w| waits_for_dependencies_with(w, "DependencyRuleError", "time bound"),
    )
    .await
    .expect("a slow rule is stopped at its time bound");

    // Others' works still apply, with their own rules evaluated.
    let mut other = manifest_work(
        CLUSTER,
        "other",
        vec![config_map("default", "other", json!({}))],
    );
    other.spec.depends_on = vec![ruled("db", "work.metadata.name == 'db'")];
    fleet.create_work(&other).await.expect("create other");
    wait_applied(&works, "other")
        .await
        .expect("another team's work applies beside the slow rule");
    let config_maps = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    for name in ["broken", "hog"] {
        assert!(
            config_maps.get_opt(name).await.expect("read").is_none(),
            "{name} was applied although its rule never held"
        );
    }
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_sets_own_dependency_takes_no_rule() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    grant_work_resources(
        &fleet.hub_client,
        "default",
        "tenant-replica-sets",
        TENANT,
        &["manifestworkreplicasets"],
    )
    .await;
    let tenant = fleet.hub.client_as(TENANT).await.expect("tenant client");
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(tenant, "default");
    let set = |depends_on: serde_json::Value| -> ManifestWorkReplicaSet {
        serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "app", "namespace": "default"},
            "spec": {
                "placementRefs": [{"name": "all"}],
                "dependsOn": depends_on,
                "manifestWorkTemplate": {
                    "workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "app", "namespace": "default"}}]},
                    "dependsOn": [{"name": "cache", "celExpression": QUORUM_READY}]
                }
            }
        }))
        .expect("a replica set")
    };
    let error = sets
        .create(
            &PostParams::default(),
            &set(json!([{"name": "db", "celExpression": "true"}])),
        )
        .await
        .expect_err("a rule on the replica set's own dependsOn is refused");
    assert!(
        error
            .to_string()
            .contains("takes a condition, not a celExpression"),
        "{error}"
    );
    // In the template (the works' own dependsOn, judged by each agent) it is
    // accepted.
    sets.create(&PostParams::default(), &set(json!([{"name": "db"}])))
        .await
        .expect("a rule in the template is accepted");
    fleet.stop().await;
}
