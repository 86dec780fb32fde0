//! Reconcile phase 4 too: the deletion budget
//! (`ferry_fleet_semantics::deletion_budget`). Of the works to delete, only
//! as many go as the budget's window allows; the window is recorded in the
//! status before they are deleted, so a new leader continues it; the rest
//! wait and the status names them.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_fleet_semantics::deletion_budget::{
    Budget, Verdict, Window, deletions_now, waiting_message,
};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::error::{ReplicaSetError, failed};
use crate::placement::controller::condition;
use ferry_api::contract::RELEASE_DELETIONS_ANNOTATION;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::{
    DeletionBudgetStatus, MAX_SUMMARY_ENTRIES, ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus,
};
use ferry_semantics::contract::{DELETIONS_WAITING, KUBE_TIME_FORMAT};

/// The window recorded in `rs`'s status, if readable.
pub fn recorded_window(rs: &ManifestWorkReplicaSet) -> Option<Window> {
    let budget = rs.status.as_ref()?.deletion_budget.as_ref()?;
    Some(Window {
        start: budget.window_start.parse::<Timestamp>().ok()?.as_second(),
        base: usize::try_from(budget.base).unwrap_or(0),
        deleted: usize::try_from(budget.deleted).unwrap_or(0),
    })
}

/// Which of the `existing` works whose cluster is not `wanted` go now
/// (none unless `may_delete`), as of `now`. Pure.
pub fn budget_verdict(
    rs: &ManifestWorkReplicaSet,
    existing: &BTreeMap<String, Arc<ManifestWork>>,
    wanted: &BTreeMap<String, String>,
    may_delete: bool,
    now: Timestamp,
) -> Verdict {
    let candidates: Vec<String> = if may_delete {
        existing
            .iter()
            .filter(|(c, w)| !wanted.contains_key(*c) && w.meta().deletion_timestamp.is_none())
            .map(|(c, _)| c.clone())
            .collect()
    } else {
        Vec::new()
    };
    let released = rs
        .annotations()
        .get(RELEASE_DELETIONS_ANNOTATION)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let live = existing
        .values()
        .filter(|w| w.meta().deletion_timestamp.is_none())
        .count();
    deletions_now(
        &Budget::default(),
        recorded_window(rs),
        live,
        &candidates,
        released,
        now.as_second(),
    )
}

fn window_status(window: Window, waiting: &[String]) -> DeletionBudgetStatus {
    DeletionBudgetStatus {
        window_start: Timestamp::from_second(window.start)
            .unwrap_or(Timestamp::UNIX_EPOCH)
            .strftime(KUBE_TIME_FORMAT)
            .to_string(),
        base: i32::try_from(window.base).unwrap_or(i32::MAX),
        deleted: i32::try_from(window.deleted).unwrap_or(i32::MAX),
        waiting: i32::try_from(waiting.len()).unwrap_or(i32::MAX),
        waiting_clusters: waiting.iter().take(MAX_SUMMARY_ENTRIES).cloned().collect(),
    }
}

