//! Only the hub writes what the hub decides (issue 30, item 3): a tenant
//! with broad RBAC in its namespace still cannot write PlacementDecisions
//! or a replica set's status (the API server refuses, quoting the
//! hub-owned-writes policy), and a decision naming a cluster outside the
//! namespace's bound sets (written as an administrator, as a routed-around
//! write would be) gets no work and is named in the replica set's status.
//! Nor can a tenant with every right on ClusterProfiles forge, change or
//! disown one ferry publishes; profiles of other cluster managers stay
//! theirs to write. Nor can whoever writes works in a cluster's namespace
//! set or change the replica-set label that names a work's owner.

use std::time::Duration;

use ferry_api::contract::{CLUSTER_SET_LABEL, PLACEMENT_LABEL, REPLICA_SET_LABEL};
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::placement::PlacementDecision;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::admission::{refusal, until_refused_by};
use ferry_e2e::helpers::cluster_inventory::{
    PLACEMENT_DECISION_CRD, cluster_profiles, install_cluster_profile_crd, install_module_crd,
    inventory_placement_decisions,
};
use ferry_e2e::helpers::namespaces::create_namespace;
use ferry_e2e::helpers::placement_helpers::{bind_cluster_set, create_placement_unbound};
use ferry_e2e::helpers::tenant_rbac::grant_work_resources;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map, manifest_work, wait_applied};
use ferry_hub::admission::hub_writes_policy::HUB_WRITES_POLICY_NAME;
use ferry_hub::crds::install_crds;
use ferry_hub::replica_set::bound::{CLUSTERS_REFUSED, NOT_IN_BOUND_SETS};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const TENANT: &str = "team-a";
const TEAM: &str = "mallory";
/// How long the replica set is given to answer one write of the routed decision.
const ROUND: Duration = Duration::from_secs(10);

/// Grants `TEAM` every verb on every ferry resource and ClusterProfile (and
/// subresource) in `TENANT`: broader than the README's tenant role, so only
/// the admission policy stands in the way.
async fn grant_tenant_everything(admin: &Client) {
    let rule = PolicyRule {
        api_groups: Some(vec![
            "cluster.ferry.dev".into(),
            "work.ferry.dev".into(),
            "multicluster.x-k8s.io".into(),
        ]),
        resources: Some(vec!["*".into(), "*/status".into()]),
        verbs: vec!["*".into()],
        ..Default::default()
    };
    Api::<Role>::namespaced(admin.clone(), TENANT)
        .create(
            &PostParams::default(),
            &Role {
                metadata: ObjectMeta {
                    name: Some("tenant".into()),
                    namespace: Some(TENANT.into()),
                    ..Default::default()
                },
                rules: Some(vec![rule]),
            },
        )
        .await
        .expect("role");
    Api::<RoleBinding>::namespaced(admin.clone(), TENANT)
        .create(
            &PostParams::default(),
            &RoleBinding {
                metadata: ObjectMeta {
                    name: Some("tenant".into()),
                    namespace: Some(TENANT.into()),
                    ..Default::default()
                },
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "Role".into(),
                    name: "tenant".into(),
                },
                subjects: Some(vec![Subject {
                    kind: "User".into(),
                    name: TEAM.into(),
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    ..Default::default()
                }]),
            },
        )
        .await
        .expect("role binding");
}

/// Retries `attempt` until it is refused quoting the hub-owned-writes
/// policy (the API server learns of policies and RBAC asynchronously);
/// returns the last outcome.
async fn until_refused<F, Fut>(what: &str, attempt: F) -> Result<(), String>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let outcome = until_refused_by(HUB_WRITES_POLICY_NAME, Duration::from_secs(60), || async {
        attempt().await.map_err(refusal)
    })
    .await;
    println!("{what}: {outcome:?}");
    outcome
}

