//! The agent's composition root: builds the reconciler, the per-work
//! workers and the hub session around one spoke client, and runs them until
//! shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use kube::Client;
use tokio_util::task::AbortOnDropHandle;

use crate::applied_works::AppliedWorks;
use crate::deletion_brake::DeletionBrake;
use crate::discovery::KindResolver;
use crate::executor::ExecutorCheck;
use crate::list_schema::ListSchemas;
use crate::observability::Observability;
use crate::reconcile::Reconciler;
use crate::sealing::Keyring;
use crate::session::{SessionConfig, run_session};
use crate::status_board::StatusBoard;
use crate::work_workers::WorkManager;
use crate::write_identity::WriteIdentity;

/// Tunables of the agent beyond its hub session.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// How often every work is re-checked against the spoke even when no watch
    /// event arrived (a safety net; drift is normally seen by watches).
    pub resync_interval: Duration,
    /// How long a work the hub does not have (a rebuilt hub, a work removed
    /// while the hub was away) keeps its objects before they are released.
    pub eviction_grace: Duration,
    /// How long a deleted work keeps its objects while other works of the
    /// cluster still depend on it (`spec.dependsOn`); then it is released
    /// anyway, so a stuck dependent cannot pin objects forever.
    pub dependents_deletion_timeout: Duration,
    /// At shutdown, how long passes in flight may run on before they are
    /// abandoned (kept well under Kubernetes' default 30 s grace period).
    pub shutdown_grace: Duration,
    /// The metrics and readiness this agent keeps up to date.
    pub observability: Observability,
    /// Largest `JsonRaw` status feedback value in bytes (OCM's
    /// `--max-json-raw-length`); larger values are left out with a reason.
    pub max_json_raw_length: usize,
    /// Refuse works that name no executor (`--require-executor`): their
    /// manifests fail with `ExecutorRequired` instead of being applied with
    /// the agent's own rights.
    pub require_executor: bool,
    /// Restricted mode (`--restricted`): manifests that are CRDs or ferry's
    /// own kinds fail with `RestrictedKind`, since the agent holds rights on
    /// those for its own records only.
    pub restricted: bool,
    /// Migration from OCM's work agent (`--adopt-ocm-objects`): objects a
    /// work applies lose their owner references to OCM's
    /// AppliedManifestWorks, so removing OCM's agent cannot delete them.
    pub adopt_ocm_objects: bool,
    /// Write as each work's executor (`--write-as-executor`): the spoke
    /// connection (the agent's own) through which the executor is
    /// impersonated. Set, every work must name an executor, and the
    /// agent's own ClusterRole needs no workload rights.
    pub write_as_executor: Option<kube::Config>,
    /// The deletion brake (`--deletion-brake-*`): where its ledger lives on
    /// the spoke and its budget. None: deletions go at once, whatever
    /// their number.
    pub deletion_brake: Option<DeletionBrakeOptions>,
    /// The spoke namespace of the cluster's sealing keys (Secret
    /// `ferry-agent-sealing-keys`, made at the first session's start).
    /// None: the agent holds no keys, publishes none, and opens no sealed
    /// Secret.
    pub sealing_namespace: Option<String>,
}

/// Where the deletion brake keeps its ledger, and its budget.
#[derive(Debug, Clone)]
pub struct DeletionBrakeOptions {
    /// The spoke namespace of the ledger's ConfigMap (the agent's own).
    pub namespace: String,
    /// Percent, floor and window of the budget.
    pub limits: crate::deletion_brake::decide::Limits,
}

impl Default for AgentOptions {
    fn default() -> Self {
        Self {
            resync_interval: Duration::from_secs(600),
            eviction_grace: Duration::from_secs(3600),
            dependents_deletion_timeout: crate::work_workers::DEFAULT_DEPENDENTS_TIMEOUT,
            shutdown_grace: Duration::from_secs(10),
            observability: Observability::default(),
            max_json_raw_length: ferry_semantics::MAX_RAW_FEEDBACK_BYTES,
            require_executor: false,
            restricted: false,
            adopt_ocm_objects: false,
            write_as_executor: None,
            deletion_brake: None,
            sealing_namespace: Some("default".into()),
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
    let observability = options.observability.clone();
    // Checked for as long as the agent runs, session or not.
    let _spoke_check = AbortOnDropHandle::new(tokio::spawn(
        observability.readiness.clone().check_spoke(client.clone()),
    ));
    let resolver = Arc::new(KindResolver::new(client.clone()));
    let schemas = Arc::new(ListSchemas::new(client.clone()));
    let applied = AppliedWorks::new(client.clone(), &config.cluster_name);
    let reconciler = Arc::new(
        Reconciler::with_options(
            client.clone(),
            resolver,
            schemas,
            applied.clone(),
            observability.metrics.clone(),
            {
                let check = ExecutorCheck::new(
                    client.clone(),
                    options.require_executor,
                    options.restricted,
                );
                // Writing as the executor, a work without one has nobody to
                // write as, and the API server judges the rest.
                if options.write_as_executor.is_some() {
                    check.judged_by_api_server()
                } else {
                    check
                }
            },
            options.adopt_ocm_objects,
        )
        .with_max_json_raw_length(options.max_json_raw_length)
        .with_write_identity(match &options.write_as_executor {
            Some(config) => WriteIdentity::as_executor(config.clone()),
            None => WriteIdentity::Agent(client.clone()),
        })
        .with_keyring(Arc::new(match &options.sealing_namespace {
            Some(namespace) => Keyring::new(client.clone(), namespace),
            None => Keyring::none(),
        })),
    );
    let brake = options.deletion_brake.as_ref().map(|brake| {
        Arc::new(DeletionBrake::new(
            client.clone(),
            &brake.namespace,
            brake.limits,
            applied.clone(),
            observability.metrics.deletions_held.clone(),
        ))
    });
    // Shows what an earlier run held and records releases while the agent
    // runs.
    let _brake_releases = brake
        .clone()
        .map(|brake| AbortOnDropHandle::new(tokio::spawn(brake.watch_releases())));
    let board = Arc::new(StatusBoard::default());
    let works = Arc::new(WorkManager::new(
        reconciler,
        board.clone(),
        options.resync_interval,
        options.eviction_grace,
        options.dependents_deletion_timeout,
        brake,
        observability.metrics.clone(),
    ));
    let run = async {
        prepare_spoke(&client, &applied, &works).await;
        run_session(config, works.clone(), board, &observability).await;
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
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(30))
        .without_max_times();
    let prepared = (|| async {
        AppliedWorks::install_crd(client).await?;
        applied.list().await
    })
    .retry(backoff)
    .notify(|error, backoff| {
        tracing::warn!(%error, ?backoff, "cannot prepare the spoke; retrying");
    })
    .await;
    // Without a bound on retries the error arm cannot happen; the records
    // are what matters.
    if let Ok(records) = prepared {
        let uids = records.into_iter().map(|r| r.spec.work_uid);
        works.remember_recorded(uids).await;
    }
}
