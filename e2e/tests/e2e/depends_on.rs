//! `spec.dependsOn` between the works of one cluster, enforced by the real
//! agent against a real spoke: a work's manifests are applied only once every
//! work it names is on the cluster with its condition True, the wait is
//! reported in `DependenciesReady`, a cycle is reported and never applied, a
//! work naming itself is refused by the hub API server, and a deleted work
//! keeps its objects while another work still depends on it, for at most the
//! agent's timeout.
//!
//! Order is proven by what the agent reported while works waited and by the
//! spoke objects' resourceVersions (etcd revisions, which only grow), never
//! by timing.

use ferry_api::manifest_work::{ManifestWork, WorkDependency};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::image::workspace_dir;
use ferry_e2e::helpers::tenant_rbac::grant_work_resources;
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_work, wait_applied, work_condition,
};
use ferry_e2e::helpers::work_helpers::{dependencies_ready, waits_for_dependencies_with};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde::Deserialize;
use serde_json::json;

const CLUSTER: &str = "cluster-a";

/// The works of `examples/depends-on.yaml`, by name.
fn example_works() -> Vec<ManifestWork> {
    let path = workspace_dir().join("examples/depends-on.yaml");
    let text = std::fs::read_to_string(&path).expect("read examples/depends-on.yaml");
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| ManifestWork::deserialize(doc).expect("an example document is a ManifestWork"))
        .collect()
}

fn depends_on(names: &[&str]) -> Vec<WorkDependency> {
    names
        .iter()
        .map(|n| WorkDependency {
            name: n.to_string(),
            condition: None,
            cel_expression: None,
        })
        .collect()
}

/// The resourceVersion of a spoke object, as a number (etcd's revision).
fn revision(object: &kube::api::DynamicObject) -> u64 {
    object
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .expect("a numeric resourceVersion")
}

