//! The ferry agent: dials the hub, applies the works of its cluster with
//! server-side apply, and reports per-manifest status back.
#![forbid(unsafe_code)]

pub mod applier;
pub mod conditions;
pub mod discovery;
pub mod probes;
pub mod reconcile;
pub mod semantics;
pub mod session;
pub mod status_board;
pub mod works;

use std::future::Future;
use std::sync::Arc;

use kube::Client;

use crate::discovery::KindResolver;
use crate::reconcile::Reconciler;
use crate::session::{SessionConfig, run_session};
use crate::status_board::StatusBoard;
use crate::works::WorkManager;

/// Runs an agent against the spoke `client` until `shutdown` completes.
/// Connection problems are retried forever; nothing here fails as a whole.
pub async fn run_agent(
    client: Client,
    config: SessionConfig,
    shutdown: impl Future<Output = ()> + Send,
) {
    let resolver = Arc::new(KindResolver::new(client.clone()));
    let reconciler = Arc::new(Reconciler::new(client, resolver));
    let board = Arc::new(StatusBoard::default());
    let works = Arc::new(WorkManager::new(reconciler, board.clone()));
    tokio::select! {
        () = run_session(config, works, board) => {}
        () = shutdown => {}
    }
}
