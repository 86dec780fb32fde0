//! Gets one session's status reports written, or keeps trying. A report is
//! written as it arrives; when the write fails for a reason that may pass
//! (the API server away, a conflict, the hub's RBAC missing), the report goes
//! into its work's pending slot and a task retries it with backoff. A newer
//! report of the same work replaces the one in the slot, so the latest wins
//! and memory stays at one report per work. A `gone` report is retried the
//! same way until the finalizer is released or the work is gone.
//!
//! Two live sessions of one cluster on this replica (an agent rollout):
//! the newer one's reports win. The older session's reports wait in their
//! slots while a newer session lives, and are written if it ends first; a
//! `gone` is a fact about the cluster and is never held back. Across
//! replicas, the generation check against the live object still keeps an
//! older generation from overwriting a newer one.
//!
//! Retries end with the session. That loses nothing: a new session starts
//! with the agent sending the latest status of every work it holds, and a
//! deleted work the agent no longer holds (it reported `gone`) is released by
//! the hub when the session syncs.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use ferry_proto::v1;
use tokio::sync::Mutex;
use tokio::task::JoinSet;
use tracing::{debug, warn};

use crate::metrics::{HubMetrics, OutcomeLabel};
use crate::status::order::{SessionOrder, SessionTicket};
use crate::status::writer::{Basis, StatusOutcome, StatusWriteError, StatusWriter};

/// First wait before a failed status write is tried again.
pub const FIRST_RETRY: Duration = Duration::from_millis(250);
/// Longest wait between two tries (jitter adds up to as much again).
pub const MAX_RETRY: Duration = Duration::from_secs(8);

/// The latest report of one work that still has to be written.
struct Pending {
    report: v1::WorkStatus,
    /// Bumped each time a newer report replaces this one.
    version: u64,
}

/// What the session and its retry tasks share.
struct Shared {
    cluster: String,
    writer: Arc<StatusWriter>,
    metrics: Arc<HubMetrics>,
    /// Pending reports by work UID.
    pending: Mutex<HashMap<String, Pending>>,
    /// Works this session wrote: the index may not show those writes yet, so
    /// their next report is judged against a fresh read.
    written: Mutex<HashSet<String>>,
    ticket: SessionTicket,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let left = self.pending.get_mut().len();
        self.metrics.status_reports_pending.dec_by(left as i64);
    }
}

/// A report that failed, and which version of its work's slot it was.
struct Failed {
    version: u64,
    error: StatusWriteError,
}

/// The status reports of one agent session.
pub struct SessionReports {
    shared: Arc<Shared>,
    retries: JoinSet<()>,
}

impl SessionReports {
    /// Reports of a new session of the agent of `cluster`, written by
    /// `writer`; `order` ranks it after every session opened before.
    pub fn new(
        cluster: &str,
        writer: Arc<StatusWriter>,
        metrics: Arc<HubMetrics>,
        order: &Arc<SessionOrder>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                cluster: cluster.to_string(),
                writer,
                metrics,
                pending: Mutex::new(HashMap::new()),
                written: Mutex::new(HashSet::new()),
                ticket: order.open(cluster),
            }),
            retries: JoinSet::new(),
        }
    }

    /// Returns once this session must end: enough newer sessions of its
    /// cluster are live (see [`crate::status::order::MAX_LIVE_SESSIONS`]).
    pub async fn pushed_out(&self) {
        self.shared.ticket.pushed_out().await;
    }

    /// Writes `report`, or leaves it to its work's retry task. Never fails:
    /// what could not be written is logged and counted.
    pub async fn deliver(&mut self, report: v1::WorkStatus) {
        while self.retries.try_join_next().is_some() {}
        let shared = &self.shared;
        shared.metrics.status_reports_received.inc();
        let Some(uid) = report.work.as_ref().map(|w| w.uid.clone()) else {
            let error = StatusWriteError::MissingWorkRef {
                cluster: shared.cluster.clone(),
            };
            warn!(cluster = %shared.cluster, %error, "status report dropped");
            shared.count("error");
            return;
        };
        // Only works the hub holds for this cluster: what a session keeps
        // (one pending slot per work) is then bounded by the cluster's works,
        // whatever UIDs an agent sends.
        if !shared.writer.holds(&shared.cluster, &report).await {
            shared.metrics.status_reports_stale.inc();
            shared.count("unknown_work");
            return;
        }
        {
            let mut pending = shared.pending.lock().await;
            if let Some(slot) = pending.get_mut(&uid) {
                slot.report = report;
                slot.version += 1;
                shared.count("coalesced");
                return;
            }
        }
        if !report.gone && !shared.ticket.is_newest() {
            shared.count("superseded");
            self.park(uid, report).await;
            return;
        }
        let basis = if shared.written.lock().await.contains(&uid) {
            Basis::Live
        } else {
            Basis::Index
        };
        match shared.writer.write(&shared.cluster, &report, basis).await {
            Ok(outcome) => shared.record(&uid, outcome).await,
            Err(error) if error.is_transient() => {
                shared.metrics.status_write_failures.inc();
                warn!(cluster = %shared.cluster, %uid, %error, "status not written; retrying");
                self.park(uid, report).await;
            }
            Err(error) => {
                shared.metrics.status_write_failures.inc();
                warn!(cluster = %shared.cluster, %uid, %error, "status report refused; dropped");
                shared.count("error");
            }
        }
    }
}

