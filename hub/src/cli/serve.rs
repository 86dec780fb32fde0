//! `ferry-hub serve`: runs one hub replica, configured by flags and
//! environment variables, until SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{ArgGroup, Args};
use ferry_api::contract::AGENT_SERVICE_ACCOUNT;
use ferry_hub::admission::target::{ServiceRef, WebhookTarget};
use ferry_hub::admission::webhook::{AdmissionOptions, DEFAULT_MAX_WORK_BYTES, FailurePolicy};
use ferry_hub::agent_certs::ca_secret::DEFAULT_SECRET;
use ferry_hub::agent_certs::issuing::DEFAULT_LIFETIME;
use ferry_hub::api_client::requests::ApiRequests;
use ferry_hub::certs::reload::{CaSource, CertSource, DEFAULT_RELOAD_INTERVAL};
use ferry_hub::certs::tls::ServingCert;
use ferry_hub::cluster_profile::ClusterProfileOptions;
use ferry_hub::clusters::replica_lease::ReplicaLease;
use ferry_hub::crds::install_crds;
use ferry_hub::grpc::config::{AgentCertOptions, GrpcTls, SessionConfig, TransportLimits};
use ferry_hub::grpc::identity::AuthOptions;
use ferry_hub::grpc::message_caps::MessageCaps;
use ferry_hub::hub::{HealthPoolConfig, HubListeners, run_hub};
use ferry_hub::leader::LeaderElection;
use tokio::net::TcpListener;