fn decision(name: &str, placement: &str, clusters: &[&str]) -> PlacementDecision {
    serde_json::from_value(json!({
        "apiVersion": "cluster.ferry.dev/v1alpha1",
        "kind": "PlacementDecision",
        "metadata": {"name": name, "namespace": TENANT, "labels": {PLACEMENT_LABEL: placement}},
        "spec": {},
        "status": {"decisions": clusters.iter().map(|c| json!({"clusterName": c, "reason": ""})).collect::<Vec<_>>()},
    }))
    .expect("decision")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cannot_write_decisions_or_its_replica_sets_status() {
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let admin = hub.client().await.expect("admin client");
    install_crds(&admin).await.expect("CRDs and policies");
    create_namespace(&admin, TENANT).await;
    grant_tenant_everything(&admin).await;
    // A replica set and a decision the tenant's writes will aim at, made
    // by the administrator (allowed: system:masters).
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "app", "namespace": TENANT},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [
                config_map("default", "app", json!({"a": "b"})),
            ]}},
            "placementRefs": [{"name": "p", "rolloutStrategy": {"type": "All"}}],
        },
    }))
    .expect("replica set");
    Api::<ManifestWorkReplicaSet>::namespaced(admin.clone(), TENANT)
        .create(&PostParams::default(), &rs)
        .await
        .expect("an administrator creates a replica set");
    Api::<PlacementDecision>::namespaced(admin.clone(), TENANT)
        .create(&PostParams::default(), &decision("p-decision-1", "p", &[]))
        .await
        .expect("an administrator may write a decision");

    let tenant = hub.client_as(TEAM).await.expect("tenant client");
    let decisions: Api<PlacementDecision> = Api::namespaced(tenant.clone(), TENANT);
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(tenant.clone(), TENANT);
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let create = until_refused("tenant creates a decision", || async {
        decisions
            .create(&dry, &decision("mine", "p", &["anywhere"]))
            .await
            .map(|_| ())
    })
    .await;
    let message = create.expect_err("a tenant's PlacementDecision is refused");
    assert!(
        message.contains(TEAM),
        "the refusal names the requester: {message}"
    );

    let patch = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let status = json!({"status": {"decisions": [{"clusterName": "anywhere", "reason": ""}]}});
    until_refused("tenant patches a decision's status", || async {
        decisions
            .patch_status("p-decision-1", &patch, &Patch::Merge(&status))
            .await
            .map(|_| ())
    })
    .await
    .expect_err("a tenant's decision status patch is refused");
    until_refused("tenant labels a decision", || async {
        decisions
            .patch(
                "p-decision-1",
                &patch,
                &Patch::Merge(json!({"metadata": {"labels": {PLACEMENT_LABEL: "other"}}})),
            )
            .await
            .map(|_| ())
    })
    .await
    .expect_err("a tenant's decision patch is refused");
    // A gate marked passed by the tenant.
    let gate = json!({"status": {"rollout": {"placements": [{
        "name": "p", "gates": [{"afterGroup": "canary", "state": "Passed"}]}]}}});
    until_refused("tenant patches its replica set's status", || async {
        sets.patch_status("app", &patch, &Patch::Merge(&gate))
            .await
            .map(|_| ())
    })
    .await
    .expect_err("a tenant's replica-set status patch is refused");
    // The tenant's own spec writes still go through.
    sets.patch(
        "app",
        &patch,
        &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
    )
    .await
    .expect("a tenant may still edit its replica set");
}

fn profile(name: &str, manager: &str) -> kube::api::DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name, "namespace": TENANT,
            "labels": {"x-k8s.io/cluster-manager": manager}},
        "spec": {"displayName": name, "clusterManager": {"name": manager}},
    }))
    .expect("profile")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cannot_forge_change_or_disown_ferrys_cluster_profiles() {
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let admin = hub.client().await.expect("admin client");
    install_crds(&admin).await.expect("CRDs and policies");
    install_cluster_profile_crd(&admin)
        .await
        .expect("the ClusterProfile CRD");
    create_namespace(&admin, TENANT).await;
    grant_tenant_everything(&admin).await;
    // A profile as the hub publishes it (written here by an administrator).
    cluster_profiles(&admin, TENANT)
        .create(&PostParams::default(), &profile("spoke-a", "ferry"))
        .await
        .expect("an administrator may write ferry's profile");

    let profiles = cluster_profiles(&hub.client_as(TEAM).await.expect("tenant"), TENANT);
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let patch = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let forged = until_refused("tenant creates a ferry profile", || async {
        profiles
            .create(&dry, &profile("invented", "ferry"))
            .await
            .map(|_| ())
    })
    .await
    .expect_err("a tenant's ferry-labelled profile is refused");
    assert!(
        forged.contains(TEAM),
        "the refusal names the requester: {forged}"
    );
    let healthy = json!({"status": {"conditions": [{"type": "ControlPlaneHealthy",
        "status": "True", "reason": "Forged", "message": "",
        "lastTransitionTime": "2026-11-28T00:00:00Z"}]}});
    until_refused("tenant marks ferry's profile healthy", || async {
        profiles
            .patch_status("spoke-a", &patch, &Patch::Merge(&healthy))
            .await
            .map(|_| ())
    })
    .await
    .expect_err("a tenant's status patch of ferry's profile is refused");
    // Taking the label off would make it look like someone else's profile:
    // the object as it was is ferry's, so that is refused too.
    until_refused("tenant disowns ferry's profile", || async {
        profiles
            .patch(
                "spoke-a",
                &patch,
                &Patch::Merge(
                    json!({"metadata": {"labels": {"x-k8s.io/cluster-manager": "other"}}}),
                ),
            )
            .await
            .map(|_| ())
    })
    .await
    .expect_err("a tenant's relabelling of ferry's profile is refused");
    // Another cluster manager's profile is not ferry's to guard.
    profiles
        .create(&dry, &profile("elsewhere", "other-manager"))
        .await
        .expect("a profile of another cluster manager is admitted");
}

