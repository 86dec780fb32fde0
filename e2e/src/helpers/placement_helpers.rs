//! Creating the fleet-distribution objects tests place works with.

use ferry_api::cluster_set::{ManagedClusterSetBinding, ManagedClusterSetBindingSpec};
use ferry_api::contract::GLOBAL_CLUSTER_SET;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::placement::Placement;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// Binds the ManagedClusterSet `set` into `namespace` (a
/// ManagedClusterSetBinding named after it), so that the namespace's
/// Placements may choose its clusters; `client` must hold create on
/// `managedclustersets/bind` for the set (the fleet's admin does). A binding
/// that exists already is kept. Panics (failing the test) when the API
/// server refuses it.
pub async fn bind_cluster_set(client: &Client, namespace: &str, set: &str) {
    let mut binding = ManagedClusterSetBinding::new(
        set,
        ManagedClusterSetBindingSpec {
            cluster_set: set.into(),
        },
    );
    binding.metadata.namespace = Some(namespace.into());
    match Api::<ManagedClusterSetBinding>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &binding)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create ManagedClusterSetBinding {namespace}/{set}: {e}"),
    }
}

/// Binds the well-known set `global` (every cluster) into `namespace`, as
/// every namespace whose Placements should see the whole fleet needs.
pub async fn bind_global(client: &Client, namespace: &str) {
    bind_cluster_set(client, namespace, GLOBAL_CLUSTER_SET).await;
}

/// Creates the Placement `namespace/name` with `spec` on the hub, after
/// binding the `global` set into `namespace` ([`bind_global`]); panics
/// (failing the test) when the spec does not decode or the API server
/// refuses it.
pub async fn create_placement(
    client: &Client,
    namespace: &str,
    name: &str,
    spec: serde_json::Value,
) {
    bind_global(client, namespace).await;
    create_placement_unbound(client, namespace, name, spec).await;
}

/// Creates the Placement `namespace/name` with `spec` and binds nothing.
pub async fn create_placement_unbound(
    client: &Client,
    namespace: &str,
    name: &str,
    spec: serde_json::Value,
) {
    let placement: Placement = serde_json::from_value(json!({
        "apiVersion": "cluster.ferry.dev/v1alpha1",
        "kind": "Placement",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }))
    .expect("placement");
    Api::<Placement>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &placement)
        .await
        .expect("create Placement");
}

/// Merges `labels` into the ManagedCluster `cluster`'s labels (a `null`
/// value removes one), as a platform admin relabels a cluster. Panics
/// (failing the test) when the API server refuses it.
pub async fn label_cluster(client: &Client, cluster: &str, labels: serde_json::Value) {
    Api::<ManagedCluster>::all(client.clone())
        .patch(
            cluster,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": labels}})),
        )
        .await
        .unwrap_or_else(|e| panic!("label ManagedCluster {cluster}: {e}"));
}