#[test]
fn the_example_parses_into_works_with_a_dependency() {
    let works = example_works();
    let names: Vec<String> = works
        .iter()
        .map(|w| w.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(names, ["widgets-crd", "widgets"]);
    assert_eq!(works[1].spec.depends_on.len(), 1);
    assert_eq!(works[1].spec.depends_on[0].name, "widgets-crd");
    assert_eq!(works[1].spec.depends_on[0].condition_type(), "Available");
    assert!(works[0].spec.depends_on.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_work_waits_for_its_crd_work_then_applies() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let [crd_work, cr_work]: [ManifestWork; 2] =
        example_works().try_into().expect("two example works");
    // The dependent first, so the wait is there to see.
    let works = fleet.create_work(&cr_work).await.expect("create widgets");
    let waiting = wait_until(
        &works,
        "widgets",
        "widgets waits for the missing widgets-crd",
        APPLY_TIMEOUT,
        |w| waits_for_dependencies_with(w, "DependencyMissing", "widgets-crd"),
    )
    .await
    .expect("the dependent reports its wait");
    let applied = work_condition(&waiting, "Applied").expect("Applied reported");
    assert_eq!(
        (applied.status.as_str(), applied.reason.as_str()),
        ("False", "DependenciesNotReady")
    );
    // Nothing of it reached the spoke: not even an attempt at the unknown kind.
    let crds =
        fleet
            .spoke(CLUSTER)
            .api("apiextensions.k8s.io/v1", "CustomResourceDefinition", None);
    assert!(
        crds.get_opt("widgets.example.ferry.dev")
            .await
            .expect("read CRDs")
            .is_none()
    );
    assert!(
        waiting
            .status
            .as_ref()
            .and_then(|s| s.resource_status.as_ref())
            .is_none_or(|r| r.manifests.is_empty()),
        "a waiting work reports no manifest: {waiting:?}"
    );

    fleet
        .create_work(&crd_work)
        .await
        .expect("create widgets-crd");
    let crd_done = wait_applied(&works, "widgets-crd")
        .await
        .expect("CRD applied");
    assert_eq!(
        work_condition(&crd_done, "Available").map(|c| c.status.as_str()),
        Some("True")
    );
    let done = wait_until(
        &works,
        "widgets",
        "widgets applied once its dependency is Available",
        APPLY_TIMEOUT,
        |w| {
            work_condition(w, "Applied").is_some_and(|c| c.status == "True")
                && dependencies_ready(w).is_some_and(|(s, _, _)| s == "True")
        },
    )
    .await
    .expect("the dependent is applied");
    assert_eq!(
        dependencies_ready(&done).map(|(_, r, _)| r),
        Some("DependenciesReady".to_string())
    );
    let widget = fleet
        .spoke(CLUSTER)
        .api("example.ferry.dev/v1", "Widget", Some("default"))
        .get("first")
        .await
        .expect("the custom resource is on the spoke");
    assert_eq!(widget.data["spec"]["size"], 3);
    let crd = crds
        .get("widgets.example.ferry.dev")
        .await
        .expect("the CRD is on the spoke");
    assert!(revision(&crd) < revision(&widget));
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_three_created_in_reverse_applies_in_order() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let work = |name: &str, deps: &[&str]| {
        let mut w = manifest_work(
            CLUSTER,
            name,
            vec![config_map("default", name, json!({"step": name}))],
        );
        w.spec.depends_on = depends_on(deps);
        w
    };
    let works = fleet
        .create_work(&work("chain-3", &["chain-2"]))
        .await
        .expect("create chain-3");
    wait_until(
        &works,
        "chain-3",
        "chain-3 waits for the missing chain-2",
        APPLY_TIMEOUT,
        |w| waits_for_dependencies_with(w, "DependencyMissing", "chain-2"),
    )
    .await
    .expect("chain-3 waits");
    fleet
        .create_work(&work("chain-2", &["chain-1"]))
        .await
        .expect("create chain-2");
    wait_until(
        &works,
        "chain-2",
        "chain-2 waits for the missing chain-1",
        APPLY_TIMEOUT,
        |w| waits_for_dependencies_with(w, "DependencyMissing", "chain-1"),
    )
    .await
    .expect("chain-2 waits");
    // chain-2 exists now but is not applied: chain-3 waits for its condition.
    wait_until(
        &works,
        "chain-3",
        "chain-3 waits for chain-2 to be Available",
        APPLY_TIMEOUT,
        |w| waits_for_dependencies_with(w, "WaitingForDependency", "chain-2 to be Available=True"),
    )
    .await
    .expect("chain-3 waits for chain-2's condition");
    let config_maps = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    for name in ["chain-2", "chain-3"] {
        assert!(
            config_maps.get_opt(name).await.expect("read").is_none(),
            "{name} was applied while it waited"
        );
    }

    fleet
        .create_work(&work("chain-1", &[]))
        .await
        .expect("create chain-1");
    let mut revisions = Vec::new();
    let mut created = Vec::new();
    for name in ["chain-1", "chain-2", "chain-3"] {
        wait_applied(&works, name).await.expect("applied");
        let object = config_maps.get(name).await.expect("on the spoke");
        revisions.push(revision(&object));
        created.push(object.metadata.creation_timestamp.expect("created").0);
    }
    assert!(
        revisions[0] < revisions[1] && revisions[1] < revisions[2],
        "applied out of order: resourceVersions {revisions:?}"
    );
    assert!(
        created[0] <= created[1] && created[1] <= created[2],
        "{created:?}"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_is_reported_on_each_work_and_nothing_is_applied_until_it_is_broken() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let work = |name: &str, deps: &[&str]| {
        let mut w = manifest_work(
            CLUSTER,
            name,
            vec![config_map("default", name, json!({"k": "v"}))],
        );
        w.spec.depends_on = depends_on(deps);
        w
    };
    let works = fleet
        .create_work(&work("cycle-a", &["cycle-b"]))
        .await
        .expect("create a");
    fleet
        .create_work(&work("cycle-b", &["cycle-c"]))
        .await
        .expect("create b");
    fleet
        .create_work(&work("cycle-c", &["cycle-a"]))
        .await
        .expect("create c");
    for (name, cycle) in [
        ("cycle-a", "cycle-a -> cycle-b -> cycle-c -> cycle-a"),
        ("cycle-b", "cycle-b -> cycle-c -> cycle-a -> cycle-b"),
        ("cycle-c", "cycle-c -> cycle-a -> cycle-b -> cycle-c"),
    ] {
        wait_until(&works, name, "the cycle reported", APPLY_TIMEOUT, |w| {
            waits_for_dependencies_with(w, "DependencyCycle", cycle)
        })
        .await
        .expect("cycle reported");
    }
    let config_maps = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    for name in ["cycle-a", "cycle-b", "cycle-c"] {
        assert!(
            config_maps.get_opt(name).await.expect("read").is_none(),
            "{name} of a cycle was applied"
        );
    }
    // Breaking the cycle (c no longer depends on a) releases all three.
    works
        .patch(
            "cycle-c",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"dependsOn": null}})),
        )
        .await
        .expect("break the cycle");
    for name in ["cycle-c", "cycle-b", "cycle-a"] {
        wait_applied(&works, name)
            .await
            .expect("applied once the cycle is broken");
        config_maps.get(name).await.expect("on the spoke");
    }
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_that_depends_on_itself_is_refused_when_a_tenant_writes_it() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    // A tenant with every right on works of its cluster's namespace, and no more.
    grant_work_resources(
        &fleet.hub_client,
        CLUSTER,
        "tenant-works",
        "tenant",
        &["manifestworks"],
    )
    .await;
    let tenant = fleet.hub.client_as("tenant").await.expect("tenant client");
    let works: Api<ManifestWork> = Api::namespaced(tenant, CLUSTER);
    let mut work = manifest_work(
        CLUSTER,
        "narcissus",
        vec![config_map("default", "n", json!({}))],
    );
    work.spec.depends_on = depends_on(&["narcissus"]);
    let error = works
        .create(&PostParams::default(), &work)
        .await
        .expect_err("a work depending on itself is refused");
    let kube::Error::Api(status) = error else {
        panic!("not a refusal by the API server: {error}");
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status
            .message
            .contains("spec.dependsOn: a work cannot depend on itself (narcissus)"),
        "{}",
        status.message
    );
    // Naming a work twice is refused too; a valid dependency is accepted.
    work.spec.depends_on = depends_on(&["other", "other"]);
    let error = works
        .create(&PostParams::default(), &work)
        .await
        .expect_err("a duplicate is refused");
    assert!(
        error.to_string().contains("names a work more than once"),
        "{error}"
    );
    work.spec.depends_on = depends_on(&["other"]);
    works
        .create(&PostParams::default(), &work)
        .await
        .expect("a work depending on another is accepted");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_work_keeps_its_objects_until_its_dependents_are_gone() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let base = manifest_work(
        CLUSTER,
        "base",
        vec![config_map("default", "base", json!({}))],
    );
    let mut app = manifest_work(
        CLUSTER,
        "app",
        vec![config_map("default", "app", json!({}))],
    );
    app.spec.depends_on = depends_on(&["base"]);
    let works = fleet.create_work(&base).await.expect("create base");
    fleet.create_work(&app).await.expect("create app");
    // Both reports written before the deletion, so no report of the applied
    // work is still on its way when the deletion's arrives.
    wait_applied(&works, "base").await.expect("base applied");
    wait_applied(&works, "app").await.expect("app applied");

    works
        .delete("base", &DeleteParams::default())
        .await
        .expect("delete base");
    wait_until(
        &works,
        "base",
        "base held for its dependent",
        APPLY_TIMEOUT,
        |w| {
            work_condition(w, "Deleting")
                .is_some_and(|c| c.reason == "WaitingForDependents" && c.message.contains("app"))
        },
    )
    .await
    .expect("the deletion waits for app");
    let config_maps = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    config_maps
        .get("base")
        .await
        .expect("base's object stays while app depends on it");

    works
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete app");
    wait_deleted(
        &works,
        "base",
        "base released once app is gone",
        APPLY_TIMEOUT,
    )
    .await
    .expect("base goes");
    assert!(config_maps.get_opt("base").await.expect("read").is_none());
    assert!(config_maps.get_opt("app").await.expect("read").is_none());
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_that_stays_cannot_pin_a_deleted_work_past_the_timeout() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    fleet.stop_agent(CLUSTER).await;
    fleet.set_agent_options(CLUSTER, |o| {
        o.dependents_deletion_timeout = std::time::Duration::from_secs(5);
    });
    fleet.start_agent(CLUSTER);
    let base = manifest_work(
        CLUSTER,
        "base",
        vec![config_map("default", "base", json!({}))],
    );
    let mut app = manifest_work(
        CLUSTER,
        "app",
        vec![config_map("default", "app", json!({}))],
    );
    app.spec.depends_on = depends_on(&["base"]);
    let works = fleet.create_work(&base).await.expect("create base");
    fleet.create_work(&app).await.expect("create app");
    wait_applied(&works, "base").await.expect("base applied");
    wait_applied(&works, "app").await.expect("app applied");

    // app is never deleted: base goes anyway once the timeout has passed.
    works
        .delete("base", &DeleteParams::default())
        .await
        .expect("delete base");
    wait_deleted(
        &works,
        "base",
        "base released after the timeout",
        APPLY_TIMEOUT,
    )
    .await
    .expect("base goes although app still depends on it");
    let config_maps = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    assert!(config_maps.get_opt("base").await.expect("read").is_none());
    // The dependent stays applied: nothing of it is deleted.
    config_maps.get("app").await.expect("app's object stays");
    let app = works.get("app").await.expect("app");
    assert!(
        work_condition(&app, "Applied").is_some_and(|c| c.status == "True"),
        "{app:?}"
    );
    fleet.stop().await;
}
