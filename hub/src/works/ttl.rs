//! `deleteOption.ttlSecondsAfterFinished` (OCM): the hub deletes a work that
//! many seconds after its `Complete` condition turned True. A kube-runtime
//! controller over the works watch requeues each completed work for the
//! moment its TTL runs out: one timer per completed work, never a poll loop.
//! It keeps only the fields it reads, so its cache holds no manifests.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, ResourceExt};
use tracing::{debug, info, warn};

use ferry_semantics::contract::COMPLETE;

use crate::metrics::{HubMetrics, WatchLabel};
use crate::watch::{WORKS_RESOURCE, WatchErrors, run_controller, watch};
use ferry_api::manifest_work::ManifestWork;

/// Deleting an expired work failed.
#[derive(Debug, thiserror::Error)]
pub enum TtlError {
    /// The API server refused the delete or could not be reached.
    #[error("deleting completed ManifestWork {namespace}/{name} after its TTL: {source}")]
    Delete {
        /// The work's namespace.
        namespace: String,
        /// The work's name.
        name: String,
        /// What the API server said.
        source: kube::Error,
    },
}

/// What the TTL asks for a work now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TtlDecision {
    /// No TTL, not complete, or already being deleted: nothing to do.
    Nothing,
    /// The TTL ran out: delete the work.
    DeleteNow,
    /// Delete the work after this long.
    Wait(Duration),
}

/// The TTL decision for `work` at `now`: the deadline is the `Complete`
/// condition's `lastTransitionTime` plus `ttlSecondsAfterFinished` (0 deletes
/// at once). A transition time that does not parse counts as now, so the
/// work is kept a full TTL rather than deleted early.
pub fn ttl_decision(work: &ManifestWork, now: Timestamp) -> TtlDecision {
    if work.metadata.deletion_timestamp.is_some() {
        return TtlDecision::Nothing;
    }
    let Some(ttl) = work
        .spec
        .delete_option
        .as_ref()
        .and_then(|d| d.ttl_seconds_after_finished)
    else {
        return TtlDecision::Nothing;
    };
    let Some(complete) = work
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == COMPLETE))
        .filter(|c| c.status == "True")
    else {
        return TtlDecision::Nothing;
    };
    let completed = complete
        .last_transition_time
        .parse::<Timestamp>()
        .unwrap_or(now);
    let ttl = Duration::from_secs(u64::try_from(ttl).unwrap_or(0));
    let elapsed = now.duration_since(completed).unsigned_abs();
    let elapsed = if now < completed {
        Duration::ZERO
    } else {
        elapsed
    };
    match ttl.checked_sub(elapsed) {
        Some(left) if !left.is_zero() => TtlDecision::Wait(left),
        _ => TtlDecision::DeleteNow,
    }
}

/// Drops what the TTL never reads (manifests, configs, per-manifest status,
/// managed fields), so the controller's cache stays small.
fn keep_what_ttl_reads(work: &mut ManifestWork) {
    work.metadata.managed_fields = None;
    work.metadata.annotations = None;
    work.spec.workload.manifests.clear();
    work.spec.manifest_configs.clear();
    if let Some(status) = work.status.as_mut() {
        status.resource_status = None;
        status.conditions.retain(|c| c.type_ == COMPLETE);
    }
}

async fn reconcile(work: Arc<ManifestWork>, client: Arc<Client>) -> Result<Action, TtlError> {
    match ttl_decision(&work, Timestamp::now()) {
        TtlDecision::Nothing => Ok(Action::await_change()),
        TtlDecision::Wait(left) => {
            debug!(work = %work.name_any(), ?left, "completed work waits for its TTL");
            Ok(Action::requeue(left))
        }
        TtlDecision::DeleteNow => {
            let namespace = work.namespace().unwrap_or_default();
            let name = work.name_any();
            let works: Api<ManifestWork> = Api::namespaced((*client).clone(), &namespace);
            // Only this work: a new one under the same name is not touched.
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: work.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match works.delete(&name, &params).await {
                Ok(_) => {
                    info!(%namespace, %name, "deleted a completed work after its TTL");
                    Ok(Action::await_change())
                }
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {
                    Ok(Action::await_change())
                }
                Err(source) => Err(TtlError::Delete {
                    namespace,
                    name,
                    source,
                }),
            }
        }
    }
}

