//! One task per work. While the hub wants the work, the task applies the
//! latest spec it was given, re-applies when a managed object drifts on the
//! spoke (watched, not polled) and on a slow resync, retries transient
//! failures with backoff, and publishes status. A new spec for a work that is
//! still being applied replaces any older pending one, so bursts of edits
//! coalesce and the latest generation wins. When the hub deletes the work,
//! the same task releases its objects and reports `Deleting` until they are
//! gone; when the hub does not know the work at all, the task waits out the
//! eviction grace period first, and goes back to applying if the work returns.
//!
//! - `worker.rs`: one work's task: its loop, its turns (apply, delete,
//!   evict) and what wakes it between them.
//! - `pass.rs`: one apply pass and publishing a work's status.
//! - `releasing.rs`: releasing a work's objects, and when an eviction is due.

mod pass;
mod releasing;
mod worker;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ferry_proto::v1;
use tokio::sync::{Mutex, watch};
use tokio_util::task::AbortOnDropHandle;
use tracing::{info, warn};

use crate::deletion_brake::DeletionBrake;
use crate::dependencies::DependencyIndex;
use crate::drift::DriftWatches;
use crate::metrics::AgentMetrics;
use crate::reconcile::Reconciler;
use crate::status_board::StatusBoard;

pub use releasing::EVICTION_OFF_AT;
use worker::run_worker;

/// What the hub wants done with one work.
#[derive(Debug, Clone)]
enum Desired {
    /// Apply this spec.
    Apply(Arc<v1::WorkUpsert>),
    /// The user deleted the work: release its objects now.
    Delete {
        work: v1::WorkRef,
        option: Option<v1::DeleteOption>,
    },
    /// The hub has no such work: release its objects after the grace period.
    Evict,
}

impl Desired {
    fn generation(&self) -> i64 {
        match self {
            Desired::Apply(upsert) => upsert.generation,
            Desired::Delete { .. } | Desired::Evict => 0,
        }
    }
}

struct Worker {
    desired: watch::Sender<Desired>,
    // Aborted when dropped, so no worker outlives its manager.
    task: AbortOnDropHandle<()>,
}

/// Everything a worker task shares with the others.
struct Shared {
    reconciler: Arc<Reconciler>,
    board: Arc<StatusBoard>,
    resync: Duration,
    eviction_grace: Duration,
    drift: Arc<DriftWatches>,
    metrics: Arc<AgentMetrics>,
    /// The works of this cluster by name, for `spec.dependsOn`.
    dependencies: DependencyIndex,
    /// How long a deleted work keeps its objects for works that still
    /// depend on it.
    dependents_timeout: Duration,
    /// Holds deletions past the agent's budget (None: deletions go at once).
    brake: Option<Arc<DeletionBrake>>,
}

/// Default of [`WorkManager::new`]'s `dependents_timeout` (the agent's
/// `--dependents-deletion-timeout-seconds`): long enough for a dependent's
/// own deletion to finish, short enough that a stuck dependent cannot pin a
/// deleted work's objects for long.
pub const DEFAULT_DEPENDENTS_TIMEOUT: Duration = Duration::from_secs(300);

/// The works this agent holds.
pub struct WorkManager {
    shared: Arc<Shared>,
    workers: Mutex<HashMap<String, Worker>>,
    /// Works found recorded on the spoke at start that no worker runs yet:
    /// the hub hears of them in Hello and says what to do with each.
    recorded: Mutex<HashSet<String>>,
    /// Set once the agent is shutting down: no new work is taken.
    stopping: AtomicBool,
}

