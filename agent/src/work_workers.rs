//! One task per work. While the hub wants the work, the task applies the
//! latest spec it was given, re-applies when a managed object drifts on the
//! spoke (watched, not polled) and on a slow resync, retries transient
//! failures with backoff, and publishes status. A new spec for a work that is
//! still being applied replaces any older pending one, so bursts of edits
//! coalesce and the latest generation wins. When the hub deletes the work,
//! the same task releases its objects and reports `Deleting` until they are
//! gone; when the hub does not know the work at all, the task waits out the
//! eviction grace period first, and goes back to applying if the work returns.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use ferry_proto::v1;
use k8s_openapi::jiff::Timestamp;
use tokio::sync::{Mutex, Notify, watch};
use tokio_util::task::AbortOnDropHandle;
use tracing::{Instrument as _, debug, info, info_span, warn};

use crate::conditions::{carry_work_transition_times, condition, condition_of, is_complete};
use crate::deletion::{Progress, release_work};
use crate::deletion_brake::DeletionBrake;
use crate::dependencies::{DependencyIndex, Gate, wire_dependencies, work_owner};
use crate::dependency_readiness::{RuleBackoff, decide};
use crate::drift::{DriftWatch, DriftWatches};
use crate::metrics::{AgentMetrics, KindLabel};
use crate::reconcile::Reconciler;
use crate::status_board::StatusBoard;
use ferry_semantics::contract::{
    APPLIED, AVAILABLE, DELETING, DEPENDENCIES_READY, REASON_DELETION_BRAKE_HELD,
    REASON_DEPENDENCIES_NOT_READY, REASON_DEPENDENCIES_READY, REASON_WAITING_FOR_DEPENDENTS,
};
use ferry_semantics::drift_report::{drop_corrections, settle_drift};
use ferry_semantics::text::first_few;

const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(60);

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

/// Runs the work `uid` as `desired` says until it is released. With
/// `record_likely_new`, its first pass creates the work's record without
/// reading it first.
async fn run_worker(
    uid: String,
    desired: watch::Receiver<Desired>,
    shared: Arc<Shared>,
    record_likely_new: bool,
) {
    let drifted = Arc::new(Notify::new());
    let mut wakes = Wakes {
        desired,
        drifted: drifted.clone(),
        // Wakes a work waiting for its dependencies, or a deleted work
        // waiting for its dependents, when another work of the cluster
        // changes.
        works_changed: shared.dependencies.subscribe(),
        // Wakes a deletion the brake holds when a platform admin releases it.
        brake_released: shared.brake.as_ref().map(|b| b.subscribe()),
    };
    let mut state = WorkerState::new(uid, shared, drifted, record_likely_new);
    let retry = ExponentialBuilder::default()
        .with_min_delay(FIRST_RETRY)
        .with_max_delay(MAX_RETRY)
        .without_max_times();
    let mut delays = retry.build();
    loop {
        let wish = wakes.desired.borrow_and_update().clone();
        // Seen from here on: a change while this pass runs still wakes the
        // wait below.
        wakes.works_changed.borrow_and_update();
        if !matches!(wish, Desired::Apply(_)) {
            state.settled_generation = None;
        }
        let turn = match wish {
            Desired::Apply(upsert) => state.apply_turn(&upsert).await,
            Desired::Delete { work, option } => match state.delete_turn(work, option).await {
                Some(turn) => turn,
                None => return,
            },
            Desired::Evict => match state.evict_turn().await {
                Eviction::Turn(turn) => turn,
                Eviction::Released => return,
                Eviction::NotDue(wait) => {
                    debug!(uid = %state.uid, ?wait, "the hub does not have this work; evicting after the grace period");
                    if !wakes.wish_or_sleep(wait).await {
                        return;
                    }
                    state.spoke_woke = false;
                    continue;
                }
            },
        };
        let wait = match next_wait(&turn) {
            NextWait::ForWorks(limit) => {
                delays = retry.build();
                limit
            }
            NextWait::Resync => {
                delays = retry.build();
                state.shared.resync
            }
            NextWait::Retry => delays.next().unwrap_or(MAX_RETRY),
        };
        match wakes.next(&state.uid, &turn, wait).await {
            Some(spoke_woke) => state.spoke_woke = spoke_woke,
            None => return,
        }
    }
}

