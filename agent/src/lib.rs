//! The ferry agent: dials the hub, applies the works of its cluster with
//! server-side apply, and reports per-manifest status back.
#![forbid(unsafe_code)]

pub mod applied_works;
pub mod applier;
pub mod conditions;
pub mod deletion;
pub mod discovery;
pub mod drift;
pub mod list_schema;
pub mod metrics;
pub mod probes;
pub mod readiness;
pub mod reconcile;
pub mod release;
pub mod session;
pub mod status_board;
pub mod works;

/// The pure apply semantics, in their own crate so the hub's admission
/// webhook uses the very same parsers; re-exported so `crate::semantics::…`
/// paths keep working.
pub use ferry_semantics as semantics;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use prometheus_client::registry::Registry;
use tokio_util::task::AbortOnDropHandle;

use crate::applied_works::AppliedWorks;
use crate::discovery::KindResolver;
use crate::list_schema::ListSchemas;
use crate::metrics::AgentMetrics;
use crate::readiness::Readiness;
use crate::reconcile::Reconciler;
use crate::session::{SessionConfig, run_session};
use crate::status_board::StatusBoard;
use crate::works::WorkManager;

/// Tunables of the agent beyond its hub session.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// How often every work is re-checked against the spoke even when no watch
    /// event arrived (a safety net; drift is normally seen by watches).
    pub resync_interval: Duration,
    /// How long a work the hub does not have (a rebuilt hub, a work removed
    /// while the hub was away) keeps its objects before they are released.
    pub eviction_grace: Duration,
    /// At shutdown, how long passes in flight may run on before they are
    /// abandoned (kept well under Kubernetes' default 30 s grace period).
    pub shutdown_grace: Duration,
    /// The metrics and readiness this agent keeps up to date.
    pub telemetry: Telemetry,
}

/// What the agent tells its probes and Prometheus: metrics, and whether it
/// is ready. Cheap to clone; clones share everything.
#[derive(Debug, Clone)]
pub struct Telemetry {
    /// The agent's metrics.
    pub metrics: Arc<AgentMetrics>,
    /// Whether the agent has a hub session and spoke access.
    pub readiness: Readiness,
}

impl Telemetry {
    /// Fresh metrics, not ready; the spoke API server is checked every
    /// `spoke_check_interval` while the agent runs.
    pub fn new(spoke_check_interval: Duration) -> Self {
        Self {
            metrics: Arc::new(AgentMetrics::default()),
            readiness: Readiness::new(spoke_check_interval),
        }
    }

    /// A registry holding every agent metric, for `/metrics`.
    pub fn registry(&self) -> Registry {
        let mut registry = Registry::default();
        self.metrics.register(&mut registry);
        registry
    }
}

impl Default for Telemetry {
    fn default() -> Self {
        Self::new(DEFAULT_SPOKE_CHECK_INTERVAL)
    }
}

/// How often the spoke API server is checked for readiness by default.
pub const DEFAULT_SPOKE_CHECK_INTERVAL: Duration = Duration::from_secs(10);

impl Default for AgentOptions {
    fn default() -> Self {
        Self {
            resync_interval: Duration::from_secs(600),
            eviction_grace: Duration::from_secs(3600),
            shutdown_grace: Duration::from_secs(10),
            telemetry: Telemetry::default(),
        }
    }
}

/// Runs an agent against the spoke `client` until `shutdown` completes.
/// Connection problems are retried forever; nothing here fails as a whole.
/// On shutdown the agent takes no new work, lets passes in flight finish
/// for up to `options.shutdown_grace` while the hub session still carries
/// their status, then closes the session and returns.
pub async fn run_agent(
    client: Client,
    config: SessionConfig,
    options: AgentOptions,
    shutdown: impl Future<Output = ()> + Send,
) {
    let telemetry = options.telemetry.clone();
    // Checked for as long as the agent runs, session or not.
    let _spoke_check = AbortOnDropHandle::new(tokio::spawn(
        telemetry.readiness.clone().check_spoke(client.clone()),
    ));
    let resolver = Arc::new(KindResolver::new(client.clone()));
    let schemas = Arc::new(ListSchemas::new(client.clone()));
    let applied = AppliedWorks::new(client.clone(), &config.cluster_name);
    let reconciler = Arc::new(Reconciler::new(
        client.clone(),
        resolver,
        schemas,
        applied.clone(),
        telemetry.metrics.clone(),
    ));
    let board = Arc::new(StatusBoard::default());
    let works = Arc::new(WorkManager::new(
        reconciler,
        board.clone(),
        options.resync_interval,
        options.eviction_grace,
        telemetry.metrics.clone(),
    ));
    let run = async {
        prepare_spoke(&client, &applied, &works).await;
        run_session(config, works.clone(), board, &telemetry).await;
    };
    let mut run = std::pin::pin!(run);
    tokio::select! {
        () = &mut run => {}
        () = shutdown => {
            tracing::info!(grace = ?options.shutdown_grace, "shutting down: taking no new work");
            // The session keeps running meanwhile, so the last statuses
            // still reach the hub.
            tokio::select! {
                () = works.shutdown(options.shutdown_grace) => {}
                () = &mut run => {}
            }
        }
    }
    // Dropping the session here closes the stream to the hub.
    tracing::info!("agent stopped");
}

/// Installs the AppliedManifestWork CRD and picks up the works an earlier run
/// recorded, before the first Hello: a Hello without them would let the hub
/// forget works whose objects are still on the cluster. Retried until it
/// works; without its records the agent must not apply anything.
async fn prepare_spoke(client: &Client, applied: &AppliedWorks, works: &WorkManager) {
    let mut backoff = Duration::from_millis(500);
    loop {
        let prepared = async {
            AppliedWorks::install_crd(client).await?;
            applied.list().await
        };
        match prepared.await {
            Ok(records) => {
                let uids = records.into_iter().map(|r| r.spec.work_uid);
                works.remember_recorded(uids).await;
                return;
            }
            Err(error) => {
                tracing::warn!(%error, ?backoff, "cannot prepare the spoke; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
    }
}
