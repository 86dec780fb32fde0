//! The placement controller: keeps each Placement's PlacementDecisions and
//! status up to date from watches of Placements, ManagedClusters and
//! PlacementDecisions. A placement chooses only among the clusters of the
//! ManagedClusterSets bound to its namespace (`crate::cluster_sets`). A
//! cluster change reconciles only the placements it can affect (those whose
//! predicates select it and those that chose it); a binding change the
//! placements of its namespace; a set change those of the namespaces bound
//! to it. A reconcile writes only what changed, so a quiet fleet costs no
//! writes.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use ferry_fleet_semantics::cluster_sets::Eligible;
use ferry_fleet_semantics::decision_rewrite::decision_writes;
use ferry_fleet_semantics::lost_grant::{EmptyCause, GrantOutcome, grant_outcome, hold_message};
use ferry_fleet_semantics::placement::{Candidate, Schedule, Taint, decision_objects, schedule};
use ferry_semantics::contract::{
    ALL_MANAGED_CLUSTER_SETS_EMPTY, NO_MANAGED_CLUSTER_SET_BINDINGS, PLACEMENT_DECISIONS_HELD,
    PLACEMENT_FIELD_MANAGER, PLACEMENT_MISCONFIGURED, PLACEMENT_SATISFIED,
};
use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::Mutex;
use tracing::warn;

use super::compile::{CompiledPlacement, compile};
use crate::cluster_sets::membership::{compile_sets, eligible};
use crate::clusters::taints::taints_for_placement;
use crate::store_ready::{StoresReady, store_ready};
use crate::watch::SettledObjects;
use crate::watch::{resync_every, run_controller, watch};
use ferry_api::cluster_set::{ManagedClusterSet, ManagedClusterSetBinding};
use ferry_api::contract::{
    CONFIRM_EMPTY_DECISIONS_ANNOTATION, DECISION_GROUP_INDEX_LABEL, DECISION_GROUP_NAME_LABEL,
    PLACEMENT_LABEL,
};
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::Condition;
use ferry_api::placement::{DecisionGroupStatus, Placement, PlacementDecision, PlacementStatus};

/// How often a placement is scheduled again without any change seen, so
/// that `Balance` follows other placements' decisions.
const RESYNC: Duration = Duration::from_secs(300);

/// A placement could not be brought up to date; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// The API server refused a write.
    #[error("{action} for placement {namespace}/{placement}: {source}")]
    Write {
        /// What was being written.
        action: String,
        /// Namespace of the placement.
        namespace: String,
        /// The placement's name.
        placement: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The watches have not listed everything yet (or stopped).
    #[error("the cluster and decision caches are not ready")]
    NotReady,
}

/// A placement's decisions: cluster name to (group name, group index).
type Previous = BTreeMap<String, (String, usize)>;

struct Context {
    client: Client,
    clusters: Store<ManagedCluster>,
    decisions: Store<PlacementDecision>,
    /// The decisions this controller last wrote, per placement UID (a
    /// placement made again under the same name starts afresh): the cache
    /// of PlacementDecisions may not show its own latest writes yet, and
    /// scheduling from an older view would move clusters between groups.
    written: Mutex<BTreeMap<String, Previous>>,
    /// The placements, to forget what was written for deleted ones.
    placements: Store<Placement>,
    /// The cluster sets, for which clusters a placement may choose.
    sets: Store<ManagedClusterSet>,
    /// The bindings of sets to namespaces.
    bindings: Store<ManagedClusterSetBinding>,
    /// Publishes the Event of a held grant.
    recorder: Recorder,
    /// Every store above has listed: scheduling against a cache that has
    /// not would drop decisions it simply has not seen yet.
    ready: StoresReady,
}

/// The claims of a cluster as a map, for claim selectors.
fn claims_of(cluster: &ManagedCluster) -> BTreeMap<String, String> {
    cluster
        .status
        .iter()
        .flat_map(|s| s.cluster_claims.iter())
        .map(|c| (c.name.clone(), c.value.clone()))
        .collect()
}