/// Arguments of `ferry-hub serve`.
#[derive(Args)]
#[command(group(ArgGroup::new("webhook_target").args(["webhook_url", "webhook_service"])))]
pub struct ServeArgs {
    /// Address agents connect to.
    #[arg(long, env = "FERRY_GRPC_ADDR", default_value = "0.0.0.0:8443")]
    pub grpc_addr: SocketAddr,
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, env = "FERRY_PROBE_ADDR", default_value = "0.0.0.0:8080")]
    pub probe_addr: SocketAddr,
    /// Seconds between heartbeats to each agent.
    #[arg(long, env = "FERRY_HEARTBEAT_SECONDS", default_value_t = 10)]
    pub heartbeat_seconds: u64,
    /// Apply the hub CRDs at start-up and wait until they are served.
    #[arg(long, env = "FERRY_INSTALL_CRDS")]
    pub install_crds: bool,
    /// Let the leader watch that the admission policies are installed and
    /// enforced as the hub installs them: while one is not, /readyz fails
    /// naming it, the webhook refuses executor changes, and the leader
    /// re-applies it (needs list and watch on the policies and bindings,
    /// and patch to repair).
    #[arg(long, env = "FERRY_WATCH_ADMISSION_POLICIES", default_value_t = true, action = clap::ArgAction::Set)]
    pub watch_admission_policies: bool,
    /// Serving certificate chain (PEM) of the agent port; TLS is on
    /// unless --insecure-plaintext is given. Re-read when it changes.
    #[arg(long, env = "FERRY_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert.
    #[arg(long, env = "FERRY_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// CA (PEM) that agents' client certificates must chain to: turns
    /// on mutual TLS, on top of token authentication.
    #[arg(long, env = "FERRY_CLIENT_CA", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,
    /// Serve agents without TLS. Tokens then travel in clear text: for
    /// local experiments only.
    #[arg(long, env = "FERRY_INSECURE_PLAINTEXT", conflicts_with_all = ["tls_cert", "client_ca"])]
    pub insecure_plaintext: bool,
    /// Address of the ManifestWork admission webhook (HTTPS). With it,
    /// the hub registers a ValidatingWebhookConfiguration so invalid
    /// works are refused when written.
    /// Needs --webhook-url or --webhook-service.
    #[arg(long, env = "FERRY_WEBHOOK_ADDR", requires = "webhook_target")]
    pub webhook_addr: Option<SocketAddr>,
    /// Base URL at which the hub API server reaches the webhook, e.g.
    /// https://hub.example:9443 (a hub outside the hub cluster).
    #[arg(long, env = "FERRY_WEBHOOK_URL", requires = "webhook_addr")]
    pub webhook_url: Option<String>,
    /// The Service of the hub cluster in front of the webhook, as
    /// NAMESPACE/NAME[:PORT] (port of the Service, default 443): the
    /// registration names the Service, and the certificate must be valid
    /// for NAME.NAMESPACE.svc.
    #[arg(long, env = "FERRY_WEBHOOK_SERVICE", requires = "webhook_addr")]
    pub webhook_service: Option<ServiceRef>,
    /// PEM certificate chain of the webhook; a certificate for the URL's
    /// host (or the Service's DNS name) is generated at start when absent.
    #[arg(long, env = "FERRY_WEBHOOK_CERT", requires = "webhook_key")]
    pub webhook_cert: Option<PathBuf>,
    /// PEM private key of the webhook certificate.
    #[arg(long, env = "FERRY_WEBHOOK_KEY", requires = "webhook_cert")]
    pub webhook_key: Option<PathBuf>,
    /// PEM CA bundle the API server uses to trust the webhook
    /// certificate; defaults to the certificate file itself.
    #[arg(long, env = "FERRY_WEBHOOK_CA", requires = "webhook_cert")]
    pub webhook_ca: Option<PathBuf>,
    /// How often the certificate files (--tls-cert, --tls-key,
    /// --client-ca, --webhook-cert, --webhook-key) are checked for
    /// changes; changed files are served to new connections without a
    /// restart, unusable ones are logged and the previous certificate kept.
    #[arg(long, env = "FERRY_CERT_RELOAD_SECONDS", default_value_t = DEFAULT_RELOAD_INTERVAL.as_secs())]
    pub cert_reload_seconds: u64,
    /// Largest ManifestWork admitted, in bytes of JSON.
    #[arg(long, env = "FERRY_MAX_WORK_BYTES", default_value_t = DEFAULT_MAX_WORK_BYTES)]
    pub max_work_bytes: usize,
    /// What the API server does while it cannot reach the webhook:
    /// Ignore admits the write (the CRD's rules and the admission policy
    /// still apply; the agent reports bad paths), Fail refuses it.
    #[arg(long, env = "FERRY_WEBHOOK_FAILURE_POLICY", value_enum, default_value_t = FailurePolicy::Ignore)]
    pub webhook_failure_policy: FailurePolicy,
    /// The ServiceAccount, in each cluster's namespace, that cluster's
    /// agent authenticates as; tokens of any other account are refused.
    #[arg(long, env = "FERRY_AGENT_SERVICE_ACCOUNT", default_value = AGENT_SERVICE_ACCOUNT)]
    pub agent_service_account: String,
    /// Issue client certificates to agents, signed by the hub's agent CA
    /// (kept in the Secret --agent-ca-secret, created by the first replica):
    /// an agent's first session authenticates with its token, later ones
    /// with its certificate, checked without a call to the API server and
    /// never reviewed again. Off under --client-ca (operator-run mutual TLS)
    /// and --insecure-plaintext.
    #[arg(long, env = "FERRY_AGENT_CERTIFICATES", default_value_t = true, action = clap::ArgAction::Set)]
    pub agent_certificates: bool,
    /// The Secret, in the replica Lease's namespace, that holds the agent
    /// CA. Deleting it (and restarting the hub) replaces the CA; agents
    /// then connect with their token once and get new certificates.
    #[arg(long, env = "FERRY_AGENT_CA_SECRET", default_value = DEFAULT_SECRET)]
    pub agent_ca_secret: String,
    /// Seconds an agent certificate is valid; agents ask for a new one at
    /// two thirds of it.
    #[arg(long, env = "FERRY_AGENT_CERTIFICATE_SECONDS", default_value_t = DEFAULT_LIFETIME.as_secs())]
    pub agent_certificate_seconds: u64,
    /// Seconds a TokenReview answer is reused; live sessions have their
    /// token reviewed again this often, and end when it is refused.
    #[arg(long, env = "FERRY_TOKEN_REVIEW_SECONDS", default_value_t = AuthOptions::default().review_interval.as_secs())]
    pub token_review_seconds: u64,
    /// Tokens one peer address (IPv6: its /64) may present a minute that
    /// the hub does not already know to be good; more are refused with
    /// RESOURCE_EXHAUSTED without a TokenReview.
    #[arg(long, env = "FERRY_PEER_TOKEN_REVIEWS_PER_MINUTE", default_value_t = AuthOptions::default().peer_reviews_per_minute)]
    pub peer_token_reviews_per_minute: NonZeroU32,
    /// Live sessions' tokens reviewed again per second at most, across
    /// every session of this replica: a fleet larger than this times
    /// `--token-review-seconds` has its tokens reviewed less often instead
    /// of loading the API server without end. Reviews a sweep asks for
    /// (a cluster no longer accepted) are not held back.
    #[arg(long, env = "FERRY_LIVE_TOKEN_REVIEWS_PER_SECOND", default_value_t = AuthOptions::default().live_reviews_per_second)]
    pub live_token_reviews_per_second: NonZeroU32,
    /// TokenReviews of agents' new tokens (connects) this replica has in
    /// flight at once. In a connect storm, a connect that finds no slot
    /// free within a second is refused as busy (the agent backs off and
    /// redials) rather than queueing its review until it times out.
    #[arg(long, env = "FERRY_CONNECT_TOKEN_REVIEWS_IN_FLIGHT", default_value_t = AuthOptions::default().connect_reviews_in_flight)]
    pub connect_token_reviews_in_flight: NonZeroU32,
    /// Longest an agent session lives before the hub ends it and the agent
    /// reconnects (each ends at a random point in the last tenth).
    #[arg(long, env = "FERRY_MAX_SESSION_SECONDS", default_value_t = SessionConfig::default().max_session_age.as_secs())]
    pub max_session_seconds: u64,
    /// Streams one connection to the agent port may have open at once.
    #[arg(long, env = "FERRY_MAX_STREAMS_PER_CONNECTION", default_value_t = TransportLimits::default().max_concurrent_streams)]
    pub max_streams_per_connection: u32,
    /// Seconds a TLS handshake on the agent port may take.
    #[arg(long, env = "FERRY_TLS_HANDSHAKE_TIMEOUT_SECONDS", default_value_t = TransportLimits::default().tls_handshake_timeout.as_secs())]
    pub tls_handshake_timeout_seconds: u64,
    /// TLS handshakes under way on the agent port at once; more connections
    /// wait their turn in arrival order.
    #[arg(long, env = "FERRY_TLS_HANDSHAKES_IN_FLIGHT", default_value_t = TransportLimits::default().tls_handshakes_in_flight)]
    pub tls_handshakes_in_flight: usize,
    /// Seconds between HTTP/2 pings on agent connections.
    #[arg(long, env = "FERRY_HTTP2_KEEPALIVE_SECONDS", default_value_t = TransportLimits::default().http2_keepalive_interval.as_secs())]
    http2_keepalive_seconds: u64,
    /// Seconds the hub waits for a ping's answer before closing the
    /// connection.
    #[arg(long, env = "FERRY_HTTP2_KEEPALIVE_TIMEOUT_SECONDS", default_value_t = TransportLimits::default().http2_keepalive_timeout.as_secs())]
    http2_keepalive_timeout_seconds: u64,
    /// Connections the agent port holds at once; more are closed as soon
    /// as they are accepted.
    #[arg(long, env = "FERRY_MAX_CONNECTIONS", default_value_t = TransportLimits::default().max_connections)]
    pub max_connections: usize,
    /// Connections one peer address (IPv6: its /64) may hold on the agent
    /// port at once; more are closed as soon as they are accepted. Agents
    /// behind one NAT address share it.
    #[arg(long, env = "FERRY_MAX_CONNECTIONS_PER_PEER", default_value_t = TransportLimits::default().max_connections_per_peer)]
    pub max_connections_per_peer: usize,
    /// Seconds a connection to the agent port may stay open without a
    /// stream whose token was accepted; then it is closed.
    #[arg(long, env = "FERRY_UNAUTHENTICATED_IDLE_SECONDS", default_value_t = TransportLimits::default().unauthenticated_idle.as_secs())]
    pub unauthenticated_idle_seconds: u64,
    /// TCP keepalive of agent connections, in seconds.
    #[arg(long, env = "FERRY_TCP_KEEPALIVE_SECONDS", default_value_t = TransportLimits::default().tcp_keepalive.as_secs())]
    pub tcp_keepalive_seconds: u64,
    /// Requests the hub has in flight to its API server at once (each
    /// needs its own connection until answered); more wait their turn.
    /// Bounds the connections a burst of agents (token reviews, liveness
    /// writes) opens, and the memory those connections hold.
    #[arg(long, env = "FERRY_HUB_API_CONCURRENCY", default_value_t = DEFAULT_API_CONCURRENCY)]
    pub hub_api_concurrency: usize,
    /// Namespace of the leader Lease (the hub's own). Set, replicas elect a
    /// leader that alone runs the placement, taint, replica-set, TTL,
    /// deletion and liveness-sweep controllers; every replica serves agents.
    /// Unset, this replica runs them all (run one replica only).
    #[arg(long, env = "FERRY_LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// Name of the leader Lease.
    #[arg(long, env = "FERRY_LEADER_ELECTION_LEASE", default_value = "ferry-hub")]
    pub leader_election_lease: String,
    /// Seconds the Lease holds without renewal: the longest the controllers
    /// stay stopped after a leader dies (a leader that stops cleanly hands
    /// over at once). It is renewed a third of this before it ends.
    #[arg(long, env = "FERRY_LEADER_LEASE_SECONDS", default_value_t = 15)]
    pub leader_lease_seconds: u64,
    /// Namespace of this replica's own Lease (`ferry-hub-replica-<pod>-<n>`),
    /// which vouches for the agent sessions it holds instead of a write per
    /// cluster. Defaults to the leader election namespace, else
    /// `POD_NAMESPACE`, else `default`.
    #[arg(long, env = "FERRY_REPLICA_LEASE_NAMESPACE")]
    pub replica_lease_namespace: Option<String>,
    /// Seconds the replica Lease vouches without renewal: the longest the
    /// clusters of a replica that died still show connected. Renewed a
    /// third of this before it ends.
    #[arg(long, env = "FERRY_REPLICA_LEASE_SECONDS", default_value_t = 30)]
    pub replica_lease_seconds: u64,
    /// Seconds a cluster's agent may stay disconnected before the cluster
    /// is tainted `cluster.ferry.dev/unreachable`, which drops it from
    /// placements that do not tolerate the taint (and so deletes its
    /// replica-set works). Agent restarts, sessions reaching their maximum
    /// age and hub failovers shorter than this move nothing. A cluster whose
    /// agent never connected is tainted at once.
    #[arg(long, env = "FERRY_UNREACHABLE_GRACE_SECONDS", default_value_t = 60)]
    pub unreachable_grace_seconds: u64,
    /// Seconds between two reconciles of every Placement and
    /// ManifestWorkReplicaSet by the leader with no change seen: the net
    /// for an event lost any other way. Watches trigger every reconcile
    /// that matters; this only bounds how long a lost one goes unnoticed.
    #[arg(long, env = "FERRY_CONTROLLER_SWEEP_SECONDS", default_value_t = ferry_hub::hub::DEFAULT_CONTROLLER_SWEEP.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..))]
    pub controller_sweep_seconds: u64,
    /// Seconds the hub has to stop after SIGTERM or Ctrl-C (releasing its
    /// Leases, closing agent streams); past them it exits whatever it is
    /// doing. Keep it below the pod's terminationGracePeriodSeconds (30 by
    /// default), so the hub ends itself before the kubelet kills it.
    #[arg(long, env = "FERRY_SHUTDOWN_GRACE_SECONDS", default_value_t = 25)]
    pub shutdown_grace_seconds: u64,
    /// Publish a ClusterProfile (SIG Multicluster's cluster inventory,
    /// `multicluster.x-k8s.io/v1alpha1`) for every ManagedCluster. The
    /// leader does so while the API server serves the ClusterProfile CRD
    /// (deploy/crds/clusterprofiles.yaml, which the hub does not install);
    /// without it the hub logs so and serves everything else.
    #[arg(long, env = "FERRY_CLUSTER_PROFILES", default_value_t = true, action = clap::ArgAction::Set)]
    pub cluster_profiles: bool,
    /// Namespace the ClusterProfiles are written to; it must exist.
    /// Defaults to the replica Lease's namespace (the hub's own).
    #[arg(long, env = "FERRY_CLUSTER_PROFILE_NAMESPACE")]
    pub cluster_profile_namespace: Option<String>,
    /// How many rollout-gate health expressions (tenant CEL) may be
    /// evaluated at once, each on a blocking thread of its own; an
    /// evaluation past its deadline keeps its slot until it ends, so at
    /// most this many threads ever burn. At most one per namespace runs.
    #[arg(long, env = "FERRY_HEALTH_EVAL_PERMITS", default_value_t = 2)]
    pub health_eval_permits: usize,
    /// Milliseconds one health expression may take (waiting for a slot
    /// included) before its gate is `Unhealthy` with a message naming
    /// the time limit.
    #[arg(long, env = "FERRY_HEALTH_EVAL_DEADLINE_MS", default_value_t = 500)]
    pub health_eval_deadline_ms: u64,
    /// OpenTelemetry trace export (off unless an endpoint is given); read
    /// by `main`, which installs the exporter before `run`.
    #[command(flatten)]
    pub trace: ferry_telemetry::TraceArgs,
}

