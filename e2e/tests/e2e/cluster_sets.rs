//! Cluster sets and bindings (issue 20): a Placement chooses only among the
//! clusters of the ManagedClusterSets bound to its namespace, narrowed by
//! `spec.clusterSets`; with no binding it chooses none and says why; a
//! cluster relabelled into another set moves; set status counts follow; a
//! replica set in an unbound namespace writes no work; binding a set needs
//! `create` on `managedclustersets/bind`, checked by the API server with no
//! hub process running.

use std::collections::BTreeSet;
use std::time::Duration;

use ferry_api::cluster_set::{
    ManagedClusterSet, ManagedClusterSetBinding, ManagedClusterSetBindingSpec,
    ManagedClusterSetSpec,
};
use ferry_api::contract::{
    CLUSTER_SET_LABEL, DEFAULT_CLUSTER_SET, GLOBAL_CLUSTER_SET, PLACEMENT_LABEL, REPLICA_SET_LABEL,
    UNREACHABLE_TAINT,
};
use ferry_api::managed_cluster::{ManagedCluster, ManagedClusterSpec};
use ferry_api::manifest_work::{Condition, ManifestWork};
use ferry_api::placement::{Placement, PlacementDecision};
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::namespaces::create_namespace;
use ferry_e2e::helpers::placement_helpers::{bind_cluster_set, create_placement_unbound};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map, wait_applied};
use ferry_hub::admission::cluster_set_policy::CLUSTER_SET_POLICY_NAME;
use ferry_hub::crds::install_crds;
use ferry_semantics::contract::{
    ALL_MANAGED_CLUSTER_SETS_EMPTY, BOUND, CLUSTER_SET_EMPTY, NO_MANAGED_CLUSTER_SET_BINDINGS,
    PLACEMENT_SATISFIED, PLACEMENT_VERIFIED,
};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

const TENANT: &str = "team-a";

async fn add_cluster(client: &Client, name: &str, set: Option<&str>) {
    let mut cluster = ManagedCluster::new(name, ManagedClusterSpec::default());
    if let Some(set) = set {
        cluster.metadata.labels = Some([(CLUSTER_SET_LABEL.to_string(), set.to_string())].into());
    }
    Api::<ManagedCluster>::all(client.clone())
        .create(&PostParams::default(), &cluster)
        .await
        .expect("create ManagedCluster");
}

async fn create_set(client: &Client, name: &str) {
    Api::<ManagedClusterSet>::all(client.clone())
        .create(
            &PostParams::default(),
            &ManagedClusterSet::new(name, ManagedClusterSetSpec::default()),
        )
        .await
        .expect("create ManagedClusterSet");
}

async fn move_cluster(client: &Client, name: &str, set: &str) {
    Api::<ManagedCluster>::all(client.clone())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {CLUSTER_SET_LABEL: set}}})),
        )
        .await
        .expect("relabel ManagedCluster");
}

fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn placement_condition<'a>(p: &'a Placement, type_: &str) -> Option<&'a Condition> {
    p.status
        .as_ref()
        .and_then(|s| condition(&s.conditions, type_))
}

/// The clusters the placement's decisions name.
async fn decided(client: &Client, namespace: &str, placement: &str) -> BTreeSet<String> {
    Api::<PlacementDecision>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&format!("{PLACEMENT_LABEL}={placement}")))
        .await
        .expect("list PlacementDecisions")
        .items
        .iter()
        .flat_map(|d| d.status.iter().flat_map(|s| s.decisions.iter()))
        .map(|d| d.cluster_name.clone())
        .collect()
}

