//! A hub control plane, spoke control planes, and ferry's hub and agents
//! running in this process against them: what the tests and the local fleet
//! command use.

use std::time::Duration;

use ferry_agent::{AgentOptions, run_agent};
use ferry_hub::admission::tls::ServingCert;
use ferry_hub::admission::{AdmissionOptions, DEFAULT_MAX_WORK_BYTES, wait_until_enforced};
use ferry_hub::crds::{InstallCrdsError, install_crds};
use ferry_hub::managed_cluster::{ManagedCluster, ManagedClusterSpec};
use ferry_hub::manifest_work::ManifestWork;
use ferry_hub::server::{HubListeners, run_hub};
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, PostParams};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::error;

use crate::controlplane::{ControlPlane, ControlPlaneOptions, StartError};

/// A fleet could not be started.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// A control plane did not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The hub CRDs could not be installed.
    #[error(transparent)]
    Crds(#[from] InstallCrdsError),
    /// A hub object (namespace, ManagedCluster) could not be created.
    #[error("registering cluster {cluster} on the hub: {source}")]
    Register {
        /// Cluster name.
        cluster: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The hub's gRPC port could not be bound.
    #[error("binding the hub gRPC port: {0}")]
    Bind(#[source] std::io::Error),
    /// The admission webhook could not be set up or was not enforced in time.
    #[error("hub admission webhook: {0}")]
    Admission(String),
}

/// How to build a fleet.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Names of the spoke clusters.
    pub spokes: Vec<String>,
    /// Enable audit logs on the spokes, to count the writes they receive.
    pub audit_spokes: bool,
    /// Heartbeat interval of hub and agents.
    pub heartbeat: Duration,
    /// Agent resync interval; long by default so tests prove that drift is
    /// seen by watches, not by resync.
    pub resync: Duration,
    /// Run the hub's ManifestWork admission webhook, as production does (on
    /// by default; off only to write works it would refuse).
    pub admission: bool,
}

impl FleetOptions {
    /// Spokes with these names, default settings.
    pub fn with_spokes(names: &[&str]) -> Self {
        Self {
            spokes: names.iter().map(|n| n.to_string()).collect(),
            audit_spokes: false,
            heartbeat: Duration::from_secs(5),
            resync: Duration::from_secs(3600),
            admission: true,
        }
    }
}

/// One spoke: its control plane, an admin client, and its agent task.
pub struct Spoke {
    /// Cluster name (its namespace on the hub).
    pub name: String,
    /// Its control plane.
    pub control_plane: ControlPlane,
    /// Admin client of the spoke.
    pub client: Client,
    agent: JoinHandle<()>,
}

impl Spoke {
    /// A dynamic Api for `kind` in `api_version` on this spoke, in `namespace`
    /// or cluster-wide. The plural is derived from the kind, which holds for
    /// the kinds tests use.
    pub fn api(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Api<DynamicObject> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        }
    }
}

/// A running fleet.
pub struct Fleet {
    /// The hub control plane.
    pub hub: ControlPlane,
    /// Admin client of the hub.
    pub hub_client: Client,
    /// URL the agents dial.
    pub hub_url: String,
    /// The spokes, in the order they were named.
    pub spokes: Vec<Spoke>,
    hub_stop: Option<oneshot::Sender<()>>,
    hub_task: JoinHandle<()>,
}

