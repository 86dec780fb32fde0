//! The ManifestWorkReplicaSet controller: for every cluster the referenced
//! Placements chose, a ManifestWork made from the template (named like the
//! replica set, in the cluster's namespace, labelled with the replica set
//! and the placement); a cluster leaving the decisions loses its work; the
//! status counts the works by state. Rollout `All`: every cluster at once.
//! Triggered by the replica sets, the PlacementDecisions and the generated
//! works, so only the replica sets a change touches are reconciled.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, predicates, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use tokio::sync::Mutex;
use tracing::{info, warn};

use super::budget::record_window;
use super::decide::{Snapshot, decide, decide_status, gate_inputs};
use super::decisions::chosen_by_decisions;
use super::depends::{DependencyInputs, dependents};
use super::deploy::{Refused, delete_work, deploy, owner_label};
use super::error::{ReplicaSetError, failed};
use super::health_pool::{HealthPool, HealthPoolConfig};
use super::name_clash::{Standing, rivals};
use super::revisions::{protected_hashes, sync_revisions};
use super::rollback::record_rollback;
use super::rollout_signals::rollout_signals;
use super::status::{fence, write_status};
use crate::metrics::RolloutMetrics;
use crate::store_ready::{StoresReady, store_ready};
use crate::watch::SettledObjects;
use crate::watch::{resync_every, run_controller, watch};
use ferry_api::cluster_set::{ManagedClusterSet, ManagedClusterSetBinding};
use ferry_api::contract::{PLACEMENT_LABEL, REPLICA_SET_FINALIZER, REPLICA_SET_LABEL};
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::placement::{Placement, PlacementDecision};
use ferry_api::replica_set::{ManifestWorkReplicaSet, RollbackStatus};
use ferry_api::rollout_approval::RolloutApproval;
use k8s_openapi::api::apps::v1::ControllerRevision;

struct Context {
    client: Client,
    /// Every replica set: those a replica set depends on are read from it.
    replica_sets: Store<ManifestWorkReplicaSet>,
    placements: Store<Placement>,
    decisions: Store<PlacementDecision>,
    works: Store<ManifestWork>,
    clusters: Store<ManagedCluster>,
    /// The replica sets' ControllerRevisions (those with the replica-set
    /// label): read on every reconcile without a list call.
    revisions: Store<ControllerRevision>,
    approvals: Store<RolloutApproval>,
    /// The cluster sets and their bindings: a decided cluster must be in a
    /// set bound to the replica set's namespace ([`refuse_unbound`]).
    sets: Store<ManagedClusterSet>,
    bindings: Store<ManagedClusterSetBinding>,
    /// Every store above has listed: a reconcile reads none before (an
    /// unlisted set or binding would refuse bound clusters).
    ready: StoresReady,
    /// The works the API server refused, per replica set (owner label):
    /// their clusters count as failed until their rendering changes. An
    /// entry goes with its replica set; a hub restart tries them again.
    refused: Mutex<BTreeMap<String, Refused>>,
    /// The rollback each replica set (owner label) is in, remembered
    /// because the works written back reconcile again before the cache
    /// holds the status recording it; the status is the memory across
    /// restarts. An entry goes with its replica set.
    rollbacks: Mutex<BTreeMap<String, RollbackStatus>>,
    /// The resourceVersion of the last status this process wrote, per
    /// replica set (owner label). The gates' memory is the status: a
    /// reconcile must not read it from a cache that has not seen that
    /// write yet. An entry goes with its replica set.
    written: Mutex<BTreeMap<String, String>>,
    /// Where the gates' health expressions (tenant CEL) are evaluated:
    /// bounded threads, a deadline, one evaluation per namespace.
    health: HealthPool,
    /// The rollout gauges, set from each status decided.
    rollout_metrics: RolloutMetrics,
}

