//! Work records (AppliedManifestWorks) on the spoke that belong to no work
//! on the hub, found while the agent runs: once the hub says `Synced` it
//! has named every work it has for this cluster, so a record that no
//! worker holds by then is an orphan (left by a crash between two hubs, or
//! written by someone else). It is evicted like a work the hub no longer
//! has: kept for the eviction grace period, then released. Checked when
//! the hub says `Synced` and again every resync interval of the session;
//! before this, an orphan went only when the agent restarted.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::warn;

use crate::applied_works::AppliedManifestWork;
use crate::work_workers::WorkManager;

/// The uids of `records` that are neither held by a worker (`held`) nor
/// being deleted already.
pub fn orphans(records: &[AppliedManifestWork], held: impl Fn(&str) -> bool) -> Vec<String> {
    records
        .iter()
        .filter(|r| r.metadata.deletion_timestamp.is_none())
        .map(|r| r.spec.work_uid.clone())
        .filter(|uid| !uid.is_empty() && !held(uid))
        .collect()
}

/// When the sweep last ran and whether the session's hub said `Synced`.
#[derive(Default)]
struct SweepState {
    synced: bool,
    last: Option<Instant>,
    running: bool,
}

/// Finds and evicts orphaned records, at most one sweep at a time.
pub struct OrphanSweep {
    works: Arc<WorkManager>,
    every: Duration,
    state: Mutex<SweepState>,
}

impl OrphanSweep {
    /// A sweep over `works`' records, repeated every `every` while a
    /// session lasts.
    pub fn new(works: Arc<WorkManager>, every: Duration) -> Arc<Self> {
        Arc::new(Self {
            works,
            every,
            state: Mutex::new(SweepState::default()),
        })
    }

    /// A new session: nothing is swept until its hub says `Synced`.
    pub fn session_started(&self) {
        self.state().synced = false;
    }

    /// The hub named every work it has for this cluster: sweep now.
    pub fn hub_synced(self: &Arc<Self>) {
        self.state().synced = true;
        self.start(true);
    }

    /// A hub heartbeat: sweep again once `every` has passed since the last.
    pub fn hub_heartbeat(self: &Arc<Self>) {
        self.start(false);
    }

    fn state(&self) -> std::sync::MutexGuard<'_, SweepState> {
        // A panic while holding it cannot leave it inconsistent: plain flags.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn start(self: &Arc<Self>, now: bool) {
        {
            let mut state = self.state();
            let due = now || state.last.is_none_or(|l| l.elapsed() >= self.every);
            if !state.synced || state.running || !due {
                return;
            }
            state.running = true;
            state.last = Some(Instant::now());
        }
        let sweep = self.clone();
        tokio::spawn(async move {
            sweep.sweep().await;
            sweep.state().running = false;
        });
    }

    async fn sweep(&self) {
        let records = match self.works.records().await {
            Ok(records) => records,
            Err(error) => {
                warn!(%error, "cannot list work records to find orphans; trying at the next resync");
                return;
            }
        };
        // Read after the list: a worker started in between holds its
        // record already, so it is not taken for an orphan.
        let held = self.works.held().await;
        for uid in orphans(&records, |uid| held.contains(uid)) {
            self.works.evict_orphan(uid).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::applied_works::AppliedManifestWorkSpec;

    fn record(uid: &str, deleting: bool) -> AppliedManifestWork {
        let mut r = AppliedManifestWork::new(
            uid,
            AppliedManifestWorkSpec {
                work_uid: uid.into(),
                ..AppliedManifestWorkSpec::default()
            },
        );
        if deleting {
            r.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::now(),
                ));
        }
        r
    }

    #[test]
    fn a_record_no_worker_holds_is_an_orphan_unless_it_is_going_already() {
        let records = [
            record("held", false),
            record("orphan", false),
            record("going", true),
            record("", false),
        ];
        assert_eq!(orphans(&records, |uid| uid == "held"), ["orphan"]);
    }
}