/// This replica's name in the leader Lease: the pod name (`POD_NAME` from
/// the downward API, else the hostname Kubernetes sets to it), else a
/// random one so two local replicas never share it.
fn replica_identity() -> String {
    ["POD_NAME", "HOSTNAME"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| format!("ferry-hub-{:016x}", rand::random::<u64>()))
}

/// Runs the hub until a shutdown signal. Fails when the TLS flags are
/// incomplete, a port cannot be bound, the CRDs cannot be installed, or a
/// part of the hub fails.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    // Installed before anything waits on the API server, so a stop during
    // start-up is bounded too.
    let stop = super::shutdown::shutdown_signal(Duration::from_secs(args.shutdown_grace_seconds))
        .context("installing the signal handlers")?;
    let replica_lease = replica_lease(&args);
    let cluster_profiles = args.cluster_profiles.then(|| ClusterProfileOptions {
        namespace: args
            .cluster_profile_namespace
            .clone()
            .unwrap_or_else(|| replica_lease.namespace.clone()),
    });
    let grpc_tls = grpc_tls(&args)?;
    let api_requests = ApiRequests::default();
    let client = api_client(args.hub_api_concurrency, api_requests.clone()).await?;
    if args.install_crds {
        install_crds(&client).await?;
    }
    let listeners = HubListeners {
        cluster_profiles,
        watch_policies: args.watch_admission_policies,
        leader_election: leader_election(&args),
        replica_lease,
        unreachable_grace: Duration::from_secs(args.unreachable_grace_seconds),
        controller_sweep: Duration::from_secs(args.controller_sweep_seconds),
        health_pool: HealthPoolConfig {
            permits: args.health_eval_permits.max(1),
            deadline: Duration::from_millis(args.health_eval_deadline_ms.max(1)),
        },
        grpc: bind(args.grpc_addr).await?,
        grpc_tls,
        probes: Some(bind(args.probe_addr).await?),
        admission: admission(&args).await?,
        api_requests: Some(api_requests),
    };
    run_hub(client, listeners, session(&args), stop).await?;
    Ok(())
}

