//! One work's task: the loop that applies, deletes or evicts the work as
//! the hub last said, and waits between turns for a new wish, a drift, a
//! change of another work, a brake release, a retry or the resync.

use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use ferry_proto::v1;
use tokio::sync::{Notify, watch};
use tracing::{debug, info, warn};

use super::pass::{Pass, apply, publish, waiting_report};
use super::releasing::{Step, deletion_report, eviction_due, release};
use super::{Desired, Shared};
use crate::dependencies::{Gate, wire_dependencies, work_owner};
use crate::dependency_readiness::{RuleBackoff, decide};
use crate::drift::DriftWatch;
use ferry_semantics::contract::{REASON_DELETION_BRAKE_HELD, REASON_WAITING_FOR_DEPENDENTS};
use ferry_semantics::text::first_few;

const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(60);

/// Runs the work `uid` as `desired` says until it is released. With
/// `record_likely_new`, its first pass creates the work's record without
/// reading it first.
pub(super) async fn run_worker(
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

#[cfg(test)]
mod tests {
    use super::*;

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