impl Fleet {
    /// Starts every control plane in parallel, installs the hub CRDs,
    /// registers each spoke on the hub, and runs the hub and one agent per spoke.
    pub async fn start(options: FleetOptions) -> Result<Self, FleetError> {
        let hub_start = ControlPlane::start("hub", ControlPlaneOptions::default());
        let spoke_starts = futures::future::try_join_all(options.spokes.iter().map(|name| {
            ControlPlane::start(
                name,
                ControlPlaneOptions {
                    audit: options.audit_spokes,
                },
            )
        }));
        let (hub, spoke_planes) = tokio::try_join!(hub_start, spoke_starts)?;
        let hub_client = hub.client().await?;
        install_crds(&hub_client).await?;
        for name in &options.spokes {
            register_cluster(&hub_client, name).await?;
        }

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(FleetError::Bind)?;
        let hub_url = format!(
            "http://{}",
            listener.local_addr().map_err(FleetError::Bind)?
        );
        let (hub_stop, stopped) = oneshot::channel::<()>();
        let session = ferry_hub::session::SessionConfig {
            heartbeat_interval: options.heartbeat,
        };
        let listeners = HubListeners {
            grpc: listener,
            probes: None,
            admission: if options.admission {
                Some(admission_options().await?)
            } else {
                None
            },
        };
        let hub_task = tokio::spawn({
            let client = hub_client.clone();
            async move {
                let shutdown = async {
                    let _ = stopped.await;
                };
                if let Err(e) = run_hub(client, listeners, session, shutdown).await {
                    error!(error = %e, "hub stopped");
                }
            }
        });

        if options.admission
            && !wait_until_enforced(&hub_client, "default", Duration::from_secs(30)).await
        {
            return Err(FleetError::Admission("not enforced within 30 s".into()));
        }

        let mut spokes = Vec::new();
        for control_plane in spoke_planes {
            let client = control_plane.client().await?;
            let config = ferry_agent::session::SessionConfig {
                hub_url: hub_url.clone(),
                cluster_name: control_plane.name.clone(),
                heartbeat_interval: options.heartbeat,
            };
            let agent_options = AgentOptions {
                resync_interval: options.resync,
            };
            let agent = tokio::spawn(run_agent(
                client.clone(),
                config,
                agent_options,
                std::future::pending(),
            ));
            spokes.push(Spoke {
                name: control_plane.name.clone(),
                control_plane,
                client,
                agent,
            });
        }
        Ok(Self {
            hub,
            hub_client,
            hub_url,
            spokes,
            hub_stop: Some(hub_stop),
            hub_task,
        })
    }

    /// The spoke named `name`.
    ///
    /// Panics if there is none: a test asking for a spoke it did not start is
    /// a bug in the test.
    pub fn spoke(&self, name: &str) -> &Spoke {
        self.spokes
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no spoke named {name}"))
    }

    /// Creates `work` on the hub and returns the API of its cluster's works.
    pub async fn create_work(&self, work: &ManifestWork) -> Result<Api<ManifestWork>, kube::Error> {
        let namespace = work.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<ManifestWork> = Api::namespaced(self.hub_client.clone(), namespace);
        api.create(&PostParams::default(), work).await?;
        Ok(api)
    }

    /// Stops agents, hub and control planes cleanly.
    pub async fn stop(mut self) {
        for spoke in &self.spokes {
            spoke.agent.abort();
        }
        if let Some(stop) = self.hub_stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.hub_task).await;
        let spokes = std::mem::take(&mut self.spokes);
        let planes = spokes.into_iter().map(|s| s.control_plane.stop());
        futures::future::join_all(planes).await;
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.hub_task.abort();
        for spoke in &self.spokes {
            spoke.agent.abort();
        }
    }
}

/// A webhook on a loopback port with a certificate made for it.
async fn admission_options() -> Result<AdmissionOptions, FleetError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(FleetError::Bind)?;
    let addr = listener.local_addr().map_err(FleetError::Bind)?;
    let cert = ServingCert::generate(&[addr.ip().to_string()])
        .map_err(|e| FleetError::Admission(e.to_string()))?;
    Ok(AdmissionOptions {
        listener,
        url: format!("https://{addr}"),
        cert,
        max_work_bytes: DEFAULT_MAX_WORK_BYTES,
    })
}

async fn register_cluster(hub: &Client, name: &str) -> Result<(), FleetError> {
    let wrap = |source| FleetError::Register {
        cluster: name.to_string(),
        source,
    };
    let namespaces: Api<Namespace> = Api::all(hub.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    create_if_absent(&namespaces, &namespace)
        .await
        .map_err(wrap)?;
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    let cluster = ManagedCluster::new(name, ManagedClusterSpec::default());
    create_if_absent(&clusters, &cluster).await.map_err(wrap)
}

async fn create_if_absent<K>(api: &Api<K>, object: &K) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}
