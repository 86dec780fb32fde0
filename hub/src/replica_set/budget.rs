//! Reconcile phase 4 too: what a replica set removes, and how fast.
//! Removals the author's own spec asks for (a placement taken out of
//! `placementRefs`) are intended: they go at the pace of the spec's rollout
//! strategy (`ferry_fleet_semantics::deletion_budget::intended_now`).
//! Everything else (cluster labels, taints, sets, bindings, a deleted
//! ManagedCluster) is an accident until someone says otherwise: the
//! deletion budget (`ferry_fleet_semantics::deletion_budget`) lets a share
//! go and holds the rest until a release. The window is recorded in the
//! status before its deletions are made, so a new leader continues it.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_fleet_semantics::deletion_budget::{
    Budget, Recorded, Verdict, Window, deletions_now, intended_now, waiting_message,
};
use k8s_openapi::jiff::Timestamp;
use kube::{Resource, ResourceExt};

use super::rollout::resolve;
use crate::conditions::condition_since;
use ferry_api::contract::{PLACEMENT_NAME_LABEL, RELEASE_DELETIONS_ANNOTATION};
use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::{
    DeletionBudgetStatus, DeletionRelease, MAX_RELEASE_VALUE, MAX_SUMMARY_ENTRIES,
    ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus,
};
use ferry_semantics::contract::{DELETIONS_WAITING, KUBE_TIME_FORMAT};
use ferry_semantics::text::prefix_within;

/// What one reconcile removes: the budget's verdict on accidental
/// removals, and the intended ones that go now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removals {
    /// The budget's verdict on removals the spec did not ask for.
    pub budget: Verdict,
    /// Removals the spec asks for that go now (at the rollout's pace).
    pub intended: Vec<String>,
    /// Removals the spec asks for that wait for the ones in flight.
    pub intended_later: usize,
}

impl Removals {
    /// Every cluster whose work is deleted now, by name.
    pub fn delete(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .budget
            .delete
            .iter()
            .chain(&self.intended)
            .cloned()
            .collect();
        all.sort();
        all
    }
}

/// What `rs`'s status recorded of its budget.
pub fn recorded(rs: &ManifestWorkReplicaSet) -> Recorded {
    let Some(budget) = rs.status.as_ref().and_then(|s| s.deletion_budget.as_ref()) else {
        return Recorded::default();
    };
    Recorded {
        window: budget
            .window_start
            .parse::<Timestamp>()
            .ok()
            .map(|start| Window {
                start: start.as_second(),
                base: usize::try_from(budget.base).unwrap_or(0),
                deleted: usize::try_from(budget.deleted).unwrap_or(0),
            }),
        waiting: usize::try_from(budget.waiting).unwrap_or(0),
        release: budget.last_release.as_ref().map(|r| r.value.clone()),
        removed: budget.removed_clusters.clone(),
    }
}

/// Whether removing `work` is the author's intent: its placement (as the
/// hub labelled it) is no longer among `rs`'s `placementRefs`. A work
/// without the label is not known to be intended.
fn intended(rs: &ManifestWorkReplicaSet, work: &ManifestWork) -> bool {
    work.labels()
        .get(PLACEMENT_NAME_LABEL)
        .is_some_and(|p| !rs.spec.placement_refs.iter().any(|r| &r.name == p))
}

/// The pace of intended removals: the smallest `maxConcurrency` of `rs`'s
/// rollout strategies, resolved for `count` clusters (All: every one).
fn pace(rs: &ManifestWorkReplicaSet, count: usize) -> usize {
    rs.spec
        .placement_refs
        .iter()
        .filter_map(|r| resolve(&r.rollout_strategy, count).ok())
        .map(|s| s.limits.max_concurrency)
        .min()
        .unwrap_or(count)
}

