//! A hub control plane, spoke control planes, and ferry's hub and agents
//! running in this process against them: what the tests and the local fleet
//! command use.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferry_agent::session::{ClientTls, TokenSource};
use ferry_agent::{AgentOptions, run_agent};
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::ManifestWork;
use ferry_hub::admission::duplicates_policy::wait_until_policy_enforced;
use ferry_hub::admission::target::WebhookTarget;
use ferry_hub::admission::webhook::{
    AdmissionOptions, DEFAULT_MAX_WORK_BYTES, FailurePolicy, wait_until_enforced,
};
use ferry_hub::agent_certs::ca_secret::DEFAULT_SECRET as AGENT_CA_SECRET;
use ferry_hub::certs::reload::{CaSource, CertSource};
use ferry_hub::certs::tls::ServingCert;
use ferry_hub::cluster_profile::ClusterProfileOptions;
use ferry_hub::clusters::replica_lease::ReplicaLease;
use ferry_hub::crds::{InstallCrdsError, install_crds, install_crds_for};
use ferry_hub::grpc::config::{AgentCertOptions, GrpcTls};
use ferry_hub::hub::{DEFAULT_CONTROLLER_SWEEP, HubListeners, run_hub};

use super::reserved_port::ReservedPort;
use ferry_hub::join::hub_side::{JoinError, join_cluster};
use ferry_hub::leader::LeaderElection;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::error;

use crate::harness::controlplane::{ControlPlane, ControlPlaneOptions, StartError};
use crate::harness::hub_metrics::{
    MetricWaitError, STATUS_REPORTS_RECEIVED, hub_metric, wait_metric_above,
};
use crate::harness::link::Link;
use crate::helpers::wait::{WaitError, wait_until};

/// A restarted agent did not show that it has made its first pass.
#[derive(Debug, thiserror::Error)]
pub enum RestartError {
    /// The hub never marked the stopped agent's session as ended.
    #[error("waiting for the old session to end: {0}")]
    OldSession(#[source] WaitError),
    /// The hub's report counter could not be read or did not move.
    #[error("waiting for the restarted agent's first report: {0}")]
    Report(#[source] MetricWaitError),
}

/// A fleet could not be started.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// A control plane did not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The hub CRDs could not be installed.
    #[error(transparent)]
    Crds(#[from] InstallCrdsError),
    /// A cluster could not be joined to the hub.
    #[error(transparent)]
    Join(JoinError),
    /// A certificate could not be generated.
    #[error("generating a certificate: {0}")]
    Cert(String),
    /// The hub's gRPC port could not be bound.
    #[error("binding the hub gRPC port: {0}")]
    Bind(#[source] std::io::Error),
    /// The admission webhook could not be set up or was not enforced in time.
    #[error("hub admission webhook: {0}")]
    Admission(String),
    /// The hub's restricted identity could not be set up.
    #[error("granting the hub its rights: {0}")]
    Rbac(#[source] kube::Error),
    /// A work could not be removed while the hub was stopped.
    #[error("removing work {work} behind the hub's back: {detail}")]
    Forget {
        /// The work's name.
        work: String,
        /// What failed.
        detail: String,
    },
}

/// The user a hub started with `FleetOptions::hub_rules` runs as.
pub const HUB_USER: &str = "ferry-hub-restricted";
/// The ClusterRole holding that user's rights; tests edit its rules to take
/// rights away and give them back.
pub const HUB_CLUSTER_ROLE: &str = "ferry-hub-restricted";

/// Grants `HUB_USER` exactly `rules`, through `HUB_CLUSTER_ROLE`.
pub async fn grant_hub(admin: &Client, rules: &[PolicyRule]) -> Result<(), kube::Error> {
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(HUB_CLUSTER_ROLE.into()),
            ..Default::default()
        },
        rules: Some(rules.to_vec()),
        ..Default::default()
    };
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(HUB_CLUSTER_ROLE.into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: HUB_CLUSTER_ROLE.into(),
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "User".into(),
            name: HUB_USER.into(),
            namespace: None,
        }]),
    };
    let params = PatchParams::apply("ferry-e2e").force();
    Api::<ClusterRole>::all(admin.clone())
        .patch(HUB_CLUSTER_ROLE, &params, &Patch::Apply(&role))
        .await?;
    Api::<ClusterRoleBinding>::all(admin.clone())
        .patch(HUB_CLUSTER_ROLE, &params, &Patch::Apply(&binding))
        .await?;
    Ok(())
}

