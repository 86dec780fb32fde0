//! The bounded fleet summary of a replica set's status: per revision some
//! cluster holds, its clusters by state; the first failing clusters (by
//! name) with their reasons; for each feedback name the status summary
//! asks for, the most common values with their counts. Its size is bounded
//! whatever the fleet's: the per-cluster detail stays on the works.

use std::collections::BTreeMap;

use ferry_fleet_semantics::rollout::ClusterState;
use ferry_semantics::text::prefix_within;

use ferry_api::replica_set::{
    FailingCluster, FeedbackSummary, FeedbackValueCount, MAX_SUMMARY_ENTRIES, RevisionRef,
    RevisionSummary, RolloutCounts,
};

/// Longest failure reason kept in the summary, in bytes.
pub const MAX_REASON: usize = 256;

/// One cluster as the summary counts it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterReport {
    /// The cluster.
    pub cluster: String,
    /// The revision hash its work holds (None: no work, or unknown).
    pub revision: Option<String>,
    /// Where it stands on that revision (`ToApply` when it has no work).
    pub state: ClusterState,
    /// Why it fails, when `state` is Failed.
    pub failure: Option<String>,
    /// Whether it waits for the current revision (the rollout will write
    /// it): counted as `toApply` of the current revision.
    pub waiting: bool,
    /// Whether its agent is not connected: counted `unreachable` instead
    /// of by state.
    pub unreachable: bool,
    /// Its work's feedback values by name, as JSON text.
    pub feedback: BTreeMap<String, String>,
}

/// The summary's three parts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetSummary {
    /// Per revision, newest (highest number) first.
    pub revisions: Vec<RevisionSummary>,
    /// The first [`MAX_SUMMARY_ENTRIES`] failing clusters by name.
    pub failing_clusters: Vec<FailingCluster>,
    /// Per feedback name, in the order asked.
    pub feedback: Vec<FeedbackSummary>,
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// `text` cut to at most `max` bytes on a character boundary, marked with
/// an ellipsis when cut.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    format!("{}...", prefix_within(text, max.saturating_sub(3)))
}