impl SessionReports {
    /// Puts `report` in the empty slot of `uid` and starts its retry task.
    async fn park(&mut self, uid: String, report: v1::WorkStatus) {
        let shared = &self.shared;
        shared
            .pending
            .lock()
            .await
            .insert(uid.clone(), Pending { report, version: 0 });
        shared.metrics.status_reports_pending.inc();
        self.retries.spawn(retry(shared.clone(), uid));
    }
}

impl Shared {
    fn count(&self, outcome: &'static str) {
        self.metrics
            .status_reports
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
    }

    async fn record(&self, uid: &str, outcome: StatusOutcome) {
        match outcome {
            StatusOutcome::Written => {
                self.metrics.status_writes.inc();
                self.written.lock().await.insert(uid.to_string());
            }
            // A released work is gone for good: forgetting it keeps the set
            // to the works the cluster has.
            StatusOutcome::Released => {
                self.metrics.status_writes.inc();
                self.written.lock().await.remove(uid);
            }
            StatusOutcome::Stale => {
                self.metrics.status_reports_stale.inc();
            }
            StatusOutcome::Unchanged => {}
        }
        self.count(outcome.label());
    }

    /// One try at the latest pending report of `uid`; None when there is none.
    async fn try_pending(&self, uid: &str) -> Result<Option<(u64, StatusOutcome)>, Failed> {
        let (version, report) = match self.pending.lock().await.get(uid) {
            Some(slot) => (slot.version, slot.report.clone()),
            None => return Ok(None),
        };
        if !report.gone {
            self.ticket.wait_newest().await;
        }
        match self.writer.write(&self.cluster, &report, Basis::Live).await {
            Ok(outcome) => Ok(Some((version, outcome))),
            Err(error) => {
                self.metrics.status_write_failures.inc();
                Err(Failed { version, error })
            }
        }
    }
}

/// Retries the pending report of `uid` with backoff until one is written or
/// refused for good, then goes on with any newer report that arrived
/// meanwhile; ends when the slot is empty.
async fn retry(shared: Arc<Shared>, uid: String) {
    let backoff = ExponentialBuilder::default()
        .with_min_delay(FIRST_RETRY)
        .with_max_delay(MAX_RETRY)
        .with_jitter()
        .without_max_times();
    loop {
        let result = (|| shared.try_pending(&uid))
            .retry(backoff)
            .when(|failed: &Failed| failed.error.is_transient())
            .notify(|failed: &Failed, wait: Duration| {
                shared.metrics.status_write_retries.inc();
                debug!(cluster = %shared.cluster, %uid, error = %failed.error, ?wait, "status write failed again");
            })
            .await;
        let done = match result {
            Ok(None) => return,
            Ok(Some((version, outcome))) => {
                shared.record(&uid, outcome).await;
                version
            }
            Err(failed) => {
                warn!(cluster = %shared.cluster, %uid, error = %failed.error, "status report refused; dropped");
                shared.count("error");
                failed.version
            }
        };
        let mut pending = shared.pending.lock().await;
        if pending.get(&uid).is_some_and(|slot| slot.version == done) {
            pending.remove(&uid);
            shared.metrics.status_reports_pending.dec();
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_newest_session_of_a_cluster_wins_until_it_ends() {
        let order = Arc::new(SessionOrder::default());
        let older = order.open("a");
        let other_cluster = order.open("b");
        assert!(older.is_newest());
        let newer = order.open("a");
        assert!(!older.is_newest());
        assert!(newer.is_newest());
        assert!(other_cluster.is_newest());
        let waiting = tokio::spawn(async move {
            older.wait_newest().await;
            older.is_newest()
        });
        drop(newer);
        assert!(waiting.await.expect("joins"));
    }
}