/// Waits until the placement's status reports `selected` clusters with
/// `PlacementSatisfied` of `reason` for its current generation, then checks
/// its decisions name exactly `clusters`; returns the condition's message.
async fn wait_placement(
    client: &Client,
    namespace: &str,
    placement: &str,
    reason: &str,
    clusters: &[&str],
) -> String {
    let api: Api<Placement> = Api::namespaced(client.clone(), namespace);
    let selected = i32::try_from(clusters.len()).expect("few clusters");
    let wanted: BTreeSet<String> = clusters.iter().map(|c| c.to_string()).collect();
    let deadline = tokio::time::Instant::now() + APPLY_TIMEOUT;
    loop {
        let p = wait_until(&api, placement, reason, APPLY_TIMEOUT, |p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.number_of_selected_clusters == selected)
                && placement_condition(p, PLACEMENT_SATISFIED).is_some_and(|c| {
                    c.reason == reason && Some(c.observed_generation) == p.metadata.generation
                })
        })
        .await
        .unwrap_or_else(|e| panic!("placement {namespace}/{placement}: {e}"));
        // The status is written after the decisions.
        let now = decided(client, namespace, placement).await;
        if now == wanted {
            return placement_condition(&p, PLACEMENT_SATISFIED)
                .map(|c| c.message.clone())
                .unwrap_or_default();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "placement {namespace}/{placement} decided {now:?}, expected {wanted:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until set `name` reports `count` clusters and a ClusterSetEmpty
/// that agrees.
async fn wait_set_count(client: &Client, name: &str, count: i32) {
    let api: Api<ManagedClusterSet> = Api::all(client.clone());
    let set = wait_until(&api, name, "set status", APPLY_TIMEOUT, |s| {
        s.status.as_ref().is_some_and(|st| {
            st.cluster_count == count
                && condition(&st.conditions, CLUSTER_SET_EMPTY)
                    .is_some_and(|c| c.status == if count == 0 { "True" } else { "False" })
        })
    })
    .await
    .unwrap_or_else(|e| panic!("ManagedClusterSet {name}: {e}"));
    println!("set {name}: {:?}", set.status);
}

fn tolerate_unreachable() -> serde_json::Value {
    json!({"tolerations": [{"key": UNREACHABLE_TAINT, "operator": "Exists"}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_reaches_only_the_clusters_of_sets_bound_to_its_namespace() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    create_namespace(&hub, TENANT).await;
    create_set(&hub, "x").await;
    create_set(&hub, "y").await;
    add_cluster(&hub, "c1", Some("x")).await;
    add_cluster(&hub, "c2", Some("y")).await;
    add_cluster(&hub, "c3", None).await;

    // The hub labels an unlabelled cluster into `default`, as OCM does.
    wait_until(
        &Api::<ManagedCluster>::all(hub.clone()),
        "c3",
        "default set label",
        APPLY_TIMEOUT,
        |c| c.labels().get(CLUSTER_SET_LABEL).map(String::as_str) == Some(DEFAULT_CLUSTER_SET),
    )
    .await
    .expect("c3 joins the default set");

    // No binding: nothing is chosen, and the placement says why.
    create_placement_unbound(&hub, TENANT, "all", tolerate_unreachable()).await;
    let message = wait_placement(&hub, TENANT, "all", NO_MANAGED_CLUSTER_SET_BINDINGS, &[]).await;
    println!("unbound: {message}");
    assert!(
        message.contains(TENANT) && message.contains("ManagedClusterSetBinding"),
        "{message}"
    );

    // Bound to x: x's cluster only.
    bind_cluster_set(&hub, TENANT, "x").await;
    wait_placement(&hub, TENANT, "all", "AllDecisionsScheduled", &["c1"]).await;
    let bindings: Api<ManagedClusterSetBinding> = Api::namespaced(hub.clone(), TENANT);
    wait_until(&bindings, "x", "Bound", APPLY_TIMEOUT, |b| {
        b.status
            .as_ref()
            .and_then(|s| condition(&s.conditions, BOUND))
            .is_some_and(|c| c.status == "True")
    })
    .await
    .expect("the binding is Bound");

    // Bound to x and y: both; clusterSets narrows to y; an unbound set
    // reaches nothing.
    bind_cluster_set(&hub, TENANT, "y").await;
    wait_placement(&hub, TENANT, "all", "AllDecisionsScheduled", &["c1", "c2"]).await;
    let mut narrow = tolerate_unreachable();
    narrow["clusterSets"] = json!(["y"]);
    create_placement_unbound(&hub, TENANT, "only-y", narrow).await;
    wait_placement(&hub, TENANT, "only-y", "AllDecisionsScheduled", &["c2"]).await;
    let mut elsewhere = tolerate_unreachable();
    elsewhere["clusterSets"] = json!([DEFAULT_CLUSTER_SET]);
    create_placement_unbound(&hub, TENANT, "only-default", elsewhere).await;
    wait_placement(
        &hub,
        TENANT,
        "only-default",
        NO_MANAGED_CLUSTER_SET_BINDINGS,
        &[],
    )
    .await;

    // A binding to a set that does not exist is not Bound.
    bind_cluster_set(&hub, TENANT, "missing").await;
    let unbound = wait_until(&bindings, "missing", "Bound=False", APPLY_TIMEOUT, |b| {
        b.status
            .as_ref()
            .and_then(|s| condition(&s.conditions, BOUND))
            .is_some_and(|c| c.status == "False")
    })
    .await
    .expect("a binding to a missing set is not Bound");
    println!("missing set: {:?}", unbound.status);

    wait_set_count(&hub, "x", 1).await;
    wait_set_count(&hub, "y", 1).await;
    wait_set_count(&hub, DEFAULT_CLUSTER_SET, 1).await;
    wait_set_count(&hub, GLOBAL_CLUSTER_SET, 3).await;

    // c2 moves from y to x: y empties, the narrowed placement says so and,
    // having lost every cluster at once, holds its last decision (issue 31).
    move_cluster(&hub, "c2", "x").await;
    wait_placement(
        &hub,
        TENANT,
        "only-y",
        ALL_MANAGED_CLUSTER_SETS_EMPTY,
        &["c2"],
    )
    .await;
    wait_placement(&hub, TENANT, "all", "AllDecisionsScheduled", &["c1", "c2"]).await;
    wait_set_count(&hub, "x", 2).await;
    wait_set_count(&hub, "y", 0).await;

    // c1 moves to default (not bound here): it leaves the decisions.
    move_cluster(&hub, "c1", DEFAULT_CLUSTER_SET).await;
    wait_placement(&hub, TENANT, "all", "AllDecisionsScheduled", &["c2"]).await;
    wait_set_count(&hub, DEFAULT_CLUSTER_SET, 2).await;
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_set_in_an_unbound_namespace_writes_no_works_until_a_set_is_bound() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    create_namespace(&hub, TENANT).await;
    create_placement_unbound(&hub, TENANT, "everywhere", json!({})).await;
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "takeover", "namespace": TENANT},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [
                config_map("default", "takeover", json!({"from": TENANT})),
            ]}},
            "placementRefs": [{"name": "everywhere", "rolloutStrategy": {"type": "All"}}],
        },
    }))
    .expect("replica set");
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), TENANT);
    sets.create(&PostParams::default(), &rs)
        .await
        .expect("create replica set");
    wait_placement(
        &hub,
        TENANT,
        "everywhere",
        NO_MANAGED_CLUSTER_SET_BINDINGS,
        &[],
    )
    .await;
    let seen = wait_until(
        &sets,
        "takeover",
        "PlacementVerified",
        APPLY_TIMEOUT,
        |rs| {
            rs.status.as_ref().is_some_and(|s| {
                condition(&s.conditions, PLACEMENT_VERIFIED)
                    .is_some_and(|c| Some(c.observed_generation) == rs.metadata.generation)
                    && s.summary.total == 0
            })
        },
    )
    .await
    .expect("the replica set reconciled its empty placement");
    println!("unbound replica set: {:?}", seen.status);
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), "cluster-a");
    let label = format!("{REPLICA_SET_LABEL}={TENANT}.takeover");
    let written = works
        .list(&ListParams::default().labels(&label))
        .await
        .expect("list works");
    assert!(
        written.items.is_empty(),
        "an unbound namespace wrote works: {:?}",
        written
            .items
            .iter()
            .map(|w| w.name_any())
            .collect::<Vec<_>>()
    );
    assert!(works.get_opt("takeover").await.expect("read").is_none());

    // Bound, the same replica set reaches the cluster.
    bind_cluster_set(&hub, TENANT, GLOBAL_CLUSTER_SET).await;
    wait_applied(&works, "takeover")
        .await
        .expect("with global bound the work is written and applied");
    fleet.stop().await;
}

