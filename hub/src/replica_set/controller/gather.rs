//! Gather: what one reconcile of a replica set reads, into a [`Snapshot`]
//! that carries `now`. Reads only: the caches, and the replica set itself
//! when the cache is behind the last status this process wrote.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;

use super::super::chosen::chosen_by_decisions;
use super::super::decide::{Snapshot, gate_inputs};
use super::super::depends::DependencyInputs;
use super::super::error::{ReplicaSetError, failed};
use super::super::name_clash::rivals;
use super::super::revisions::StoredRevisions;
use super::super::work_writes::owner_label;
use super::Context;
use ferry_api::contract::REPLICA_SET_LABEL;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::placement::{Placement, PlacementDecision};
use ferry_api::replica_set::ManifestWorkReplicaSet;

impl Context {
    /// The works this replica set generated, by cluster (namespace).
    pub(super) fn generated(
        &self,
        rs: &ManifestWorkReplicaSet,
    ) -> BTreeMap<String, Arc<ManifestWork>> {
        let owner = owner_label(rs);
        self.works
            .state()
            .into_iter()
            .filter(|w| w.labels().get(REPLICA_SET_LABEL) == Some(&owner))
            .filter_map(|w| Some((w.namespace()?, w)))
            .collect()
    }

    /// What the `dependsOn` of `rs` is judged from: the replica sets of
    /// its namespace, and the works and chosen clusters of those it names
    /// (at most `MAX_DEPENDENCIES`). Empty without `dependsOn`.
    pub(super) fn dependencies(
        &self,
        rs: &ManifestWorkReplicaSet,
        placements: &[Arc<Placement>],
        decisions: &[Arc<PlacementDecision>],
    ) -> DependencyInputs {
        if rs.spec.depends_on.is_empty() {
            return DependencyInputs::default();
        }
        let namespace = rs.namespace();
        let replica_sets: BTreeMap<String, Arc<ManifestWorkReplicaSet>> = self
            .replica_sets
            .state()
            .into_iter()
            .filter(|other| other.namespace() == namespace)
            .map(|other| (other.name_any(), other))
            .collect();
        let mut inputs = DependencyInputs::default();
        for dependency in &rs.spec.depends_on {
            let Some(other) = replica_sets.get(&dependency.name) else {
                continue;
            };
            inputs
                .works
                .insert(dependency.name.clone(), self.generated(other));
            let placed = chosen_by_decisions(other, placements, decisions)
                .wanted
                .into_keys()
                .collect();
            inputs.placed.insert(dependency.name.clone(), placed);
        }
        inputs.replica_sets = replica_sets;
        inputs
    }

    /// `rs` as the cache has it, or read from the API server when the cache
    /// is not (exactly) at the last status this process wrote: the rollout
    /// reads its gates' memory from the status.
    pub(super) async fn current(
        &self,
        rs: Arc<ManifestWorkReplicaSet>,
    ) -> Result<Arc<ManifestWorkReplicaSet>, ReplicaSetError> {
        let owner = owner_label(&rs);
        let stale = self
            .written
            .lock()
            .await
            .get(&owner)
            .is_some_and(|version| rs.resource_version().as_ref() != Some(version));
        if !stale {
            return Ok(rs);
        }
        let api: Api<ManifestWorkReplicaSet> =
            Api::namespaced(self.client.clone(), &rs.namespace().unwrap_or_default());
        let fresh = api
            .get(&rs.name_any())
            .await
            .map_err(failed(&rs, "reading it"))?;
        // The cache is current again once it reaches this version.
        if let Some(version) = fresh.resource_version() {
            self.written.lock().await.insert(owner, version);
        }
        Ok(Arc::new(fresh))
    }

    /// Everything the decision for `rs` is made from, at `now`, with its
    /// generated works `existing` and its revisions as `stored` (see
    /// `act::revisions`).
    pub(super) async fn gather(
        &self,
        rs: &Arc<ManifestWorkReplicaSet>,
        existing: BTreeMap<String, Arc<ManifestWork>>,
        stored: StoredRevisions,
        now: Timestamp,
    ) -> Snapshot {
        let owner = owner_label(rs);
        let placements = self.placements.state();
        let decisions = self.decisions.state();
        let dependencies = self.dependencies(rs, &placements, &decisions);
        Snapshot {
            gates: gate_inputs(
                rs,
                &placements,
                self.clusters.state(),
                self.approvals.state(),
            ),
            rs: rs.clone(),
            placements,
            decisions,
            sets: self.sets.state(),
            bindings: self.bindings.state(),
            existing,
            revisions: stored.kept,
            refused_revisions: stored.refused,
            remembered: self.rollbacks.lock().await.get(&owner).cloned(),
            refused: self
                .refused
                .lock()
                .await
                .get(&owner)
                .cloned()
                .unwrap_or_default(),
            dependencies,
            rivals: rivals(rs, &self.replica_sets.state()),
            now,
        }
    }
}