/// How to build a fleet.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Names of the spoke clusters.
    pub spokes: Vec<String>,
    /// Enable audit logs on the spokes, to count the writes they receive.
    pub audit_spokes: bool,
    /// Enable the audit log on the hub's API server.
    pub audit_hub: bool,
    /// Heartbeat interval of hub and agents.
    pub heartbeat: Duration,
    /// Agent resync interval; long by default so tests prove that drift is
    /// seen by watches, not by resync.
    pub resync: Duration,
    /// How long agents keep the objects of works the hub does not have.
    pub eviction_grace: Duration,
    /// Serve agents over TLS (as production does).
    pub tls: bool,
    /// Require client certificates from agents (mutual TLS).
    pub mtls: bool,
    /// Under TLS (without `mtls`): the hub issues agents client
    /// certificates of this lifetime, as production does; None keeps every
    /// agent on its token.
    pub agent_certificates: Option<Duration>,
    /// How many hub replicas run against the hub control plane; spoke `i`
    /// dials replica `i % hub_replicas`. Replica 0 also serves the webhook.
    pub hub_replicas: usize,
    /// Admission as production has it: the CRDs' CEL rules, the admission
    /// policy and the hub's webhook (on by default). Off, the CRDs are
    /// installed without their rules and neither policy nor webhook runs:
    /// only to write works they would refuse, standing in for works stored
    /// before the rules existed.
    pub admission: bool,
    /// Longest an agent session lives on the hub before the agent must
    /// reconnect.
    pub max_session_age: Duration,
    /// Run every hub replica as `HUB_USER` with exactly these rights (in
    /// ClusterRole `HUB_CLUSTER_ROLE`) instead of as admin (None, the default).
    pub hub_rules: Option<Vec<PolicyRule>>,
    /// How often the hub reviews a live session's token again (and how long
    /// it trusts a review).
    pub token_review_interval: Duration,
    /// Token reviews one peer address may cause per minute: every
    /// simulated agent dials from 127.0.0.1, so tests simulating hundreds
    /// raise it.
    pub peer_token_reviews_per_minute: std::num::NonZeroU32,
    /// Connect TokenReviews the hub has in flight at once.
    pub connect_token_reviews_in_flight: std::num::NonZeroU32,
    /// Agents refuse works that name no executor (`--require-executor`).
    pub require_executor: bool,
    /// Agents run restricted (`--restricted`): CRDs and ferry's own kinds are refused.
    pub restricted: bool,
    /// Agents adopt objects applied by OCM's work agent (`--adopt-ocm-objects`).
    pub adopt_ocm_objects: bool,
    /// Agents' deletion brake (`--deletion-brake-*`); None (the default)
    /// lets every deletion go at once, as tests of deletion itself need.
    pub deletion_brake: Option<ferry_agent::DeletionBrakeOptions>,
    /// Limits of every hub replica's agent port (connections, per-peer
    /// share, unauthenticated deadline, message caps).
    pub transport: ferry_hub::grpc::config::TransportLimits,
    /// What the hub API server does while no hub answers the webhook
    /// (`--webhook-failure-policy`).
    pub webhook_failure_policy: FailurePolicy,
    /// The replicas elect a leader through [`LEADER_LEASE`] even when there is
    /// one: for tests that run another hub (a `ferry-hub` process) beside it.
    pub elect_leader: bool,
    /// How long a cluster's agent may be disconnected before the hub
    /// taints it unreachable (`--unreachable-grace-seconds`).
    pub unreachable_grace: Duration,
    /// Whether the leader checks and repairs the admission policies
    /// (`HubListeners::watch_policies`).
    pub watch_policies: bool,
    /// The namespace the leader publishes ClusterProfiles to
    /// (`HubListeners::cluster_profiles`); None (the default) publishes none.
    pub cluster_profile_namespace: Option<String>,
    /// How often the first hub replica's controllers reconcile everything
    /// again (`HubListeners::controller_sweep`): long for tests proving a
    /// reconcile comes from a watch or a requeue, not from the sweep.
    pub controller_sweep: Duration,
}

/// The fleet's default `unreachable_grace`: longer than a replica Lease
/// lapsing for a moment on a loaded machine, short enough for tests that
/// wait for the taint.
pub const UNREACHABLE_GRACE: Duration = Duration::from_secs(10);