fn cluster_role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        rules: Some(rules),
        ..Default::default()
    }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: kind.into(),
        name: name.into(),
    }
}

fn user(name: &str) -> Vec<Subject> {
    vec![Subject {
        kind: "User".into(),
        name: name.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        ..Default::default()
    }]
}

fn binding_of(set: &str, name: &str) -> ManagedClusterSetBinding {
    let mut binding = ManagedClusterSetBinding::new(
        name,
        ManagedClusterSetBindingSpec {
            cluster_set: set.into(),
        },
    );
    binding.metadata.namespace = Some(TENANT.into());
    binding
}

/// A dry-run create: Ok, or the refusal's message.
async fn try_bind(api: &Api<ManagedClusterSetBinding>, set: &str) -> Result<(), String> {
    let params = PostParams {
        dry_run: true,
        ..Default::default()
    };
    match api.create(&params, &binding_of(set, set)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err(status.message),
        Err(other) => Err(other.to_string()),
    }
}

/// Retries a dry-run bind until `done` holds: the signal that the API
/// server enforces a new policy or RBAC grant (it learns of both
/// asynchronously).
async fn until(
    api: &Api<ManagedClusterSetBinding>,
    set: &str,
    done: impl Fn(&Result<(), String>) -> bool,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let outcome = try_bind(api, set).await;
        if done(&outcome) || tokio::time::Instant::now() >= deadline {
            return outcome;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_a_set_needs_bind_rights_checked_by_the_api_server_with_no_hub_running() {
    const TEAM: &str = "bob";
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let admin = hub.client().await.expect("admin client");
    install_crds(&admin).await.expect("CRDs and policies");
    create_namespace(&admin, TENANT).await;
    let may_create_bindings = PolicyRule {
        api_groups: Some(vec!["cluster.ferry.dev".into()]),
        resources: Some(vec!["managedclustersetbindings".into()]),
        verbs: vec!["create".into(), "get".into()],
        ..Default::default()
    };
    Api::<Role>::namespaced(admin.clone(), TENANT)
        .create(
            &PostParams::default(),
            &Role {
                metadata: ObjectMeta {
                    name: Some("binder".into()),
                    namespace: Some(TENANT.into()),
                    ..Default::default()
                },
                rules: Some(vec![may_create_bindings]),
            },
        )
        .await
        .expect("role");
    Api::<RoleBinding>::namespaced(admin.clone(), TENANT)
        .create(
            &PostParams::default(),
            &RoleBinding {
                metadata: ObjectMeta {
                    name: Some("binder".into()),
                    namespace: Some(TENANT.into()),
                    ..Default::default()
                },
                role_ref: role_ref("Role", "binder"),
                subjects: Some(user(TEAM)),
            },
        )
        .await
        .expect("role binding");

    let bob = hub.client_as(TEAM).await.expect("bob");
    let bindings: Api<ManagedClusterSetBinding> = Api::namespaced(bob, TENANT);
    // Create on bindings but no bind right: refused by the policy.
    let refused = until(&bindings, "prod", |o| {
        o.as_ref()
            .is_err_and(|m| m.contains(CLUSTER_SET_POLICY_NAME))
    })
    .await
    .expect_err("binding without bind rights is refused");
    println!("refusal: {refused}");
    assert!(
        refused.contains(TEAM)
            && refused.contains("ManagedClusterSet prod")
            && refused.contains("managedclustersets/bind"),
        "the refusal names the requester, the set and the missing right: {refused}"
    );

    // Bind granted on `prod` only, by resource name (cluster-scoped: sets are).
    let bind_prod = PolicyRule {
        api_groups: Some(vec!["cluster.ferry.dev".into()]),
        resources: Some(vec!["managedclustersets/bind".into()]),
        resource_names: Some(vec!["prod".into()]),
        verbs: vec!["create".into()],
        ..Default::default()
    };
    Api::<ClusterRole>::all(admin.clone())
        .create(
            &PostParams::default(),
            &cluster_role("bind-prod", vec![bind_prod]),
        )
        .await
        .expect("cluster role");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(
            &PostParams::default(),
            &ClusterRoleBinding {
                metadata: ObjectMeta {
                    name: Some("bob-binds-prod".into()),
                    ..Default::default()
                },
                role_ref: role_ref("ClusterRole", "bind-prod"),
                subjects: Some(user(TEAM)),
            },
        )
        .await
        .expect("cluster role binding");
    until(&bindings, "prod", Result::is_ok)
        .await
        .expect("with bind on prod the binding is admitted");
    bindings
        .create(&PostParams::default(), &binding_of("prod", "prod"))
        .await
        .expect("stored");
    let refused = try_bind(&bindings, "staging")
        .await
        .expect_err("another set is still refused");
    assert!(refused.contains("ManagedClusterSet staging"), "{refused}");

    // A binding named differently from its set is refused by the CRD.
    let params = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let misnamed = Api::<ManagedClusterSetBinding>::namespaced(admin.clone(), TENANT)
        .create(&params, &binding_of("prod", "other-name"))
        .await
        .expect_err("a binding must be named after its set");
    println!("misnamed: {misnamed}");
    assert!(
        misnamed
            .to_string()
            .contains("the binding's name must equal spec.clusterSet"),
        "{misnamed}"
    );
    hub.stop().await;
}
