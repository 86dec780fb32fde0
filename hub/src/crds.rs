//! Installing ferry's CustomResourceDefinitions (from `ferry_api::crds`) and
//! the admission policy that goes with them, and rendering both as the YAML
//! checked in under `deploy/crds/`, which a test compares against them.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use ferry_api::crds::hub_crds;

use crate::admission::policies::{all_policies, install_policies};

/// Renders one CRD as the YAML document that is checked in.
///
/// Fails only if serde_yaml cannot represent the CRD, which would be a bug.
pub fn render_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_yaml::Error> {
    Ok(format!(
        "# Generated from the Rust types by `ferry-hub crds --out deploy/crds`; do not edit.\n{}",
        serde_yaml::to_string(crd)?
    ))
}

/// File name under `deploy/crds/` of the admission policy and its binding,
/// which are installed with the CRDs.
pub const POLICY_FILE: &str = "manifestworks-policy.yaml";

/// Renders the admission policies (every one of `all_policies`, in its
/// order) and their bindings as the multi-document YAML file checked in
/// next to the CRDs.
///
/// Fails only if serde_yaml cannot represent them, which would be a bug.
pub fn render_policy_yaml() -> Result<String, serde_yaml::Error> {
    Ok(format!(
        "# Generated from the Rust types by `ferry-hub crds --out deploy/crds`; do not edit.\n\
         # Checks across the manifests of a work, who may name an executor and who may bind a\n\
         # cluster set, who a rollout approval names as approver, and that only the hub writes\n\
         # what it decides, run by the API server itself (needs Kubernetes 1.35+). The hub\n\
         # applies the last one naming its own identity; this file names the chart's default.\n\
         {}",
        all_policies()
            .iter()
            .map(|def| Ok(format!(
                "{}---\n{}",
                serde_yaml::to_string(&def.policy())?,
                serde_yaml::to_string(&def.binding())?
            )))
            .collect::<Result<Vec<_>, serde_yaml::Error>>()?
            .join("---\n")
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
    /// The API server refused the admission policy or its binding.
    #[error("applying ValidatingAdmissionPolicy {name}: {source}")]
    Policy {
        /// Policy name.
        name: &'static str,
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

/// Server-side applies every hub CRD, waits until the API server serves
/// them, then applies the admission policies and their bindings (the API
/// server starts enforcing those asynchronously, within a second or so).
/// The hub-owned-writes policy names the caller (asked of the API server)
/// as the hub; the chart's default ServiceAccount when the API server
/// cannot say. Fails with the first CRD or policy refused.
pub async fn install_crds(client: &kube::Client) -> Result<(), InstallCrdsError> {
    let writers = match crate::admission::policies::own_username(client).await {
        Ok(name) => vec![name],
        Err(error) => {
            tracing::warn!(
                %error,
                "asking who the hub is; the hub-owned-writes policy names the chart's default ServiceAccount"
            );
            vec![crate::admission::hub_writes_policy::DEFAULT_HUB_USERNAME.to_string()]
        }
    };
    install_crds_for(client, &writers).await
}

/// [`install_crds`] with the hub-owned-writes policy naming `hub_writers`
/// (the usernames the hub runs as) rather than the caller. Fails as
/// [`install_crds`] does.
pub async fn install_crds_for(
    client: &kube::Client,
    hub_writers: &[String],
) -> Result<(), InstallCrdsError> {
    use kube::api::{Api, Patch, PatchParams};
    use kube::runtime::wait::{await_condition, conditions};

    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(ferry_semantics::contract::HUB_FIELD_MANAGER).force();
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
    install_policies(client, hub_writers)
        .await
        .map_err(|(name, source)| InstallCrdsError::Policy { name, source })
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
        let expected = render_policy_yaml().expect("render");
        let actual = std::fs::read_to_string(dir.join(POLICY_FILE))
            .unwrap_or_else(|e| panic!("read deploy/crds/{POLICY_FILE}: {e}"));
        assert!(
            expected == actual,
            "deploy/crds/{POLICY_FILE} is stale: run `cargo run -p ferry-hub -- crds --out deploy/crds`"
        );
    }
}