impl FleetOptions {
    /// Spokes with these names, default settings.
    pub fn with_spokes(names: &[&str]) -> Self {
        Self {
            spokes: names.iter().map(|n| n.to_string()).collect(),
            audit_spokes: false,
            audit_hub: false,
            heartbeat: Duration::from_secs(5),
            resync: Duration::from_secs(3600),
            eviction_grace: Duration::from_secs(3600),
            tls: true,
            mtls: false,
            agent_certificates: Some(ferry_hub::agent_certs::issuing::DEFAULT_LIFETIME),
            admission: true,
            hub_replicas: 1,
            max_session_age: ferry_hub::grpc::config::SessionConfig::default().max_session_age,
            hub_rules: None,
            token_review_interval: ferry_hub::grpc::identity::AuthOptions::default()
                .review_interval,
            peer_token_reviews_per_minute: ferry_hub::grpc::identity::AuthOptions::default()
                .peer_reviews_per_minute,
            connect_token_reviews_in_flight: ferry_hub::grpc::identity::AuthOptions::default()
                .connect_reviews_in_flight,
            require_executor: false,
            restricted: false,
            adopt_ocm_objects: false,
            deletion_brake: None,
            transport: ferry_hub::grpc::config::TransportLimits::default(),
            webhook_failure_policy: FailurePolicy::default(),
            elect_leader: false,
            unreachable_grace: UNREACHABLE_GRACE,
            watch_policies: false,
            controller_sweep: DEFAULT_CONTROLLER_SWEEP,
            cluster_profile_namespace: None,
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
    /// The network link its agent reaches the hub through.
    pub link: Link,
    agent_config: ferry_agent::session::SessionConfig,
    agent_options: AgentOptions,
    /// The spoke identity the agent runs as: `client` unless a test gave
    /// it another ([`Fleet::set_agent_client`]).
    agent_client: Option<Client>,
    agent: Option<Running>,
}

/// A hub or agent running as a task of this process.
struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Running {
    /// Asks the task to stop and waits for it; a task that does not stop in
    /// time is aborted, as a killed process would be.
    async fn stop(self) {
        let _ = self.stop.send(());
        let mut task = self.task;
        if tokio::time::timeout(Duration::from_secs(10), &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
    }
}

impl Spoke {
    fn start_agent(&mut self) {
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(run_agent(
            self.agent_client
                .clone()
                .unwrap_or_else(|| self.client.clone()),
            self.agent_config.clone(),
            self.agent_options.clone(),
            async {
                let _ = stopped.await;
            },
        ));
        self.agent = Some(Running { stop, task });
    }
}

impl Spoke {
    /// The hub token this spoke's agent presents, for running the real
    /// `ferry-agent` binary against the fleet's hub.
    pub fn agent_token(&self) -> Option<&str> {
        match &self.agent_config.token {
            TokenSource::Inline(token) => Some(token),
            TokenSource::File(_) => None,
        }
    }

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
    /// The client the hub runs as: `hub_client` unless `hub_rules` was set.
    hub_identity: Client,
    /// URL the agents dial.
    pub hub_url: String,
    /// The spokes, in the order they were named.
    pub spokes: Vec<Spoke>,
    hub_addr: std::net::SocketAddr,
    /// Where the hub serves `/metrics`.
    pub hub_probes_addr: std::net::SocketAddr,
    /// The ports of `hub_addr` and `hub_probes_addr`, held across restarts.
    hub_port: ReservedPort,
    hub_probes_port: ReservedPort,
    /// The CA of the hub's serving certificate.
    pub hub_ca_pem: String,
    grpc_tls: Option<GrpcTls>,
    session: ferry_hub::grpc::config::SessionConfig,
    hub_run: Option<Running>,
    webhook: Option<Webhook>,
    /// Replicas 1.. (replica 0 is `hub_run` at `hub_addr`).
    replicas: Vec<Replica>,
    /// Replica 0 elects a leader even when it is the only in-process one.
    elect_leader: bool,
    unreachable_grace: Duration,
    watch_policies: bool,
    cluster_profiles: Option<ClusterProfileOptions>,
}

/// Starts the hub's and every spoke's control plane, all at once.
async fn start_control_planes(
    options: &FleetOptions,
) -> Result<(ControlPlane, Vec<ControlPlane>), FleetError> {
    let hub_start = ControlPlane::start(
        "hub",
        ControlPlaneOptions {
            audit: options.audit_hub,
            ..Default::default()
        },
    );
    let spoke_starts = futures::future::try_join_all(options.spokes.iter().map(|name| {
        ControlPlane::start(
            name,
            ControlPlaneOptions {
                audit: options.audit_spokes,
                ..Default::default()
            },
        )
    }));
    Ok(tokio::try_join!(hub_start, spoke_starts)?)
}

/// Installs the hub's CRDs (with the admission policy, enforced, when the
/// fleet has admission) and, for a restricted hub, its RBAC; returns the
/// client the hub runs as.
async fn prepare_hub_api(
    hub: &ControlPlane,
    hub_client: &Client,
    options: &FleetOptions,
) -> Result<Client, FleetError> {
    if options.admission {
        // The hub-owned-writes policy names the user the hub runs as.
        match &options.hub_rules {
            Some(_) => install_crds_for(hub_client, &[HUB_USER.to_string()]).await?,
            None => install_crds(hub_client).await?,
        }
        if !wait_until_policy_enforced(hub_client, "default", Duration::from_secs(30)).await {
            return Err(FleetError::Admission(
                "the admission policy was not enforced within 30 s".into(),
            ));
        }
    } else {
        install_crds_without_rules(hub_client).await?;
    }
    match &options.hub_rules {
        Some(rules) => {
            grant_hub(hub_client, rules)
                .await
                .map_err(FleetError::Rbac)?;
            Ok(hub.client_as(HUB_USER).await?)
        }
        None => Ok(hub_client.clone()),
    }
}

/// The fleet's certificates: the hub's serving certificate and, under
/// mutual TLS, one client certificate every agent shares (the token, not
/// the certificate, says which cluster an agent may serve).
struct FleetTls {
    grpc: Option<GrpcTls>,
    agent: Option<ClientTls>,
    hub_ca_pem: String,
}

impl FleetTls {
    fn generate(options: &FleetOptions) -> Result<Self, FleetError> {
        let serving = ServingCert::generate(&["127.0.0.1".into(), "localhost".into()])
            .map_err(|e| FleetError::Cert(e.to_string()))?;
        let client_cert = if options.mtls {
            Some(
                ServingCert::generate(&["ferry-agent".into()])
                    .map_err(|e| FleetError::Cert(e.to_string()))?,
            )
        } else {
            None
        };
        let grpc = options.tls.then(|| GrpcTls {
            client_ca: client_cert
                .as_ref()
                .map(|c| CaSource::Pem(c.ca_pem.clone())),
            agent_certificates: options.agent_certificates.map(|lifetime| AgentCertOptions {
                ca_secret: ("default".into(), AGENT_CA_SECRET.into()),
                lifetime,
            }),
            ..GrpcTls::new(CertSource::Pem {
                chain: serving.chain_pem.clone(),
                key: serving.key_pem.clone(),
            })
        });
        let agent = options.tls.then(|| ClientTls {
            ca_pem: serving.ca_pem.clone(),
            identity: client_cert
                .as_ref()
                .map(|c| (c.chain_pem.clone(), c.key_pem.clone())),
        });
        Ok(Self {
            grpc,
            agent,
            hub_ca_pem: serving.ca_pem,
        })
    }
}

/// Name and namespace of the Lease the fleet's hub replicas elect a leader
/// with.
pub const LEADER_LEASE: (&str, &str) = ("default", "ferry-hub");

/// How long the fleet's leader Lease holds without renewal: short, so a
/// test that kills the leader sees the handover quickly.
pub const LEADER_LEASE_DURATION: Duration = Duration::from_secs(6);

/// Leader election for replica `index` of `replicas`: none for a single
/// replica (it runs every controller) unless `elect` asks for it, else the
/// fleet's Lease, with the replica named `replica-<index>`.
fn leader_election(replicas: usize, index: usize, elect: bool) -> Option<LeaderElection> {
    (replicas > 1 || elect).then(|| LeaderElection {
        lease_name: LEADER_LEASE.1.into(),
        namespace: LEADER_LEASE.0.into(),
        identity: format!("replica-{index}"),
        lease_duration: LEADER_LEASE_DURATION,
        renew_before: LEADER_LEASE_DURATION / 3,
    })
}

/// Hub starts in this process, numbering replica identities.
static STARTS: AtomicUsize = AtomicUsize::new(0);

/// The own Lease of replica `index`, in `default`: named for the replica
/// and unique per start, as the hub binary names it, vouching for three
/// heartbeats (at least 3 s).
pub fn replica_lease(index: usize, heartbeat: Duration) -> ReplicaLease {
    ReplicaLease {
        namespace: "default".into(),
        identity: format!("replica-{index}-{}", STARTS.fetch_add(1, Ordering::Relaxed)),
        duration: (heartbeat * 3).max(Duration::from_secs(3)),
    }
}

/// Starts the hub replicas beyond the first (`replicas` counts them all).
async fn start_more_replicas(
    replicas: usize,
    hub_identity: &Client,
    hub_client: &Client,
    tls: &FleetTls,
    session: &ferry_hub::grpc::config::SessionConfig,
    unreachable_grace: Duration,
    cluster_profiles: &Option<ClusterProfileOptions>,
) -> Result<Vec<Replica>, FleetError> {
    let mut started = Vec::new();
    for index in 1..replicas.max(1) {
        let grpc = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(FleetError::Bind)?;
        let addr = grpc.local_addr().map_err(FleetError::Bind)?;
        let listeners = HubListeners {
            grpc,
            grpc_tls: tls.grpc.clone(),
            probes: None,
            admission: None,
            leader_election: leader_election(replicas, index, false),
            replica_lease: replica_lease(index, session.heartbeat_interval),
            unreachable_grace,
            controller_sweep: DEFAULT_CONTROLLER_SWEEP,
            watch_policies: false,
            health_pool: Default::default(),
            cluster_profiles: cluster_profiles.clone(),
            api_requests: None,
        };
        let run = spawn_hub(
            hub_identity.clone(),
            hub_client,
            listeners,
            session.clone(),
            None,
        )
        .await?;
        started.push(Replica {
            addr,
            run: Some(run),
        });
    }
    Ok(started)
}

/// Starts one agent per spoke, each behind its own link to a hub replica
/// (round robin), with the token its cluster was joined with.
async fn start_spokes(
    options: &FleetOptions,
    spoke_planes: Vec<ControlPlane>,
    tokens: Vec<String>,
    replica_addrs: &[std::net::SocketAddr],
    tls: &FleetTls,
) -> Result<Vec<Spoke>, FleetError> {
    let scheme = if options.tls { "https" } else { "http" };
    let mut spokes = Vec::new();
    for (i, (control_plane, token)) in spoke_planes.into_iter().zip(tokens).enumerate() {
        let client = control_plane.client().await?;
        let link = Link::start(replica_addrs[i % replica_addrs.len()])
            .await
            .map_err(FleetError::Bind)?;
        let config = ferry_agent::session::SessionConfig {
            hub_url: format!("{scheme}://{}", link.addr()),
            cluster_name: control_plane.name.clone(),
            heartbeat_interval: options.heartbeat,
            token: TokenSource::Inline(token),
            tls: tls.agent.clone(),
        };
        let agent_options = AgentOptions {
            resync_interval: options.resync,
            eviction_grace: options.eviction_grace,
            // Under the harness's own 10 s limit for a graceful stop.
            shutdown_grace: Duration::from_secs(5),
            require_executor: options.require_executor,
            restricted: options.restricted,
            adopt_ocm_objects: options.adopt_ocm_objects,
            deletion_brake: options.deletion_brake.clone(),
            ..AgentOptions::default()
        };
        let mut spoke = Spoke {
            name: control_plane.name.clone(),
            control_plane,
            client,
            link,
            agent_config: config,
            agent_options,
            agent_client: None,
            agent: None,
        };
        spoke.start_agent();
        spokes.push(spoke);
    }
    Ok(spokes)
}

/// A further hub replica: where it listens, and its task while it runs.
struct Replica {
    addr: std::net::SocketAddr,
    run: Option<Running>,
}

/// Runs the hub as `client`; with `webhook`, also its admission webhook on
/// the webhook's address, and returns once the hub API server enforces it
/// (checked as `admin`).
async fn spawn_hub(
    client: Client,
    admin: &Client,
    mut listeners: HubListeners,
    session: ferry_hub::grpc::config::SessionConfig,
    webhook: Option<&Webhook>,
) -> Result<Running, FleetError> {
    let (stop, stopped) = oneshot::channel::<()>();
    // The fleet's webhook, if any, is served by every hub it runs.
    if let Some(webhook) = webhook {
        listeners.admission = Some(webhook.options().await?);
    }
    let hub_client = client.clone();
    let task = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        if let Err(e) = run_hub(hub_client, listeners, session, shutdown).await {
            error!(error = %e, "hub stopped");
        }
    });
    if webhook.is_some() && !wait_until_enforced(admin, "default", Duration::from_secs(30)).await {
        task.abort();
        return Err(FleetError::Admission("not enforced within 30 s".into()));
    }
    Ok(Running { stop, task })
}

/// Applies the hub CRDs with every `x-kubernetes-validations` rule removed
/// and no admission policy: what a hub API server held before the rules
/// existed, so tests can store works the rules refuse.
pub async fn install_crds_without_rules(client: &Client) -> Result<(), FleetError> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Patch, PatchParams};
    fn strip(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                map.remove("x-kubernetes-validations");
                map.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let api: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    for (_, crd) in ferry_api::crds::hub_crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let mut value =
            serde_json::to_value(&crd).map_err(|e| FleetError::Admission(e.to_string()))?;
        strip(&mut value);
        api.patch(
            &name,
            &PatchParams::apply("ferry-hub").force(),
            &Patch::Apply(&value),
        )
        .await
        .map_err(|e| FleetError::Admission(format!("applying CRD {name} without rules: {e}")))?;
        let established = kube::runtime::wait::await_condition(
            api.clone(),
            &name,
            kube::runtime::wait::conditions::is_crd_established(),
        );
        tokio::time::timeout(Duration::from_secs(30), established)
            .await
            .map_err(|_| FleetError::Admission(format!("CRD {name} not established")))?
            .map_err(|e| FleetError::Admission(e.to_string()))?;
    }
    Ok(())
}