/// A listener on `addr`; fails naming it.
async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))
}

/// This replica's Lease: in `--replica-lease-namespace`, else the leader
/// election's, else the pod's, else `default`.
fn replica_lease(args: &ServeArgs) -> ReplicaLease {
    ReplicaLease {
        namespace: hub_namespace(args),
        // Unique per process: a restarted replica is a new one, and its
        // predecessor's clusters are swept once the old Lease lapses.
        identity: format!(
            "{}-{:06x}",
            replica_identity(),
            rand::random::<u32>() & 0xff_ffff
        ),
        duration: Duration::from_secs(args.replica_lease_seconds.max(3)),
    }
}

/// The hub's own namespace: `--replica-lease-namespace`, else the leader
/// election's, else the pod's, else `default`.
fn hub_namespace(args: &ServeArgs) -> String {
    args.replica_lease_namespace
        .clone()
        .or_else(|| args.leader_election_namespace.clone())
        .or_else(|| {
            std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|n| !n.is_empty())
        })
        .unwrap_or_else(|| "default".into())
}

/// Leader election, when `--leader-election-namespace` is given.
fn leader_election(args: &ServeArgs) -> Option<LeaderElection> {
    args.leader_election_namespace.clone().map(|namespace| {
        let lease_duration = Duration::from_secs(args.leader_lease_seconds.max(3));
        LeaderElection {
            lease_name: args.leader_election_lease.clone(),
            namespace,
            identity: replica_identity(),
            lease_duration,
            renew_before: lease_duration / 3,
        }
    })
}

