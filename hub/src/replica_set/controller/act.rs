//! Act: carries a decision out, records before the writes they announce,
//! then the status. Every write goes through `act/`; this is the order.

use std::sync::Arc;

use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use tracing::info;

use super::super::act::records::{fence, write_status};
use super::super::act::works::{delete_work, deploy};
use super::super::budget::window_record;
use super::super::decide::{Decision, Snapshot, decide_status};
use super::super::error::{ReplicaSetError, failed};
use super::super::name_clash::Standing;
use super::super::rollback::rollback_record;
use super::super::rollout_signals::rollout_signals;
use super::super::work_writes::owner_label;
use super::Context;
use ferry_api::contract::REPLICA_SET_LABEL;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::{ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus};

impl Context {
    /// A write to the replica set `owner` returned `version`: the next
    /// write of this reconcile (`at`) carries it, and the next reconcile
    /// knows the cache is at least that new.
    pub(super) async fn recorded(
        &self,
        owner: &str,
        at: &mut ManifestWorkReplicaSet,
        version: String,
    ) {
        self.written
            .lock()
            .await
            .insert(owner.to_string(), version.clone());
        at.metadata.resource_version = Some(version);
    }

    /// Writes `status` as the status of `at` (the replica set `owner`),
    /// fenced by its resourceVersion, and makes `at` what was written;
    /// false when it already said so (nothing written). Fails when the
    /// write is refused or fenced off.
    async fn record(
        &self,
        owner: &str,
        at: &mut ManifestWorkReplicaSet,
        status: ManifestWorkReplicaSetStatus,
    ) -> Result<bool, ReplicaSetError> {
        let Some(version) = write_status(&self.client, at, status.clone()).await? else {
            return Ok(false);
        };
        at.status = Some(status);
        self.recorded(owner, at, version).await;
        Ok(true)
    }

    /// Carries out `decision`, made from `snapshot` for `rs`: the
    /// records first, then the works, then the status. Returns when to
    /// reconcile again.
    pub(super) async fn act(
        &self,
        rs: &Arc<ManifestWorkReplicaSet>,
        snapshot: &Snapshot,
        decision: Decision<'_>,
    ) -> Result<Action, ReplicaSetError> {
        let owner = owner_label(rs);
        let namespace = rs.namespace().unwrap_or_default();
        let now = snapshot.now;
        if decision.name_standing == Standing::Yields {
            // The status does not name the other team; the log does, for
            // the platform team.
            let rivals: Vec<&str> = snapshot
                .rivals
                .iter()
                .map(|r| r.namespace.as_str())
                .collect();
            info!(replica_set = %owner, ?rivals, "an older replica set of the same name holds it: no new works");
        }
        {
            let mut rollbacks = self.rollbacks.lock().await;
            match &decision.rollback_memory {
                Some(status) => {
                    rollbacks.insert(owner.clone(), status.clone());
                }
                None => {
                    rollbacks.remove(&owner);
                }
            }
        }
        // Record before act: the rollback, then the budget's window, are in
        // the status before the first work they decide is written or
        // deleted; a failed record writes no work. Every write to the
        // replica set carries the resourceVersion the decision was made
        // from (then the one this reconcile wrote): a leader that decided
        // from an older object, paused and resumed after another took
        // over, writes nothing (fenced).
        let mut at = (**rs).clone();
        let mut recorded = false;
        if let Some(rollback) = &decision.record_rollback {
            let status = rollback_record(&at, rollback);
            recorded |= self.record(&owner, &mut at, status).await?;
        }
        if let Some(status) = window_record(&at, &decision.removals.budget) {
            recorded |= self.record(&owner, &mut at, status).await?;
        }
        // A gate that passes now is in the status before the first work of
        // the groups after it: a leader taking over reads it passed and
        // keeps it so, rather than judging it again (a health expression
        // may no longer hold) with some of those groups already written.
        if !decision.record_gates.is_empty() {
            let status = decide_status(snapshot, &decision, &snapshot.existing, &decision.refused);
            recorded |= self.record(&owner, &mut at, status).await?;
        }
        let mut refused = decision.refused.clone();
        let mut newly_refused = false;
        if let Some(works) = &decision.works {
            // Nothing recorded yet: check the decision's object is current
            // before its first work write (writing nothing).
            if !recorded && (!works.start.is_empty() || !works.delete.is_empty()) {
                fence(&self.client, &at).await?;
            }
            let new = deploy(&self.client, rs, works, &decision.chosen.wanted, now).await?;
            newly_refused = !new.is_empty();
            refused.extend(new);
        }
        {
            let mut all = self.refused.lock().await;
            if refused.is_empty() {
                all.remove(&owner);
            } else {
                all.insert(owner.clone(), refused.clone());
            }
        }
        // The status counts what the cache shows; the writes above come
        // back through the work watch and reconcile again.
        let generated = self.generated(rs);
        let status = decide_status(snapshot, &decision, &generated, &refused);
        self.rollout_metrics
            .set(&namespace, &rs.name_any(), &rollout_signals(&status));
        if let Some(version) = write_status(&self.client, &at, status).await? {
            self.written.lock().await.insert(owner.clone(), version);
        }
        Ok(decision.action(newly_refused))
    }

    /// Deletes every generated work; with `Foreground`, holds the replica
    /// set until they are gone.
    pub(super) async fn cleanup(
        &self,
        rs: Arc<ManifestWorkReplicaSet>,
    ) -> Result<Action, ReplicaSetError> {
        self.refused.lock().await.remove(&owner_label(&rs));
        self.rollbacks.lock().await.remove(&owner_label(&rs));
        self.written.lock().await.remove(&owner_label(&rs));
        self.rollout_metrics
            .forget(&rs.namespace().unwrap_or_default(), &rs.name_any());
        // Listed from the API, not the cache: the finalizer must not go
        // while a work the cache has not seen yet exists.
        let works: Api<ManifestWork> = Api::all(self.client.clone());
        let listed = works
            .list(
                &ListParams::default().labels(&format!("{REPLICA_SET_LABEL}={}", owner_label(&rs))),
            )
            .await
            .map_err(failed(&rs, "listing its works"))?;
        for work in &listed.items {
            if work.meta().deletion_timestamp.is_none() {
                delete_work(&self.client, &rs, &work.namespace().unwrap_or_default()).await?;
            }
        }
        if rs.spec.cascade_deletion_policy == "Foreground" && !listed.items.is_empty() {
            return Err(ReplicaSetError::WorksRemaining(listed.items.len()));
        }
        Ok(Action::await_change())
    }
}
