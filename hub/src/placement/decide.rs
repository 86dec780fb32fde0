//! Decide: what one reconcile of a placement does, as a pure function of
//! its [`Snapshot`]: the clusters it chooses, whether a lost grant holds
//! the last decisions, the decision objects to write (each with the
//! resourceVersion it was read at, so a leader that decided from an older
//! view writes nothing), and the status.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::{Resource, ResourceExt};

use super::compile::{CompiledPlacement, compile};
use super::gather::{Previous, Snapshot};
use crate::cluster_sets::membership::{compile_sets, eligible};
use crate::clusters::taints::taints_for_placement;
use crate::conditions::{condition_at, conditions};
use ferry_api::contract::{
    CONFIRM_EMPTY_DECISIONS_ANNOTATION, DECISION_GROUP_INDEX_LABEL, DECISION_GROUP_NAME_LABEL,
    PLACEMENT_LABEL,
};
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::placement::{DecisionGroupStatus, Placement, PlacementDecision, PlacementStatus};
use ferry_fleet_semantics::cluster_sets::Eligible;
use ferry_fleet_semantics::decision_rewrite::decision_writes;
use ferry_fleet_semantics::lost_grant::{EmptyCause, GrantOutcome, grant_outcome, hold_message};
use ferry_fleet_semantics::placement::{
    Candidate, DecisionGroup, Schedule, Taint, decision_objects, schedule,
};
use ferry_semantics::contract::{
    ALL_MANAGED_CLUSTER_SETS_EMPTY, NO_MANAGED_CLUSTER_SET_BINDINGS, PLACEMENT_DECISIONS_HELD,
    PLACEMENT_MISCONFIGURED, PLACEMENT_SATISFIED,
};

/// How often a placement is scheduled again without any change seen, so
/// that `Balance` follows other placements' decisions.
pub const RESYNC: Duration = Duration::from_secs(300);

/// What one reconcile does.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// The placement is being deleted: its decisions go with it (owner
    /// references); what was written for it is forgotten.
    Deleted,
    /// The spec cannot be used: the decisions stay as they are (a typo must
    /// not empty a fleet) and the status says why.
    Misconfigured {
        /// The status to write.
        status: PlacementStatus,
    },
    /// Every chosen cluster was lost at once: the decisions stay until the
    /// grant comes back or the user confirms (issue 31).
    Hold {
        /// The status to write (`PlacementDecisionsHeld`).
        status: PlacementStatus,
        /// The Warning Event's message, when the hold begins now.
        announce: Option<String>,
    },
    /// The schedule is written.
    Schedule(Box<Scheduled>),
}

/// A schedule to write.
#[derive(Debug, Clone, PartialEq)]
pub struct Scheduled {
    /// The decision objects' writes.
    pub writes: DecisionWrites,
    /// The decisions as written, remembered for the next reconcile.
    pub written: Previous,
    /// The status to write once the decisions are.
    pub status: PlacementStatus,
    /// When to schedule again (a toleration running out, else [`RESYNC`]).
    pub requeue: Duration,
}

/// The writes that take a placement's PlacementDecisions to a schedule, in
/// order: objects created or relabelled, then their decision lists
/// (additions before removals: a cluster moving between groups is in some
/// object at every moment, so no reader sees it leave, ocm#1203), then the
/// objects no longer wanted deleted. Every write of an existing object
/// carries the resourceVersion it was read at.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecisionWrites {
    /// Objects whose metadata (labels, owner) is written, with their labels;
    /// those not in `versions` are created.
    pub objects: Vec<(String, BTreeMap<String, String>)>,
    /// Decision lists written, in order: the object and its clusters.
    pub lists: Vec<(String, Vec<String>)>,
    /// Objects deleted after the last list.
    pub deletes: Vec<String>,
    /// The resourceVersion each existing object was read at.
    pub versions: BTreeMap<String, String>,
}