impl Fleet {
    /// Starts every control plane in parallel, installs the hub CRDs,
    /// registers each spoke on the hub, and runs the hub and one agent per spoke.
    pub async fn start(options: FleetOptions) -> Result<Self, FleetError> {
        crate::harness::test_log::init();
        let (hub, spoke_planes) = start_control_planes(&options).await?;
        let hub_client = hub.client().await?;
        let hub_identity = prepare_hub_api(&hub, &hub_client, &options).await?;
        let mut tokens = Vec::new();
        for name in &options.spokes {
            let token = join_cluster(&hub_client, name, 3600)
                .await
                .map_err(FleetError::Join)?;
            tokens.push(token);
        }
        let tls = FleetTls::generate(&options)?;
        let scheme = if options.tls { "https" } else { "http" };

        // Held for the fleet's life, so a restarted hub gets them back.
        let hub_port = ReservedPort::new().map_err(FleetError::Bind)?;
        let hub_probes_port = ReservedPort::new().map_err(FleetError::Bind)?;
        let listener = hub_port.listen().map_err(FleetError::Bind)?;
        let probes = hub_probes_port.listen().map_err(FleetError::Bind)?;
        let hub_addr = hub_port.addr();
        let hub_probes_addr = hub_probes_port.addr();
        let hub_url = format!("{scheme}://{hub_addr}");
        let session = ferry_hub::grpc::config::SessionConfig {
            heartbeat_interval: options.heartbeat,
            max_session_age: options.max_session_age,
            auth: ferry_hub::grpc::identity::AuthOptions {
                review_interval: options.token_review_interval,
                peer_reviews_per_minute: options.peer_token_reviews_per_minute,
                connect_reviews_in_flight: options.connect_token_reviews_in_flight,
                ..Default::default()
            },
            transport: options.transport.clone(),
        };
        let cluster_profiles = options
            .cluster_profile_namespace
            .clone()
            .map(|namespace| ClusterProfileOptions { namespace });
        let listeners = HubListeners {
            grpc: listener,
            grpc_tls: tls.grpc.clone(),
            probes: Some(probes),
            admission: None,
            leader_election: leader_election(options.hub_replicas, 0, options.elect_leader),
            replica_lease: replica_lease(0, session.heartbeat_interval),
            unreachable_grace: options.unreachable_grace,
            controller_sweep: options.controller_sweep,
            watch_policies: options.watch_policies,
            health_pool: Default::default(),
            cluster_profiles: cluster_profiles.clone(),
            api_requests: None,
        };
        let webhook = if options.admission {
            Some(Webhook::new(options.webhook_failure_policy).await?)
        } else {
            None
        };
        let hub_run = spawn_hub(
            hub_identity.clone(),
            &hub_client,
            listeners,
            session.clone(),
            webhook.as_ref(),
        )
        .await?;
        let replicas = start_more_replicas(
            options.hub_replicas,
            &hub_identity,
            &hub_client,
            &tls,
            &session,
            options.unreachable_grace,
            &cluster_profiles,
        )
        .await?;
        let replica_addrs: Vec<std::net::SocketAddr> = std::iter::once(hub_addr)
            .chain(replicas.iter().map(|r| r.addr))
            .collect();
        let spokes = start_spokes(&options, spoke_planes, tokens, &replica_addrs, &tls).await?;
        Ok(Self {
            hub,
            hub_client,
            hub_identity,
            hub_url,
            spokes,
            hub_addr,
            hub_probes_addr,
            hub_port,
            hub_probes_port,
            hub_ca_pem: tls.hub_ca_pem,
            grpc_tls: tls.grpc,
            session,
            hub_run: Some(hub_run),
            replicas,
            elect_leader: options.elect_leader,
            unreachable_grace: options.unreachable_grace,
            watch_policies: options.watch_policies,
            cluster_profiles,
            webhook,
        })
    }