/// What one turn of a worker's loop leaves for the wait that follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Turn {
    /// Nothing needs a retry.
    settled: bool,
    /// The turn waits for other works rather than for a retry, for at
    /// most this long.
    waits_for_works: Option<Duration>,
    /// The deletion brake holds this work's deletion.
    braked: bool,
}

impl Turn {
    /// A turn that waits for nothing but a retry or the resync.
    fn settled(settled: bool) -> Self {
        Turn {
            settled,
            waits_for_works: None,
            braked: false,
        }
    }
}

/// How long a worker waits after a turn, before its wakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NextWait {
    /// Other works, for at most this long; the retry backoff starts over.
    ForWorks(Duration),
    /// The resync after a settled turn; the retry backoff starts over.
    Resync,
    /// The next retry delay.
    Retry,
}

/// The wait after `turn`.
fn next_wait(turn: &Turn) -> NextWait {
    if let Some(limit) = turn.waits_for_works {
        NextWait::ForWorks(limit)
    } else if turn.settled {
        NextWait::Resync
    } else {
        NextWait::Retry
    }
}

/// What an eviction turn came to.
enum Eviction {
    /// The work's objects are released: the worker ends.
    Released,
    /// The grace period has this long left.
    NotDue(Duration),
    /// A turn like any other.
    Turn(Turn),
}

/// What wakes a worker between turns.
struct Wakes {
    desired: watch::Receiver<Desired>,
    /// A managed object of the work changed on the spoke.
    drifted: Arc<Notify>,
    works_changed: watch::Receiver<u64>,
    brake_released: Option<watch::Receiver<u64>>,
}

impl Wakes {
    /// Waits after `turn` for a new wish, a drift, another work's change
    /// (when the turn waits for works), a brake release (when braked) or
    /// `wait`. Whether the spoke woke the worker (a drift, or the resync
    /// after a settled turn); None when the manager is gone.
    async fn next(&mut self, uid: &str, turn: &Turn, wait: Duration) -> Option<bool> {
        let waiting = turn.waits_for_works.is_some();
        let braked = turn.braked;
        let settled = turn.settled;
        let spoke_woke = tokio::select! {
            changed = self.desired.changed() => {
                if changed.is_err() {
                    return None;
                }
                false
            }
            () = self.drifted.notified() => {
                debug!(%uid, "managed object changed on the spoke");
                true
            }
            // Another work of the cluster changed: the dependency (or
            // dependent) waited for may be ready (or gone) now. The sender
            // lives as long as the manager, so an error cannot happen.
            _ = self.works_changed.changed(), if waiting => false,
            // A release lets this held deletion go.
            () = async {
                match self.brake_released.as_mut() {
                    Some(released) => { let _ = released.changed().await; }
                    None => std::future::pending().await,
                }
            }, if braked => false,
            // After a settled pass the wait is the resync.
            () = tokio::time::sleep(wait) => settled && !waiting,
        };
        Some(spoke_woke)
    }

    /// Waits for a new wish or `wait`, whichever comes first; false when
    /// the manager is gone.
    async fn wish_or_sleep(&mut self, wait: Duration) -> bool {
        tokio::select! {
            changed = self.desired.changed() => if changed.is_err() { return false },
            () = tokio::time::sleep(wait) => {}
        }
        true
    }
}

/// What a worker remembers from one turn to the next.
struct WorkerState {
    uid: String,
    shared: Arc<Shared>,
    drift: DriftWatch,
    /// The work's record is probably not on the spoke yet (until the first
    /// apply pass).
    record_likely_new: bool,
    generation: i64,
    // The generation the last pass fully applied, and whether this pass was
    // woken by the spoke (a drift watch, or the resync after a settled
    // pass): what it writes then corrects drift.
    settled_generation: Option<i64>,
    spoke_woke: bool,
    // The work's name, once a wish named it: its key among the works of
    // this cluster that others may depend on.
    name: Option<String>,
    // The generation whose dependencies were all ready when it was first
    // applied: it stays applied (and corrected) whatever they do later; a
    // new generation waits again.
    released_generation: Option<i64>,
    // When this deletion started waiting for the works that depend on it.
    dependents_wait_since: Option<tokio::time::Instant>,
    // Readiness rules of this work's dependencies that ran past their time
    // bound, not run again for a while.
    rule_backoff: RuleBackoff,
    // Whether the brake may hold this work's deletion: a work the hub wants
    // again leaves its held list (at the worker's first apply too, for a
    // hold recorded by an earlier run).
    maybe_held: bool,
}

