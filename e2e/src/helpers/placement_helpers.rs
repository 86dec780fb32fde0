//! Creating the fleet-distribution objects tests place works with.

use ferry_api::placement::Placement;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

/// Creates the Placement `namespace/name` with `spec` on the hub; panics
/// (failing the test) when the spec does not decode or the API server
/// refuses it.
pub async fn create_placement(
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
