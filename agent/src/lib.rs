//! The ferry agent: dials the hub, applies the works of its cluster with
//! server-side apply, and reports per-manifest status back.
#![forbid(unsafe_code)]

pub mod applier;
pub mod conditions;
pub mod discovery;
pub mod drift;
pub mod list_schema;
pub mod probes;
pub mod reconcile;
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

use crate::discovery::KindResolver;
use crate::list_schema::ListSchemas;
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
}

impl Default for AgentOptions {
    fn default() -> Self {
        Self {
            resync_interval: Duration::from_secs(600),
        }
    }
}

/// Runs an agent against the spoke `client` until `shutdown` completes.
/// Connection problems are retried forever; nothing here fails as a whole.
pub async fn run_agent(
    client: Client,
    config: SessionConfig,
    options: AgentOptions,
    shutdown: impl Future<Output = ()> + Send,
) {
    let resolver = Arc::new(KindResolver::new(client.clone()));
    let schemas = Arc::new(ListSchemas::new(client.clone()));
    let reconciler = Arc::new(Reconciler::new(client, resolver, schemas));
    let board = Arc::new(StatusBoard::default());
    let works = Arc::new(WorkManager::new(
        reconciler,
        board.clone(),
        options.resync_interval,
    ));
    tokio::select! {
        () = run_session(config, works, board) => {}
        () = shutdown => {}
    }
}