impl WorkerState {
    fn new(
        uid: String,
        shared: Arc<Shared>,
        drifted: Arc<Notify>,
        record_likely_new: bool,
    ) -> Self {
        Self {
            drift: DriftWatch::new(shared.drift.clone(), drifted),
            uid,
            shared,
            record_likely_new,
            generation: 0,
            settled_generation: None,
            spoke_woke: false,
            name: None,
            released_generation: None,
            dependents_wait_since: None,
            rule_backoff: RuleBackoff::default(),
            maybe_held: true,
        }
    }

    /// The work leaves the works others may depend on.
    fn withdraw(&self) {
        if let Some(name) = &self.name {
            self.shared.dependencies.withdraw(name, &self.uid);
        }
    }

    /// A turn applying `upsert`: declared among the works of the cluster,
    /// then applied once its dependencies are ready (reported waiting until
    /// then).
    async fn apply_turn(&mut self, upsert: &v1::WorkUpsert) -> Turn {
        if self.maybe_held
            && let Some(brake) = &self.shared.brake
        {
            brake.withdraw(&self.uid).await;
        }
        self.maybe_held = false;
        self.generation = upsert.generation;
        let generation = self.generation;
        self.dependents_wait_since = None;
        let work_name = upsert
            .work
            .as_ref()
            .map(|w| w.name.clone())
            .unwrap_or_default();
        let owner = work_owner(upsert);
        let depends_on = wire_dependencies(upsert.spec.as_ref());
        self.shared
            .dependencies
            .declare(&work_name, &self.uid, owner, depends_on.clone());
        self.name = Some(work_name.clone());
        let gate = if depends_on.is_empty() || self.released_generation == Some(generation) {
            Gate::Open
        } else {
            self.shared
                .dependencies
                .gate(&work_name, owner, &depends_on)
        };
        // What keeps the generation waiting, if anything.
        let blocked = match gate {
            Gate::Open => None,
            Gate::Closed { reason, message } => Some((reason, message)),
            Gate::Evaluate(checks) => {
                let evaluator = self.shared.reconciler.rule_evaluator();
                decide(
                    owner,
                    checks,
                    &self.shared.board,
                    evaluator,
                    &mut self.rule_backoff,
                )
                .await
            }
        };
        if let Some((reason, message)) = blocked {
            debug!(uid = %self.uid, generation, %message, "waiting for dependencies");
            self.settled_generation = None;
            publish(
                &self.uid,
                waiting_report(upsert, reason, message),
                &self.shared,
            )
            .await;
            return Turn {
                settled: true,
                waits_for_works: Some(self.shared.resync),
                braked: false,
            };
        }
        if !depends_on.is_empty() && self.released_generation != Some(generation) {
            info!(uid = %self.uid, generation, "dependencies ready; applying");
        }
        self.released_generation = (!depends_on.is_empty()).then_some(generation);
        let pass = Pass {
            correcting: self.spoke_woke && self.settled_generation == Some(generation),
            dependencies_ready: self.released_generation.is_some(),
            record_likely_new: self.record_likely_new,
        };
        let settled = apply(&self.uid, upsert, &self.shared, &mut self.drift, pass).await;
        self.record_likely_new = false;
        self.settled_generation = settled.then_some(generation);
        Turn::settled(settled)
    }

