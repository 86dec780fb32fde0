//! `ferry-agent`: apply this cluster's works from the ferry hub.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use ferry_agent::deletion_brake::decide::Limits;
use ferry_agent::session::{ClientTls, SessionConfig, TokenSource};
use ferry_agent::{
    AgentOptions, DEFAULT_SPOKE_CHECK_INTERVAL, DeletionBrakeOptions, Observability, run_agent,
};

#[derive(Parser)]
#[command(
    name = "ferry-agent",
    version,
    about = "The ferry agent",
    args_conflicts_with_subcommands = true,
    // `crds` needs none of the flags running an agent requires.
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Hub gRPC URL.
    #[arg(long, env = "FERRY_HUB_URL", required = true)]
    hub_url: Option<String>,
    /// This cluster's name (its namespace on the hub).
    #[arg(long, env = "FERRY_CLUSTER_NAME", required = true)]
    cluster_name: Option<String>,
    /// File holding the ServiceAccount token the agent presents to the hub
    /// (written by `ferry-hub join`); re-read on every connection.
    #[arg(long, env = "FERRY_TOKEN_FILE", required = true)]
    token_file: Option<std::path::PathBuf>,
    /// CA (PEM) of the hub's serving certificate, for an https hub URL.
    #[arg(long, env = "FERRY_HUB_CA")]
    hub_ca: Option<std::path::PathBuf>,
    /// Client certificate (PEM) for a hub that requires mutual TLS.
    #[arg(long, env = "FERRY_CLIENT_CERT", requires = "client_key")]
    client_cert: Option<std::path::PathBuf>,
    /// Private key (PEM) of --client-cert.
    #[arg(long, env = "FERRY_CLIENT_KEY", requires = "client_cert")]
    client_key: Option<std::path::PathBuf>,
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, env = "FERRY_PROBE_ADDR", default_value = "0.0.0.0:8081")]
    probe_addr: SocketAddr,
    /// Seconds between checks that the spoke API server answers the agent
    /// (GET /version with its credentials); /readyz fails once three in a
    /// row went unanswered.
    #[arg(long, env = "FERRY_SPOKE_CHECK_SECONDS", default_value_t = DEFAULT_SPOKE_CHECK_INTERVAL.as_secs())]
    spoke_check_seconds: u64,
    /// Seconds between heartbeats to the hub.
    #[arg(long, env = "FERRY_HEARTBEAT_SECONDS", default_value_t = 10)]
    heartbeat_seconds: u64,
    /// Seconds between full re-checks of every work (drift is normally seen
    /// at once by watches; this is the safety net).
    #[arg(long, env = "FERRY_RESYNC_SECONDS", default_value_t = 600)]
    resync_seconds: u64,
    /// Seconds a work the hub does not have (a rebuilt hub, a work removed
    /// while the hub was away) keeps its objects before they are released;
    /// 100 years (3153600000) or more turns eviction off, as in OCM.
    #[arg(long, env = "FERRY_EVICTION_GRACE_SECONDS", default_value_t = 3600)]
    eviction_grace_seconds: u64,
    /// Seconds a deleted work keeps its objects while other works of the
    /// cluster still depend on it (spec.dependsOn); then it is released
    /// anyway, so a stuck dependent cannot pin objects forever.
    #[arg(
        long,
        env = "FERRY_DEPENDENTS_DELETION_TIMEOUT_SECONDS",
        default_value_t = 300
    )]
    dependents_deletion_timeout_seconds: u64,
    /// Seconds passes still running at SIGTERM may take to finish before they
    /// are abandoned (safe: objects are recorded before they are created).
    /// Keep it under the Pod's terminationGracePeriodSeconds.
    #[arg(long, env = "FERRY_SHUTDOWN_GRACE_SECONDS", default_value_t = 10)]
    shutdown_grace_seconds: u64,
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, env = "FERRY_LOG_JSON")]
    log_json: bool,
    /// Largest JsonRaw status feedback value in bytes (OCM's flag and
    /// default); a larger value is left out and StatusFeedbackSynced says why.
    #[arg(long, env = "FERRY_MAX_JSON_RAW_LENGTH", default_value_t = 1024)]
    max_json_raw_length: usize,
    /// Apply only works that name an executor (spec.executor, a
    /// ServiceAccount whose rights on this cluster bound what the work may
    /// apply); the manifests of other works fail with ExecutorRequired.
    #[arg(long, env = "FERRY_REQUIRE_EXECUTOR")]
    require_executor: bool,
    /// Restricted mode (the chart's rbac.restricted): refuse manifests that
    /// are CustomResourceDefinitions or ferry's own kinds (AppliedManifestWork
    /// and the rest), which the agent holds rights on for its own records
    /// only; they fail with RestrictedKind.
    #[arg(long, env = "FERRY_RESTRICTED")]
    restricted: bool,
    /// Migration from OCM's work agent: remove owner references to OCM's
    /// AppliedManifestWorks from the objects works apply, so that removing
    /// OCM's agent and its records cannot delete them. Stop OCM's agent first.
    #[arg(long, env = "FERRY_ADOPT_OCM_OBJECTS")]
    adopt_ocm_objects: bool,
    /// Write every work's objects as the work's executor, impersonating its
    /// ServiceAccount (the chart's rbac.executorOnly): the spoke's API server
    /// then judges each write, escalate and bind included, against the
    /// executor, and the agent's own role needs no workload rights. Every
    /// work must name an executor (implies --require-executor).
    #[arg(long, env = "FERRY_WRITE_AS_EXECUTOR")]
    write_as_executor: bool,
    /// The deletion brake: percent of the objects the agent manages (their
    /// high-water mark in the window) that deleted works may remove per
    /// window before further deletions are held for a platform admin's
    /// release. 0 turns the brake off.
    #[arg(long, env = "FERRY_DELETION_BRAKE_PERCENT", default_value_t = 25,
          value_parser = clap::value_parser!(u8).range(0..=100))]
    deletion_brake_percent: u8,
    /// Objects deleted works may always remove per window, however few the
    /// agent manages.
    #[arg(long, env = "FERRY_DELETION_BRAKE_FLOOR", default_value_t = 20)]
    deletion_brake_floor: u64,
    /// The deletion brake's window in seconds.
    #[arg(long, env = "FERRY_DELETION_BRAKE_WINDOW_SECONDS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..))]
    deletion_brake_window_seconds: u64,
    /// The spoke namespace of the brake's ledger (ConfigMap
    /// ferry-deletion-brake), where a platform admin releases held
    /// deletions. Default: the agent's own namespace in a Pod, else
    /// `default`.
    #[arg(long, env = "FERRY_DELETION_BRAKE_NAMESPACE")]
    deletion_brake_namespace: Option<String>,
    /// The spoke namespace of the cluster's sealing keys (Secret
    /// ferry-agent-sealing-keys; docs/sealed-secrets.md). Default: the
    /// agent's own namespace in a Pod, else `default`.
    #[arg(long, env = "FERRY_SEALING_NAMESPACE")]
    sealing_namespace: Option<String>,
    /// Hold no sealing keys: publish none and open no sealed Secret.
    #[arg(long, env = "FERRY_NO_SEALING")]
    no_sealing: bool,
    /// Threads running the agent's tasks. Its work is mostly waiting on the
    /// hub and the spoke, and each thread costs memory (its stack, and the
    /// allocator keeps memory per thread), so the default does not follow
    /// the node's CPU count.
    #[arg(long, env = "FERRY_WORKER_THREADS", default_value_t = 2,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    worker_threads: u16,
    /// OpenTelemetry trace export (off unless an endpoint is given).
    #[command(flatten)]
    trace: ferry_telemetry::TraceArgs,
}