/// Decides what the reconcile of `s.placement` does (see the module docs).
pub fn decide(s: &Snapshot) -> Decision {
    let placement = &s.placement;
    if placement.meta().deletion_timestamp.is_some() {
        return Decision::Deleted;
    }
    let current = placement.status.clone().unwrap_or_default();
    let at = |type_: &str, status: bool, reason: &str, message: String| {
        stamped(s, type_, status, reason, message)
    };
    let compiled = match compile(&placement.spec) {
        Ok(compiled) => compiled,
        Err(error) => return misconfigured(s, current, error.to_string()),
    };
    let namespace = placement.namespace().unwrap_or_default();
    let name = placement.name_any();
    let eligible = eligible(
        &compile_sets(&s.sets),
        &s.bindings,
        &namespace,
        &placement.spec.cluster_sets,
        &s.clusters,
    );
    let outcome = schedule_of(s, &compiled, &eligible);
    // Every chosen cluster lost at once holds the last decisions until the
    // grant comes back or the user confirms (issue 31).
    let previous = match &s.written {
        Some(written) => written.len(),
        None => decisions_of(&s.decisions, &namespace, &name)
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
        return held(s, current, cause, previous);
    }
    let (writes, decision_groups) = writes_of(s, &outcome);
    let written: Previous = outcome
        .groups
        .iter()
        .flat_map(|g| {
            g.clusters
                .iter()
                .map(|c| (c.clone(), (g.name.clone(), g.index)))
        })
        .collect();
    let (satisfied, reason, message) = satisfaction(
        compiled.input.number_of_clusters,
        &eligible,
        &outcome,
        &namespace,
        &placement.spec.cluster_sets,
    );
    let wanted = vec![
        spec_valid(s),
        at(PLACEMENT_SATISFIED, satisfied, reason, message),
    ];
    let status = PlacementStatus {
        number_of_selected_clusters: i32::try_from(outcome.selected).unwrap_or(i32::MAX),
        decision_groups,
        conditions: conditions(&current.conditions, wanted),
    };
    let requeue = match outcome.reschedule_at {
        Some(at) => Duration::from_secs(u64::try_from(at - s.now.as_second()).unwrap_or(0).max(1))
            .min(RESYNC),
        None => RESYNC,
    };
    Decision::Schedule(Box::new(Scheduled {
        writes,
        written,
        status,
        requeue,
    }))
}

/// A condition of the snapshot's placement, of its generation, at the
/// snapshot's `now`.
fn stamped(
    s: &Snapshot,
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
) -> ferry_api::manifest_work::Condition {
    let generation = s.placement.meta().generation.unwrap_or(0);
    condition_at(type_, status, reason, message, generation, s.now)
}

/// `PlacementMisconfigured=False`: the spec compiled (OCM's reason).
fn spec_valid(s: &Snapshot) -> ferry_api::manifest_work::Condition {
    stamped(
        s,
        PLACEMENT_MISCONFIGURED,
        false,
        "Succeedconfigured",
        "the spec is valid".into(),
    )
}

/// The decision for a spec that cannot be used (`error`): the previous
/// decisions stand, and the status says why.
fn misconfigured(s: &Snapshot, current: PlacementStatus, error: String) -> Decision {
    let at = |type_: &str, status: bool, reason: &str, message: String| {
        stamped(s, type_, status, reason, message)
    };
    let wanted = vec![
        at(PLACEMENT_MISCONFIGURED, true, "Misconfigured", error),
        at(
            PLACEMENT_SATISFIED,
            false,
            "Misconfigured",
            "the spec cannot be used; the previous decisions stand".into(),
        ),
    ];
    let status = PlacementStatus {
        conditions: conditions(&current.conditions, wanted),
        ..current
    };
    Decision::Misconfigured { status }
}

/// The decision when every chosen cluster is lost at once (`cause`; the
/// `previous` decisions held): they stand, the status says so, and the
/// hold is announced once.
fn held(s: &Snapshot, current: PlacementStatus, cause: EmptyCause, previous: usize) -> Decision {
    let at = |type_: &str, status: bool, reason: &str, message: String| {
        stamped(s, type_, status, reason, message)
    };
    let message = hold_message(cause, previous, CONFIRM_EMPTY_DECISIONS_ANNOTATION);
    let already = current
        .conditions
        .iter()
        .any(|c| c.type_ == PLACEMENT_DECISIONS_HELD && c.status == "True");
    let wanted = vec![
        spec_valid(s),
        at(PLACEMENT_SATISFIED, false, cause.reason(), message.clone()),
        at(
            PLACEMENT_DECISIONS_HELD,
            true,
            cause.reason(),
            message.clone(),
        ),
    ];
    let status = PlacementStatus {
        conditions: conditions(&current.conditions, wanted),
        ..current
    };
    Decision::Hold {
        status,
        announce: (!already).then_some(message),
    }
}

