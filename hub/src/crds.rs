//! The hub's CustomResourceDefinitions, rendered from the Rust types. The
//! checked-in copies under `deploy/crds/` are compared against these by a test.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::managed_cluster::ManagedCluster;
use crate::manifest_work::ManifestWork;

/// Every CRD the hub serves, with the file name it is checked in under.
pub fn hub_crds() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        ("manifestworks.yaml", ManifestWork::crd()),
        ("managedclusters.yaml", ManagedCluster::crd()),
    ]
}

/// Renders one CRD as the YAML document that is checked in.
///
/// Fails only if serde_yaml cannot represent the CRD, which would be a bug.
pub fn render_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_yaml::Error> {
    Ok(format!(
        "# Generated from the Rust types by `ferry-hub crds --out deploy/crds`; do not edit.\n{}",
        serde_yaml::to_string(crd)?
    ))
}

/// Installing the CRDs failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallCrdsError {
    /// The API server refused a CRD.
    #[error("applying CRD {name}: {source}")]
    Apply {
        /// CRD name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A CRD did not become Established in time.
    #[error("CRD {name} was not established within {seconds} s")]
    NotEstablished {
        /// CRD name.
        name: String,
        /// How long we waited.
        seconds: u64,
    },
}

/// Server-side applies every hub CRD and waits until the API server serves them.
pub async fn install_crds(client: &kube::Client) -> Result<(), InstallCrdsError> {
    use kube::api::{Api, Patch, PatchParams};
    use kube::runtime::wait::{await_condition, conditions};

    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("ferry-hub").force();
    for (_, crd) in hub_crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .map_err(|source| InstallCrdsError::Apply {
                name: name.clone(),
                source,
            })?;
        let seconds = 30;
        let established = await_condition(api.clone(), &name, conditions::is_crd_established());
        match tokio::time::timeout(std::time::Duration::from_secs(seconds), established).await {
            Ok(Ok(_)) => {}
            _ => return Err(InstallCrdsError::NotEstablished { name, seconds }),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Fails when the Rust types change without regenerating deploy/crds.
    #[test]
    fn checked_in_crds_match_the_rust_types() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds");
        for (file, crd) in hub_crds() {
            let expected = render_yaml(&crd).expect("render");
            let actual = std::fs::read_to_string(dir.join(file))
                .unwrap_or_else(|e| panic!("read deploy/crds/{file}: {e}"));
            assert!(
                expected == actual,
                "deploy/crds/{file} is stale: run `cargo run -p ferry-hub -- crds --out deploy/crds`"
            );
        }
    }

    #[test]
    fn manifests_keep_unknown_fields_as_embedded_resources() {
        let crd = ManifestWork::crd();
        let schema = serde_json::to_value(&crd.spec.versions[0].schema).expect("json");
        let item = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["workload"]["properties"]
            ["manifests"]["items"];
        assert_eq!(item["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(item["x-kubernetes-embedded-resource"], true);
    }
}