    /// A turn releasing a work the hub deleted, once no work of the cluster
    /// depends on it any more (or the wait for them ran out). None when
    /// everything is released: the worker ends.
    async fn delete_turn(
        &mut self,
        work: v1::WorkRef,
        option: Option<v1::DeleteOption>,
    ) -> Option<Turn> {
        // A delete for a work that vanished from the hub carries no
        // name; the one this worker applied under still counts.
        let work_name = if work.name.is_empty() {
            self.name.clone().unwrap_or_default()
        } else {
            work.name.clone()
        };
        let dependents = if work_name.is_empty() {
            Vec::new()
        } else {
            self.shared.dependencies.dependents(&work_name)
        };
        let since = *self
            .dependents_wait_since
            .get_or_insert_with(tokio::time::Instant::now);
        let timeout = self.shared.dependents_timeout;
        let left = timeout.saturating_sub(since.elapsed());
        if let Some(message) = dependents_wait(&dependents, left, timeout) {
            let status = deletion_report(
                work,
                self.generation,
                false,
                REASON_WAITING_FOR_DEPENDENTS,
                message,
            );
            publish(&self.uid, status, &self.shared).await;
            return Some(Turn {
                settled: true,
                waits_for_works: Some(left),
                braked: false,
            });
        }
        if !dependents.is_empty() {
            warn!(uid = %self.uid, ?dependents, timeout = ?timeout,
                "works still depend on a deleted work; releasing it after the timeout");
        }
        let uid = &self.uid;
        let (reason, message, turn) =
            match release(uid, option.as_ref(), &self.shared, &mut self.drift).await {
                Step::Finished => {
                    self.shared.reconciler.forget_work(uid).await;
                    let message = "Every object of the work is deleted or orphaned".to_string();
                    let report =
                        deletion_report(work, self.generation, true, "ResourcesReleased", message);
                    self.shared.board.publish(uid, report).await;
                    self.withdraw();
                    return None;
                }
                Step::Pending(message) => ("DeletingResources", message, Turn::settled(false)),
                Step::Held(message) => {
                    self.maybe_held = true;
                    let held = Turn {
                        settled: true,
                        waits_for_works: None,
                        braked: true,
                    };
                    (REASON_DELETION_BRAKE_HELD, message, held)
                }
            };
        let status = deletion_report(work, self.generation, false, reason, message);
        publish(uid, status, &self.shared).await;
        Some(turn)
    }

    /// A turn evicting a work the hub does not have: nothing until the
    /// grace period is over, then its objects are released.
    async fn evict_turn(&mut self) -> Eviction {
        let uid = &self.uid;
        match eviction_due(uid, &self.shared).await {
            Ok(None) => match release(uid, None, &self.shared, &mut self.drift).await {
                Step::Finished => {
                    self.shared.reconciler.forget_work(uid).await;
                    info!(%uid, "evicted a work the hub does not have");
                    self.shared.board.remove(uid).await;
                    self.withdraw();
                    Eviction::Released
                }
                Step::Pending(_) => Eviction::Turn(Turn::settled(false)),
                Step::Held(message) => {
                    self.maybe_held = true;
                    info!(%uid, %message, "the hub does not have this work; its eviction is held");
                    Eviction::Turn(Turn {
                        settled: true,
                        waits_for_works: None,
                        braked: true,
                    })
                }
            },
            Ok(Some(wait)) => Eviction::NotDue(wait),
            Err(error) => {
                warn!(%uid, %error, "cannot start evicting a work");
                Eviction::Turn(Turn::settled(false))
            }
        }
    }
}

/// The message a deleted work is kept with while works of the cluster
/// still depend on it and the wait for them has `left` of `timeout`; None
/// when it is released now (no dependents, or the wait ran out).
fn dependents_wait(dependents: &[String], left: Duration, timeout: Duration) -> Option<String> {
    if dependents.is_empty() || left.is_zero() {
        return None;
    }
    Some(format!(
        "kept while works of this cluster still depend on it: {}; released once they are gone or no longer name it, or {}s after the deletion began",
        first_few(dependents, ", "),
        timeout.as_secs()
    ))
}

/// What one apply pass knows before it starts.
#[derive(Clone, Copy)]
struct Pass {
    /// The work was fully applied before and the spoke woke this pass, so
    /// every object it writes is a drift correction.
    correcting: bool,
    /// The work's dependencies were all ready.
    dependencies_ready: bool,
    /// The work's record is probably not on the spoke yet.
    record_likely_new: bool,
}

