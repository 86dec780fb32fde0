//! OCM's work agent for the side-by-side benchmark: built at bench time from
//! the Go module cache (`open-cluster-management.io/ocm`, exact version, never
//! vendored), cached in the ferry cache directory keyed by that version, and
//! run with its defaults against its own hub and spoke control planes.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::runtime::wait::{await_condition, conditions};

use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::harness::controlplane_build::cache_dir;

/// The OCM release compared against.
pub const OCM_VERSION: &str = "v1.0.0";
const OCM_MODULE: &str = "open-cluster-management.io/ocm";
const API_MODULE: &str = "open-cluster-management.io/api";
/// The cluster name OCM's agent serves (its namespace on the hub).
pub const OCM_CLUSTER: &str = "cluster1";

/// The namespace the agent runs in (its leader-election lease); inside a
/// cluster it is read from the pod, outside it must be given.
pub const OCM_AGENT_NAMESPACE: &str = "open-cluster-management-agent";

/// OCM's agent could not be built or started.
#[derive(Debug, thiserror::Error)]
pub enum OcmError {
    /// A go command could not run or failed.
    #[error("{command}: {detail} (set FERRY_GO to a Go toolchain)")]
    Go {
        /// The command.
        command: String,
        /// Its error or output.
        detail: String,
    },
    /// Reading or writing a file failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The cache directory is unknown.
    #[error(transparent)]
    Cache(#[from] ferry_e2e::harness::controlplane_build::BuildError),
    /// A CRD file did not parse.
    #[error("parsing {path}: {source}")]
    Crd {
        /// The file.
        path: PathBuf,
        /// The YAML error.
        #[source]
        source: serde_yaml::Error,
    },
    /// A control plane did not start.
    #[error(transparent)]
    ControlPlane(#[from] ferry_e2e::harness::controlplane::StartError),
    /// A Kubernetes request failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: &'static str,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// The CRDs were not established in time.
    #[error("the OCM CRDs were not established within 60 s")]
    NotEstablished,
}

fn go() -> String {
    std::env::var("FERRY_GO").unwrap_or_else(|_| "go".into())
}

/// `go mod download` of `module@OCM_VERSION`: the directory of its sources
/// in the module cache.
fn module_dir(module: &str) -> Result<PathBuf, OcmError> {
    let spec = format!("{module}@{OCM_VERSION}");
    let command = format!("{} mod download -json {spec}", go());
    // Outside any module, so the workspace's go.mod is not consulted.
    let output = std::process::Command::new(go())
        .args(["mod", "download", "-json", &spec])
        .current_dir(std::env::temp_dir())
        .env("GOFLAGS", "-mod=mod")
        .output()
        .map_err(|e| OcmError::Go {
            command: command.clone(),
            detail: e.to_string(),
        })?;
    let json: serde_json::Value =
        serde_json::from_slice(&output.stdout).map_err(|e| OcmError::Go {
            command: command.clone(),
            detail: format!("{e}; stderr: {}", String::from_utf8_lossy(&output.stderr)),
        })?;
    match json["Dir"].as_str() {
        Some(dir) if output.status.success() => Ok(PathBuf::from(dir)),
        _ => Err(OcmError::Go {
            command,
            detail: format!("{json}"),
        }),
    }
}

/// The work agent binary (`./cmd/work` of the OCM module), built once into
/// the cache. Blocking: call from `spawn_blocking`. A cold build takes
/// minutes.
pub fn ensure_work_agent() -> Result<PathBuf, OcmError> {
    let cache = cache_dir()?;
    let binary = cache.join(format!("ocm-work-{OCM_VERSION}"));
    if binary.is_file() {
        return Ok(binary);
    }
    let dir = module_dir(OCM_MODULE)?;
    std::fs::create_dir_all(&cache).map_err(|source| OcmError::Io {
        action: "creating",
        path: cache.clone(),
        source,
    })?;
    let partial = cache.join(format!(".ocm-work-{OCM_VERSION}.{}", std::process::id()));
    eprintln!(
        "ferry-bench: building OCM's work agent {OCM_VERSION} into {} (a cold build takes minutes)",
        binary.display()
    );
    let command = format!("{} build -mod=mod ./cmd/work in {}", go(), dir.display());
    let status = std::process::Command::new(go())
        .args(["build", "-mod=mod", "-o"])
        .arg(&partial)
        .arg("./cmd/work")
        .current_dir(&dir)
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .status()
        .map_err(|e| OcmError::Go {
            command: command.clone(),
            detail: e.to_string(),
        })?;
    if !status.success() {
        return Err(OcmError::Go {
            command,
            detail: status.to_string(),
        });
    }
    std::fs::rename(&partial, &binary).map_err(|source| OcmError::Io {
        action: "moving into the cache",
        path: binary.clone(),
        source,
    })?;
    Ok(binary)
}

/// The CRD shipped at `file` in the API module's `work/v1/`.
fn crd(file: &str) -> Result<CustomResourceDefinition, OcmError> {
    let path = module_dir(API_MODULE)?.join("work/v1").join(file);
    let text = std::fs::read_to_string(&path).map_err(|source| OcmError::Io {
        action: "reading",
        path: path.clone(),
        source,
    })?;
    serde_yaml::from_str(&text).map_err(|source| OcmError::Crd { path, source })
}

async fn install(client: &Client, crd: CustomResourceDefinition) -> Result<(), OcmError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.metadata.name.clone().unwrap_or_default();
    api.create(&PostParams::default(), &crd)
        .await
        .map_err(|source| OcmError::Kube {
            action: "creating an OCM CRD",
            source,
        })?;
    tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(api, &name, conditions::is_crd_established()),
    )
    .await
    .map_err(|_| OcmError::NotEstablished)?
    .map_err(|_| OcmError::NotEstablished)?;
    Ok(())
}