/// How often certificate files are read again: a rotated certificate
/// (cert-manager renewing the Secret) is served without a restart.
fn reload_interval(args: &ServeArgs) -> Duration {
    Duration::from_secs(args.cert_reload_seconds.max(1))
}

/// TLS of the agent port; fails unless it has a certificate and key or
/// plaintext is asked for.
fn grpc_tls(args: &ServeArgs) -> anyhow::Result<Option<GrpcTls>> {
    match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Ok(Some(GrpcTls {
            client_ca: args.client_ca.clone().map(CaSource::File),
            reload_interval: reload_interval(args),
            agent_certificates: args.agent_certificates.then(|| AgentCertOptions {
                ca_secret: (hub_namespace(args), args.agent_ca_secret.clone()),
                lifetime: Duration::from_secs(args.agent_certificate_seconds.max(60)),
            }),
            ..GrpcTls::new(CertSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            })
        })),
        _ if args.insecure_plaintext => Ok(None),
        _ => anyhow::bail!(
            "TLS is on by default: give --tls-cert and --tls-key, or --insecure-plaintext for local experiments"
        ),
    }
}

/// The admission webhook, when it has an address and a target: its
/// certificate from files, or made for the target's host. Fails when the
/// files cannot be read or the address bound.
async fn admission(args: &ServeArgs) -> anyhow::Result<Option<AdmissionOptions>> {
    let target = webhook_target(args.webhook_url.clone(), args.webhook_service.clone());
    let (Some(addr), Some(target)) = (args.webhook_addr, target) else {
        return Ok(None);
    };
    let cert = match (&args.webhook_cert, &args.webhook_key) {
        (Some(cert), Some(key)) => ServingCert {
            reload_interval: reload_interval(args),
            ..ServingCert::load(cert, key, args.webhook_ca.as_deref())?
        },
        _ => ServingCert::generate(&[match &target {
            WebhookTarget::Url(url) => url_host(url)?,
            WebhookTarget::Service(service) => service.dns_name(),
        }])?,
    };
    Ok(Some(AdmissionOptions {
        listener: bind(addr).await?,
        target,
        cert,
        max_work_bytes: args.max_work_bytes,
        failure_policy: args.webhook_failure_policy,
    }))
}