fn epoch_seconds(text: &str) -> Option<i64> {
    text.parse::<Timestamp>().ok().map(|t| t.as_second())
}

/// The decisions of the placement `namespace/name` in the store.
fn decisions_of<'a>(
    decisions: &'a [Arc<PlacementDecision>],
    namespace: &'a str,
    name: &'a str,
) -> impl Iterator<Item = &'a Arc<PlacementDecision>> {
    decisions.iter().filter(move |d| {
        d.namespace().as_deref() == Some(namespace)
            && d.labels().get(PLACEMENT_LABEL).map(String::as_str) == Some(name)
    })
}

/// The condition list `wanted` keeps each condition's transition time when
/// its status did not change.
pub(crate) fn conditions(current: &[Condition], wanted: Vec<Condition>) -> Vec<Condition> {
    wanted
        .into_iter()
        .map(|mut c| {
            if let Some(old) = current.iter().find(|o| o.type_ == c.type_)
                && old.status == c.status
            {
                c.last_transition_time = old.last_transition_time.clone();
            }
            c
        })
        .collect()
}

pub(crate) fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: i64,
) -> Condition {
    Condition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time: Timestamp::now()
            .strftime(ferry_semantics::contract::KUBE_TIME_FORMAT)
            .to_string(),
    }
}

/// Whether two condition lists are equal but for transition times, which
/// the API server rounds.
pub(crate) fn same_conditions(a: &[Condition], b: &[Condition]) -> bool {
    let strip = |list: &[Condition]| {
        list.iter()
            .cloned()
            .map(|mut c| {
                c.last_transition_time.clear();
                c
            })
            .collect::<Vec<_>>()
    };
    strip(a) == strip(b)
}

/// Compares status without the transition times the API server rounds.
fn same_status(a: &PlacementStatus, b: &PlacementStatus) -> bool {
    let strip = |s: &PlacementStatus| {
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_transition_time.clear();
        }
        s
    };
    strip(a) == strip(b)
}

impl Context {
    fn failed(
        &self,
        placement: &Placement,
        action: impl Into<String>,
    ) -> impl FnOnce(kube::Error) -> PlacementError {
        let action = action.into();
        let namespace = placement.namespace().unwrap_or_default();
        let name = placement.name_any();
        move |source| PlacementError::Write {
            action,
            namespace,
            placement: name,
            source,
        }
    }