/// Records the window of `verdict` in `rs`'s status before its deletions
/// are made; returns the resourceVersion written, None when nothing is to
/// record. Fails when the API server refuses the write (then nothing is
/// deleted).
pub async fn record_window(
    client: &kube::Client,
    rs: &ManifestWorkReplicaSet,
    verdict: &Verdict,
) -> Result<Option<String>, ReplicaSetError> {
    let Some(window) = verdict.window else {
        return Ok(None);
    };
    let api: Api<ManifestWorkReplicaSet> =
        Api::namespaced(client.clone(), &rs.namespace().unwrap_or_default());
    let patch = json!({"status": {"deletionBudget": window_status(window, &verdict.waiting)}});
    let params = PatchParams {
        field_manager: Some(ferry_semantics::contract::REPLICA_SET_FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    let written = api
        .patch_status(&rs.name_any(), &params, &Patch::Merge(&patch))
        .await
        .map_err(failed(rs, "recording the deletion budget's window"))?;
    Ok(written.resource_version())
}

/// Puts the budget into `status`: the window (the one recorded now, else
/// the last one in the status) and, when
/// deletions wait, the `DeletionsWaiting` condition naming them.
pub fn fill_budget_status(
    rs: &ManifestWorkReplicaSet,
    status: &mut ManifestWorkReplicaSetStatus,
    verdict: &Verdict,
) {
    let budget = Budget::default();
    // The last window stays recorded once it ends (it is only read back as
    // ended): dropping it would rewrite the status on every reconcile, as
    // the write that recorded it keeps a share of its fields.
    let window = verdict.window.or_else(|| recorded_window(rs));
    status.deletion_budget = window.map(|w| window_status(w, &verdict.waiting));
    status.conditions.retain(|c| c.type_ != DELETIONS_WAITING);
    if !verdict.waiting.is_empty() {
        let allowance = window.map_or(1, |w| w.allowance(&budget));
        let generation = rs.meta().generation.unwrap_or(0);
        let mut waiting = condition(
            DELETIONS_WAITING,
            true,
            "DeletionBudgetExhausted",
            format!(
                "{}; annotate the replica set {RELEASE_DELETIONS_ANNOTATION}=true to let them go",
                waiting_message(&verdict.waiting, allowance, budget.window_seconds)
            ),
            generation,
        );
        if let Some(old) = rs
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == DELETIONS_WAITING))
            .filter(|c| c.status == "True")
        {
            waiting.last_transition_time = old.last_transition_time.clone();
        }
        status.conditions.push(waiting);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::manifest_work::ManifestWorkSpec;

    fn rs(annotations: serde_json::Value) -> ManifestWorkReplicaSet {
        serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "app", "namespace": "ns", "annotations": annotations},
            "spec": {"manifestWorkTemplate": {}},
        }))
        .expect("replica set")
    }

    fn works(n: usize) -> BTreeMap<String, Arc<ManifestWork>> {
        (0..n)
            .map(|i| {
                let name = format!("c{i}");
                (
                    name.clone(),
                    Arc::new(ManifestWork::new("app", ManifestWorkSpec::default())),
                )
            })
            .collect()
    }

    #[test]
    fn a_fleet_wide_loss_waits_and_the_status_names_it() {
        let rs = rs(json!({}));
        let now = Timestamp::from_second(1_000_000).expect("time");
        let verdict = budget_verdict(&rs, &works(8), &BTreeMap::new(), true, now);
        assert_eq!(verdict.delete, vec!["c0".to_string(), "c1".to_string()]);
        assert_eq!(verdict.waiting.len(), 6);
        let mut status = ManifestWorkReplicaSetStatus::default();
        fill_budget_status(&rs, &mut status, &verdict);
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
                .starts_with("6 deletions wait, first 6: c2, c3")
        );
    }

    #[test]
    fn nothing_is_deleted_while_the_view_is_unsettled() {
        let verdict = budget_verdict(
            &rs(json!({})),
            &works(8),
            &BTreeMap::new(),
            false,
            Timestamp::UNIX_EPOCH,
        );
        assert!(verdict.delete.is_empty() && verdict.waiting.is_empty());
    }

    #[test]
    fn the_release_annotation_lets_all_go() {
        let rs = rs(json!({RELEASE_DELETIONS_ANNOTATION: "true"}));
        let verdict = budget_verdict(
            &rs,
            &works(8),
            &BTreeMap::new(),
            true,
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(verdict.delete.len(), 8);
    }

    #[test]
    fn the_recorded_window_is_read_back() {
        let mut rs = rs(json!({}));
        rs.status = Some(ManifestWorkReplicaSetStatus {
            deletion_budget: Some(DeletionBudgetStatus {
                window_start: "2026-11-28T04:00:00Z".into(),
                base: 8,
                deleted: 2,
                ..DeletionBudgetStatus::default()
            }),
            ..ManifestWorkReplicaSetStatus::default()
        });
        let window = recorded_window(&rs).expect("window");
        assert_eq!((window.base, window.deleted), (8, 2));
        let now: Timestamp = "2026-11-28T04:05:00Z".parse().expect("time");
        let verdict = budget_verdict(&rs, &works(6), &BTreeMap::new(), true, now);
        assert!(verdict.delete.is_empty(), "the window is spent");
        assert_eq!(verdict.waiting.len(), 6);
    }
}