/// One apply pass; true when nothing needs a retry.
async fn apply(
    uid: &str,
    upsert: &v1::WorkUpsert,
    shared: &Shared,
    drift: &mut DriftWatch,
    pass: Pass,
) -> bool {
    let Pass {
        correcting,
        dependencies_ready,
        record_likely_new,
    } = pass;
    // A completed work is no longer updated (OCM): its objects are neither
    // re-applied nor corrected, and its last report stands.
    if let Some(previous) = shared.board.latest(uid).await
        && is_complete(&previous)
    {
        debug!(%uid, "work is complete; not updating it");
        return true;
    }
    // The hub's send span is the parent, so this pass joins the trace of
    // the generation it applies.
    let span = ferry_telemetry::span(|| {
        let work = upsert.work.as_ref();
        info_span!(
            "apply_work",
            work = %work.map(|w| w.name.as_str()).unwrap_or_default(),
            work.uid = %uid,
            generation = upsert.generation,
            manifests = upsert.spec.as_ref().map_or(0, |s| s.manifests_json.len()),
            correcting,
        )
    });
    ferry_telemetry::set_parent(&span, &upsert.trace_context);
    let mut result = shared
        .reconciler
        .reconcile(upsert, record_likely_new)
        .instrument(span.clone())
        .await;
    result.status.trace_context = ferry_telemetry::inject(&span);
    if !correcting {
        drop_corrections(&mut result.status);
    }
    if correcting {
        for kind in &result.written {
            shared
                .metrics
                .drift_corrections
                .get_or_create(&KindLabel { kind: kind.clone() })
                .inc();
        }
    }
    drift.track(&result.managed).await;
    if dependencies_ready {
        result.status.conditions.push(condition(
            DEPENDENCIES_READY,
            true,
            REASON_DEPENDENCIES_READY,
            format!(
                "every work it depends on was ready when generation {} was applied; it stays applied if one turns not ready later",
                upsert.generation
            ),
            upsert.generation,
        ));
    }
    publish(uid, result.status, shared).await;
    // After the report, not before it: the record already names every
    // object the pass may have created, and this write only adds their
    // UIDs, so it need not stand between the spoke and the hub. A failed
    // write retries the pass.
    if let Some(update) = &result.record
        && let Err(error) = shared
            .reconciler
            .applied()
            .set_resources(&update.name, &update.resources)
            .await
    {
        warn!(%uid, %error, "could not record the applied objects");
        result.retry = true;
    }
    if result.retry {
        debug!(%uid, generation = upsert.generation, "work not fully applied; retrying");
    }
    !result.retry
}

/// Publishes `status`, keeping transition times of unchanged conditions so
/// that an unchanged pass sends nothing.
async fn publish(uid: &str, mut status: v1::WorkStatus, shared: &Shared) {
    let previous = shared.board.latest(uid).await;
    if let Some(previous) = &previous {
        carry_work_transition_times(previous, &mut status);
    }
    settle_drift(previous.as_ref(), &mut status);
    if let Some(previous) = &previous {
        keep_reported_trace(previous, &mut status);
    }
    // Published first, so that a work woken by the change reads this status
    // from the board when its readiness rule looks.
    let observed = status
        .work
        .as_ref()
        .map(|work| (work.name.clone(), status.conditions.clone()));
    let changed = shared.board.publish(uid, status).await;
    if let Some((name, conditions)) = observed {
        shared
            .dependencies
            .observe(&name, uid, &conditions, changed);
    }
}

/// A pass that changed nothing but its trace context keeps the context
/// already reported, so the board sees no change and nothing is sent: with
/// traces on, an idle work costs the hub no more reports than with them off.
fn keep_reported_trace(previous: &v1::WorkStatus, status: &mut v1::WorkStatus) {
    if status.trace_context.is_empty() || status.trace_context == previous.trace_context {
        return;
    }
    let fresh = std::mem::replace(&mut status.trace_context, previous.trace_context.clone());
    if status != previous {
        status.trace_context = fresh;
    }
}

/// The report of a work whose current generation waits for its
/// dependencies: why (`DependenciesReady=False`), and that nothing of this
/// generation is applied yet. Objects of an earlier generation stay as they are.
fn waiting_report(upsert: &v1::WorkUpsert, reason: &str, message: String) -> v1::WorkStatus {
    let generation = upsert.generation;
    v1::WorkStatus {
        work: upsert.work.clone(),
        generation,
        conditions: vec![
            condition(
                APPLIED,
                false,
                REASON_DEPENDENCIES_NOT_READY,
                format!(
                    "generation {generation} waits for its dependencies (see DependenciesReady)"
                ),
                generation,
            ),
            condition_of(
                AVAILABLE,
                "Unknown",
                REASON_DEPENDENCIES_NOT_READY,
                "not applied yet: waiting for its dependencies",
                generation,
            ),
            condition(DEPENDENCIES_READY, false, reason, message, generation),
        ],
        manifests: vec![],
        gone: false,
        trace_context: Default::default(),
    }
}

enum Step {
    Finished,
    Pending(String),
    /// The deletion brake keeps the objects; the message says why.
    Held(String),
}

