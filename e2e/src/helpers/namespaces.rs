//! Namespaces on a control plane, as tests make them.

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

/// Creates the namespace `name` through `client`; one that exists already
/// is kept. Panics (failing the test) when the API server refuses it.
pub async fn create_namespace(client: &Client, name: &str) {
    create_labelled_namespace(client, name, &[]).await;
}

/// Creates the namespace `name` carrying `labels` (a tenant policy's
/// switch, say) through `client`; one that exists already is kept as it
/// is. Panics (failing the test) when the API server refuses it.
pub async fn create_labelled_namespace(client: &Client, name: &str, labels: &[(&str, &str)]) {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: (!labels.is_empty()).then(|| {
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create namespace {name}: {e}"),
    }
}