/// Threads for blocking calls at most (name resolution, file reads, CEL
/// rules); tokio's default of 512 would let a burst leave idle threads and
/// their memory behind.
const MAX_BLOCKING_THREADS: usize = 8;

#[derive(clap::Subcommand)]
enum Command {
    /// Write the spoke CRDs (AppliedManifestWork) as YAML files into a
    /// directory. The agent installs them itself at start.
    Crds {
        /// Target directory.
        #[arg(long)]
        out: std::path::PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(usize::from(cli.worker_threads))
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?
        .block_on(run(cli))
}

/// The `crds` subcommand, or the agent until it is told to stop, on the
/// runtime `main` built.
async fn run(cli: Cli) -> anyhow::Result<()> {
    if let Some(Command::Crds { out }) = &cli.command {
        for (file, crd) in ferry_agent::applied_works::spoke_crds() {
            let path = out.join(file);
            let yaml = ferry_agent::applied_works::render_spoke_crd(&crd)?;
            std::fs::write(&path, yaml).with_context(|| format!("writing {}", path.display()))?;
        }
        return Ok(());
    }
    // clap requires these unless a subcommand ran, which returned above.
    let (Some(hub_url), Some(cluster_name), Some(token_file)) =
        (cli.hub_url, cli.cluster_name, cli.token_file)
    else {
        anyhow::bail!("--hub-url, --cluster-name and --token-file are required");
    };
    let identity = ferry_telemetry::ServiceIdentity {
        service_name: "ferry-agent",
        attributes: vec![("ferry.cluster", cluster_name.clone())],
    };
    let traces = ferry_telemetry::init(cli.log_json, &cli.trace, identity)?;
    let read = |path: &std::path::PathBuf| {
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
    };
    let tls = match &cli.hub_ca {
        Some(ca) => Some(ClientTls {
            ca_pem: read(ca)?,
            identity: match (&cli.client_cert, &cli.client_key) {
                (Some(cert), Some(key)) => Some((read(cert)?, read(key)?)),
                _ => None,
            },
        }),
        None if hub_url.starts_with("https://") => {
            anyhow::bail!("an https hub URL needs --hub-ca (the CA of the hub's certificate)")
        }
        None => None,
    };
    let spoke = kube::Config::infer()
        .await
        .context("reading the spoke connection (in-cluster or KUBECONFIG)")?;
    // The namespace the spoke connection defaults to: the Pod's own in a
    // cluster, the kubeconfig context's (else `default`) outside one.
    let spoke_namespace = spoke.default_namespace.clone();
    let client = ferry_agent::spoke_client::spoke_client(spoke.clone())
        .context("building a Kubernetes client for the spoke")?;
    let probes = tokio::net::TcpListener::bind(cli.probe_addr)
        .await
        .with_context(|| format!("binding {}", cli.probe_addr))?;
    let observability = Observability::new(Duration::from_secs(cli.spoke_check_seconds.max(1)));
    let router = ferry_agent::probes::router(
        observability.readiness.clone(),
        std::sync::Arc::new(observability.registry()),
    );
    tokio::spawn(async move {
        axum::serve(ferry_agent::probes::nodelay_listener(probes), router).await
    });
    let config = SessionConfig {
        hub_url,
        cluster_name,
        heartbeat_interval: Duration::from_secs(cli.heartbeat_seconds.max(1)),
        token: TokenSource::File(token_file),
        tls,
    };
    let options = AgentOptions {
        resync_interval: Duration::from_secs(cli.resync_seconds.max(1)),
        eviction_grace: Duration::from_secs(cli.eviction_grace_seconds),
        dependents_deletion_timeout: Duration::from_secs(cli.dependents_deletion_timeout_seconds),
        shutdown_grace: Duration::from_secs(cli.shutdown_grace_seconds),
        observability,
        max_json_raw_length: cli.max_json_raw_length,
        require_executor: cli.require_executor,
        restricted: cli.restricted,
        adopt_ocm_objects: cli.adopt_ocm_objects,
        write_as_executor: cli.write_as_executor.then_some(spoke),
        sealing_namespace: (!cli.no_sealing).then(|| {
            cli.sealing_namespace
                .clone()
                .unwrap_or_else(|| spoke_namespace.clone())
        }),
        deletion_brake: (cli.deletion_brake_percent > 0).then(|| DeletionBrakeOptions {
            namespace: cli
                .deletion_brake_namespace
                .clone()
                .unwrap_or_else(|| spoke_namespace.clone()),
            limits: Limits {
                percent: cli.deletion_brake_percent,
                floor: cli.deletion_brake_floor,
                window: Duration::from_secs(cli.deletion_brake_window_seconds),
            },
        }),
    };
    run_agent(client, config, options, shutdown_signal()).await;
    traces.shutdown().await;
    Ok(())
}

/// Completes on SIGTERM (what Kubernetes sends a Pod) or Ctrl-C. Without a
/// SIGTERM handler only Ctrl-C is awaited.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(
            tokio::signal::unix::SignalKind::terminate(),
        ) {
            Ok(term) => term,
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops the agent");
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