/// A `multicluster.x-k8s.io` PlacementDecision in the tenant's namespace:
/// ferry's when `placement` labels it (as the hub writes them).
fn slice(name: &str, placement: Option<&str>, clusters: &[&str]) -> kube::api::DynamicObject {
    let labels = match placement {
        Some(p) => json!({PLACEMENT_LABEL: p, "multicluster.x-k8s.io/decision-key": p}),
        None => json!({"multicluster.x-k8s.io/decision-key": name}),
    };
    serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "PlacementDecision",
        "metadata": {"name": name, "namespace": TENANT, "labels": labels},
        "decisions": clusters.iter().map(|c| json!({"clusterProfileRef": {"name": c}})).collect::<Vec<_>>(),
        "schedulerName": if placement.is_some() { "ferry" } else { "other-scheduler" },
    }))
    .expect("slice")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cannot_forge_change_or_disown_ferrys_inventory_placement_decisions() {
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let admin = hub.client().await.expect("admin client");
    install_crds(&admin).await.expect("CRDs and policies");
    install_module_crd(&admin, PLACEMENT_DECISION_CRD)
        .await
        .expect("the upstream PlacementDecision CRD");
    create_namespace(&admin, TENANT).await;
    grant_tenant_everything(&admin).await;
    // A slice as the hub publishes it (written here by an administrator).
    inventory_placement_decisions(&admin, TENANT)
        .create(
            &PostParams::default(),
            &slice("p-decision-1", Some("p"), &["spoke-a"]),
        )
        .await
        .expect("an administrator may write ferry's slice");

    let slices = inventory_placement_decisions(&hub.client_as(TEAM).await.expect("tenant"), TENANT);
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let patch = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    // A consumer trusting ferry's slices would send work to a cluster the
    // placement never chose.
    let forged = until_refused("tenant creates a ferry slice", || async {
        slices
            .create(&dry, &slice("invented", Some("p"), &["anywhere"]))
            .await
            .map(|_| ())
    })
    .await
    .expect_err("a tenant's ferry-labelled slice is refused");
    assert!(
        forged.contains(TEAM),
        "the refusal names the requester: {forged}"
    );
    until_refused("tenant rewrites ferry's slice", || async {
        slices
            .patch(
                "p-decision-1",
                &patch,
                &Patch::Merge(json!({"decisions": [{"clusterProfileRef": {"name": "anywhere"}}]})),
            )
            .await
            .map(|_| ())
    })
    .await
    .expect_err("a tenant's edit of ferry's slice is refused");
    // Taking ferry's label off: the object as it was is ferry's.
    until_refused("tenant disowns ferry's slice", || async {
        slices
            .patch(
                "p-decision-1",
                &patch,
                &Patch::Json::<()>(
                    serde_json::from_value(json!([{"op": "remove",
                        "path": "/metadata/labels/cluster.ferry.dev~1placement"}]))
                    .expect("json patch"),
                ),
            )
            .await
            .map(|_| ())
    })
    .await
    .expect_err("a tenant's unlabelling of ferry's slice is refused");
    // Another scheduler's slice in the namespace is not ferry's to guard.
    slices
        .create(&dry, &slice("elsewhere", None, &["spoke-b"]))
        .await
        .expect("a slice of another scheduler is admitted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decided_cluster_outside_the_bound_sets_gets_no_work_and_is_named() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["inside", "outside"]))
        .await
        .expect("fleet");
    let hub = fleet.hub_client.clone();
    create_namespace(&hub, TENANT).await;
    // `inside` in the team's set, bound to the namespace; `outside` not.
    Api::<ManagedCluster>::all(hub.clone())
        .patch(
            "inside",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {CLUSTER_SET_LABEL: TENANT}}})),
        )
        .await
        .expect("label inside");
    Api::<ferry_api::cluster_set::ManagedClusterSet>::all(hub.clone())
        .create(
            &PostParams::default(),
            &ferry_api::cluster_set::ManagedClusterSet::new(TENANT, Default::default()),
        )
        .await
        .expect("create set");
    bind_cluster_set(&hub, TENANT, TENANT).await;
    create_placement_unbound(&hub, TENANT, "p", json!({})).await;
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "app", "namespace": TENANT},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [
                config_map("default", "app", json!({"a": "b"})),
            ]}},
            "placementRefs": [{"name": "p", "rolloutStrategy": {"type": "All"}}],
        },
    }))
    .expect("replica set");
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), TENANT);
    sets.create(&PostParams::default(), &rs)
        .await
        .expect("create replica set");
    wait_applied(&Api::namespaced(hub.clone(), "inside"), "app")
        .await
        .expect("the bound cluster gets its work");

    // The routed-around write: the decision now also names `outside`.
    let decisions: Api<PlacementDecision> = Api::namespaced(hub.clone(), TENANT);
    let name = decisions
        .list(&ListParams::default().labels(&format!("{PLACEMENT_LABEL}=p")))
        .await
        .expect("list decisions")
        .items
        .first()
        .map(|d| d.name_any())
        .expect("the placement's decision");
    let routed = json!({"status": {"decisions": [
        {"clusterName": "inside", "reason": ""},
        {"clusterName": "outside", "reason": ""},
    ]}});
    let refused = |rs: &ManifestWorkReplicaSet| {
        rs.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == CLUSTERS_REFUSED
                    && c.status == "True"
                    && c.reason == NOT_IN_BOUND_SETS
                    && c.message.contains("outside")
            })
        })
    };
    // The placement controller owns the decision and puts it back to its
    // own choice when it next looks (its watch, or its 30 s sweep), which
    // may come before the replica-set controller has read the routed one;
    // the administrator writes it again each round, so the replica set
    // meets a decision naming `outside` whatever the order.
    let deadline = tokio::time::Instant::now() + APPLY_TIMEOUT;
    let seen = loop {
        decisions
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&routed))
            .await
            .expect("an administrator writes the decision");
        match wait_until(&sets, "app", CLUSTERS_REFUSED, ROUND, refused).await {
            Ok(seen) => break seen,
            Err(e) => assert!(
                tokio::time::Instant::now() < deadline,
                "the replica set never named the refused cluster: {e}"
            ),
        }
    };
    println!("status: {:?}", seen.status.map(|s| s.conditions));
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), "outside");
    let written = works
        .list(&ListParams::default().labels(&format!("{REPLICA_SET_LABEL}={TENANT}.app")))
        .await
        .expect("list works");
    assert!(
        written.items.is_empty(),
        "a cluster outside the bound sets was written a work"
    );
    fleet.stop().await;
}

