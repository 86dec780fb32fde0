//! The revision part of a replica set's status: the current and stable
//! revisions, the rollback a `rollbackAll` did, the bounded fleet summary,
//! and `PlacementRolledOut` saying what the failure strategy did.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_fleet_semantics::rollout::ClusterState;
use ferry_semantics::contract::{DEGRADED, PLACEMENT_ROLLED_OUT, ROLLED_BACK};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;

use super::chosen::Chosen;
use super::fleet_summary::{ClusterReport, fleet_summary};
use super::render::Rendered;
use super::revisions::Revision;
use super::rollback::{Abort, FailureOutcome, held_revision, rolled_back};
use super::rollout::{ResolvedStrategy, cluster_state, resolve};
use super::work_writes::Refused;
use crate::conditions::condition_since;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::{FieldValue, ManifestWork};
use ferry_api::replica_set::{ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus, RevisionRef};
use ferry_semantics::text::first_few;

/// What the revision status is made from.
pub struct RevisionInputs<'a> {
    /// The chosen clusters.
    pub chosen: &'a Chosen,
    /// The generated works, by cluster.
    pub works: &'a BTreeMap<String, Arc<ManifestWork>>,
    /// Each cluster's rendering of the current revision.
    pub rendered: &'a Rendered,
    /// The works the hub API server refused.
    pub refused: &'a Refused,
    /// The stored revisions, oldest first.
    pub revisions: &'a [Revision],
    /// Why each stored revision not among them was refused.
    pub refused_revisions: &'a [String],
    /// The revision the spec asks for.
    pub current: &'a RevisionRef,
    /// The stable revision before this reconcile.
    pub stable: Option<&'a RevisionRef>,
    /// What the failure strategy did.
    pub outcome: &'a FailureOutcome<'a>,
    /// The clusters by name, for their unreachable taint.
    pub clusters: &'a BTreeMap<String, Arc<ManagedCluster>>,
    /// Now.
    pub now: Timestamp,
}

/// A feedback value as JSON text (`3`, `"v1"`, `true`, or the raw JSON).
fn feedback_text(value: &FieldValue) -> Option<String> {
    if let Some(i) = value.integer {
        return Some(i.to_string());
    }
    if let Some(b) = value.boolean {
        return Some(b.to_string());
    }
    if let Some(s) = &value.string {
        return serde_json::to_string(s).ok();
    }
    value.json_raw.clone()
}

/// Each feedback value of `work`, by name (the first manifest reporting a
/// name wins).
fn feedback_of(work: &ManifestWork) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    let manifests = work
        .status
        .as_ref()
        .and_then(|s| s.resource_status.as_ref())
        .map(|r| r.manifests.as_slice())
        .unwrap_or_default();
    for manifest in manifests {
        for value in manifest
            .status_feedback
            .iter()
            .flat_map(|f| f.values.iter())
        {
            if let Some(text) = feedback_text(&value.field_value) {
                values.entry(value.name.clone()).or_insert(text);
            }
        }
    }
    values
}

/// Why a cluster whose work is Failed fails: its Degraded condition, or its
/// progress deadline.
fn failure_of(work: &ManifestWork) -> String {
    work.status
        .as_ref()
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == DEGRADED && c.status == "True")
        })
        .map_or_else(
            || "did not succeed within progressDeadline".to_string(),
            |c| format!("{DEGRADED}: {}: {}", c.reason, c.message),
        )
}

/// `PlacementRolledOut` reason while every reachable cluster is done but
/// some chosen cluster has not run and succeeded on the current revision.
pub const WAITING_FOR_CLUSTERS: &str = "WaitingForClusters";

/// The chosen clusters (of `reports`) that do not run revision `current`
/// and succeeded there: unreachable ones, late joiners, any still going.
fn unconfirmed<'a>(reports: &'a [ClusterReport], current: &str) -> Vec<&'a str> {
    reports
        .iter()
        .filter(|r| {
            r.unreachable
                || r.waiting
                || r.revision.as_deref() != Some(current)
                || r.state != ClusterState::Succeeded
        })
        .map(|r| r.cluster.as_str())
        .collect()
}