/// The agents' sessions: heartbeats, age, authentication and transport
/// limits (each at least one second where a zero would spin).
fn session(args: &ServeArgs) -> SessionConfig {
    let seconds = |s: u64| Duration::from_secs(s.max(1));
    SessionConfig {
        heartbeat_interval: seconds(args.heartbeat_seconds),
        max_session_age: seconds(args.max_session_seconds),
        auth: AuthOptions {
            service_account: args.agent_service_account.clone(),
            review_interval: seconds(args.token_review_seconds),
            peer_reviews_per_minute: args.peer_token_reviews_per_minute,
            live_reviews_per_second: args.live_token_reviews_per_second,
            connect_reviews_in_flight: args.connect_token_reviews_in_flight,
        },
        transport: TransportLimits {
            max_concurrent_streams: args.max_streams_per_connection.max(1),
            tls_handshake_timeout: seconds(args.tls_handshake_timeout_seconds),
            tls_handshakes_in_flight: args.tls_handshakes_in_flight.max(1),
            http2_keepalive_interval: seconds(args.http2_keepalive_seconds),
            http2_keepalive_timeout: seconds(args.http2_keepalive_timeout_seconds),
            tcp_keepalive: seconds(args.tcp_keepalive_seconds),
            max_connections: args.max_connections.max(1),
            max_connections_per_peer: args.max_connections_per_peer.max(1),
            unauthenticated_idle: seconds(args.unauthenticated_idle_seconds),
            // Agents report the status of works of up to this size.
            message_caps: MessageCaps::for_max_work_bytes(args.max_work_bytes),
            ..TransportLimits::default()
        },
    }
}

/// Default of `--hub-api-concurrency`.
const DEFAULT_API_CONCURRENCY: usize = 64;

/// The hub's client of its API server (from the kubeconfig or the pod's
/// ServiceAccount) with at most `concurrency` requests awaiting an answer at
/// once. kube's client opens one HTTP/1.1 connection per concurrent request
/// and keeps it idle afterwards: without a bound, 1,000 agents connecting
/// together (each a TokenReview and a liveness write) left ~1,700 idle TLS
/// connections to the API server in the hub, 60 % of its memory. A watch
/// holds its slot only until its response starts, so watches never starve
/// other requests.
async fn api_client(concurrency: usize, counted: ApiRequests) -> anyhow::Result<kube::Client> {
    let config = kube::Config::infer()
        .await
        .context("building a Kubernetes client")?;
    ferry_hub::api_client::api_client(config, Some(concurrency), Some(counted))
        .context("building a Kubernetes client")
}

