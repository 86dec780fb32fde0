//! The agent's deletion brake: the last line against a mass deletion,
//! whatever happens on the hub (a deleted CRD or cluster namespace, a hub
//! restored from an old backup or restarted with an empty store, a stolen
//! hub credential). Past a budget of deleted objects per window, the agent
//! keeps the objects of further deleted works, says so on each of them, and
//! goes on applying everything else, until a platform admin releases the
//! hold on the spoke.
//!
//! - `ledger.rs`: what the brake records.
//! - `decide.rs`: whether one deletion goes ahead, and what a release lets go
//!   (pure).
//! - `store.rs`: the ledger's ConfigMap on the spoke (the only writes).
//!
//! Each question gathers the ledger (fresh from the spoke) and the count of
//! managed objects, decides, and records the decision before the caller
//! deletes anything.

pub mod decide;
pub mod ledger;
pub mod store;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{Mutex, watch};
use tracing::{info, warn};

use crate::applied_works::AppliedWorks;
use decide::{Limits, Managed, Request, Verdict};
use ferry_api::contract::{DELETION_BRAKE_LEDGER, RELEASE_DELETIONS_ANNOTATION};
use ledger::{Holding, Ledger};
use store::{LedgerStore, StoreError};

/// How often the brake looks for a release while it holds deletions.
const RELEASE_POLL: Duration = Duration::from_secs(3);
/// How long a count of managed objects is trusted: a mass deletion asks
/// once per work, and listing every record each time would cost more than
/// the deletions.
const MANAGED_COUNT_TTL: Duration = Duration::from_secs(10);
/// Attempts at writing the ledger when someone else wrote it meanwhile.
const WRITE_ATTEMPTS: usize = 5;

/// The brake's answer for one work's deletion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Delete the work's objects now.
    Go,
    /// Keep them; the message says why and how to release.
    Held(String),
}

/// What the brake remembers between questions.
#[derive(Default)]
struct State {
    /// The ledger as last read or written.
    ledger: Option<Ledger>,
    /// The managed-object count and when it was taken.
    managed: Option<(Managed, Instant)>,
}

/// The agent's deletion brake (see the module docs).
pub struct DeletionBrake {
    limits: Limits,
    store: LedgerStore,
    applied: AppliedWorks,
    state: Mutex<State>,
    released: watch::Sender<u64>,
    holding: watch::Sender<Holding>,
    held_works: Gauge,
}

impl DeletionBrake {
    /// A brake with `limits`, its ledger in `namespace` on the spoke of
    /// `client`, counting the objects recorded in `applied`, and showing the
    /// works it holds in `held_works`.
    pub fn new(
        client: Client,
        namespace: &str,
        limits: Limits,
        applied: AppliedWorks,
        held_works: Gauge,
    ) -> Self {
        Self {
            limits,
            store: LedgerStore::new(client, namespace),
            applied,
            state: Mutex::new(State::default()),
            released: watch::channel(0).0,
            holding: watch::channel(Holding::default()).0,
            held_works,
        }
    }

