//! `kubectl ferry seal` and `kubectl ferry sealed` (issue 52), as the
//! README's three commands use them: a Secret manifest sealed into a
//! replica set's template for the clusters its placement chose reaches
//! those clusters' spokes and no other; `--cluster` and `--placement` print
//! an entry sealed to exactly the clusters named; `sealed` says each
//! work's entry is sealed to its cluster's current key; a cluster without
//! a key is refused by name, printing nothing.

use std::time::Duration;

use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::placement::PlacementDecision;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::kubectl_ferry::{kubectl_ferry, succeeded};
use ferry_e2e::helpers::placement_helpers::{create_placement, label_cluster};
use ferry_e2e::helpers::wait::wait_until;
use ferry_semantics::sealing::SealedEnvelope;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);
const NAMESPACE: &str = "default";

/// A Secret as `kubectl get secret db -o yaml` prints it, with what the
/// cluster it was read from added (sealed as is, the stale resourceVersion
/// would make the spoke refuse the create).
const SECRET_YAML: &str = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: default\n  uid: 6f1c0e7a-0000-4000-8000-000000000001\n  resourceVersion: \"12345\"\n  creationTimestamp: \"2026-12-01T10:00:00Z\"\ndata:\n  password: czNjcmV0\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seal_puts_a_secret_into_a_replica_set_for_the_clusters_its_placement_chose() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a", "cluster-b"]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    for name in ["cluster-a", "cluster-b"] {
        wait_until(&clusters, name, "keys published", TIMEOUT, |c| {
            c.status
                .as_ref()
                .is_some_and(|s| !s.sealing_keys.is_empty())
        })
        .await
        .expect("the agent publishes its key");
    }
    label_cluster(&hub, "cluster-a", json!({"team": "shop"})).await;
    create_placement(
        &hub,
        NAMESPACE,
        "shop",
        json!({"predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"team": "shop"}}}}]}),
    )
    .await;
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "web", "namespace": NAMESPACE},
        "spec": {"placementRefs": [{"name": "shop"}], "manifestWorkTemplate": {"workload": {"manifests": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "default"},
             "data": {"a": "1"}}]}}},
    }))
    .expect("replica set");
    Api::<ManifestWorkReplicaSet>::namespaced(hub.clone(), NAMESPACE)
        .create(&PostParams::default(), &rs)
        .await
        .expect("create the replica set");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("db.yaml");
    std::fs::write(&file, SECRET_YAML).expect("write db.yaml");
    let file = file.to_str().expect("utf-8 path");
    let kubeconfig = fleet.hub.info.kubeconfig.clone();

    // The placement has to have chosen cluster-a first.
    let decisions: Api<PlacementDecision> = Api::namespaced(hub.clone(), NAMESPACE);
    wait_until(
        &decisions,
        "shop-decision-1",
        "cluster-a chosen",
        TIMEOUT,
        |d| d.cluster_names().collect::<Vec<_>>() == ["cluster-a"],
    )
    .await
    .expect("the placement chooses cluster-a");
    let printed = succeeded(
        &kubectl_ferry(
            &kubeconfig,
            &[
                "seal",
                "-f",
                file,
                "--placement",
                "default/shop",
                "-o",
                "json",
            ],
        )
        .await,
        "seal --placement",
    );
    let entry: Value = serde_json::from_str(&printed).expect("JSON entry");
    let envelope = SealedEnvelope::parse(&entry).expect("a sealed entry");
    let sealed_to: Vec<&str> = envelope
        .recipients
        .iter()
        .map(|r| r.cluster.as_str())
        .collect();
    assert_eq!(
        sealed_to,
        vec!["cluster-a"],
        "exactly the placement's clusters"
    );
    assert!(!printed.contains("czNjcmV0"), "{printed}");

    // Command two of the README.
    let said = succeeded(
        &kubectl_ferry(
            &kubeconfig,
            &["seal", "-f", file, "--replica-set", "default/web"],
        )
        .await,
        "seal --replica-set",
    );
    assert!(
        said.contains("added") && said.contains("cluster-a") && !said.contains("cluster-b"),
        "{said}"
    );
    let secrets_a: Api<Secret> =
        Api::namespaced(fleet.spoke("cluster-a").client.clone(), "default");
    wait_until(&secrets_a, "db", "the Secret on cluster-a", TIMEOUT, |s| {
        s.data
            .as_ref()
            .and_then(|d| d.get("password"))
            .is_some_and(|p| p.0 == b"s3cret")
    })
    .await
    .expect("the chosen cluster opens it");
    let secrets_b: Api<Secret> =
        Api::namespaced(fleet.spoke("cluster-b").client.clone(), "default");
    assert!(
        secrets_b.get_opt("db").await.expect("read").is_none(),
        "cluster-b was not chosen"
    );

    // Command three: the entry stands against its cluster's current key.
    let listed = succeeded(
        &kubectl_ferry(&kubeconfig, &["sealed", "-A"]).await,
        "sealed -A",
    );
    let row = listed
        .lines()
        .find(|l| l.starts_with("cluster-a"))
        .unwrap_or_else(|| panic!("a row for cluster-a: {listed}"));
    assert!(
        row.contains("default/db") && row.ends_with("current"),
        "{listed}"
    );

    // Named directly; and a cluster that publishes no key is refused.
    let direct = succeeded(
        &kubectl_ferry(&kubeconfig, &["seal", "-f", file, "--cluster", "cluster-b"]).await,
        "seal --cluster",
    );
    let entry: Value = serde_yaml::from_str(&direct).expect("YAML entry");
    assert_eq!(entry["spec"]["recipients"][0]["cluster"], "cluster-b");
    let refused = kubectl_ferry(&kubeconfig, &["seal", "-f", file, "--cluster", "nowhere"]).await;
    assert!(!refused.status.success() && refused.stdout.is_empty());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("nowhere"));
    fleet.stop().await;
}