/// The webhook's target from --webhook-url or --webhook-service (clap lets
/// at most one through).
fn webhook_target(url: Option<String>, service: Option<ServiceRef>) -> Option<WebhookTarget> {
    url.map(WebhookTarget::Url)
        .or(service.map(WebhookTarget::Service))
}

/// The host of an https URL, for the generated certificate's name.
fn url_host(url: &str) -> anyhow::Result<String> {
    let uri: http::Uri = url
        .parse()
        .with_context(|| format!("--webhook-url {url:?} is not a URL"))?;
    anyhow::ensure!(
        uri.scheme_str() == Some("https"),
        "--webhook-url {url:?} must be https: the API server only calls webhooks over TLS"
    );
    let host = uri
        .host()
        .with_context(|| format!("--webhook-url {url:?} has no host"))?;
    // IPv6 hosts come bracketed; the certificate wants the bare address.
    Ok(host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn serve(args: &[&str]) -> Result<Cli, clap::Error> {
        let base = ["ferry-hub", "serve", "--insecure-plaintext"];
        Cli::try_parse_from(base.iter().chain(args))
    }

    #[test]
    fn the_webhook_is_registered_by_service_reference() {
        let cli = serve(&[
            "--webhook-addr=0.0.0.0:9443",
            "--webhook-service=ferry/ferry-hub-webhook",
        ])
        .expect("parses");
        let Command::Serve(ServeArgs {
            webhook_url,
            webhook_service,
            ..
        }) = cli.command
        else {
            panic!("not serve")
        };
        assert_eq!(
            webhook_target(webhook_url, webhook_service),
            Some(WebhookTarget::Service(ServiceRef {
                namespace: "ferry".into(),
                name: "ferry-hub-webhook".into(),
                port: 443,
            }))
        );
    }

    #[test]
    fn the_agent_port_limits_have_their_defaults_and_flags() {
        let parsed = |args: &[&str]| match serve(args).expect("parses").command {
            Command::Serve(args) => (
                args.max_connections_per_peer,
                args.unauthenticated_idle_seconds,
                args.max_work_bytes,
            ),
            _ => panic!("not serve"),
        };
        let defaults = TransportLimits::default();
        assert_eq!(
            parsed(&[]),
            (
                defaults.max_connections_per_peer,
                defaults.unauthenticated_idle.as_secs(),
                DEFAULT_MAX_WORK_BYTES
            )
        );
        assert_eq!(defaults.max_connections_per_peer, 1_000);
        assert_eq!(defaults.unauthenticated_idle, Duration::from_secs(20));
        assert_eq!(
            defaults.message_caps,
            MessageCaps::for_max_work_bytes(DEFAULT_MAX_WORK_BYTES)
        );
        assert_eq!(
            parsed(&[
                "--max-connections-per-peer=3",
                "--unauthenticated-idle-seconds=7",
                "--max-work-bytes=2000000"
            ]),
            (3, 7, 2_000_000)
        );
    }

    #[test]
    fn the_webhook_needs_exactly_one_target_and_an_address() {
        let both = serve(&[
            "--webhook-addr=0.0.0.0:9443",
            "--webhook-service=ferry/hook",
            "--webhook-url=https://h:9443",
        ]);
        assert_eq!(
            both.err().map(|e| e.kind()),
            Some(clap::error::ErrorKind::ArgumentConflict)
        );
        let neither = serve(&["--webhook-addr=0.0.0.0:9443"]);
        assert_eq!(
            neither.err().map(|e| e.kind()),
            Some(clap::error::ErrorKind::MissingRequiredArgument)
        );
        let no_addr = serve(&["--webhook-service=ferry/hook"]);
        assert_eq!(
            no_addr.err().map(|e| e.kind()),
            Some(clap::error::ErrorKind::MissingRequiredArgument)
        );
        let malformed = serve(&["--webhook-addr=0.0.0.0:9443", "--webhook-service=hook"]);
        assert_eq!(
            malformed.err().map(|e| e.kind()),
            Some(clap::error::ErrorKind::ValueValidation)
        );
        assert!(serve(&["--webhook-addr=0.0.0.0:9443", "--webhook-url=https://h"]).is_ok());
    }
}