async fn namespace(client: &Client, name: &str) -> Result<(), OcmError> {
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))
        .expect("a literal Namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .map_err(|source| OcmError::Kube {
            action: "creating a namespace",
            source,
        })?;
    Ok(())
}

/// OCM's hub and spoke control planes (ManifestWork CRD on the hub,
/// AppliedManifestWork CRD on the spoke), the cluster namespace on the hub,
/// and, once [`OcmFleet::start_agent`] ran, its work agent.
pub struct OcmFleet {
    /// The hub control plane.
    pub hub: ControlPlane,
    /// The spoke control plane.
    pub spoke: ControlPlane,
    /// Admin client of the hub.
    pub hub_client: Client,
    /// Admin client of the spoke.
    pub spoke_client: Client,
    agent: Option<tokio::process::Child>,
    log: PathBuf,
}

impl OcmFleet {
    /// Starts both control planes and installs OCM's CRDs.
    pub async fn start() -> Result<Self, OcmError> {
        let hub = ControlPlane::start("ocm-hub", ControlPlaneOptions::default()).await?;
        let spoke = ControlPlane::start("ocm-spoke", ControlPlaneOptions::default()).await?;
        let hub_client = hub.client().await?;
        let spoke_client = spoke.client().await?;
        let (works, applied) = tokio::task::spawn_blocking(|| {
            Ok::<_, OcmError>((
                crd("0000_00_work.open-cluster-management.io_manifestworks.crd.yaml")?,
                crd("0000_01_work.open-cluster-management.io_appliedmanifestworks.crd.yaml")?,
            ))
        })
        .await
        .expect("reading CRDs does not panic")?;
        install(&hub_client, works).await?;
        install(&spoke_client, applied).await?;
        namespace(&hub_client, OCM_CLUSTER).await?;
        namespace(&spoke_client, OCM_AGENT_NAMESPACE).await?;
        let log =
            std::env::temp_dir().join(format!("ferry-bench-ocm-work-{}.log", std::process::id()));
        Ok(Self {
            hub,
            spoke,
            hub_client,
            spoke_client,
            agent: None,
            log,
        })
    }

    /// Runs `binary` as `work agent` with its defaults for cluster
    /// [`OCM_CLUSTER`]; its output goes to [`OcmFleet::log_path`]. Returns its pid.
    pub fn start_agent(&mut self, binary: &Path) -> Result<u32, OcmError> {
        let io = |source| OcmError::Io {
            action: "starting the OCM work agent, log",
            path: self.log.clone(),
            source,
        };
        let log = std::fs::File::create(&self.log).map_err(io)?;
        // The agent watches a directory holding the hub kubeconfig as
        // `kubeconfig` (its mounted Secret in a pod), even when given the file.
        let hub_dir = self.log.with_extension("hub");
        std::fs::create_dir_all(&hub_dir).map_err(io)?;
        let hub_kubeconfig = hub_dir.join("kubeconfig");
        std::fs::copy(&self.hub.info.kubeconfig, &hub_kubeconfig).map_err(io)?;
        let child = tokio::process::Command::new(binary)
            .args(["agent", "--spoke-cluster-name", OCM_CLUSTER])
            .args(["--namespace", OCM_AGENT_NAMESPACE])
            .arg("--hub-kubeconfig-dir")
            .arg(&hub_dir)
            .arg("--hub-kubeconfig")
            .arg(&hub_kubeconfig)
            // The work agent reads its hub from the workload source config,
            // whose default is the in-pod path of the same Secret.
            .arg("--workload-source-config")
            .arg(&hub_kubeconfig)
            .arg("--kubeconfig")
            .arg(&self.spoke.info.kubeconfig)
            .stdout(Stdio::from(log.try_clone().map_err(io)?))
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .map_err(io)?;
        let pid = child.id().unwrap_or_default();
        self.agent = Some(child);
        Ok(pid)
    }

    /// Where the agent's output goes.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Stops the agent and both control planes.
    pub async fn stop(mut self) {
        if let Some(mut agent) = self.agent.take() {
            let _ = agent.kill().await;
        }
        self.spoke.stop().await;
        self.hub.stop().await;
    }
}
