//! One task per work: it applies the latest spec it was given, re-applies
//! when a managed object drifts on the spoke (watched, not polled) and on a
//! slow resync, retries transient failures with backoff, and publishes
//! status. A new spec for a work that is still being applied replaces any
//! older pending one, so bursts of edits coalesce and the latest generation
//! wins.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ferry_proto::v1;
use tokio::sync::{Mutex, Notify, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info};

use crate::conditions::carry_work_transition_times;
use crate::drift::{DriftWatch, DriftWatches};
use crate::reconcile::{Reconciler, WorkMemory};
use crate::status_board::StatusBoard;

const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(60);

struct Worker {
    spec: watch::Sender<Arc<v1::WorkUpsert>>,
    task: JoinHandle<()>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The works this agent holds.
pub struct WorkManager {
    reconciler: Arc<Reconciler>,
    board: Arc<StatusBoard>,
    resync: Duration,
    drift: Arc<DriftWatches>,
    workers: Mutex<HashMap<String, Worker>>,
}

impl WorkManager {
    /// A manager applying with `reconciler`, reporting into `board`, and
    /// re-checking every work at least every `resync`.
    pub fn new(reconciler: Arc<Reconciler>, board: Arc<StatusBoard>, resync: Duration) -> Self {
        Self {
            reconciler,
            board,
            resync,
            drift: DriftWatches::new(),
            workers: Mutex::new(HashMap::new()),
        }
    }

    /// Takes a new desired state for a work. Ignored when it names no work or
    /// is not newer than what the worker already has.
    pub async fn upsert(&self, upsert: v1::WorkUpsert) {
        let Some(uid) = upsert
            .work
            .as_ref()
            .map(|w| w.uid.clone())
            .filter(|u| !u.is_empty())
        else {
            return;
        };
        let mut workers = self.workers.lock().await;
        if let Some(worker) = workers.get(&uid) {
            worker.spec.send_if_modified(|current| {
                let newer = upsert.generation > current.generation;
                if newer {
                    *current = Arc::new(upsert);
                }
                newer
            });
            return;
        }
        let (spec, rx) = watch::channel(Arc::new(upsert));
        let task = tokio::spawn(run_worker(
            uid.clone(),
            rx,
            self.reconciler.clone(),
            self.board.clone(),
            self.resync,
            self.drift.clone(),
        ));
        workers.insert(uid, Worker { spec, task });
    }

    /// Stops managing a work the hub no longer has.
    pub async fn delete(&self, uid: &str) {
        if self.workers.lock().await.remove(uid).is_some() {
            info!(%uid, "work removed by the hub");
        }
        self.board.remove(uid).await;
    }

    /// (uid, generation) of every work held, for the Hello of a new session.
    pub async fn known(&self) -> Vec<v1::WorkVersion> {
        self.workers
            .lock()
            .await
            .iter()
            .map(|(uid, w)| v1::WorkVersion {
                uid: uid.clone(),
                generation: w.spec.borrow().generation,
            })
            .collect()
    }
}

async fn run_worker(
    uid: String,
    mut spec: watch::Receiver<Arc<v1::WorkUpsert>>,
    reconciler: Arc<Reconciler>,
    board: Arc<StatusBoard>,
    resync: Duration,
    watches: Arc<DriftWatches>,
) {
    let drifted = Arc::new(Notify::new());
    let mut drift = DriftWatch::new(watches, drifted.clone());
    let mut memory = WorkMemory::default();
    let mut backoff = FIRST_RETRY;
    loop {
        let upsert = spec.borrow_and_update().clone();
        let result = reconciler.reconcile(&upsert, &mut memory).await;
        drift.track(&result.managed).await;
        let mut status = result.status;
        if let Some(previous) = board.latest(&uid).await {
            carry_work_transition_times(&previous, &mut status);
        }
        board.publish(&uid, status).await;
        let wait = if result.retry {
            debug!(%uid, generation = upsert.generation, ?backoff, "work not fully applied; retrying");
            let wait = backoff;
            backoff = (backoff * 2).min(MAX_RETRY);
            wait
        } else {
            backoff = FIRST_RETRY;
            resync
        };
        tokio::select! {
            changed = spec.changed() => if changed.is_err() { return },
            () = drifted.notified() => debug!(%uid, "managed object changed on the spoke"),
            () = tokio::time::sleep(wait) => {}
        }
    }
}