/// One pass of releasing a work's objects.
async fn release(
    uid: &str,
    option: Option<&v1::DeleteOption>,
    shared: &Shared,
    drift: &mut DriftWatch,
) -> Step {
    let reconciler = &shared.reconciler;
    match release_work(
        reconciler.writers(),
        reconciler.client(),
        reconciler.applied(),
        uid,
        option,
        shared.brake.as_deref(),
    )
    .await
    {
        Ok(Progress::Done) => {
            drift.track(&[]).await;
            Step::Finished
        }
        Ok(Progress::Held(message)) => Step::Held(message),
        Ok(Progress::Waiting {
            blockers,
            total,
            remaining,
        }) => {
            drift.track(&remaining).await;
            Step::Pending(format!(
                "{} of {total} objects are still on the cluster: {}",
                remaining.len(),
                blockers.join("; ")
            ))
        }
        Err(error) => Step::Pending(format!("cannot read or update the work's record: {error}")),
    }
}

/// A grace period this long or longer turns eviction off (OCM's bound): the
/// objects of works the hub does not have are kept for good, and any
/// eviction already started is called off.
pub const EVICTION_OFF_AT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// None when the eviction grace period is over, else how long is left
/// (forever, with any start time cleared, when eviction is off).
async fn eviction_due(
    uid: &str,
    shared: &Shared,
) -> Result<Option<Duration>, crate::applied_works::AppliedWorksError> {
    let applied = shared.reconciler.applied();
    let Some(record) = applied.get(uid).await? else {
        return Ok(None);
    };
    if shared.eviction_grace >= EVICTION_OFF_AT {
        applied.call_off_eviction(record).await?;
        return Ok(Some(shared.eviction_grace));
    }
    let started = applied.start_eviction(&record).await?;
    let elapsed = Timestamp::now().duration_since(started);
    let elapsed = Duration::try_from(elapsed).unwrap_or(Duration::ZERO);
    Ok(shared
        .eviction_grace
        .checked_sub(elapsed)
        .filter(|d| !d.is_zero()))
}

/// A report on a work being deleted: its `Deleting` condition, and `gone`
/// once nothing of it is left on the cluster.
fn deletion_report(
    work: v1::WorkRef,
    generation: i64,
    gone: bool,
    reason: &str,
    message: String,
) -> v1::WorkStatus {
    v1::WorkStatus {
        work: Some(work),
        generation,
        conditions: vec![condition(DELETING, true, reason, message, generation)],
        manifests: vec![],
        gone,
        trace_context: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traced(status: &v1::WorkStatus, parent: &str) -> v1::WorkStatus {
        let mut status = status.clone();
        status.trace_context = [("traceparent".to_owned(), parent.to_owned())].into();
        status
    }

    #[test]
    fn an_unchanged_pass_keeps_the_reported_trace() {
        let base = v1::WorkStatus {
            generation: 3,
            ..Default::default()
        };
        let previous = traced(&base, "first");
        let mut again = traced(&base, "second");
        keep_reported_trace(&previous, &mut again);
        assert_eq!(again, previous, "nothing new to report");

        let mut changed = traced(&base, "second");
        changed.generation = 4;
        keep_reported_trace(&previous, &mut changed);
        assert_eq!(changed.trace_context["traceparent"], "second");

        let mut untraced = base.clone();
        keep_reported_trace(&previous, &mut untraced);
        assert!(untraced.trace_context.is_empty(), "tracing off writes none");
    }

    #[test]
    fn a_turn_waiting_for_works_waits_for_them_a_settled_one_for_the_resync_else_a_retry() {
        let for_works = Turn {
            settled: true,
            waits_for_works: Some(Duration::from_secs(7)),
            braked: false,
        };
        assert_eq!(
            next_wait(&for_works),
            NextWait::ForWorks(Duration::from_secs(7))
        );
        assert_eq!(next_wait(&Turn::settled(true)), NextWait::Resync);
        assert_eq!(next_wait(&Turn::settled(false)), NextWait::Retry);
        let braked = Turn {
            settled: true,
            waits_for_works: None,
            braked: true,
        };
        assert_eq!(next_wait(&braked), NextWait::Resync);
    }

    #[test]
    fn a_deleted_work_is_kept_only_while_dependents_remain_and_the_wait_lasts() {
        let timeout = Duration::from_secs(300);
        let dependents = vec!["web".to_string(), "db".to_string()];
        let message = dependents_wait(&dependents, Duration::from_secs(10), timeout)
            .expect("kept while dependents remain");
        assert!(message.contains("web, db"), "{message}");
        assert!(
            message.contains("300s after the deletion began"),
            "{message}"
        );
        assert_eq!(dependents_wait(&dependents, Duration::ZERO, timeout), None);
        assert_eq!(dependents_wait(&[], Duration::from_secs(10), timeout), None);
    }
}