    async fn write_status(
        &self,
        placement: &Placement,
        status: PlacementStatus,
    ) -> Result<(), PlacementError> {
        let current = placement.status.clone().unwrap_or_default();
        let status = PlacementStatus {
            conditions: conditions(&current.conditions, status.conditions),
            ..status
        };
        if same_status(&current, &status) {
            return Ok(());
        }
        let api: Api<Placement> = Api::namespaced(
            self.client.clone(),
            &placement.namespace().unwrap_or_default(),
        );
        let patch = json!({
            "apiVersion": Placement::api_version(&()),
            "kind": Placement::kind(&()),
            "status": status,
        });
        api.patch_status(
            &placement.name_any(),
            &PatchParams::apply(PLACEMENT_FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(self.failed(placement, "writing the status"))?;
        Ok(())
    }

    /// Schedules `compiled` against the clusters in the cache. The previous
    /// decisions are `written` (what this controller last wrote) when known,
    /// else those in the cache.
    fn schedule(
        &self,
        placement: &Placement,
        compiled: &CompiledPlacement,
        written: Option<&Previous>,
        eligible: &Eligible,
    ) -> Schedule {
        let namespace = placement.namespace().unwrap_or_default();
        let name = placement.name_any();
        let decisions = self.decisions.state();
        let mut input = compiled.input.clone();
        input.now = Timestamp::now().as_second();
        let mut other_decisions: BTreeMap<&str, usize> = BTreeMap::new();
        for decision in decisions.iter() {
            let own = decision.namespace().as_deref() == Some(namespace.as_str())
                && decision.labels().get(PLACEMENT_LABEL) == Some(&name);
            let (group_index, group_name) = decision.decision_group();
            for cluster in decision.cluster_names() {
                if own {
                    input
                        .previous
                        .insert(cluster.to_string(), (group_name.clone(), group_index));
                } else {
                    *other_decisions.entry(cluster).or_default() += 1;
                }
            }
        }
        let candidates: Vec<Candidate> = self
            .clusters
            .state()
            .iter()
            .filter(|c| c.meta().deletion_timestamp.is_none())
            .filter(|c| eligible.allows(&c.name_any()))
            .map(|cluster| {
                let claims = claims_of(cluster);
                let cluster_name = cluster.name_any();
                Candidate {
                    matches_predicates: compiled.selects(cluster.labels(), &claims),
                    named_group: compiled.group_of(cluster.labels(), &claims),
                    taints: taints_for_placement(cluster)
                        .iter()
                        .map(|t| Taint {
                            key: t.key.clone(),
                            value: t.value.clone(),
                            effect: t.effect.clone(),
                            added_at: epoch_seconds(&t.time_added),
                        })
                        .collect(),
                    other_decisions: other_decisions
                        .get(cluster_name.as_str())
                        .copied()
                        .unwrap_or(0),
                    name: cluster_name,
                }
            })
            .collect();
        if let Some(written) = written {
            input.previous = written.clone();
        }
        schedule(&input, &candidates)
    }

    /// Writes the PlacementDecisions of `outcome` and deletes the ones no
    /// longer needed; returns the groups as the status lists them.
    async fn write_decisions(
        &self,
        placement: &Placement,
        outcome: &Schedule,
    ) -> Result<Vec<DecisionGroupStatus>, PlacementError> {
        let namespace = placement.namespace().unwrap_or_default();
        let name = placement.name_any();
        let api: Api<PlacementDecision> = Api::namespaced(self.client.clone(), &namespace);
        let params = PatchParams::apply(PLACEMENT_FIELD_MANAGER).force();
        let owner = placement.controller_owner_ref(&());
        let all = self.decisions.state();
        let existing: BTreeMap<String, &Arc<PlacementDecision>> =
            decisions_of(&all, &namespace, &name)
                .map(|d| (d.name_any(), d))
                .collect();
        // An empty placement still has one (empty) decision object, as in OCM.
        let empty = ferry_fleet_semantics::placement::DecisionGroup {
            index: 0,
            name: String::new(),
            clusters: Vec::new(),
        };
        let groups: Vec<&ferry_fleet_semantics::placement::DecisionGroup> =
            if outcome.groups.is_empty() {
                vec![&empty]
            } else {
                outcome.groups.iter().collect()
            };
        let mut wanted = BTreeSet::new();
        let mut statuses = Vec::new();
        // Each object's clusters, in write order.
        let mut contents: Vec<(String, Vec<String>)> = Vec::new();
        let mut number = 0;
        for group in groups {
            let mut names = Vec::new();
            for clusters in decision_objects(&group.clusters) {
                number += 1;
                let object = format!("{name}-decision-{number}");
                wanted.insert(object.clone());
                names.push(object.clone());
                contents.push((object.clone(), clusters.to_vec()));
                let labels = BTreeMap::from([
                    (PLACEMENT_LABEL.to_string(), name.clone()),
                    (
                        DECISION_GROUP_INDEX_LABEL.to_string(),
                        group.index.to_string(),
                    ),
                    (DECISION_GROUP_NAME_LABEL.to_string(), group.name.clone()),
                ]);
                let current = existing.get(&object);
                let labels_match = current
                    .is_some_and(|d| labels.iter().all(|(k, v)| d.labels().get(k) == Some(v)));
                if !labels_match {
                    let body = json!({
                        "apiVersion": PlacementDecision::api_version(&()),
                        "kind": PlacementDecision::kind(&()),
                        "metadata": {
                            "name": object,
                            "namespace": namespace,
                            "labels": labels,
                            "ownerReferences": owner.iter().collect::<Vec<_>>(),
                        },
                        "spec": {},
                    });
                    api.patch(&object, &params, &Patch::Apply(&body))
                        .await
                        .map_err(
                            self.failed(placement, format!("writing PlacementDecision {object}")),
                        )?;
                }
            }
            statuses.push(DecisionGroupStatus {
                decision_group_index: i32::try_from(group.index).unwrap_or(i32::MAX),
                decision_group_name: group.name.clone(),
                decisions: names,
                clusters_count: i32::try_from(group.clusters.len()).unwrap_or(i32::MAX),
            });
        }
        // Additions before removals: a cluster moving between groups is in
        // some object at every moment, so no reader of the decisions sees
        // it leave (ocm#1203).
        let current: BTreeMap<String, Option<Vec<String>>> = existing
            .iter()
            .map(|(object, d)| {
                let clusters = d
                    .status
                    .as_ref()
                    .map(|_| d.cluster_names().map(str::to_string).collect());
                (object.clone(), clusters)
            })
            .collect();
        for (object, clusters) in decision_writes(&current, &contents) {
            let decisions: Vec<serde_json::Value> = clusters
                .iter()
                .map(|c| json!({"clusterName": c, "reason": ""}))
                .collect();
            let body = json!({
                "apiVersion": PlacementDecision::api_version(&()),
                "kind": PlacementDecision::kind(&()),
                "status": {"decisions": decisions},
            });
            api.patch_status(&object, &params, &Patch::Apply(&body))
                .await
                .map_err(self.failed(placement, format!("writing the decisions of {object}")))?;
        }
        for object in existing.keys().filter(|o| !wanted.contains(*o)) {
            match api.delete(object, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(source) => {
                    return Err(self
                        .failed(placement, format!("deleting PlacementDecision {object}"))(
                        source,
                    ));
                }
            }
        }
        Ok(statuses)
    }
}

async fn reconcile(placement: Arc<Placement>, ctx: Arc<Context>) -> Result<Action, PlacementError> {
    // Scheduling against a cache that has not listed every cluster would
    // drop decisions it simply has not seen yet.
    ctx.ready
        .wait()
        .await
        .map_err(|_| PlacementError::NotReady)?;
    let key = placement.uid().unwrap_or_default();
    if placement.meta().deletion_timestamp.is_some() {
        // Its decisions go with it (owner references).
        ctx.written.lock().await.remove(&key);
        return Ok(Action::await_change());
    }
    let generation = placement.meta().generation.unwrap_or(0);
    let compiled = match compile(&placement.spec) {
        Ok(compiled) => compiled,
        Err(error) => {
            // The decisions stay as they were: a typo must not empty a fleet.
            let mut status = placement.status.clone().unwrap_or_default();
            status.conditions = vec![
                condition(
                    PLACEMENT_MISCONFIGURED,
                    true,
                    "Misconfigured",
                    error.to_string(),
                    generation,
                ),
                condition(
                    PLACEMENT_SATISFIED,
                    false,
                    "Misconfigured",
                    "the spec cannot be used; the previous decisions stand".into(),
                    generation,
                ),
            ];
            ctx.write_status(&placement, status).await?;
            return Ok(Action::await_change());
        }
    };
    let written = ctx.written.lock().await.get(&key).cloned();
    let namespace = placement.namespace().unwrap_or_default();
    let eligible = eligible(
        &compile_sets(&ctx.sets.state()),
        &ctx.bindings.state(),
        &namespace,
        &placement.spec.cluster_sets,
        &ctx.clusters.state(),
    );
    let outcome = ctx.schedule(&placement, &compiled, written.as_ref(), &eligible);
    // Every chosen cluster lost at once holds the last decisions until the
    // grant comes back or the user confirms (issue 31).
    let previous = match &written {
        Some(written) => written.len(),
        None => decisions_of(&ctx.decisions.state(), &namespace, &placement.name_any())
            .flat_map(|d| d.cluster_names().map(str::to_string).collect::<Vec<_>>())
            .collect::<BTreeSet<_>>()
            .len(),
    };
    let cause = match &eligible {
        Eligible::NoBindings => Some(EmptyCause::NoBindings),
        Eligible::AllSetsEmpty(_) => Some(EmptyCause::AllSetsEmpty),
        Eligible::Clusters(_) if outcome.selected == 0 => Some(EmptyCause::NothingMatched),
        Eligible::Clusters(_) => None,
    };
    let confirmed = placement
        .annotations()
        .get(CONFIRM_EMPTY_DECISIONS_ANNOTATION)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if let GrantOutcome::Hold { cause, previous } =
        grant_outcome(previous, outcome.selected, cause, confirmed)
    {
        return hold(&ctx, &placement, cause, previous, generation).await;
    }
    let groups = match ctx.write_decisions(&placement, &outcome).await {
        Ok(groups) => groups,
        Err(error) => {
            // Partly written: the cache is the best account now.
            ctx.written.lock().await.remove(&key);
            return Err(error);
        }
    };
    let now_written: Previous = outcome
        .groups
        .iter()
        .flat_map(|g| {
            g.clusters
                .iter()
                .map(|c| (c.clone(), (g.name.clone(), g.index)))
        })
        .collect();
    {
        let mut written = ctx.written.lock().await;
        written.insert(key, now_written);
        if written.len() > ctx.placements.state().len() {
            let live: BTreeSet<String> = ctx
                .placements
                .state()
                .iter()
                .filter_map(|p| p.uid())
                .collect();
            written.retain(|uid, _| live.contains(uid));
        }
    }
    let wanted = compiled.input.number_of_clusters;
    let (satisfied, reason, message) = match wanted {
        _ if eligible == Eligible::NoBindings => (
            false,
            NO_MANAGED_CLUSTER_SET_BINDINGS,
            no_bindings_message(&namespace, &placement.spec.cluster_sets),
        ),
        _ if matches!(eligible, Eligible::AllSetsEmpty(_)) => (
            false,
            ALL_MANAGED_CLUSTER_SETS_EMPTY,
            match &eligible {
                Eligible::AllSetsEmpty(sets) => format!(
                    "no ManagedCluster belongs to the sets bound to namespace {namespace} that \
                     this placement may use: {}",
                    sets.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
                _ => String::new(),
            },
        ),
        _ if outcome.selected == 0 => (
            false,
            "NoManagedClusterMatched",
            "no ManagedCluster matches the predicates and tolerations".to_string(),
        ),
        Some(n) if outcome.selected < n => (
            false,
            "NotAllDecisionsScheduled",
            format!(
                "{} of {n} clusters chosen: only {} match the predicates and tolerations",
                outcome.selected, outcome.feasible
            ),
        ),
        _ => (
            true,
            "AllDecisionsScheduled",
            format!("{} clusters chosen", outcome.selected),
        ),
    };
    let status = PlacementStatus {
        number_of_selected_clusters: i32::try_from(outcome.selected).unwrap_or(i32::MAX),
        decision_groups: groups,
        conditions: vec![
            condition(
                PLACEMENT_MISCONFIGURED,
                false,
                "Succeedconfigured",
                "the spec is valid".into(),
                generation,
            ),
            condition(PLACEMENT_SATISFIED, satisfied, reason, message, generation),
        ],
    };
    ctx.write_status(&placement, status).await?;
    let next = match outcome.reschedule_at {
        Some(at) => Duration::from_secs(
            u64::try_from(at - Timestamp::now().as_second())
                .unwrap_or(0)
                .max(1),
        )
        .min(RESYNC),
        None => RESYNC,
    };
    Ok(Action::requeue(next))
}

/// Keeps the decisions of `placement` as they are (every one of its
/// `previous` clusters was lost at once for `cause`) and says so: the
/// `PlacementDecisionsHeld` condition and, when the hold begins, a Warning
/// Event. Fails when the status cannot be written.
async fn hold(
    ctx: &Context,
    placement: &Placement,
    cause: EmptyCause,
    previous: usize,
    generation: i64,
) -> Result<Action, PlacementError> {
    let message = hold_message(cause, previous, CONFIRM_EMPTY_DECISIONS_ANNOTATION);
    let current = placement.status.clone().unwrap_or_default();
    let already = current
        .conditions
        .iter()
        .any(|c| c.type_ == PLACEMENT_DECISIONS_HELD && c.status == "True");
    let status = PlacementStatus {
        conditions: vec![
            condition(
                PLACEMENT_MISCONFIGURED,
                false,
                "Succeedconfigured",
                "the spec is valid".into(),
                generation,
            ),
            condition(
                PLACEMENT_SATISFIED,
                false,
                cause.reason(),
                message.clone(),
                generation,
            ),
            condition(
                PLACEMENT_DECISIONS_HELD,
                true,
                cause.reason(),
                message.clone(),
                generation,
            ),
        ],
        ..current
    };
    ctx.write_status(placement, status).await?;
    if !already {
        warn!(placement = %placement.name_any(), %message, "every chosen cluster lost at once; decisions held");
        let event = Event {
            type_: EventType::Warning,
            reason: "DecisionsHeld".into(),
            note: Some(message),
            action: "HoldDecisions".into(),
            secondary: None,
        };
        if let Err(error) = ctx
            .recorder
            .publish(&event, &placement.object_ref(&()))
            .await
        {
            warn!(placement = %placement.name_any(), %error, "the Event of a held grant was not published");
        }
    }
    Ok(Action::requeue(RESYNC))
}

/// Why a placement in `namespace` with `spec.clusterSets` = `wanted` may
/// use no set.
fn no_bindings_message(namespace: &str, wanted: &[String]) -> String {
    if wanted.is_empty() {
        format!(
            "no ManagedClusterSet is bound to namespace {namespace}: create a \
             ManagedClusterSetBinding there (it needs create on managedclustersets/bind)"
        )
    } else {
        format!(
            "none of the sets in spec.clusterSets ({}) is bound to namespace {namespace} and exists",
            wanted.join(", ")
        )
    }
}

fn error_policy(placement: Arc<Placement>, error: &PlacementError, _: Arc<Context>) -> Action {
    warn!(placement = %placement.name_any(), %error, "placement not brought up to date; retrying");
    Action::requeue(Duration::from_secs(2))
}

/// The part of a cluster placements look at; a change elsewhere (the
/// liveness writer's heartbeat) reconciles nothing.
fn placement_view(cluster: &ManagedCluster) -> u64 {
    let mut hasher = DefaultHasher::new();
    cluster.labels().hash(&mut hasher);
    claims_of(cluster).hash(&mut hasher);
    for taint in taints_for_placement(cluster) {
        (&taint.key, &taint.value, &taint.effect, &taint.time_added).hash(&mut hasher);
    }
    cluster
        .meta()
        .deletion_timestamp
        .is_some()
        .hash(&mut hasher);
    hasher.finish()
}

/// The placements a change of `cluster` can affect: those whose predicates
/// select it and those whose decisions name it.
fn affected(
    cluster: &ManagedCluster,
    placements: &Store<Placement>,
    decisions: &Store<PlacementDecision>,
) -> Vec<ObjectRef<Placement>> {
    let name = cluster.name_any();
    let claims = claims_of(cluster);
    let mut out: BTreeSet<(String, String)> = decisions
        .state()
        .iter()
        .filter(|d| d.cluster_names().any(|c| c == name))
        .filter_map(|d| Some((d.namespace()?, d.labels().get(PLACEMENT_LABEL)?.clone())))
        .collect();
    for placement in placements.state() {
        // A placement that does not compile is not scheduled anyway.
        if compile(&placement.spec).is_ok_and(|c| c.selects(cluster.labels(), &claims)) {
            out.insert((
                placement.namespace().unwrap_or_default(),
                placement.name_any(),
            ));
        }
    }
    out.into_iter()
        .map(|(namespace, name)| ObjectRef::new(&name).within(&namespace))
        .collect()
}

/// The placements of the namespaces `wanted` accepts.
fn in_namespaces(
    placements: &Store<Placement>,
    wanted: impl Fn(&str) -> bool,
) -> Vec<ObjectRef<Placement>> {
    placements
        .state()
        .iter()
        .filter(|p| p.namespace().is_some_and(|ns| wanted(&ns)))
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

/// Runs the placement controller until `shutdown` completes, reconciling
/// every placement again each `sweep`. Watch errors never end it: they are
/// logged and retried with backoff.
pub async fn run_placement_controller(
    client: Client,
    sweep: Duration,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let (placements, placement_writer) = reflector::store();
    let (clusters, cluster_writer) = reflector::store();
    let (decisions, decision_writer) = reflector::store();
    let placement_stream = watch(
        Api::<Placement>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(placement_writer)
    .applied_settled();
    // Only changes placements look at pass, and every deletion.
    let cluster_stream = watch(
        Api::<ManagedCluster>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(cluster_writer)
    .scan(BTreeMap::<String, u64>::new(), |seen, event| {
        let passed = match event {
            Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c)) => {
                let view = placement_view(&c);
                (seen.insert(c.name_any(), view) != Some(view)).then_some(Ok(c))
            }
            Ok(watcher::Event::Delete(c)) => {
                seen.remove(&c.name_any());
                Some(Ok(c))
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
            Err(e) => Some(Err(e)),
        };
        std::future::ready(Some(passed))
    })
    .filter_map(std::future::ready);
    let decision_stream = watch(
        Api::<PlacementDecision>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(decision_writer)
    .touched_settled();
    let (sets, set_writer) = reflector::store();
    let (bindings, binding_writer) = reflector::store::<ManagedClusterSetBinding>();
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
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: crate::works::events::REPORTING_CONTROLLER.into(),
            instance: None,
        },
    );
    let ready = StoresReady::all(vec![
        store_ready(&clusters),
        store_ready(&decisions),
        store_ready(&sets),
        store_ready(&bindings),
        store_ready(&placements),
    ]);
    let context = Arc::new(Context {
        ready,
        recorder,
        client,
        clusters,
        decisions: decisions.clone(),
        written: Mutex::new(BTreeMap::new()),
        placements: placements.clone(),
        sets,
        bindings: bindings.clone(),
    });
    let mapper_placements = placements.clone();
    let binding_placements = placements.clone();
    let set_placements = placements.clone();
    let controller = Controller::for_stream(placement_stream, placements)
        .owns_stream(decision_stream)
        .watches_stream(cluster_stream, move |cluster: ManagedCluster| {
            affected(&cluster, &mapper_placements, &decisions)
        })
        .watches_stream(binding_stream, move |binding: ManagedClusterSetBinding| {
            in_namespaces(&binding_placements, |ns| {
                binding.namespace().as_deref() == Some(ns)
            })
        })
        .watches_stream(set_stream, move |set: ManagedClusterSet| {
            let name = set.name_any();
            let bound: BTreeSet<String> = bindings
                .state()
                .iter()
                .filter(|b| b.spec.cluster_set == name)
                .filter_map(|b| b.namespace())
                .collect();
            in_namespaces(&set_placements, |ns| bound.contains(ns))
        })
        .reconcile_all_on(resync_every(sweep));
    run_controller(
        "placement",
        controller,
        None,
        shutdown,
        reconcile,
        error_policy,
        context,
    )
    .await;
}