    fn spoke_mut(&mut self, name: &str) -> &mut Spoke {
        self.spokes
            .iter_mut()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no spoke named {name}"))
    }

    /// Stops the agent of spoke `name` (its control plane keeps running).
    pub async fn stop_agent(&mut self, name: &str) {
        if let Some(agent) = self.spoke_mut(name).agent.take() {
            agent.stop().await;
        }
    }

    /// Stops the agent of spoke `name`, starts a fresh one, and waits until
    /// the hub has a status report from it. A restarted agent reports a work
    /// only after its first pass over it, so this is the signal that it has
    /// had its chance to act (or to leave something alone). The hub marking
    /// the old session disconnected comes after every message of that
    /// session was handled, so no late report of the old agent counts.
    pub async fn restart_agent_until_it_reports(
        &mut self,
        name: &str,
        timeout: Duration,
    ) -> Result<(), RestartError> {
        self.stop_agent(name).await;
        let clusters: Api<ManagedCluster> = Api::all(self.hub_client.clone());
        let disconnected = |c: &ManagedCluster| c.status.as_ref().is_some_and(|s| !s.connected);
        wait_until(
            &clusters,
            name,
            "the old session ended",
            timeout,
            disconnected,
        )
        .await
        .map_err(RestartError::OldSession)?;
        let reports = hub_metric(self.hub_probes_addr, STATUS_REPORTS_RECEIVED)
            .await
            .map_err(|e| RestartError::Report(e.into()))?;
        self.start_agent(name);
        wait_metric_above(
            self.hub_probes_addr,
            STATUS_REPORTS_RECEIVED,
            reports,
            timeout,
        )
        .await
        .map_err(RestartError::Report)?;
        Ok(())
    }