/// Summarises `reports` against the `current` revision; `known` gives
/// each known revision hash its reference (an unknown hash counts as
/// number 0, without a digest), and
/// `feedback_names` the feedback whose values are counted. Bounded: one
/// entry per revision held (protected from pruning, so few), at most
/// [`MAX_SUMMARY_ENTRIES`] failing clusters with reasons of at most
/// [`MAX_REASON`] bytes, and at most [`MAX_SUMMARY_ENTRIES`] values (each
/// clipped to [`MAX_REASON`] bytes) per feedback name.
pub fn fleet_summary(
    reports: &[ClusterReport],
    current: &RevisionRef,
    known: &BTreeMap<String, RevisionRef>,
    feedback_names: &[String],
) -> FleetSummary {
    let mut per_revision: BTreeMap<&str, RolloutCounts> = BTreeMap::new();
    per_revision.entry(current.hash.as_str()).or_default();
    for report in reports {
        if report.waiting {
            let c = per_revision.entry(current.hash.as_str()).or_default();
            c.to_apply += 1;
            c.total += 1;
        }
        let Some(revision) = report.revision.as_deref() else {
            continue;
        };
        let c = per_revision.entry(revision).or_default();
        c.total += 1;
        if report.unreachable {
            c.unreachable += 1;
            continue;
        }
        match report.state {
            ClusterState::ToApply => c.to_apply += 1,
            ClusterState::Progressing => c.progressing += 1,
            ClusterState::Succeeded => c.succeeded += 1,
            ClusterState::Failed => c.failed += 1,
        }
    }
    let mut revisions: Vec<RevisionSummary> = per_revision
        .into_iter()
        .map(|(hash, clusters)| RevisionSummary {
            revision: known.get(hash).cloned().unwrap_or_else(|| RevisionRef {
                number: 0,
                hash: hash.to_string(),
                digest: None,
            }),
            clusters,
        })
        .collect();
    revisions.sort_by_key(|r| std::cmp::Reverse(r.revision.number));
    let mut failing: Vec<&ClusterReport> = reports
        .iter()
        .filter(|r| r.state == ClusterState::Failed)
        .collect();
    failing.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    let failing_clusters = failing
        .into_iter()
        .take(MAX_SUMMARY_ENTRIES)
        .map(|r| FailingCluster {
            cluster: r.cluster.clone(),
            revision: r
                .revision
                .as_deref()
                .and_then(|h| known.get(h))
                .map_or(0, |k| k.number),
            reason: clip(r.failure.as_deref().unwrap_or("failed"), MAX_REASON),
        })
        .collect();
    let feedback = feedback_names
        .iter()
        .map(|name| {
            let mut values: BTreeMap<&str, usize> = BTreeMap::new();
            for report in reports {
                if let Some(value) = report.feedback.get(name) {
                    *values.entry(value.as_str()).or_default() += 1;
                }
            }
            let mut ranked: Vec<(&str, usize)> = values.into_iter().collect();
            // Most clusters first; equal counts by value, so the status
            // does not change order from one reconcile to the next.
            ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            let other: usize = ranked.iter().skip(MAX_SUMMARY_ENTRIES).map(|v| v.1).sum();
            FeedbackSummary {
                name: name.clone(),
                values: ranked
                    .into_iter()
                    .take(MAX_SUMMARY_ENTRIES)
                    .map(|(value, clusters)| FeedbackValueCount {
                        value: clip(value, MAX_REASON),
                        clusters: count(clusters),
                    })
                    .collect(),
                other_clusters: count(other),
            }
        })
        .collect();
    FleetSummary {
        revisions,
        failing_clusters,
        feedback,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::manifest_work::Condition;
    use ferry_api::replica_set::{
        ManifestWorkReplicaSetStatus, ManifestWorkSummary, PlacementSummary, RollbackStatus,
        RolloutStatus,
    };

    fn report(cluster: &str, revision: Option<&str>, state: ClusterState) -> ClusterReport {
        ClusterReport {
            cluster: cluster.into(),
            revision: revision.map(String::from),
            state,
            failure: None,
            waiting: false,
            unreachable: false,
            feedback: BTreeMap::new(),
        }
    }

    fn r(number: i64, hash: &str) -> RevisionRef {
        RevisionRef {
            number,
            hash: hash.into(),
            digest: None,
        }
    }

    #[test]
    fn clusters_are_counted_under_the_revision_they_hold() {
        let mut waiting = report("d", Some("old"), ClusterState::Succeeded);
        waiting.waiting = true;
        let mut away = report("e", Some("new"), ClusterState::Progressing);
        away.unreachable = true;
        let mut failed = report("b", Some("new"), ClusterState::Failed);
        failed.failure = Some("Degraded: CrashLoop".into());
        let reports = [
            report("a", Some("new"), ClusterState::Succeeded),
            failed,
            report("c", Some("new"), ClusterState::Progressing),
            waiting,
            away,
        ];
        let known = BTreeMap::from([
            ("old".to_string(), r(1, "old")),
            ("new".to_string(), r(2, "new")),
        ]);
        let summary = fleet_summary(&reports, &r(2, "new"), &known, &[]);
        assert_eq!(summary.revisions.len(), 2);
        assert_eq!(summary.revisions[0].revision, r(2, "new"));
        assert_eq!(
            summary.revisions[0].clusters,
            RolloutCounts {
                total: 5,
                to_apply: 1,
                progressing: 1,
                succeeded: 1,
                failed: 1,
                unreachable: 1,
            }
        );
        assert_eq!(summary.revisions[1].revision, r(1, "old"));
        assert_eq!(summary.revisions[1].clusters.succeeded, 1);
        assert_eq!(
            summary.failing_clusters,
            vec![FailingCluster {
                cluster: "b".into(),
                revision: 2,
                reason: "Degraded: CrashLoop".into()
            }]
        );
    }

    #[test]
    fn failing_clusters_are_the_first_by_name_and_reasons_are_clipped() {
        let reports: Vec<ClusterReport> = (0..25)
            .rev()
            .map(|i| {
                let mut r = report(&format!("c{i:02}"), None, ClusterState::Failed);
                r.failure = Some("é".repeat(400));
                r
            })
            .collect();
        let summary = fleet_summary(&reports, &r(1, "h"), &BTreeMap::new(), &[]);
        let names: Vec<&str> = summary
            .failing_clusters
            .iter()
            .map(|f| f.cluster.as_str())
            .collect();
        assert_eq!(
            names,
            (0..10).map(|i| format!("c{i:02}")).collect::<Vec<_>>()
        );
        assert!(
            summary
                .failing_clusters
                .iter()
                .all(|f| f.reason.len() <= MAX_REASON && f.revision == 0)
        );
    }

    #[test]
    fn feedback_keeps_the_most_common_values_and_counts_the_rest() {
        let reports: Vec<ClusterReport> = (0..30)
            .map(|i| {
                let mut r = report(&format!("c{i}"), Some("h"), ClusterState::Succeeded);
                // 3 clusters report 0, 2 report 1, the others one value each.
                let value = match i {
                    0..3 => 0,
                    3..5 => 1,
                    n => n,
                };
                r.feedback.insert("readyReplicas".into(), value.to_string());
                r
            })
            .collect();
        let summary = fleet_summary(
            &reports,
            &r(1, "h"),
            &BTreeMap::new(),
            &["readyReplicas".into(), "absent".into()],
        );
        let ready = &summary.feedback[0];
        assert_eq!(ready.values.len(), MAX_SUMMARY_ENTRIES);
        assert_eq!(
            (ready.values[0].value.as_str(), ready.values[0].clusters),
            ("0", 3)
        );
        assert_eq!(
            (ready.values[1].value.as_str(), ready.values[1].clusters),
            ("1", 2)
        );
        let listed: i32 = ready.values.iter().map(|v| v.clusters).sum();
        assert_eq!(listed + ready.other_clusters, 30);
        assert_eq!(summary.feedback[1].values.len(), 0);
        assert_eq!(summary.feedback[1].other_clusters, 0);
    }

    /// The whole status of a replica set over 10,000 clusters with long
    /// names, many failures and a distinct feedback value each stays far
    /// below etcd's object limit.
    #[test]
    fn the_status_of_ten_thousand_clusters_stays_under_100_kib() {
        let long = "x".repeat(200);
        let hashes = ["0000000001", "0000000002", "0000000003"];
        let reports: Vec<ClusterReport> = (0..10_000)
            .map(|i| {
                let state = match i % 4 {
                    0 => ClusterState::Succeeded,
                    1 => ClusterState::Progressing,
                    2 => ClusterState::Failed,
                    _ => ClusterState::ToApply,
                };
                ClusterReport {
                    cluster: format!("cluster-{long}-{i:05}"),
                    revision: (state != ClusterState::ToApply).then(|| hashes[i % 3].to_string()),
                    state,
                    failure: Some(format!(
                        "Degraded: {} {long}",
                        "a very long message".repeat(20)
                    )),
                    waiting: state == ClusterState::ToApply,
                    unreachable: i % 97 == 0,
                    feedback: (0..8)
                        .map(|f| (format!("feedback-{f}"), format!("\"value-{long}-{i}-{f}\"")))
                        .collect(),
                }
            })
            .collect();
        let known: BTreeMap<String, RevisionRef> = hashes
            .iter()
            .enumerate()
            .map(|(n, h)| (h.to_string(), r(i64::try_from(n).unwrap_or(0) + 1, h)))
            .collect();
        let names: Vec<String> = (0..8).map(|f| format!("feedback-{f}")).collect();
        let started = std::time::Instant::now();
        let summary = fleet_summary(&reports, &r(3, hashes[2]), &known, &names);
        let took = started.elapsed();
        let counted: i32 = summary.revisions.iter().map(|r| r.clusters.total).sum();
        assert_eq!(counted, 10_000);
        let counts = ManifestWorkSummary {
            total: 10_000,
            ..ManifestWorkSummary::default()
        };
        let status = ManifestWorkReplicaSetStatus {
            conditions: vec![Condition {
                type_: "PlacementRolledOut".into(),
                status: "False".into(),
                reason: "RolledBack".into(),
                message: "m".repeat(1024),
                observed_generation: 7,
                last_transition_time: "2026-11-27T10:00:00Z".into(),
            }],
            summary: counts.clone(),
            placement_summary: (0..4)
                .map(|p| PlacementSummary {
                    name: format!("placement-{p}-{long}"),
                    summary: counts.clone(),
                })
                .collect(),
            rollout: Some(RolloutStatus {
                revision: Some(r(3, hashes[2])),
                stable_revision: Some(r(1, hashes[0])),
                revisions: summary.revisions,
                placements: Vec::new(),
                rollback: Some(RollbackStatus {
                    from: r(3, hashes[2]),
                    to: r(1, hashes[0]),
                    reason: "r".repeat(1024),
                    at: "2026-11-27T10:00:00Z".into(),
                    clusters: 5000,
                }),
                failing_clusters: summary.failing_clusters,
                feedback: summary.feedback,
            }),
            // The deletion budget names at most ten waiting clusters.
            deletion_budget: Some(ferry_api::replica_set::DeletionBudgetStatus {
                window_start: "2026-11-27T10:00:00Z".into(),
                base: 10_000,
                deleted: 2_500,
                waiting: 7_500,
                waiting_clusters: (0..ferry_api::replica_set::MAX_SUMMARY_ENTRIES)
                    .map(|i| format!("cluster-{i}-{long}"))
                    .collect(),
                removed_clusters: (0..100).map(|i| format!("removed-{i}-{long}")).collect(),
                last_release: Some(ferry_api::replica_set::DeletionRelease {
                    value: "r".repeat(1024),
                    at: "2026-11-27T10:00:00Z".into(),
                    deleted: 7_500,
                }),
            }),
        };
        let size = serde_json::to_vec(&status).expect("serialises").len();
        println!(
            "fleet summary of 10000 clusters: status {size} bytes ({:.1} KiB), aggregated in {took:?}",
            size as f64 / 1024.0
        );
        assert!(size < 100 * 1024, "{size} bytes");
    }
}