/// Which of the `existing` works whose cluster is not `wanted` go now
/// (none unless `may_delete`), as of `now`. Pure.
pub fn removals(
    rs: &ManifestWorkReplicaSet,
    existing: &BTreeMap<String, Arc<ManifestWork>>,
    wanted: &BTreeMap<String, String>,
    may_delete: bool,
    now: Timestamp,
) -> Removals {
    let (mut accidents, mut intents) = (Vec::new(), Vec::new());
    for (cluster, work) in existing {
        if !may_delete || wanted.contains_key(cluster) || work.meta().deletion_timestamp.is_some() {
            continue;
        }
        if intended(rs, work) {
            intents.push(cluster.clone());
        } else {
            accidents.push(cluster.clone());
        }
    }
    let in_flight = existing
        .values()
        .filter(|w| w.meta().deletion_timestamp.is_some() && intended(rs, w))
        .count();
    let intended = intended_now(&intents, pace(rs, intents.len() + in_flight), in_flight);
    let live = existing
        .values()
        .filter(|w| w.meta().deletion_timestamp.is_none())
        .count();
    let recorded = recorded(rs);
    // Of the clusters the window removed, those with a work made since it
    // opened are back (a work the cache still shows from before the
    // removal is not).
    let returned: Vec<String> = recorded
        .window
        .map(|w| {
            recorded
                .removed
                .iter()
                .filter(|c| {
                    existing.get(*c).is_some_and(|work| {
                        work.meta().deletion_timestamp.is_none()
                            && work
                                .meta()
                                .creation_timestamp
                                .as_ref()
                                .is_some_and(|t| t.0.as_second() >= w.start)
                    })
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let budget = deletions_now(
        &Budget::default(),
        &recorded,
        live - intents.len(),
        &accidents,
        &returned,
        // As the status can hold it (and so compare it next time).
        rs.annotations()
            .get(RELEASE_DELETIONS_ANNOTATION)
            .map(|v| prefix_within(v, MAX_RELEASE_VALUE)),
        now.as_second(),
    );
    Removals {
        intended_later: intents.len() - intended.len(),
        intended,
        budget,
    }
}

fn time(second: i64) -> String {
    Timestamp::from_second(second)
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .strftime(KUBE_TIME_FORMAT)
        .to_string()
}

fn window_status(
    window: Window,
    waiting: &[String],
    removed: &[String],
    release: Option<DeletionRelease>,
) -> DeletionBudgetStatus {
    DeletionBudgetStatus {
        window_start: time(window.start),
        base: i32::try_from(window.base).unwrap_or(i32::MAX),
        deleted: i32::try_from(window.deleted).unwrap_or(i32::MAX),
        waiting: i32::try_from(waiting.len()).unwrap_or(i32::MAX),
        waiting_clusters: waiting.iter().take(MAX_SUMMARY_ENTRIES).cloned().collect(),
        removed_clusters: removed.to_vec(),
        last_release: release,
    }
}

/// The status `rs` records before the deletions of `verdict` are made:
/// its own with the window (and the release it acts on) in
/// `deletionBudget`; None when there is no window to record.
pub fn window_record(
    rs: &ManifestWorkReplicaSet,
    verdict: &Verdict,
) -> Option<ManifestWorkReplicaSetStatus> {
    let window = verdict.window?;
    let mut status = rs.status.clone().unwrap_or_default();
    status.deletion_budget = Some(window_status(
        window,
        &verdict.waiting,
        &verdict.removed,
        release_record(rs, verdict),
    ));
    Some(status)
}

/// The release `verdict` acts on, as the status records it; else the one
/// `rs`'s status holds.
fn release_record(rs: &ManifestWorkReplicaSet, verdict: &Verdict) -> Option<DeletionRelease> {
    match (&verdict.release, verdict.window) {
        (Some(value), Some(window)) => Some(DeletionRelease {
            value: value.clone(),
            at: time(window.start),
            deleted: i32::try_from(verdict.delete.len()).unwrap_or(i32::MAX),
        }),
        _ => rs
            .status
            .as_ref()
            .and_then(|s| s.deletion_budget.as_ref())
            .and_then(|b| b.last_release.clone()),
    }
}

/// Puts the budget into `status`: the window (the one recorded now, else
/// the last one in the status), the last release and, when deletions are
/// held, the `DeletionsWaiting` condition naming them and how to release.
pub fn fill_budget_status(
    rs: &ManifestWorkReplicaSet,
    status: &mut ManifestWorkReplicaSetStatus,
    verdict: &Verdict,
    now: Timestamp,
) {
    let budget = Budget::default();
    // The last window stays recorded once it ends (it is only read back as
    // ended): dropping it would rewrite the status on every reconcile, as
    // the write that recorded it keeps a share of its fields.
    let before = recorded(rs);
    let (window, removed) = match verdict.window {
        Some(w) => (Some(w), verdict.removed.clone()),
        None => (before.window, before.removed),
    };
    status.deletion_budget =
        window.map(|w| window_status(w, &verdict.waiting, &removed, release_record(rs, verdict)));
    status.conditions.retain(|c| c.type_ != DELETIONS_WAITING);
    if !verdict.waiting.is_empty() {
        let allowance = window.map_or(1, |w| w.allowance(&budget));
        let generation = rs.meta().generation.unwrap_or(0);
        let current = rs.status.clone().unwrap_or_default().conditions;
        let waiting = condition_since(
            DELETIONS_WAITING,
            true,
            "DeletionBudgetExhausted",
            format!(
                "{}; if these removals are wanted, someone with the platform role annotates the replica set {RELEASE_DELETIONS_ANNOTATION}=\"<your user name>: <why>\" (a new value each time)",
                waiting_message(&verdict.waiting, allowance, budget.window_seconds)
            ),
            generation,
            &current,
            now,
        );
        status.conditions.push(waiting);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::manifest_work::ManifestWorkSpec;
    use serde_json::json;

    fn rs(annotations: serde_json::Value) -> ManifestWorkReplicaSet {
        serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "app", "namespace": "ns", "annotations": annotations},
            "spec": {"manifestWorkTemplate": {}, "placementRefs": [
                {"name": "new", "rolloutStrategy": {"type": "Progressive", "progressive": {"maxConcurrency": 3}}}]},
        }))
        .expect("replica set")
    }

    /// `n` works placed by `placement`.
    fn works(n: usize, placement: &str) -> BTreeMap<String, Arc<ManifestWork>> {
        (0..n)
            .map(|i| {
                let name = format!("c{i}");
                let mut work = ManifestWork::new("app", ManifestWorkSpec::default());
                work.metadata.labels = Some(BTreeMap::from([(
                    PLACEMENT_NAME_LABEL.to_string(),
                    placement.to_string(),
                )]));
                (name, Arc::new(work))
            })
            .collect()
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_000_000).expect("time")
    }

    #[test]
    fn a_fleet_wide_loss_is_held_and_the_status_names_it() {
        let rs = rs(json!({}));
        let all = removals(&rs, &works(8, "new"), &BTreeMap::new(), true, now());
        assert!(all.intended.is_empty());
        let verdict = &all.budget;
        assert_eq!(verdict.delete, vec!["c0".to_string(), "c1".to_string()]);
        assert_eq!(verdict.waiting.len(), 6);
        let mut status = ManifestWorkReplicaSetStatus::default();
        fill_budget_status(&rs, &mut status, verdict, now());
        let budget = status.deletion_budget.expect("budget");
        assert_eq!((budget.base, budget.deleted, budget.waiting), (8, 2, 6));
        let waiting = status
            .conditions
            .iter()
            .find(|c| c.type_ == DELETIONS_WAITING)
            .expect("condition");
        assert!(
            waiting
                .message
                .starts_with("6 deletions held, first 6: c2, c3"),
            "{}",
            waiting.message
        );
        assert!(waiting.message.contains("platform role"));
    }

    #[test]
    fn removals_the_spec_asks_for_go_at_the_rollouts_pace_outside_the_budget() {
        let rs = rs(json!({}));
        // Eight works of placement "old", which the spec no longer names.
        let first = removals(&rs, &works(8, "old"), &BTreeMap::new(), true, now());
        assert_eq!(first.intended, ["c0", "c1", "c2"], "maxConcurrency 3");
        assert_eq!(first.intended_later, 5);
        assert!(first.budget.delete.is_empty() && first.budget.waiting.is_empty());
        assert_eq!(first.budget.window, None, "nothing counted");
        // Two still going: one more starts.
        let mut existing = works(8, "old");
        for c in ["c0", "c1"] {
            let mut w = (*existing[c]).clone();
            w.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
            existing.insert(c.into(), Arc::new(w));
        }
        let again = removals(&rs, &existing, &BTreeMap::new(), true, now());
        assert_eq!(again.intended, ["c2"]);
    }

    #[test]
    fn nothing_is_deleted_while_the_view_is_unsettled() {
        let none = removals(
            &rs(json!({})),
            &works(8, "new"),
            &BTreeMap::new(),
            false,
            Timestamp::UNIX_EPOCH,
        );
        assert!(none.delete().is_empty() && none.budget.waiting.is_empty());
    }

    #[test]
    fn a_new_release_value_lets_all_go_once_and_is_recorded() {
        let rs = rs(json!({RELEASE_DELETIONS_ANNOTATION: "alice: relabel wanted"}));
        let verdict = removals(&rs, &works(8, "new"), &BTreeMap::new(), true, now()).budget;
        assert_eq!(verdict.delete.len(), 8);
        let mut status = ManifestWorkReplicaSetStatus::default();
        fill_budget_status(&rs, &mut status, &verdict, now());
        let release = status
            .deletion_budget
            .as_ref()
            .and_then(|b| b.last_release.clone())
            .expect("recorded");
        assert_eq!(
            (release.value.as_str(), release.deleted),
            ("alice: relabel wanted", 8)
        );
        // Read back, the same value releases nothing more.
        let mut after = rs.clone();
        after.status = Some(status);
        let verdict = removals(&after, &works(8, "new"), &BTreeMap::new(), true, now()).budget;
        assert_eq!(verdict.delete.len(), 2, "a new budget, no second release");
    }

    #[test]
    fn a_cluster_back_with_a_new_work_gives_its_share_back_a_stale_one_does_not() {
        let mut rs = rs(json!({}));
        rs.status = Some(ManifestWorkReplicaSetStatus {
            deletion_budget: Some(DeletionBudgetStatus {
                window_start: "2026-11-28T04:00:00Z".into(),
                base: 4,
                deleted: 1,
                removed_clusters: vec!["c0".into()],
                ..DeletionBudgetStatus::default()
            }),
            ..ManifestWorkReplicaSetStatus::default()
        });
        let now: Timestamp = "2026-11-28T04:02:00Z".parse().expect("time");
        let made = |at: &str| {
            let mut existing = works(4, "new");
            let mut w = (*existing["c0"]).clone();
            w.metadata.creation_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at.parse().expect("time")),
            );
            existing.insert("c0".into(), Arc::new(w));
            existing
        };
        // c0's label flapped back (a new work), and out again.
        let back = removals(
            &rs,
            &made("2026-11-28T04:01:00Z"),
            &BTreeMap::new(),
            true,
            now,
        );
        let wanted: BTreeMap<String, String> = ["c1", "c2", "c3"]
            .iter()
            .map(|c| (c.to_string(), "new".to_string()))
            .collect();
        let back_again = removals(&rs, &made("2026-11-28T04:01:00Z"), &wanted, true, now);
        assert_eq!(back_again.budget.delete, ["c0"], "{back:?}");
        assert_eq!(back_again.budget.window.map(|w| w.deleted), Some(1));
        // The work a lagging cache still shows from before the removal is
        // not a return: nothing more goes.
        let stale = removals(&rs, &made("2026-11-28T03:00:00Z"), &wanted, true, now);
        assert!(stale.budget.delete.is_empty(), "{stale:?}");
    }

    #[test]
    fn the_recorded_window_is_read_back() {
        let mut rs = rs(json!({}));
        rs.status = Some(ManifestWorkReplicaSetStatus {
            deletion_budget: Some(DeletionBudgetStatus {
                window_start: "2026-11-28T04:00:00Z".into(),
                base: 8,
                deleted: 2,
                waiting: 6,
                ..DeletionBudgetStatus::default()
            }),
            ..ManifestWorkReplicaSetStatus::default()
        });
        let recorded = recorded(&rs);
        let window = recorded.window.expect("window");
        assert_eq!((window.base, window.deleted, recorded.waiting), (8, 2, 6));
        // A day later the hold still holds.
        let now: Timestamp = "2026-11-29T04:05:00Z".parse().expect("time");
        let verdict = removals(&rs, &works(6, "new"), &BTreeMap::new(), true, now).budget;
        assert!(verdict.delete.is_empty(), "held until a release");
        assert_eq!(verdict.waiting.len(), 6);
    }
}