/// Where each chosen cluster stands against the current revision, each
/// placement's strategy resolved for its cluster count.
fn cluster_reports(
    rs: &ManifestWorkReplicaSet,
    inputs: &RevisionInputs<'_>,
    rolling_back: bool,
) -> Vec<ClusterReport> {
    // Per placement, its strategy resolved for its cluster count.
    let strategies: BTreeMap<&str, ResolvedStrategy> = rs
        .spec
        .placement_refs
        .iter()
        .filter_map(|r| {
            let total = inputs
                .chosen
                .wanted
                .values()
                .filter(|p| **p == r.name)
                .count();
            Some((r.name.as_str(), resolve(&r.rollout_strategy, total).ok()?))
        })
        .collect();
    inputs
        .chosen
        .wanted
        .iter()
        .map(|(cluster, placement)| {
            let rendering = inputs.rendered.get(cluster);
            let work = inputs.works.get(cluster);
            let mut revision = work.and_then(|w| {
                held_revision(
                    w,
                    &inputs.current.hash,
                    rendering.and_then(|r| r.as_ref().ok()),
                )
            });
            // A refused or unrenderable current revision fails the cluster
            // on the current revision, whatever its work still holds.
            if inputs.refused.contains_key(cluster) || matches!(rendering, Some(Err(_))) {
                revision = Some(inputs.current.hash.clone());
            }
            let (state, failure) = match (inputs.refused.get(cluster), rendering, work) {
                (Some(refusal), _, _) => (ClusterState::Failed, Some(refusal.describe())),
                (_, Some(Err(error)), _) => (ClusterState::Failed, Some(error.to_string())),
                (_, _, Some(work)) => match strategies.get(placement.as_str()) {
                    Some(strategy) => {
                        let (state, _) =
                            cluster_state(Some(work), &work.spec, strategy, inputs.now);
                        let failure = (state == ClusterState::Failed).then(|| failure_of(work));
                        (state, failure)
                    }
                    None => (ClusterState::Progressing, None),
                },
                (_, _, None) => (ClusterState::ToApply, None),
            };
            let unreachable = inputs
                .clusters
                .get(cluster)
                .is_some_and(|c| crate::clusters::taints::is_unreachable(c));
            ClusterReport {
                cluster: cluster.clone(),
                waiting: !rolling_back && revision.as_deref() != Some(&inputs.current.hash),
                revision,
                state,
                failure,
                unreachable,
                feedback: work.map(|w| feedback_of(w)).unwrap_or_default(),
            }
        })
        .collect()
}

/// `PlacementRolledOut`'s message for a rollout aborted `why`, followed by
/// what halted it.
fn aborted(inputs: &RevisionInputs<'_>, why: &Abort, halted_message: &str) -> String {
    match why {
        Abort::NoStable if !inputs.refused_revisions.is_empty() => format!(
            "rollout of revision {} aborted: failureStrategy rollbackAll has no stable revision it trusts to roll back to ({}), so every cluster stays where it is; {halted_message}",
            inputs.current.number,
            first_few(inputs.refused_revisions, "; ")
        ),
        Abort::NoStable => format!(
            "rollout of revision {} aborted: failureStrategy rollbackAll has no stable revision to roll back to (no earlier revision completed), so every cluster stays where it is; {halted_message}",
            inputs.current.number
        ),
        Abort::OtherExecutor { stable, current } => format!(
            "rollout of revision {} aborted: failureStrategy rollbackAll does not roll back, because the stable revision runs as executor {stable} and the template in force as {current} (a rollback writes only as the executor the template in force was admitted with), so every cluster stays where it is; {halted_message}",
            inputs.current.number
        ),
        Abort::Asked => format!(
            "rollout of revision {} aborted (failureStrategy abortAll): every cluster stays where it is; {halted_message}",
            inputs.current.number
        ),
    }
}