    /// Changes whenever a release lets held deletions go.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.released.subscribe()
    }

    /// What the brake holds, in sum; changes whenever that does (first
    /// when the ledger is read at start).
    pub fn holding(&self) -> watch::Receiver<Holding> {
        self.holding.subscribe()
    }

    /// The spoke namespace of the brake's ledger ConfigMap.
    pub fn namespace(&self) -> &str {
        self.store.namespace()
    }

    /// Whether work `uid` (named `work`, owned by `owner`), whose deletion
    /// removes `objects` objects, may be deleted now. Any failure to read or
    /// record the ledger holds the deletion: a brake that cannot see fails
    /// closed.
    pub async fn ask(&self, uid: &str, work: &str, owner: &str, objects: u64) -> Answer {
        let mut state = self.state.lock().await;
        if objects == 0 || state.ledger.as_ref().is_some_and(|l| l.admits(uid)) {
            return Answer::Go;
        }
        let managed = match self.managed(&mut state).await {
            Ok(managed) => managed,
            Err(message) => return Answer::Held(message),
        };
        let request = Request {
            uid,
            work,
            owner,
            objects,
        };
        let verdict = self
            .transact(&mut state, |ledger, now| {
                let decision = decide::decide(ledger, now, &managed, &self.limits, request);
                (decision.verdict, decision.ledger)
            })
            .await;
        match verdict {
            Ok(Verdict::Admit) => Answer::Go,
            Ok(Verdict::Hold {
                budget,
                share,
                works,
                objects,
            }) => {
                warn!(%uid, %work, %owner, works, objects, spent = budget.spent, allowed = budget.allowed,
                    share, "the deletion brake holds a work's deletion");
                Answer::Held(format!(
                    "held by the agent's deletion brake: {} of {} objects were deleted in the last {}s ({}% of {} managed, at least {}; this work's owner is sure of {share} of them), and {works} deleted works with {objects} objects wait; release on the spoke with `kubectl annotate --overwrite configmap -n {} {DELETION_BRAKE_LEDGER} {RELEASE_DELETIONS_ANNOTATION}=\"<who and why>\"`",
                    budget.spent,
                    budget.allowed,
                    self.limits.window.as_secs(),
                    self.limits.percent,
                    budget.base,
                    self.limits.floor,
                    self.store.namespace(),
                ))
            }
            Err(error) => Answer::Held(format!(
                "held: the deletion brake cannot record this deletion, so it keeps the objects: {error}"
            )),
        }
    }

    /// Takes work `uid` off the held list: the hub wants it after all. Reads
    /// the ledger only when the work may be on it (or nothing is known yet,
    /// as right after a restart, when a hold of the earlier run may name it).
    pub async fn withdraw(&self, uid: &str) {
        let mut state = self.state.lock().await;
        if state.ledger.as_ref().is_some_and(|l| !l.holds(uid)) {
            return;
        }
        let withdrawn = self
            .transact(&mut state, |ledger, _| ((), decide::withdraw(ledger, uid)))
            .await;
        if let Err(error) = withdrawn {
            warn!(%uid, %error, "cannot take a work off the deletion brake's held list");
        }
    }

    /// Reads the ledger at start (so what an earlier run held shows at
    /// once) and then, while anything is held, looks for a release every
    /// few seconds and records it. Runs until dropped.
    pub async fn watch_releases(self: Arc<Self>) {
        let mut tick = tokio::time::interval(RELEASE_POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let mut state = self.state.lock().await;
            if state.ledger.as_ref().is_some_and(|l| l.held.is_empty()) {
                continue;
            }
            // A release, if there is one, is recorded by any transaction.
            if let Err(error) = self.transact(&mut state, |_, _| ((), None)).await {
                warn!(%error, "cannot read or record the deletion brake's ledger");
            }
        }
    }

    /// One read-decide-write of the ledger: reads it, records a new release
    /// first (if the annotation holds one), lets `change` decide on the
    /// result at the current time, and writes what changed before returning
    /// `change`'s answer; a write that finds the ConfigMap changed since
    /// the read starts again. Fails when the ledger cannot be read or
    /// written, or kept changing for [`WRITE_ATTEMPTS`] tries.
    async fn transact<T>(
        &self,
        state: &mut State,
        change: impl Fn(&Ledger, i64) -> (T, Option<Ledger>),
    ) -> Result<T, StoreError> {
        for _ in 0..WRITE_ATTEMPTS {
            let stored = self.store.read().await?;
            let now = Timestamp::now().as_second();
            let released = decide::release(
                &stored.ledger,
                now,
                &stored.release,
                &stored.release_manager,
            );
            let (answer, changed) = change(released.as_ref().unwrap_or(&stored.ledger), now);
            let next = changed.or_else(|| released.clone());
            if let Some(next) = &next {
                match self.store.write(&stored, next).await {
                    Ok(()) => {}
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(error) => return Err(error),
                }
            }
            self.remember(state, next.unwrap_or(stored.ledger), released.is_some());
            return Ok(answer);
        }
        Err(StoreError::Conflict {
            namespace: self.store.namespace().to_string(),
        })
    }

    /// Keeps `ledger` as the latest, shows its held works, and wakes the
    /// held works when `released`.
    fn remember(&self, state: &mut State, ledger: Ledger, released: bool) {
        if released && let Some(release) = ledger.releases.last() {
            info!(by = %release.by, manager = %release.manager, works = release.works,
                objects = release.objects, "held deletions released");
        }
        self.held_works
            .set(i64::try_from(ledger.held.len()).unwrap_or(i64::MAX));
        let holding = ledger.holding();
        self.holding.send_if_modified(|h| {
            let changed = *h != holding;
            *h = holding;
            changed
        });
        state.ledger = Some(ledger);
        if released {
            self.released.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Objects the agent manages (every record's resources), in all and per
    /// owner, counted at most every [`MANAGED_COUNT_TTL`].
    async fn managed(&self, state: &mut State) -> Result<Managed, String> {
        if let Some((count, at)) = &state.managed
            && at.elapsed() < MANAGED_COUNT_TTL
        {
            return Ok(count.clone());
        }
        let records = self.applied.list().await.map_err(|error| {
            format!("held: the deletion brake cannot count the objects the agent manages: {error}")
        })?;
        let mut count = Managed::default();
        for record in &records {
            let objects = record
                .resources()
                .map(|v| v.len() as u64)
                .unwrap_or_default();
            let owner = record.spec.owner.clone().unwrap_or_default();
            *count.by_owner.entry(owner).or_default() += objects;
        }
        state.managed = Some((count.clone(), Instant::now()));
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::ledger::Ledger;

    #[test]
    fn an_empty_ledger_reads_back_from_what_the_agent_writes() {
        let text = serde_json::to_string(&Ledger::default()).expect("serializes");
        let back: Ledger = serde_json::from_str(&text).expect("parses");
        assert_eq!(back, Ledger::default());
        let older: Ledger = serde_json::from_str("{}").expect("missing fields default");
        assert_eq!(older, Ledger::default());
    }
}