    /// Kills the agent of spoke `name` at once, wherever it is in a pass, as
    /// SIGKILL or an OOM kill would (its control plane keeps running).
    pub async fn kill_agent(&mut self, name: &str) {
        if let Some(agent) = self.spoke_mut(name).agent.take() {
            agent.task.abort();
            let _ = agent.task.await;
        }
    }

    /// Changes the options the agent of spoke `name` starts with next time
    /// (a restarted agent with other flags); the running agent keeps its own.
    pub fn set_agent_options(&mut self, name: &str, change: impl FnOnce(&mut AgentOptions)) {
        change(&mut self.spoke_mut(name).agent_options);
    }

    /// Runs the agent of spoke `name`, from its next start, as `client`
    /// (e.g. a ServiceAccount with exactly a chart's rights) instead of the
    /// spoke's admin.
    pub fn set_agent_client(&mut self, name: &str, client: Client) {
        self.spoke_mut(name).agent_client = Some(client);
    }

    /// Starts the agent of spoke `name` again, as a fresh process would:
    /// with nothing in memory but what the spoke itself records.
    pub fn start_agent(&mut self, name: &str) {
        let spoke = self.spoke_mut(name);
        if spoke.agent.is_none() {
            spoke.start_agent();
        }
    }

    /// The address of hub replica `index` (0 is the first hub).
    ///
    /// Panics when there is no such replica: a bug in the test.
    pub fn hub_replica_addr(&self, index: usize) -> std::net::SocketAddr {
        match index {
            0 => self.hub_addr,
            i => self.replicas[i - 1].addr,
        }
    }

