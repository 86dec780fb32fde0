//! SIG Multicluster's cluster inventory as its consumers see it: the
//! upstream CRDs read from the Go module `sigs.k8s.io/cluster-inventory-api`
//! (fetched by `go mod download`, not ferry's copy), installed on a hub, and
//! ClusterProfiles read as untyped objects against the upstream schema.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};

/// The Go module holding the upstream CRDs.
pub const MODULE: &str = "sigs.k8s.io/cluster-inventory-api";
/// The module version ferry ships the ClusterProfile CRD of.
pub const VERSION: &str = "v0.1.0";
/// The ClusterProfile CRD's file in the module.
pub const CLUSTER_PROFILE_CRD: &str = "config/crd/bases/multicluster.x-k8s.io_clusterprofiles.yaml";
/// The PlacementDecision CRD's file in the module (KEP-5313).
pub const PLACEMENT_DECISION_CRD: &str =
    "config/crd/bases/multicluster.x-k8s.io_placementdecisions.yaml";

/// The module or its CRD could not be had or installed.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// `go mod download` could not run or failed.
    #[error("go mod download {MODULE}@{VERSION}: {detail}")]
    Download {
        /// What went wrong (the command's error or its stderr).
        detail: String,
    },
    /// A file of the module could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The module's CRD file is not a CustomResourceDefinition.
    #[error("parsing {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The YAML error.
        #[source]
        source: serde_yaml::Error,
    },
    /// The API server refused the CRD.
    #[error("applying CRD {name}: {source}")]
    Apply {
        /// CRD name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The CRD was not Established in time.
    #[error("CRD {name} not established within {timeout:?}")]
    NotEstablished {
        /// CRD name.
        name: String,
        /// How long we waited.
        timeout: Duration,
    },
}

/// The module's directory in the Go module cache, downloading it through
/// the module proxy when the cache lacks it. Blocking.
pub fn module_dir() -> Result<PathBuf, InventoryError> {
    let go = std::env::var("FERRY_GO").unwrap_or_else(|_| "go".into());
    // Outside any Go module, so no go.mod around the tests is consulted.
    let out = Command::new(&go)
        .args(["mod", "download", "-json", &format!("{MODULE}@{VERSION}")])
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::null())
        .output()
        .map_err(|e| InventoryError::Download {
            detail: format!("running {go}: {e}"),
        })?;
    let answer: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| InventoryError::Download {
            detail: format!(
                "unreadable answer ({e}); stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        })?;
    match (answer["Dir"].as_str(), answer["Error"].as_str()) {
        (Some(dir), None) if out.status.success() => Ok(PathBuf::from(dir)),
        (_, error) => Err(InventoryError::Download {
            detail: format!(
                "{}; stderr: {}",
                error.unwrap_or("no Dir in the answer"),
                String::from_utf8_lossy(&out.stderr)
            ),
        }),
    }
}

/// The text of `file` in the module. Blocking.
pub fn module_file(file: &str) -> Result<String, InventoryError> {
    let path = module_dir()?.join(file);
    std::fs::read_to_string(&path).map_err(|source| InventoryError::Read { path, source })
}

/// Installs the module's ClusterProfile CRD on `client`'s API server (by
/// server-side apply) and waits until it is Established.
pub async fn install_cluster_profile_crd(client: &kube::Client) -> Result<(), InventoryError> {
    install_module_crd(client, CLUSTER_PROFILE_CRD).await
}

/// Installs the module's CRD in `file` on `client`'s API server (by
/// server-side apply) and waits until it is Established.
pub async fn install_module_crd(
    client: &kube::Client,
    file: &'static str,
) -> Result<(), InventoryError> {
    let path = tokio::task::spawn_blocking(move || module_dir().map(|d| d.join(file)))
        .await
        .map_err(|e| InventoryError::Download {
            detail: e.to_string(),
        })??;
    let text = std::fs::read_to_string(&path).map_err(|source| InventoryError::Read {
        path: path.clone(),
        source,
    })?;
    let crd: CustomResourceDefinition =
        serde_yaml::from_str(&text).map_err(|source| InventoryError::Parse { path, source })?;
    let name = crd.metadata.name.clone().unwrap_or_default();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(
        &name,
        &PatchParams::apply("ferry-e2e").force(),
        &Patch::Apply(&crd),
    )
    .await
    .map_err(|source| InventoryError::Apply {
        name: name.clone(),
        source,
    })?;
    let timeout = Duration::from_secs(30);
    match tokio::time::timeout(
        timeout,
        await_condition(api, &name, conditions::is_crd_established()),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        _ => Err(InventoryError::NotEstablished { name, timeout }),
    }
}

/// ClusterProfiles of `namespace` as a consumer reads them: untyped, by the
/// upstream group, version and kind.
pub fn cluster_profiles(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    inventory_api(client, namespace, "ClusterProfile")
}

/// `multicluster.x-k8s.io` PlacementDecisions of `namespace` as a consumer
/// reads them: untyped, by the upstream group, version and kind.
pub fn inventory_placement_decisions(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    inventory_api(client, namespace, "PlacementDecision")
}

fn inventory_api(client: &kube::Client, namespace: &str, kind: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "multicluster.x-k8s.io",
        "v1alpha1",
        kind,
    ));
    Api::namespaced_with(client.clone(), namespace, &resource)
}