/// The owner the agent is told of a work is its replica-set label's
/// namespace (issue 48): whoever may write works in a cluster's namespace
/// (the README's right, given here in full) cannot set, change or remove
/// that label to pass as another team or to shed its own owner. Edits that
/// leave it as it was, and works without it, are theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_namespace_writer_cannot_set_or_change_the_owner_label_of_a_work() {
    const CLUSTER: &str = "spoke-a";
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let admin = hub.client().await.expect("admin client");
    install_crds(&admin).await.expect("CRDs and policies");
    create_namespace(&admin, CLUSTER).await;
    grant_work_resources(&admin, CLUSTER, "cluster-writer", TEAM, &["manifestworks"]).await;
    let work = |name: &str, owner: Option<&str>| {
        let mut work = manifest_work(
            CLUSTER,
            name,
            vec![config_map("default", name, json!({"v": "1"}))],
        );
        work.metadata.labels =
            owner.map(|o| [(REPLICA_SET_LABEL.to_string(), o.to_string())].into());
        work
    };
    // A replica set's work, as the hub (here the administrator) writes it.
    let admin_works: Api<ManifestWork> = Api::namespaced(admin.clone(), CLUSTER);
    admin_works
        .create(&PostParams::default(), &work("vault", Some("team-b.vault")))
        .await
        .expect("the hub's identity writes the label");

    let writer = hub.client_as(TEAM).await.expect("writer client");
    let works: Api<ManifestWork> = Api::namespaced(writer, CLUSTER);
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let message = until_refused("a work claiming team-b's replica set", || async {
        works
            .create(&dry, &work("forged", Some("team-b.vault")))
            .await
            .map(|_| ())
    })
    .await
    .expect_err("a work with the replica-set label is refused");
    assert!(message.contains(TEAM), "names the requester: {message}");

    works
        .create(&PostParams::default(), &work("own", None))
        .await
        .expect("a work without the label is the writer's right");
    let label =
        |value: Value| Patch::Merge(json!({"metadata": {"labels": {REPLICA_SET_LABEL: value}}}));
    for (what, name, patch) in [
        (
            "labelling its own work",
            "own",
            label(json!("team-b.vault")),
        ),
        (
            "moving team-b's work to team-a",
            "vault",
            label(json!("team-a.vault")),
        ),
        (
            "removing the label of team-b's work",
            "vault",
            label(Value::Null),
        ),
    ] {
        let refused = works
            .patch(name, &PatchParams::default(), &patch)
            .await
            .expect_err(what);
        assert!(
            refused.to_string().contains(HUB_WRITES_POLICY_NAME),
            "{what}: {refused}"
        );
    }
    // An edit that leaves the label as it is goes through.
    works
        .patch(
            "vault",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"note": "seen"}}})),
        )
        .await
        .expect("a label beside the owner's is not checked");
    let after = admin_works.get("vault").await.expect("read");
    assert_eq!(
        after.labels().get(REPLICA_SET_LABEL).map(String::as_str),
        Some("team-b.vault")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_namespace_writer_cannot_forge_a_works_status() {
    const CLUSTER: &str = "spoke-a";
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let admin = hub.client().await.expect("admin client");
    install_crds(&admin).await.expect("CRDs and policies");
    create_namespace(&admin, CLUSTER).await;
    grant_work_resources(
        &admin,
        CLUSTER,
        "cluster-writer",
        TEAM,
        &["manifestworks", "manifestworks/status"],
    )
    .await;
    let admin_works: Api<ManifestWork> = Api::namespaced(admin.clone(), CLUSTER);
    admin_works
        .create(
            &PostParams::default(),
            &manifest_work(
                CLUSTER,
                "app",
                vec![config_map("default", "app", json!({"v": "1"}))],
            ),
        )
        .await
        .expect("create");
    let degraded = |writer: &str| {
        Patch::Merge(json!({"status": {"conditions": [{
            "type": "Degraded", "status": "True", "reason": "Forged",
            "message": format!("written by {writer}"),
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]}}))
    };
    // What the hub does (here the administrator stands in for it).
    admin_works
        .patch_status("app", &PatchParams::default(), &degraded("the hub"))
        .await
        .expect("the hub's identity writes a work's status");

    let writer = hub.client_as(TEAM).await.expect("writer client");
    let works: Api<ManifestWork> = Api::namespaced(writer, CLUSTER);
    let dry = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let message = until_refused("a forged Degraded condition", || async {
        works
            .patch_status("app", &dry, &degraded(TEAM))
            .await
            .map(|_| ())
    })
    .await
    .expect_err("a status written by a cluster-namespace writer is refused");
    assert!(
        message.contains(TEAM) && message.contains(HUB_WRITES_POLICY_NAME),
        "names the requester and the policy: {message}"
    );
    // The writer's own right, the work itself, is not touched.
    works
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"note": "seen"}}})),
        )
        .await
        .expect("writing the work itself stays the writer's right");
    let after = admin_works.get("app").await.expect("read");
    let forged = after
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Degraded"))
        .map(|c| c.message.clone());
    assert_eq!(forged.as_deref(), Some("written by the hub"));
}