impl Context {
    /// The works this replica set generated, by cluster (namespace).
    fn generated(&self, rs: &ManifestWorkReplicaSet) -> BTreeMap<String, Arc<ManifestWork>> {
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
    fn dependencies(
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

    /// A write to the replica set `owner` returned `version`: the next
    /// write of this reconcile (`at`) carries it, and the next reconcile
    /// knows the cache is at least that new.
    async fn recorded(&self, owner: &str, at: &mut ManifestWorkReplicaSet, version: String) {
        self.written
            .lock()
            .await
            .insert(owner.to_string(), version.clone());
        at.metadata.resource_version = Some(version);
    }

    /// Brings the works and the status of `rs` up to date: gathers what
    /// the reconcile reads, [`decide`]s, then carries the decision out in
    /// its order (records before the writes they announce) and writes the
    /// status.
    async fn apply(&self, rs: Arc<ManifestWorkReplicaSet>) -> Result<Action, ReplicaSetError> {
        let rs = self.current(rs).await?;
        let owner = owner_label(&rs);
        let namespace = rs.namespace().unwrap_or_default();
        let now = Timestamp::now();
        let existing = self.generated(&rs);
        // The revisions: the current one stored (or renumbered), old ones
        // pruned, never the stable one or one a work still holds.
        let protected = protected_hashes(&rs, &existing);
        let stored = sync_revisions(&self.client, &rs, &self.revisions.state(), &protected).await?;
        let placements = self.placements.state();
        let decisions = self.decisions.state();
        let dependencies = self.dependencies(&rs, &placements, &decisions);
        let mut snapshot = Snapshot {
            gates: gate_inputs(
                &rs,
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
            rivals: rivals(&rs, &self.replica_sets.state()),
            now,
        };
        let mut decision = decide(&snapshot);
        // The gates' health expressions (tenant CEL) run on the bounded
        // pool, awaited, never on a runtime worker; then the decision is
        // made again, the same in everything but their verdicts.
        if !decision.health_requests.is_empty() {
            let requests = std::mem::take(&mut decision.health_requests);
            drop(decision);
            for request in requests {
                let verdict = self
                    .health
                    .evaluate(&namespace, &request.expression, &request.facts)
                    .await;
                snapshot
                    .gates
                    .health
                    .insert((request.placement, request.after_group), verdict);
            }
            decision = decide(&snapshot);
        }
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
        let mut at = (*rs).clone();
        let mut recorded = false;
        if let Some(rollback) = &decision.record_rollback
            && let Some(version) = record_rollback(&self.client, &at, rollback).await?
        {
            self.recorded(&owner, &mut at, version).await;
            recorded = true;
        }
        if let Some(version) = record_window(&self.client, &at, &decision.removals.budget).await? {
            self.recorded(&owner, &mut at, version).await;
            recorded = true;
        }
        // A gate that passes now is in the status before the first work of
        // the groups after it: a leader taking over reads it passed and
        // keeps it so, rather than judging it again (a health expression
        // may no longer hold) with some of those groups already written.
        if !decision.record_gates.is_empty() {
            let status = decide_status(&snapshot, &decision, &snapshot.existing, &decision.refused);
            if let Some(version) = write_status(&self.client, &at, status).await? {
                self.recorded(&owner, &mut at, version).await;
                recorded = true;
            }
        }
        let mut refused = decision.refused.clone();
        let mut newly_refused = false;
        if let Some(works) = &decision.works {
            // Nothing recorded yet: check the decision's object is current
            // before its first work write (writing nothing).
            if !recorded && (!works.start.is_empty() || !works.delete.is_empty()) {
                fence(&self.client, &at).await?;
            }
            let new = deploy(&self.client, &rs, works, &decision.chosen.wanted, now).await?;
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
        let generated = self.generated(&rs);
        let status = decide_status(&snapshot, &decision, &generated, &refused);
        self.rollout_metrics
            .set(&namespace, &rs.name_any(), &rollout_signals(&status));
        if let Some(version) = write_status(&self.client, &at, status).await? {
            self.written.lock().await.insert(owner.clone(), version);
        }
        Ok(decision.action(newly_refused))
    }

    /// `rs` as the cache has it, or read from the API server when the cache
    /// is not (exactly) at the last status this process wrote: the rollout
    /// reads its gates' memory from the status.
    async fn current(
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

    /// Deletes every generated work; with `Foreground`, holds the replica
    /// set until they are gone.
    async fn cleanup(&self, rs: Arc<ManifestWorkReplicaSet>) -> Result<Action, ReplicaSetError> {
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

async fn reconcile(
    rs: Arc<ManifestWorkReplicaSet>,
    ctx: Arc<Context>,
) -> Result<Action, kube::runtime::finalizer::Error<ReplicaSetError>> {
    ctx.ready
        .wait()
        .await
        .map_err(|_| kube::runtime::finalizer::Error::ApplyFailed(ReplicaSetError::NotReady))?;
    let api: Api<ManifestWorkReplicaSet> =
        Api::namespaced(ctx.client.clone(), &rs.namespace().unwrap_or_default());
    finalizer(&api, REPLICA_SET_FINALIZER, rs, |event| async {
        match event {
            Event::Apply(rs) => ctx.apply(rs).await,
            Event::Cleanup(rs) => ctx.cleanup(rs).await,
        }
    })
    .await
}

fn error_policy(
    rs: Arc<ManifestWorkReplicaSet>,
    error: &kube::runtime::finalizer::Error<ReplicaSetError>,
    _: Arc<Context>,
) -> Action {
    if let kube::runtime::finalizer::Error::CleanupFailed(ReplicaSetError::WorksRemaining(_)) =
        error
    {
        return Action::requeue(Duration::from_secs(1));
    }
    // Moved on since it was read: decide again from the newer object (its
    // watch event brings it) rather than report a failure.
    if let kube::runtime::finalizer::Error::ApplyFailed(
        superseded @ ReplicaSetError::Superseded { .. },
    ) = error
    {
        tracing::info!(replica_set = %rs.name_any(), error = %superseded, "deciding again");
        return Action::requeue(Duration::from_millis(500));
    }
    warn!(replica_set = %rs.name_any(), %error, "retrying");
    Action::requeue(Duration::from_secs(2))
}

/// The replica set a replica-set label (`<namespace>.<name>`) names.
fn owner_of(labels: &BTreeMap<String, String>) -> Option<ObjectRef<ManifestWorkReplicaSet>> {
    labels
        .get(REPLICA_SET_LABEL)
        .and_then(|v| v.split_once('.'))
        .map(|(namespace, name)| ObjectRef::new(name).within(namespace))
}

/// The replica sets in `namespace` referring to `placement`.
fn referring(
    replica_sets: &Store<ManifestWorkReplicaSet>,
    namespace: &str,
    placement: &str,
) -> Vec<ObjectRef<ManifestWorkReplicaSet>> {
    replica_sets
        .state()
        .iter()
        .filter(|rs| rs.namespace().as_deref() == Some(namespace))
        .filter(|rs| rs.spec.placement_refs.iter().any(|r| r.name == placement))
        .map(|rs| ObjectRef::from_obj(&**rs))
        .collect()
}

/// What of a cluster the replica sets react to: its labels (overrides,
/// placeholders), whether it is unreachable (the rollout stops waiting
/// for it) and its maintenance windows.
fn labels_and_reachability(cluster: &ManagedCluster) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    predicates::labels(cluster).hash(&mut hasher);
    super::gates::is_unreachable(Some(cluster)).hash(&mut hasher);
    // A window opening or closing by a change of the annotation (the
    // opening by time alone comes from the decision's requeue).
    cluster
        .annotations()
        .get(ferry_api::contract::MAINTENANCE_WINDOWS_ANNOTATION)
        .hash(&mut hasher);
    Some(hasher.finish())
}

/// The replica sets a cluster change may concern: those whose rendering
/// may read a cluster's labels (overrides or a `${CLUSTER_LABEL:`
/// placeholder), and those whose rollout is under way (a cluster becoming
/// unreachable no longer holds it).
fn using_labels(
    replica_sets: &Store<ManifestWorkReplicaSet>,
) -> Vec<ObjectRef<ManifestWorkReplicaSet>> {
    replica_sets
        .state()
        .iter()
        .filter(|rs| {
            !rs.spec.overrides.is_empty()
                || serde_json::to_string(&rs.spec.manifest_work_template)
                    .is_ok_and(|t| t.contains("${CLUSTER_LABEL:"))
                || rs.status.as_ref().is_none_or(|s| {
                    !s.conditions.iter().any(|c| {
                        c.type_ == ferry_semantics::contract::PLACEMENT_ROLLED_OUT
                            && c.reason == "Complete"
                    })
                })
        })
        .map(|rs| ObjectRef::from_obj(&**rs))
        .collect()
}

/// Runs the replica set controller until `shutdown` completes, reconciling
/// every replica set again each `sweep`; watch errors are logged and
/// retried with backoff.
pub async fn run_replica_set_controller(
    client: Client,
    health: HealthPoolConfig,
    rollout_metrics: RolloutMetrics,
    sweep: Duration,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let (replica_sets, rs_writer) = reflector::store();
    let (placements, placement_writer) = reflector::store();
    let (decisions, decision_writer) = reflector::store();
    let (works, work_writer) = reflector::store();
    let (clusters, cluster_writer) = reflector::store();
    let (revisions, revision_writer) = reflector::store();
    let (approvals, approval_writer) = reflector::store();
    let (sets, set_writer) = reflector::store();
    let (bindings, binding_writer) = reflector::store();
    let rs_stream = watch(
        Api::<ManifestWorkReplicaSet>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(rs_writer)
    .applied_settled();
    // A replica set created, deleted or given a new spec may hold or free
    // the replica sets depending on it (a cycle closes or opens, a missing
    // dependency appears): its generation, not its status, matters here.
    let dependency_stream = watch(
        Api::<ManifestWorkReplicaSet>::all(client.clone()),
        watcher::Config::default(),
    )
    .touched_settled()
    .predicate_filter(predicates::generation, Default::default());
    // A placement going or coming back, or its status naming new
    // decision objects, changes what may be deleted.
    let placement_stream = watch(
        Api::<Placement>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(placement_writer)
    .touched_settled();
    let decision_stream = watch(
        Api::<PlacementDecision>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(decision_writer)
    .touched_settled();
    let work_stream = watch(
        Api::<ManifestWork>::all(client.clone()),
        watcher::Config::default().labels(REPLICA_SET_LABEL),
    )
    .reflect(work_writer)
    .touched_settled();
    // Cluster labels feed overrides and `${CLUSTER_LABEL:key}`: only a
    // label change triggers, not the status heartbeats.
    let cluster_stream = watch(
        Api::<ManagedCluster>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(cluster_writer)
    .touched_settled()
    .predicate_filter(labels_and_reachability, Default::default());
    // A revision deleted or renumbered by hand is put right at once.
    let revision_stream = watch(
        Api::<ControllerRevision>::all(client.clone()),
        watcher::Config::default().labels(REPLICA_SET_LABEL),
    )
    .reflect(revision_writer)
    .touched_settled();
    // An approval lets its replica set's gate through.
    let approval_stream = watch(
        Api::<RolloutApproval>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(approval_writer)
    .touched_settled();
    // A set or binding change can refuse or admit clusters: the replica
    // sets of the binding's namespace are looked at again (a set's change
    // at the next resync).
    let set_stream = watch(
        Api::<ManagedClusterSet>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(set_writer)
    .touched_settled();
    let binding_stream = watch(
        Api::<ManagedClusterSetBinding>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(binding_writer)
    .touched_settled();
    let ready = StoresReady::all(vec![
        store_ready(&placements),
        store_ready(&decisions),
        store_ready(&works),
        store_ready(&clusters),
        store_ready(&revisions),
        store_ready(&approvals),
        store_ready(&sets),
        store_ready(&bindings),
    ]);
    let context = Arc::new(Context {
        replica_sets: replica_sets.clone(),
        ready,
        sets,
        bindings,
        client,
        placements,
        decisions,
        works,
        clusters,
        revisions,
        approvals,
        refused: Mutex::new(BTreeMap::new()),
        rollbacks: Mutex::new(BTreeMap::new()),
        written: Mutex::new(BTreeMap::new()),
        health: HealthPool::new(health),
        rollout_metrics: rollout_metrics.clone(),
    });
    let label_sets = replica_sets.clone();
    let mapper_sets = replica_sets.clone();
    let placement_sets = replica_sets.clone();
    let binding_sets = replica_sets.clone();
    let dependent_sets = replica_sets.clone();
    let named_sets = replica_sets.clone();
    let controller = Controller::for_stream(rs_stream, replica_sets)
        .watches_stream(decision_stream, move |decision: PlacementDecision| {
            match (decision.namespace(), decision.labels().get(PLACEMENT_LABEL)) {
                (Some(namespace), Some(placement)) => {
                    referring(&mapper_sets, &namespace, placement)
                }
                _ => Vec::new(),
            }
        })
        .watches_stream(
            placement_stream,
            move |placement: Placement| match placement.namespace() {
                Some(namespace) => referring(&placement_sets, &namespace, &placement.name_any()),
                None => Vec::new(),
            },
        )
        .watches_stream(set_stream, |_: ManagedClusterSet| Vec::new())
        .watches_stream(binding_stream, move |binding: ManagedClusterSetBinding| {
            let namespace = binding.namespace();
            binding_sets
                .state()
                .iter()
                .filter(|rs| rs.namespace() == namespace)
                .map(|rs| ObjectRef::from_obj(rs.as_ref()))
                .collect::<Vec<_>>()
        })
        .watches_stream(cluster_stream, move |_: ManagedCluster| {
            using_labels(&label_sets)
        })
        .watches_stream(revision_stream, |revision: ControllerRevision| {
            owner_of(revision.labels())
        })
        .watches_stream(approval_stream, |approval: RolloutApproval| {
            approval
                .namespace()
                .map(|namespace| ObjectRef::new(&approval.spec.replica_set).within(&namespace))
        })
        .watches_stream(dependency_stream, move |rs: ManifestWorkReplicaSet| {
            let all = named_sets.state();
            let namespace = rs.namespace().unwrap_or_default();
            // Those depending on it, and other namespaces' of its name
            // (which of them holds the name may change with it).
            let rivals = all.iter().filter(|other| {
                other.name_any() == rs.name_any() && other.namespace() != rs.namespace()
            });
            dependents(&all, &namespace, &rs.name_any())
                .chain(rivals)
                .map(|other| ObjectRef::from_obj(&**other))
                .collect::<Vec<_>>()
        })
        .watches_stream(work_stream, move |work: ManifestWork| {
            // Its replica set, and those depending on it: its status (say
            // Available) may start their clusters.
            let Some(owner) = owner_of(work.labels()) else {
                return Vec::new();
            };
            let all = dependent_sets.state();
            let namespace = owner.namespace.clone().unwrap_or_default();
            let mut concerned: Vec<_> = dependents(&all, &namespace, &owner.name)
                .map(|rs| ObjectRef::from_obj(&**rs))
                .collect();
            concerned.push(owner);
            concerned
        })
        .reconcile_all_on(resync_every(sweep));
    run_controller(
        "replica set",
        controller,
        None,
        shutdown,
        reconcile,
        error_policy,
        context,
    )
    .await;
    // Another replica leads now (or the hub stops): its gauges are the
    // ones that count.
    rollout_metrics.clear();
}