    /// Stops hub replica `index` (1 or more; replica 0 is `stop_hub`).
    pub async fn stop_hub_replica(&mut self, index: usize) {
        if let Some(run) = self.replicas[index - 1].run.take() {
            run.stop().await;
        }
    }

    /// Kills the control plane of spoke `name` as a crash would; its agent
    /// keeps running and sees its spoke API server gone.
    pub async fn kill_spoke_control_plane(&mut self, name: &str) {
        self.spoke_mut(name).control_plane.kill().await;
    }

    /// Starts the control plane of spoke `name` again with its data and
    /// ports, so the agent's and the test's clients reach it as before.
    ///
    /// Fails if it does not become ready, e.g. because a port was taken.
    pub async fn start_spoke_control_plane(&mut self, name: &str) -> Result<(), FleetError> {
        Ok(self.spoke_mut(name).control_plane.start_again().await?)
    }

    /// Kills the hub's control plane as a crash would; the hub and the agents
    /// keep running and see the hub API server gone.
    pub async fn kill_hub_control_plane(&mut self) {
        self.hub.kill().await;
    }

    /// Starts the hub's control plane again with its data and ports, so the
    /// hub's, the agents' and the test's clients reach it as before.
    ///
    /// Fails if it does not become ready, e.g. because a port was taken.
    pub async fn start_hub_control_plane(&mut self) -> Result<(), FleetError> {
        Ok(self.hub.start_again().await?)
    }

