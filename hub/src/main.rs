//! `ferry-hub`: serve agents, or print the hub's CRDs.
#![forbid(unsafe_code)]

use ferry_api::contract::AGENT_SERVICE_ACCOUNT;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{ArgGroup, Parser, Subcommand};
use ferry_api::crds::hub_crds;
use ferry_hub::admission::{
    AdmissionOptions, DEFAULT_MAX_WORK_BYTES, FailurePolicy, ServiceRef, WebhookTarget,
};
use ferry_hub::certs::reload::{CaSource, CertSource, DEFAULT_RELOAD_INTERVAL};
use ferry_hub::certs::tls::ServingCert;
use ferry_hub::clusters::labels::{parse_pairs, set_labels_and_claims};
use ferry_hub::crds::{POLICY_FILE, install_crds, render_policy_yaml, render_yaml};
use ferry_hub::grpc::config::{GrpcTls, SessionConfig, TransportLimits};
use ferry_hub::grpc::identity::AuthOptions;
use ferry_hub::hub::{HubListeners, run_hub};
use ferry_hub::join::accept::set_accepted;
use ferry_hub::join::both::{JoinOptions, SpokeTarget, join_both_sides};
use ferry_hub::join::bundle::{BUNDLE_AGENT_FILE, BUNDLE_SECRET_FILE, BUNDLE_VALUES_FILE};
use ferry_hub::join::hub_side::join_cluster_as;
use tokio::net::TcpListener;