/// Whether the placement got what it asked for, the reason and message.
fn satisfaction(
    wanted: Option<usize>,
    eligible: &Eligible,
    outcome: &Schedule,
    namespace: &str,
    cluster_sets: &[String],
) -> (bool, &'static str, String) {
    match wanted {
        _ if *eligible == Eligible::NoBindings => (
            false,
            NO_MANAGED_CLUSTER_SET_BINDINGS,
            no_bindings_message(namespace, cluster_sets),
        ),
        _ if matches!(eligible, Eligible::AllSetsEmpty(_)) => (
            false,
            ALL_MANAGED_CLUSTER_SETS_EMPTY,
            match eligible {
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
    }
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

/// The claims of a cluster as a map, for claim selectors.
pub fn claims_of(cluster: &ManagedCluster) -> BTreeMap<String, String> {
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

/// The decisions of the placement `namespace/name` among `decisions`.
pub fn decisions_of<'a>(
    decisions: &'a [std::sync::Arc<PlacementDecision>],
    namespace: &'a str,
    name: &'a str,
) -> impl Iterator<Item = &'a std::sync::Arc<PlacementDecision>> {
    decisions.iter().filter(move |d| {
        d.namespace().as_deref() == Some(namespace)
            && d.labels().get(PLACEMENT_LABEL).map(String::as_str) == Some(name)
    })
}

/// Schedules `compiled` against the snapshot's clusters. The previous
/// decisions are those the controller last wrote when it remembers them,
/// else those in the snapshot.
fn schedule_of(s: &Snapshot, compiled: &CompiledPlacement, eligible: &Eligible) -> Schedule {
    let namespace = s.placement.namespace().unwrap_or_default();
    let name = s.placement.name_any();
    let mut input = compiled.input.clone();
    input.now = s.now.as_second();
    let mut other_decisions: BTreeMap<&str, usize> = BTreeMap::new();
    for decision in &s.decisions {
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
    let candidates: Vec<Candidate> = s
        .clusters
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
    if let Some(written) = &s.written {
        input.previous = written.clone();
    }
    schedule(&input, &candidates)
}

/// The writes that take the placement's decision objects in the snapshot
/// to `outcome`, and the groups as the status lists them.
fn writes_of(s: &Snapshot, outcome: &Schedule) -> (DecisionWrites, Vec<DecisionGroupStatus>) {
    let placement: &Placement = &s.placement;
    let namespace = placement.namespace().unwrap_or_default();
    let name = placement.name_any();
    let existing: BTreeMap<String, &std::sync::Arc<PlacementDecision>> =
        decisions_of(&s.decisions, &namespace, &name)
            .map(|d| (d.name_any(), d))
            .collect();
    // An empty placement still has one (empty) decision object, as in OCM.
    let empty = DecisionGroup {
        index: 0,
        name: String::new(),
        clusters: Vec::new(),
    };
    let groups: Vec<&DecisionGroup> = if outcome.groups.is_empty() {
        vec![&empty]
    } else {
        outcome.groups.iter().collect()
    };
    let mut writes = DecisionWrites {
        versions: existing
            .iter()
            .filter_map(|(object, d)| Some((object.clone(), d.resource_version()?)))
            .collect(),
        ..DecisionWrites::default()
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
            let labels_match = existing
                .get(&object)
                .is_some_and(|d| labels.iter().all(|(k, v)| d.labels().get(k) == Some(v)));
            if !labels_match {
                writes.objects.push((object, labels));
            }
        }
        statuses.push(DecisionGroupStatus {
            decision_group_index: i32::try_from(group.index).unwrap_or(i32::MAX),
            decision_group_name: group.name.clone(),
            decisions: names,
            clusters_count: i32::try_from(group.clusters.len()).unwrap_or(i32::MAX),
        });
    }
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
    writes.lists = decision_writes(&current, &contents);
    writes.deletes = existing
        .keys()
        .filter(|o| !wanted.contains(*o))
        .cloned()
        .collect();
    (writes, statuses)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::replica_set::decide::tests::everything;

    fn now() -> Timestamp {
        "2026-12-04T02:00:00Z".parse().expect("time")
    }

    fn placement(spec: serde_json::Value, status: serde_json::Value) -> Arc<Placement> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "cluster.ferry.dev/v1alpha1", "kind": "Placement",
                "metadata": {"name": "p", "namespace": "ns", "uid": "u", "generation": 3,
                             "resourceVersion": "100"},
                "spec": spec, "status": status,
            }))
            .expect("placement"),
        )
    }

    fn cluster(name: &str, env: &str) -> Arc<ManagedCluster> {
        Arc::new(
            serde_json::from_value(json!({"apiVersion": "work.ferry.dev/v1alpha1",
                "kind": "ManagedCluster", "metadata": {"name": name, "labels": {"env": env}},
                "spec": {}, "status": {"connected": true, "lastSeenTime": "2026-12-04T01:59:00Z"}}))
            .expect("cluster"),
        )
    }

    /// The placement's decision object `name` (read at `version`) naming
    /// `clusters` in group 0.
    fn decision(name: &str, version: &str, clusters: &[&str]) -> Arc<PlacementDecision> {
        let decisions: Vec<serde_json::Value> = clusters
            .iter()
            .map(|c| json!({"clusterName": c, "reason": ""}))
            .collect();
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "cluster.ferry.dev/v1alpha1", "kind": "PlacementDecision",
                "metadata": {"name": name, "namespace": "ns", "resourceVersion": version,
                    "labels": {PLACEMENT_LABEL: "p", DECISION_GROUP_INDEX_LABEL: "0",
                               DECISION_GROUP_NAME_LABEL: ""}},
                "spec": {}, "status": {"decisions": decisions},
            }))
            .expect("decision"),
        )
    }

    fn env_a() -> serde_json::Value {
        json!({"predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "a"}}}}]})
    }

    fn snapshot(
        placement: Arc<Placement>,
        clusters: Vec<Arc<ManagedCluster>>,
        decisions: Vec<Arc<PlacementDecision>>,
        bound: bool,
    ) -> Snapshot {
        let (set, binding) = everything();
        Snapshot {
            placement,
            clusters,
            decisions,
            sets: vec![set],
            bindings: if bound { vec![binding] } else { Vec::new() },
            written: None,
            now: now(),
        }
    }

    fn condition_of<'a>(status: &'a PlacementStatus, type_: &str) -> &'a str {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.reason.as_str())
            .unwrap_or_default()
    }

    #[test]
    fn a_spec_that_cannot_be_used_keeps_the_decisions_and_says_why() {
        let bad = json!({"predicates": [{"requiredClusterSelector": {"labelSelector":
            {"matchExpressions": [{"key": "env", "operator": "Sometimes", "values": ["a"]}]}}}]});
        let s = snapshot(
            placement(bad, json!({})),
            vec![cluster("c1", "a")],
            vec![decision("p-decision-1", "7", &["c1"])],
            true,
        );
        let Decision::Misconfigured { status } = decide(&s) else {
            panic!("misconfigured expected");
        };
        assert_eq!(
            condition_of(&status, PLACEMENT_MISCONFIGURED),
            "Misconfigured"
        );
        assert_eq!(condition_of(&status, PLACEMENT_SATISFIED), "Misconfigured");
    }

    #[test]
    fn every_chosen_cluster_lost_at_once_holds_the_decisions_and_announces_it_once() {
        let s = snapshot(
            placement(env_a(), json!({})),
            vec![cluster("c1", "a"), cluster("c2", "a")],
            vec![decision("p-decision-1", "7", &["c1", "c2"])],
            false,
        );
        let Decision::Hold { status, announce } = decide(&s) else {
            panic!("hold expected");
        };
        assert_eq!(
            condition_of(&status, PLACEMENT_DECISIONS_HELD),
            EmptyCause::NoBindings.reason()
        );
        assert!(announce.is_some_and(|m| m.contains(CONFIRM_EMPTY_DECISIONS_ANNOTATION)));
        // Already held: said once.
        let held = snapshot(
            placement(env_a(), serde_json::to_value(&status).expect("status")),
            s.clusters.clone(),
            s.decisions.clone(),
            false,
        );
        let Decision::Hold { announce, .. } = decide(&held) else {
            panic!("hold expected");
        };
        assert_eq!(announce, None);
    }

    #[test]
    fn every_write_of_an_object_read_carries_the_version_it_was_read_at() {
        // c1 stays, c2 leaves (relabelled), c3 joins; a stray object goes.
        let s = snapshot(
            placement(env_a(), json!({})),
            vec![cluster("c1", "a"), cluster("c2", "b"), cluster("c3", "a")],
            vec![
                decision("p-decision-1", "7", &["c1", "c2"]),
                decision("p-decision-9", "8", &[]),
            ],
            true,
        );
        let Decision::Schedule(scheduled) = decide(&s) else {
            panic!("schedule expected");
        };
        let writes = &scheduled.writes;
        assert_eq!(
            writes.versions,
            BTreeMap::from([
                ("p-decision-1".to_string(), "7".to_string()),
                ("p-decision-9".to_string(), "8".to_string()),
            ])
        );
        assert!(writes.objects.is_empty(), "{:?}", writes.objects);
        // Additions first: c3 is added before c2 is removed.
        assert_eq!(
            writes.lists,
            vec![
                (
                    "p-decision-1".to_string(),
                    vec!["c1".to_string(), "c2".to_string(), "c3".to_string()]
                ),
                (
                    "p-decision-1".to_string(),
                    vec!["c1".to_string(), "c3".to_string()]
                ),
            ]
        );
        assert_eq!(writes.deletes, vec!["p-decision-9".to_string()]);
        assert_eq!(scheduled.status.number_of_selected_clusters, 2);
        assert_eq!(
            condition_of(&scheduled.status, PLACEMENT_SATISFIED),
            "AllDecisionsScheduled"
        );
        assert_eq!(scheduled.requeue, RESYNC);
        // A first schedule creates its object: no version to carry.
        let first = snapshot(
            placement(env_a(), json!({})),
            vec![cluster("c1", "a")],
            Vec::new(),
            true,
        );
        let Decision::Schedule(first) = decide(&first) else {
            panic!("schedule expected");
        };
        assert_eq!(first.writes.objects.len(), 1);
        assert!(first.writes.versions.is_empty());
    }

    #[test]
    fn a_deleted_placement_is_forgotten_and_nothing_written() {
        let mut deleted = (*placement(env_a(), json!({}))).clone();
        deleted.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
        let s = snapshot(
            Arc::new(deleted),
            vec![cluster("c1", "a")],
            Vec::new(),
            true,
        );
        assert_eq!(decide(&s), Decision::Deleted);
    }

    proptest! {
        /// Whatever the clusters' labels and the decisions before: the same
        /// snapshot gives the same decision; every cluster chosen before
        /// and after is in some decision object after every write (no
        /// reader sees it leave); after the last write and deletion the
        /// objects name exactly the chosen clusters; and every object the
        /// decision read is written with the version it was read at.
        #[test]
        fn decisions_move_without_a_gap_and_end_exactly_chosen(
            envs in proptest::collection::vec(prop_oneof![Just("a"), Just("b")], 1..12),
            before in proptest::collection::vec(any::<bool>(), 1..12),
        ) {
            let clusters: Vec<Arc<ManagedCluster>> = envs
                .iter()
                .enumerate()
                .map(|(i, env)| cluster(&format!("c{i:02}"), env))
                .collect();
            let previous: Vec<String> = before
                .iter()
                .enumerate()
                .filter(|(i, chosen)| **chosen && *i < envs.len())
                .map(|(i, _)| format!("c{i:02}"))
                .collect();
            let names: Vec<&str> = previous.iter().map(String::as_str).collect();
            let s = snapshot(
                placement(env_a(), json!({})),
                clusters,
                vec![decision("p-decision-1", "7", &names)],
                true,
            );
            let decision = decide(&s);
            prop_assert_eq!(&decision, &decide(&s));
            let chosen: BTreeSet<String> = envs
                .iter()
                .enumerate()
                .filter(|(_, env)| **env == "a")
                .map(|(i, _)| format!("c{i:02}"))
                .collect();
            let Decision::Schedule(scheduled) = decision else {
                // Nothing matches: held only if something was chosen before.
                prop_assert!(chosen.is_empty() && !previous.is_empty());
                return Ok(());
            };
            let writes = &scheduled.writes;
            prop_assert_eq!(writes.versions.get("p-decision-1").map(String::as_str), Some("7"));
            let mut held: BTreeMap<String, Vec<String>> =
                BTreeMap::from([("p-decision-1".to_string(), previous.clone())]);
            let staying: Vec<&String> = previous.iter().filter(|c| chosen.contains(*c)).collect();
            for (object, list) in &writes.lists {
                held.insert(object.clone(), list.clone());
                for cluster in &staying {
                    prop_assert!(held.values().any(|l| l.contains(cluster)), "{} left", cluster);
                }
            }
            for object in &writes.deletes {
                held.remove(object);
            }
            let after: BTreeSet<String> = held.into_values().flatten().collect();
            prop_assert_eq!(after, chosen);
        }
    }
}