    /// Whether the first hub's task still runs: false once it stopped or
    /// failed (or was never started again after `stop_hub`).
    pub fn hub_is_running(&self) -> bool {
        self.hub_run
            .as_ref()
            .is_some_and(|hub| !hub.task.is_finished())
    }

    /// Stops the hub; agents keep running and try to reconnect.
    pub async fn stop_hub(&mut self) {
        if let Some(hub) = self.hub_run.take() {
            hub.stop().await;
        }
    }

    /// Removes work `name` while the hub is stopped, so no hub sees it go
    /// (its finalizer is stripped, as an operator giving up would), then
    /// starts the hub again: the hub no longer knows a work the agent holds.
    pub async fn forget_work(
        &mut self,
        works: &Api<ManifestWork>,
        name: &str,
    ) -> Result<(), FleetError> {
        let failed = |detail: String| FleetError::Forget {
            work: name.into(),
            detail,
        };
        self.stop_hub().await;
        works
            .delete(name, &Default::default())
            .await
            .map_err(|e| failed(e.to_string()))?;
        let no_finalizers = serde_json::json!({"metadata": {"finalizers": null}});
        works
            .patch(name, &PatchParams::default(), &Patch::Merge(&no_finalizers))
            .await
            .map_err(|e| failed(e.to_string()))?;
        crate::helpers::wait::wait_deleted(
            works,
            name,
            "work gone from the hub",
            Duration::from_secs(90),
        )
        .await
        .map_err(|e| failed(e.to_string()))?;
        self.start_hub().await
    }

    /// Starts the hub again on the same address, with nothing in memory.
    pub async fn start_hub(&mut self) -> Result<(), FleetError> {
        if self.hub_run.is_none() {
            let grpc = self.hub_port.listen().map_err(FleetError::Bind)?;
            let probes = self.hub_probes_port.listen().map_err(FleetError::Bind)?;
            let listeners = HubListeners {
                grpc,
                grpc_tls: self.grpc_tls.clone(),
                probes: Some(probes),
                admission: None,
                leader_election: leader_election(self.replicas.len() + 1, 0, self.elect_leader),
                replica_lease: replica_lease(0, self.session.heartbeat_interval),
                unreachable_grace: self.unreachable_grace,
                controller_sweep: DEFAULT_CONTROLLER_SWEEP,
                watch_policies: self.watch_policies,
                health_pool: Default::default(),
                cluster_profiles: self.cluster_profiles.clone(),
                api_requests: None,
            };
            self.hub_run = Some(
                spawn_hub(
                    self.hub_identity.clone(),
                    &self.hub_client,
                    listeners,
                    self.session.clone(),
                    self.webhook.as_ref(),
                )
                .await?,
            );
        }
        Ok(())
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
        for replica in &mut self.replicas {
            if let Some(run) = replica.run.take() {
                run.task.abort();
            }
        }
        for spoke in &mut self.spokes {
            if let Some(agent) = spoke.agent.take() {
                agent.task.abort();
            }
        }
        self.stop_hub().await;
        let spokes = std::mem::take(&mut self.spokes);
        let planes = spokes.into_iter().map(|s| s.control_plane.stop());
        futures::future::join_all(planes).await;
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Some(hub) = &self.hub_run {
            hub.task.abort();
        }
        for replica in &self.replicas {
            if let Some(run) = &replica.run {
                run.task.abort();
            }
        }
        for spoke in &self.spokes {
            if let Some(agent) = &spoke.agent {
                agent.task.abort();
            }
        }
    }
}

/// The hub's admission webhook: a loopback address and a certificate made
/// for it, kept so a restarted hub serves it where the API server expects.
struct Webhook {
    addr: std::net::SocketAddr,
    /// Held across the hub's restarts.
    port: ReservedPort,
    cert: ServingCert,
    failure_policy: FailurePolicy,
}

impl Webhook {
    async fn new(failure_policy: FailurePolicy) -> Result<Self, FleetError> {
        let port = ReservedPort::new().map_err(FleetError::Bind)?;
        let addr = port.addr();
        let cert = ServingCert::generate(&[addr.ip().to_string()])
            .map_err(|e| FleetError::Admission(e.to_string()))?;
        Ok(Self {
            addr,
            port,
            cert,
            failure_policy,
        })
    }

    async fn options(&self) -> Result<AdmissionOptions, FleetError> {
        Ok(AdmissionOptions {
            listener: self.port.listen().map_err(FleetError::Bind)?,
            target: WebhookTarget::Url(format!("https://{}", self.addr)),
            cert: self.cert.clone(),
            max_work_bytes: DEFAULT_MAX_WORK_BYTES,
            failure_policy: self.failure_policy,
        })
    }
}