#[derive(Parser)]
#[command(name = "ferry-hub", version, about = "The ferry hub")]
struct Cli {
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, env = "FERRY_LOG_JSON", global = true)]
    log_json: bool,
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start-up and matched at once: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Serve agents (uses the ambient kubeconfig or in-cluster config).
    #[command(group(ArgGroup::new("webhook_target").args(["webhook_url", "webhook_service"])))]
    Serve {
        /// Address agents connect to.
        #[arg(long, env = "FERRY_GRPC_ADDR", default_value = "0.0.0.0:8443")]
        grpc_addr: SocketAddr,
        /// Address of /healthz, /readyz and /metrics.
        #[arg(long, env = "FERRY_PROBE_ADDR", default_value = "0.0.0.0:8080")]
        probe_addr: SocketAddr,
        /// Seconds between heartbeats to each agent.
        #[arg(long, env = "FERRY_HEARTBEAT_SECONDS", default_value_t = 10)]
        heartbeat_seconds: u64,
        /// Apply the hub CRDs at start-up and wait until they are served.
        #[arg(long, env = "FERRY_INSTALL_CRDS")]
        install_crds: bool,
        /// Serving certificate chain (PEM) of the agent port; TLS is on
        /// unless --insecure-plaintext is given. Re-read when it changes.
        #[arg(long, env = "FERRY_TLS_CERT", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// Private key (PEM) of --tls-cert.
        #[arg(long, env = "FERRY_TLS_KEY", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// CA (PEM) that agents' client certificates must chain to: turns
        /// on mutual TLS, on top of token authentication.
        #[arg(long, env = "FERRY_CLIENT_CA", requires = "tls_cert")]
        client_ca: Option<PathBuf>,
        /// Serve agents without TLS. Tokens then travel in clear text: for
        /// local experiments only.
        #[arg(long, env = "FERRY_INSECURE_PLAINTEXT", conflicts_with_all = ["tls_cert", "client_ca"])]
        insecure_plaintext: bool,
        /// Address of the ManifestWork admission webhook (HTTPS). With it,
        /// the hub registers a ValidatingWebhookConfiguration so invalid
        /// works are refused when written.
        /// Needs --webhook-url or --webhook-service.
        #[arg(long, env = "FERRY_WEBHOOK_ADDR", requires = "webhook_target")]
        webhook_addr: Option<SocketAddr>,
        /// Base URL at which the hub API server reaches the webhook, e.g.
        /// https://hub.example:9443 (a hub outside the hub cluster).
        #[arg(long, env = "FERRY_WEBHOOK_URL", requires = "webhook_addr")]
        webhook_url: Option<String>,
        /// The Service of the hub cluster in front of the webhook, as
        /// NAMESPACE/NAME[:PORT] (port of the Service, default 443): the
        /// registration names the Service, and the certificate must be valid
        /// for NAME.NAMESPACE.svc.
        #[arg(long, env = "FERRY_WEBHOOK_SERVICE", requires = "webhook_addr")]
        webhook_service: Option<ServiceRef>,
        /// PEM certificate chain of the webhook; a certificate for the URL's
        /// host (or the Service's DNS name) is generated at start when absent.
        #[arg(long, env = "FERRY_WEBHOOK_CERT", requires = "webhook_key")]
        webhook_cert: Option<PathBuf>,
        /// PEM private key of the webhook certificate.
        #[arg(long, env = "FERRY_WEBHOOK_KEY", requires = "webhook_cert")]
        webhook_key: Option<PathBuf>,
        /// PEM CA bundle the API server uses to trust the webhook
        /// certificate; defaults to the certificate file itself.
        #[arg(long, env = "FERRY_WEBHOOK_CA", requires = "webhook_cert")]
        webhook_ca: Option<PathBuf>,
        /// How often the certificate files (--tls-cert, --tls-key,
        /// --client-ca, --webhook-cert, --webhook-key) are checked for
        /// changes; changed files are served to new connections without a
        /// restart, unusable ones are logged and the previous certificate kept.
        #[arg(long, env = "FERRY_CERT_RELOAD_SECONDS", default_value_t = DEFAULT_RELOAD_INTERVAL.as_secs())]
        cert_reload_seconds: u64,
        /// Largest ManifestWork admitted, in bytes of JSON.
        #[arg(long, env = "FERRY_MAX_WORK_BYTES", default_value_t = DEFAULT_MAX_WORK_BYTES)]
        max_work_bytes: usize,
        /// What the API server does while it cannot reach the webhook:
        /// Ignore admits the write (the CRD's rules and the admission policy
        /// still apply; the agent reports bad paths), Fail refuses it.
        #[arg(long, env = "FERRY_WEBHOOK_FAILURE_POLICY", value_enum, default_value_t = FailurePolicy::Ignore)]
        webhook_failure_policy: FailurePolicy,
        /// The ServiceAccount, in each cluster's namespace, that cluster's
        /// agent authenticates as; tokens of any other account are refused.
        #[arg(long, env = "FERRY_AGENT_SERVICE_ACCOUNT", default_value = AGENT_SERVICE_ACCOUNT)]
        agent_service_account: String,
        /// Seconds a TokenReview answer is reused; live sessions have their
        /// token reviewed again this often, and end when it is refused.
        #[arg(long, env = "FERRY_TOKEN_REVIEW_SECONDS", default_value_t = AuthOptions::default().review_interval.as_secs())]
        token_review_seconds: u64,
        /// Tokens one peer address (IPv6: its /64) may present a minute that
        /// the hub does not already know to be good; more are refused with
        /// RESOURCE_EXHAUSTED without a TokenReview.
        #[arg(long, env = "FERRY_PEER_TOKEN_REVIEWS_PER_MINUTE", default_value_t = AuthOptions::default().peer_reviews_per_minute)]
        peer_token_reviews_per_minute: NonZeroU32,
        /// Longest an agent session lives before the hub ends it and the agent
        /// reconnects (each ends at a random point in the last tenth).
        #[arg(long, env = "FERRY_MAX_SESSION_SECONDS", default_value_t = SessionConfig::default().max_session_age.as_secs())]
        max_session_seconds: u64,
        /// Streams one connection to the agent port may have open at once.
        #[arg(long, env = "FERRY_MAX_STREAMS_PER_CONNECTION", default_value_t = TransportLimits::default().max_concurrent_streams)]
        max_streams_per_connection: u32,
        /// Seconds a TLS handshake on the agent port may take.
        #[arg(long, env = "FERRY_TLS_HANDSHAKE_TIMEOUT_SECONDS", default_value_t = TransportLimits::default().tls_handshake_timeout.as_secs())]
        tls_handshake_timeout_seconds: u64,
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
        max_connections: usize,
        /// TCP keepalive of agent connections, in seconds.
        #[arg(long, env = "FERRY_TCP_KEEPALIVE_SECONDS", default_value_t = TransportLimits::default().tcp_keepalive.as_secs())]
        tcp_keepalive_seconds: u64,
        /// Requests the hub has in flight to its API server at once (each
        /// needs its own connection until answered); more wait their turn.
        /// Bounds the connections a burst of agents (token reviews, liveness
        /// writes) opens, and the memory those connections hold.
        #[arg(long, env = "FERRY_HUB_API_CONCURRENCY", default_value_t = DEFAULT_API_CONCURRENCY)]
        hub_api_concurrency: usize,
    },
    /// Join a cluster. With --spoke-kubeconfig (or --spoke-context), both
    /// sides at once: on the hub its namespace, agent ServiceAccount and
    /// ManagedCluster; on the spoke the agent's namespace, its hub Secret
    /// (token, CA, hub URL, cluster name) and the agent. With --output, the
    /// spoke side is written as files instead. With neither, only the hub
    /// side, and a token file. Idempotent; prints one line per object.
    Join {
        /// The cluster's name (its namespace on the hub).
        #[arg(long)]
        cluster: String,
        /// The URL agents dial, e.g. https://hub.example:8443.
        #[arg(long)]
        hub_url: String,
        /// The CA (PEM) of the hub's serving certificate (needed for an
        /// https hub URL with --spoke-kubeconfig or --output).
        #[arg(long)]
        ca: Option<PathBuf>,
        /// Kubeconfig of the hub (default: KUBECONFIG, ~/.kube/config or
        /// in-cluster).
        #[arg(long, env = "FERRY_HUB_KUBECONFIG")]
        hub_kubeconfig: Option<PathBuf>,
        /// Context of the hub in --hub-kubeconfig, or in the default
        /// kubeconfig when that is not given (default: the current one).
        #[arg(long)]
        hub_context: Option<String>,
        /// Kubeconfig of the spoke: install the agent there (its current
        /// context unless --spoke-context).
        #[arg(long, conflicts_with = "output")]
        spoke_kubeconfig: Option<PathBuf>,
        /// Context of the spoke in --spoke-kubeconfig, or in the default
        /// kubeconfig when that is not given: install the agent there.
        #[arg(long, conflicts_with = "output")]
        spoke_context: Option<String>,
        /// Write the spoke side (agent manifests, hub Secret, chart values)
        /// into this directory for GitOps instead of applying it.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Image of the agent (default: the chart's).
        #[arg(long)]
        image: Option<String>,
        /// Mint a new token even when the spoke's still works, write it to
        /// the spoke (or bundle), then revoke the cluster's older tokens.
        #[arg(long)]
        rotate_token: bool,
        /// Create the ManagedCluster not accepted: the agent is refused until
        /// `ferry-hub accept --cluster NAME`.
        #[arg(long)]
        pending: bool,
        /// Hub-only mode: directory the token (and CA) are written to.
        #[arg(long, default_value = ".")]
        out: PathBuf,
        /// Lifetime of a new agent token. Joining again renews a token past
        /// two thirds of its life; --rotate-token replaces it at once.
        #[arg(long, default_value_t = 365 * 24 * 3600)]
        token_seconds: i64,
        /// The ServiceAccount the agent authenticates as (the hub's
        /// --agent-service-account).
        #[arg(long, env = "FERRY_AGENT_SERVICE_ACCOUNT", default_value = AGENT_SERVICE_ACCOUNT)]
        agent_service_account: String,
        /// Labels of the cluster's ManagedCluster, as key=value pairs
        /// (added to the ones it has), for placements to select on.
        #[arg(long, value_delimiter = ',')]
        labels: Vec<String>,
        /// Claims of the cluster (status.clusterClaims), as name=value
        /// pairs, for placements' claimSelector; replace the recorded ones.
        #[arg(long, value_delimiter = ',')]
        claims: Vec<String>,
    },
    /// Let a joined cluster's agent in (or, with --deny, keep it out and end
    /// its session): sets its ManagedCluster's spec.hubAcceptsClient.
    Accept {
        /// The cluster's name.
        #[arg(long)]
        cluster: String,
        /// Deny instead of accept.
        #[arg(long)]
        deny: bool,
        /// Kubeconfig of the hub (default: KUBECONFIG, ~/.kube/config or
        /// in-cluster).
        #[arg(long, env = "FERRY_HUB_KUBECONFIG")]
        hub_kubeconfig: Option<PathBuf>,
        /// Context of --hub-kubeconfig.
        #[arg(long)]
        hub_context: Option<String>,
    },
    /// Write the hub CRDs as YAML into a directory, or print them.
    Crds {
        /// Directory to write into; prints to stdout when absent.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Print the ManifestWork each cluster chosen by a
    /// ManifestWorkReplicaSet would get (overrides applied), as YAML,
    /// without writing anything. Exits 1 when a cluster's rendering fails.
    #[command(group(ArgGroup::new("source").required(true).args(["replica_set", "file"])))]
    Render {
        /// The replica set on the hub, as NAMESPACE/NAME.
        #[arg(long)]
        replica_set: Option<String>,
        /// Read the replica set from this YAML file instead.
        #[arg(short = 'f', long)]
        file: Option<PathBuf>,
        /// Render for these clusters instead of the placements' decisions;
        /// with -f, nothing is read from the hub.
        #[arg(long, value_delimiter = ',')]
        clusters: Vec<String>,
        /// Labels of a cluster given by --clusters, as CLUSTER:key=value
        /// (repeatable).
        #[arg(long)]
        cluster_labels: Vec<String>,
        /// Kubeconfig of the hub (default: KUBECONFIG, ~/.kube/config or
        /// in-cluster).
        #[arg(long, env = "FERRY_HUB_KUBECONFIG")]
        hub_kubeconfig: Option<PathBuf>,
        /// Context of --hub-kubeconfig.
        #[arg(long)]
        hub_context: Option<String>,
    },
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
async fn api_client(concurrency: usize) -> anyhow::Result<kube::Client> {
    let config = kube::Config::infer()
        .await
        .context("building a Kubernetes client")?;
    let builder =
        kube::client::ClientBuilder::try_from(config).context("building a Kubernetes client")?;
    Ok(builder
        .with_layer(&tower::limit::ConcurrencyLimitLayer::new(
            concurrency.max(1),
        ))
        .build())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(cli.log_json);
    match cli.command {
        Command::Crds { out } => {
            let mut documents = Vec::new();
            for (file, crd) in hub_crds() {
                documents.push((file, render_yaml(&crd)?));
            }
            documents.push((POLICY_FILE, render_policy_yaml()?));
            for (file, yaml) in documents {
                match &out {
                    Some(dir) => std::fs::write(dir.join(file), yaml)
                        .with_context(|| format!("writing {}", dir.join(file).display()))?,
                    None => print!("---\n{yaml}"),
                }
            }
            Ok(())
        }
        Command::Serve {
            grpc_addr,
            probe_addr,
            heartbeat_seconds,
            install_crds: install,
            tls_cert,
            tls_key,
            client_ca,
            insecure_plaintext,
            webhook_addr,
            webhook_url,
            webhook_service,
            webhook_cert,
            webhook_key,
            webhook_ca,
            cert_reload_seconds,
            max_work_bytes,
            webhook_failure_policy,
            agent_service_account,
            token_review_seconds,
            peer_token_reviews_per_minute,
            max_session_seconds,
            max_streams_per_connection,
            tls_handshake_timeout_seconds,
            http2_keepalive_seconds,
            http2_keepalive_timeout_seconds,
            tcp_keepalive_seconds,
            max_connections,
            hub_api_concurrency,
        } => {
            // The files are followed: a rotated certificate (cert-manager
            // renewing the Secret) is served without a restart.
            let reload_interval = Duration::from_secs(cert_reload_seconds.max(1));
            let grpc_tls = match (tls_cert, tls_key) {
                (Some(cert), Some(key)) => Some(GrpcTls {
                    client_ca: client_ca.map(CaSource::File),
                    reload_interval,
                    ..GrpcTls::new(CertSource::Files { cert, key })
                }),
                _ if insecure_plaintext => None,
                _ => anyhow::bail!(
                    "TLS is on by default: give --tls-cert and --tls-key, or --insecure-plaintext for local experiments"
                ),
            };
            let client = api_client(hub_api_concurrency).await?;
            if install {
                install_crds(&client).await?;
            }
            let listeners = HubListeners {
                grpc: TcpListener::bind(grpc_addr)
                    .await
                    .with_context(|| format!("binding {grpc_addr}"))?,
                grpc_tls,
                probes: Some(
                    TcpListener::bind(probe_addr)
                        .await
                        .with_context(|| format!("binding {probe_addr}"))?,
                ),
                admission: match (webhook_addr, webhook_target(webhook_url, webhook_service)) {
                    (Some(addr), Some(target)) => {
                        let cert = match (webhook_cert, webhook_key) {
                            (Some(cert), Some(key)) => ServingCert {
                                reload_interval,
                                ..ServingCert::load(&cert, &key, webhook_ca.as_deref())?
                            },
                            _ => ServingCert::generate(&[match &target {
                                WebhookTarget::Url(url) => url_host(url)?,
                                WebhookTarget::Service(service) => service.dns_name(),
                            }])?,
                        };
                        Some(AdmissionOptions {
                            listener: TcpListener::bind(addr)
                                .await
                                .with_context(|| format!("binding {addr}"))?,
                            target,
                            cert,
                            max_work_bytes,
                            failure_policy: webhook_failure_policy,
                        })
                    }
                    _ => None,
                },
            };
            let seconds = |s: u64| Duration::from_secs(s.max(1));
            let session = SessionConfig {
                heartbeat_interval: seconds(heartbeat_seconds),
                max_session_age: seconds(max_session_seconds),
                auth: AuthOptions {
                    service_account: agent_service_account,
                    review_interval: seconds(token_review_seconds),
                    peer_reviews_per_minute: peer_token_reviews_per_minute,
                },
                transport: TransportLimits {
                    max_concurrent_streams: max_streams_per_connection.max(1),
                    tls_handshake_timeout: seconds(tls_handshake_timeout_seconds),
                    http2_keepalive_interval: seconds(http2_keepalive_seconds),
                    http2_keepalive_timeout: seconds(http2_keepalive_timeout_seconds),
                    tcp_keepalive: seconds(tcp_keepalive_seconds),
                    max_connections: max_connections.max(1),
                    ..TransportLimits::default()
                },
            };
            run_hub(client, listeners, session, shutdown_signal()).await?;
            Ok(())
        }
        Command::Join {
            cluster,
            hub_url,
            ca,
            hub_kubeconfig,
            hub_context,
            spoke_kubeconfig,
            spoke_context,
            output,
            image,
            rotate_token,
            pending,
            out,
            token_seconds,
            agent_service_account,
            labels,
            claims,
        } => {
            let labels = parse_pairs("--labels", &labels)?;
            let claims = parse_pairs("--claims", &claims)?;
            let hub = client_from(hub_kubeconfig.as_deref(), hub_context).await?;
            let to_spoke = spoke_kubeconfig.is_some() || spoke_context.is_some();
            if !to_spoke && output.is_none() {
                join_hub_only(
                    &hub,
                    &cluster,
                    &hub_url,
                    ca,
                    &out,
                    token_seconds,
                    &agent_service_account,
                )
                .await?;
                set_labels_and_claims(&hub, &cluster, &labels, &claims).await?;
                return Ok(());
            }
            let ca_pem = match &ca {
                Some(path) => std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?,
                None if hub_url.starts_with("http://") => String::new(),
                None => anyhow::bail!(
                    "--ca is needed: the agent must trust the certificate of {hub_url}"
                ),
            };
            let options = JoinOptions {
                cluster: cluster.clone(),
                service_account: agent_service_account,
                hub_url,
                ca_pem,
                image,
                token_seconds,
                rotate_token,
                accept: !pending,
            };
            let spoke = if to_spoke {
                Some(client_from(spoke_kubeconfig.as_deref(), spoke_context).await?)
            } else {
                None
            };
            let target = match (&spoke, &output) {
                (Some(spoke), _) => SpokeTarget::Cluster(spoke),
                (None, Some(dir)) => SpokeTarget::Bundle(dir),
                (None, None) => {
                    anyhow::bail!("give --spoke-kubeconfig, --spoke-context or --output")
                }
            };
            let report = join_both_sides(&hub, target, &options).await?;
            set_labels_and_claims(&hub, &cluster, &labels, &claims).await?;
            for applied in &report.applied {
                println!("{applied}");
            }
            for file in &report.bundle {
                println!("bundle: wrote {}", file.display());
            }
            for note in &report.notes {
                println!("note: {note}");
            }
            if let Some(dir) = output {
                println!(
                    "cluster {cluster} joined the hub; on the spoke apply the bundle:\n  kubectl apply -f {secret} -f {agent}\nor apply the Secret and install the ferry-agent chart with -f {values}",
                    secret = dir.join(BUNDLE_SECRET_FILE).display(),
                    agent = dir.join(BUNDLE_AGENT_FILE).display(),
                    values = dir.join(BUNDLE_VALUES_FILE).display(),
                );
            } else {
                println!("cluster {cluster} joined: its agent runs on the spoke");
            }
            Ok(())
        }
        Command::Accept {
            cluster,
            deny,
            hub_kubeconfig,
            hub_context,
        } => {
            let hub = client_from(hub_kubeconfig.as_deref(), hub_context).await?;
            println!("{}", set_accepted(&hub, &cluster, !deny).await?);
            Ok(())
        }
        Command::Render {
            replica_set,
            file,
            clusters,
            cluster_labels,
            hub_kubeconfig,
            hub_context,
        } => {
            render(
                replica_set,
                file,
                clusters,
                cluster_labels,
                hub_kubeconfig,
                hub_context,
            )
            .await
        }
    }
}

/// `ferry-hub render`: reads the replica set (from the hub or a file) and
/// the chosen clusters (from the decisions or the flags), prints the works.
async fn render(
    replica_set: Option<String>,
    file: Option<PathBuf>,
    clusters: Vec<String>,
    cluster_labels: Vec<String>,
    hub_kubeconfig: Option<PathBuf>,
    hub_context: Option<String>,
) -> anyhow::Result<()> {
    use ferry_api::replica_set::ManifestWorkReplicaSet;
    use ferry_hub::replica_set::dry_run::{ChosenCluster, chosen_clusters, render_yaml};
    let offline = file.is_some() && !clusters.is_empty();
    let hub = if offline {
        None
    } else {
        Some(client_from(hub_kubeconfig.as_deref(), hub_context).await?)
    };
    let rs: ManifestWorkReplicaSet = match (&file, &replica_set, &hub) {
        (Some(path), _, _) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            serde_yaml::from_str(&text)
                .with_context(|| format!("{} is not a ManifestWorkReplicaSet", path.display()))?
        }
        (None, Some(reference), Some(hub)) => {
            let (namespace, name) = reference
                .split_once('/')
                .with_context(|| format!("--replica-set {reference:?} is not NAMESPACE/NAME"))?;
            kube::Api::<ManifestWorkReplicaSet>::namespaced(hub.clone(), namespace)
                .get(name)
                .await
                .with_context(|| format!("reading ManifestWorkReplicaSet {reference}"))?
        }
        _ => anyhow::bail!("give --replica-set NAMESPACE/NAME or -f FILE"),
    };
    let chosen = if clusters.is_empty() {
        let hub = hub.context("a hub client")?;
        chosen_clusters(&hub, &rs).await?
    } else {
        let mut labels: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for entry in &cluster_labels {
            let (cluster, pair) = entry
                .split_once(':')
                .with_context(|| format!("--cluster-labels {entry:?} is not CLUSTER:key=value"))?;
            labels
                .entry(cluster.to_string())
                .or_default()
                .push(pair.to_string());
        }
        if let Some(unknown) = labels.keys().find(|c| !clusters.contains(c)) {
            anyhow::bail!("--cluster-labels names {unknown:?}, which --clusters does not list");
        }
        let placement = rs
            .spec
            .placement_refs
            .first()
            .map(|r| r.name.clone())
            .unwrap_or_default();
        clusters
            .iter()
            .map(|name| {
                Ok(ChosenCluster {
                    name: name.clone(),
                    placement: placement.clone(),
                    labels: parse_pairs(
                        "--cluster-labels",
                        labels.get(name).map(Vec::as_slice).unwrap_or_default(),
                    )?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?
    };
    let (yaml, failed) = render_yaml(&rs, &chosen)?;
    print!("{yaml}");
    if failed > 0 {
        anyhow::bail!("{failed} of {} clusters would get no work", chosen.len());
    }
    Ok(())
}

/// A client from `kubeconfig` (and `context`), or the default one.
async fn client_from(
    kubeconfig: Option<&std::path::Path>,
    context: Option<String>,
) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
            let options = kube::config::KubeConfigOptions {
                context,
                ..Default::default()
            };
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .with_context(|| format!("using the kubeconfig {}", path.display()))?
        }
        None if context.is_some() => {
            let options = kube::config::KubeConfigOptions {
                context,
                ..Default::default()
            };
            kube::Config::from_kubeconfig(&options)
                .await
                .context("using the default kubeconfig")?
        }
        None => kube::Config::infer()
            .await
            .context("finding a kubeconfig or in-cluster config")?,
    };
    kube::Client::try_from(config).context("building a Kubernetes client")
}

/// The hub half only: the token is written to a file someone carries to the
/// spoke.
async fn join_hub_only(
    client: &kube::Client,
    cluster: &str,
    hub_url: &str,
    ca: Option<PathBuf>,
    out: &std::path::Path,
    token_seconds: i64,
    agent_service_account: &str,
) -> anyhow::Result<()> {
    let token = join_cluster_as(client, cluster, agent_service_account, token_seconds).await?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let token_path = out.join(format!("{cluster}.token"));
    std::fs::write(&token_path, token)
        .with_context(|| format!("writing {}", token_path.display()))?;
    let mut command = format!(
        "ferry-agent --hub-url {hub_url} --cluster-name {cluster} --token-file {}",
        token_path.display()
    );
    if let Some(ca) = ca {
        let ca_path = out.join("hub-ca.crt");
        std::fs::copy(&ca, &ca_path)
            .with_context(|| format!("copying {} to {}", ca.display(), ca_path.display()))?;
        command.push_str(&format!(" --hub-ca {}", ca_path.display()));
    }
    println!("cluster {cluster} can join; on the cluster run (with its kubeconfig):\n  {command}");
    Ok(())
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

fn init_tracing(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let Command::Serve {
            webhook_url,
            webhook_service,
            ..
        } = cli.command
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