fn error_policy(work: Arc<ManifestWork>, error: &TtlError, _: Arc<Client>) -> Action {
    warn!(work = %work.name_any(), %error, "TTL deletion failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

/// Deletes completed works whose `ttlSecondsAfterFinished` ran out, until
/// `shutdown` completes. Watch errors never end it: each is logged, counted
/// in `metrics.watch_errors` and retried after [`crate::watch::watch_backoff`].
pub async fn run_ttl_controller(
    client: Client,
    metrics: Arc<HubMetrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let works: Api<ManifestWork> = Api::all(client.clone());
    let (reader, writer) = reflector::store();
    let trigger = watch(works, watcher::Config::default())
        .modify(keep_what_ttl_reads)
        .reflect(writer)
        .applied_objects();
    let errors = WatchErrors {
        metrics,
        label: WatchLabel {
            resource: WORKS_RESOURCE,
            watch: "ttl",
        },
    };
    run_controller(
        "ttl",
        Controller::for_stream(trigger, reader),
        Some(errors),
        shutdown,
        reconcile,
        error_policy,
        Arc::new(client),
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::manifest_work::{Condition, DeleteOption, ManifestWorkStatus};

    fn work(ttl: Option<i64>, complete: Option<(&str, &str)>) -> ManifestWork {
        let mut work = ManifestWork::new("w", Default::default());
        work.spec.delete_option = Some(DeleteOption {
            ttl_seconds_after_finished: ttl,
            ..Default::default()
        });
        work.status = complete.map(|(status, time)| ManifestWorkStatus {
            conditions: vec![Condition {
                type_: COMPLETE.into(),
                status: status.into(),
                reason: "ConditionRulesAggregated".into(),
                message: String::new(),
                observed_generation: 1,
                last_transition_time: time.into(),
            }],
            ..Default::default()
        });
        work
    }

    fn at(text: &str) -> Timestamp {
        text.parse().expect("timestamp")
    }

    #[test]
    fn a_completed_work_waits_out_its_ttl_then_is_deleted() {
        let done = work(Some(60), Some(("True", "2026-01-01T00:00:00Z")));
        assert_eq!(
            ttl_decision(&done, at("2026-01-01T00:00:20Z")),
            TtlDecision::Wait(Duration::from_secs(40))
        );
        assert_eq!(
            ttl_decision(&done, at("2026-01-01T00:01:00Z")),
            TtlDecision::DeleteNow
        );
        let zero = work(Some(0), Some(("True", "2026-01-01T00:00:00Z")));
        assert_eq!(
            ttl_decision(&zero, at("2026-01-01T00:00:00Z")),
            TtlDecision::DeleteNow
        );
    }

    #[test]
    fn no_ttl_or_no_completion_means_nothing() {
        let now = at("2026-01-01T00:10:00Z");
        assert_eq!(
            ttl_decision(&work(None, Some(("True", "2026-01-01T00:00:00Z"))), now),
            TtlDecision::Nothing
        );
        assert_eq!(
            ttl_decision(&work(Some(1), Some(("False", "2026-01-01T00:00:00Z"))), now),
            TtlDecision::Nothing
        );
        assert_eq!(
            ttl_decision(&work(Some(1), None), now),
            TtlDecision::Nothing
        );
    }

    #[test]
    fn a_clock_behind_the_completion_or_a_bad_time_waits_the_full_ttl() {
        let future = work(Some(30), Some(("True", "2026-01-01T00:05:00Z")));
        assert_eq!(
            ttl_decision(&future, at("2026-01-01T00:00:00Z")),
            TtlDecision::Wait(Duration::from_secs(30))
        );
        let garbled = work(Some(30), Some(("True", "yesterday")));
        assert_eq!(
            ttl_decision(&garbled, at("2026-01-01T00:00:00Z")),
            TtlDecision::Wait(Duration::from_secs(30))
        );
    }
}