impl WorkManager {
    /// A manager applying with `reconciler`, reporting into `board`,
    /// re-checking every work at least every `resync`, evicting works the
    /// hub does not have `eviction_grace` after it first said so, keeping
    /// a deleted work's objects for at most `dependents_timeout` while other
    /// works depend on it, asking `brake` (when set) before any deletion,
    /// and counting drift watches and corrections in `metrics`.
    pub fn new(
        reconciler: Arc<Reconciler>,
        board: Arc<StatusBoard>,
        resync: Duration,
        eviction_grace: Duration,
        dependents_timeout: Duration,
        brake: Option<Arc<DeletionBrake>>,
        metrics: Arc<AgentMetrics>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                reconciler,
                board,
                resync,
                eviction_grace,
                drift: DriftWatches::new(metrics.clone()),
                metrics,
                dependencies: DependencyIndex::default(),
                dependents_timeout,
                brake,
            }),
            workers: Mutex::new(HashMap::new()),
            recorded: Mutex::new(HashSet::new()),
            stopping: AtomicBool::new(false),
        }
    }

    /// The reconciler the workers apply with.
    pub fn reconciler(&self) -> &Arc<Reconciler> {
        &self.shared.reconciler
    }

    /// The agent's deletion brake, when it has one.
    pub fn deletion_brake(&self) -> Option<&Arc<DeletionBrake>> {
        self.shared.brake.as_ref()
    }

    /// Stops taking work and lets every worker finish the pass it is in,
    /// for at most `grace`; a pass still running then is abandoned (its
    /// task is aborted between requests). Abandoning is safe: every object is
    /// recorded before it is created, so the next run finds it.
    pub async fn shutdown(&self, grace: Duration) {
        self.stopping.store(true, Ordering::SeqCst);
        let workers: Vec<Worker> = self.workers.lock().await.drain().map(|(_, w)| w).collect();
        let mut tasks = Vec::with_capacity(workers.len());
        for Worker { desired, task } in workers {
            // A worker whose wish sender is gone returns at its next wait.
            drop(desired);
            tasks.push(task);
        }
        let count = tasks.len();
        let finished = async {
            for task in tasks.iter_mut() {
                let _ = task.await;
            }
        };
        if tokio::time::timeout(grace, finished).await.is_err() {
            let left = tasks.iter().filter(|t| !t.is_finished()).count();
            warn!(left, ?grace, "abandoning passes still running at shutdown");
        } else {
            info!(count, "every work's pass finished");
        }
    }

    /// Remembers works recorded on the spoke by an earlier run, so the next
    /// Hello names them and the hub can resend or delete them.
    pub async fn remember_recorded(&self, uids: impl IntoIterator<Item = String>) {
        self.recorded.lock().await.extend(uids);
    }

    /// Sets what the worker of `uid` should do, starting one if none runs.
    /// `replace` decides, given what the worker is doing, whether the new
    /// wish supersedes it.
    async fn steer(&self, uid: String, wish: Desired, replace: impl Fn(&Desired) -> bool) {
        if self.stopping.load(Ordering::SeqCst) {
            return;
        }
        let recorded = self.recorded.lock().await.remove(&uid);
        let mut workers = self.workers.lock().await;
        if let Some(worker) = workers.get(&uid)
            && !worker.task.is_finished()
        {
            worker.desired.send_if_modified(|current| {
                let newer = replace(current);
                if newer {
                    *current = wish;
                }
                newer
            });
            return;
        }
        let (desired, rx) = watch::channel(wish);
        // A work the spoke had no record of at start, whose worker starts
        // now, is new to the spoke: no earlier worker of this run would have
        // left its record (a finished worker removed it).
        let task = AbortOnDropHandle::new(tokio::spawn(run_worker(
            uid.clone(),
            rx,
            self.shared.clone(),
            !recorded,
        )));
        workers.insert(uid, Worker { desired, task });
    }

    /// Takes a new desired state for a work. Ignored when it names no work,
    /// is not newer than what the worker already has (newer: a later
    /// generation, or new labels at the same one), or the work is being
    /// deleted. Calls off an eviction: the hub has the work after all.
    pub async fn upsert(&self, upsert: v1::WorkUpsert) {
        let Some(uid) = upsert
            .work
            .as_ref()
            .map(|w| w.uid.clone())
            .filter(|u| !u.is_empty())
        else {
            return;
        };
        let generation = upsert.generation;
        let labels = upsert.labels.clone();
        self.steer(
            uid,
            Desired::Apply(Arc::new(upsert)),
            |current| match current {
                // Labels change without a new generation; the pass that
                // follows copies them to the work's record.
                Desired::Apply(held) => {
                    generation > held.generation
                        || (generation == held.generation && labels != held.labels)
                }
                Desired::Evict => true,
                Desired::Delete { .. } => false,
            },
        )
        .await;
    }

    /// Releases a work the hub deleted (now) or does not have (after the
    /// eviction grace period).
    pub async fn delete(&self, delete: v1::WorkDelete) {
        let Some(work) = delete.work.filter(|w| !w.uid.is_empty()) else {
            return;
        };
        let uid = work.uid.clone();
        info!(%uid, evict = delete.evict, "the hub released a work");
        if delete.evict {
            self.steer(uid, Desired::Evict, |current| {
                matches!(current, Desired::Apply(_))
            })
            .await;
        } else {
            let wish = Desired::Delete {
                work,
                option: delete.delete_option,
            };
            self.steer(uid, wish, |current| {
                !matches!(current, Desired::Delete { .. })
            })
            .await;
        }
    }

    /// Starts evicting the work `uid` that no hub message named although
    /// its record is on the spoke (an orphaned record): after the eviction
    /// grace period its objects are released as for a work the hub no
    /// longer has. A work the hub names meanwhile calls it off.
    pub async fn evict_orphan(&self, uid: String) {
        info!(%uid, "a work record the hub never named; evicting it after the grace period");
        self.steer(uid, Desired::Evict, |current| {
            matches!(current, Desired::Apply(_))
        })
        .await;
    }

    /// The uids of the works a worker runs for.
    pub async fn held(&self) -> HashSet<String> {
        self.workers
            .lock()
            .await
            .iter()
            .filter(|(_, w)| !w.task.is_finished())
            .map(|(uid, _)| uid.clone())
            .collect()
    }

    /// The work records of this cluster on the spoke. Fails when the spoke
    /// API server cannot list them.
    pub async fn records(
        &self,
    ) -> Result<
        Vec<crate::applied_works::AppliedManifestWork>,
        crate::applied_works::AppliedWorksError,
    > {
        self.shared.reconciler.applied().list().await
    }

    /// How often every work is checked again whatever happens.
    pub fn resync(&self) -> Duration {
        self.shared.resync
    }

    /// (uid, generation) of every work held, for the Hello of a new session.
    /// Works known only from the spoke's records are named with generation 0:
    /// this run has no spec for them, so the hub must send it again.
    pub async fn known(&self) -> Vec<v1::WorkVersion> {
        let mut workers = self.workers.lock().await;
        workers.retain(|_, w| !w.task.is_finished());
        let mut known: Vec<v1::WorkVersion> = workers
            .iter()
            .map(|(uid, w)| v1::WorkVersion {
                uid: uid.clone(),
                generation: w.desired.borrow().generation(),
            })
            .collect();
        drop(workers);
        known.extend(
            self.recorded
                .lock()
                .await
                .iter()
                .map(|uid| v1::WorkVersion {
                    uid: uid.clone(),
                    generation: 0,
                }),
        );
        known
    }
}