/// Fills `status.rollout` (revision, stableRevision, revisions, rollback,
/// failingClusters, feedback) of `rs` from `inputs`, and says in
/// `PlacementRolledOut` what the failure strategy did.
pub fn fill_revision_status(
    rs: &ManifestWorkReplicaSet,
    status: &mut ManifestWorkReplicaSetStatus,
    inputs: &RevisionInputs<'_>,
) {
    let now = inputs.now;
    let generation = rs.meta().generation.unwrap_or(0);
    let previous = rs.status.clone().unwrap_or_default().conditions;
    let mut known: BTreeMap<String, RevisionRef> = inputs
        .revisions
        .iter()
        .map(|r| (r.reference.hash.clone(), r.reference.clone()))
        .collect();
    known.insert(inputs.current.hash.clone(), inputs.current.clone());
    let renumbered = |r: &RevisionRef| RevisionRef {
        number: known.get(&r.hash).map_or(r.number, |k| k.number),
        ..r.clone()
    };
    let rolling_back = matches!(inputs.outcome, FailureOutcome::RollBack { .. });
    let rolled_out = status
        .conditions
        .iter()
        .find(|c| c.type_ == PLACEMENT_ROLLED_OUT);
    let reports = cluster_reports(rs, inputs, rolling_back);
    // Complete, and a new stable revision, only when every chosen cluster
    // runs the current revision and succeeded there: the rollout itself
    // counts an unreachable cluster as done (it must not hold the others),
    // but one that never ran the revision must not make it stable.
    let unconfirmed = unconfirmed(&reports, &inputs.current.hash);
    let rolled_out_true = rolled_out.is_some_and(|c| c.status == "True");
    let complete = !rolling_back && rolled_out_true && unconfirmed.is_empty();
    let waiting_for_clusters = (!rolling_back && rolled_out_true && !unconfirmed.is_empty())
        .then(|| {
            // Every unreachable cluster is among the unconfirmed ones.
            let unreachable = reports.iter().filter(|r| r.unreachable).count();
            condition_since(
                PLACEMENT_ROLLED_OUT,
                false,
                WAITING_FOR_CLUSTERS,
                format!(
                    "revision {} succeeded on {} of {} clusters; {} ({unreachable} of them unreachable) have not run it yet, so it is not the stable revision: {}",
                    inputs.current.number,
                    reports.len() - unconfirmed.len(),
                    reports.len(),
                    unconfirmed.len(),
                    first_few(&unconfirmed, ", ")
                ),
                generation,
                &previous,
                now,
            )
        });
    let stable = if complete {
        Some(inputs.current.clone())
    } else {
        inputs.stable.map(renumbered)
    };
    let feedback_names = rs
        .spec
        .status_summary
        .as_ref()
        .map(|s| s.feedback.clone())
        .unwrap_or_default();
    let summary = fleet_summary(&reports, inputs.current, &known, &feedback_names);
    let rollback = match inputs.outcome {
        FailureOutcome::RollBack { status, to } => {
            let mut status = status.clone();
            status.clusters = rolled_back(inputs.works, &to.reference, &status.at);
            Some(status)
        }
        _ => None,
    };
    // PlacementRolledOut says what the failure strategy did.
    let halted_message = rolled_out.map(|c| c.message.clone()).unwrap_or_default();
    let replaced = match (inputs.outcome, &rollback) {
        (FailureOutcome::RollBack { .. }, Some(r)) => Some(condition_since(
            PLACEMENT_ROLLED_OUT,
            false,
            ROLLED_BACK,
            format!(
                "revision {} ({}) failed, rolled back (failureStrategy rollbackAll): {} clusters put back on stable revision {} ({}); {}",
                r.from.number, r.from.hash, r.clusters, r.to.number, r.to.hash, r.reason
            ),
            generation,
            &previous,
            now,
        )),
        (FailureOutcome::Aborted { why }, _) => Some(condition_since(
            PLACEMENT_ROLLED_OUT,
            false,
            "Failed",
            aborted(inputs, why, &halted_message),
            generation,
            &previous,
            now,
        )),
        _ => waiting_for_clusters,
    };
    if let Some(replaced) = replaced {
        for c in &mut status.conditions {
            if c.type_ == PLACEMENT_ROLLED_OUT {
                *c = replaced.clone();
            }
        }
    }
    let rollout = status.rollout.get_or_insert_default();
    rollout.revision = Some(inputs.current.clone());
    rollout.stable_revision = stable;
    rollout.revisions = summary.revisions;
    rollout.rollback = rollback;
    rollout.failing_clusters = summary.failing_clusters;
    rollout.feedback = summary.feedback;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feedback_values_read_as_json_text() {
        let text = |v: serde_json::Value| {
            feedback_text(&serde_json::from_value::<FieldValue>(v).expect("value"))
        };
        assert_eq!(
            text(serde_json::json!({"type": "Integer", "integer": 3})),
            Some("3".into())
        );
        assert_eq!(
            text(serde_json::json!({"type": "String", "string": "v1"})),
            Some("\"v1\"".into())
        );
        assert_eq!(
            text(serde_json::json!({"type": "Boolean", "boolean": false})),
            Some("false".into())
        );
        assert_eq!(
            text(serde_json::json!({"type": "JsonRaw", "jsonRaw": "[1]"})),
            Some("[1]".into())
        );
        assert_eq!(text(serde_json::json!({"type": "Integer"})), None);
    }
}
