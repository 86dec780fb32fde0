//! What a manifest's conditions say about its live object. `Available`
//! follows OCM: the object exists on the spoke. What ferry knows about the
//! health of common workloads (replica counts, Job and Pod outcomes) is
//! reported as the manifest's `Progressing` and `Degraded` conditions, from
//! [`health`].

use serde_json::Value;

use super::status_fields::{condition, condition_is, int_at};

/// `Available` reason when the object exists on the spoke (OCM's).
pub const REASON_AVAILABLE: &str = "ResourceAvailable";
/// `Available` message when the object exists on the spoke (OCM's).
pub const MESSAGE_AVAILABLE: &str = "Resource is available";
/// `Available` reason when the object does not exist on the spoke (OCM's).
pub const REASON_NOT_AVAILABLE: &str = "ResourceNotAvailable";
/// `Available` message when the object does not exist on the spoke (OCM's).
pub const MESSAGE_NOT_AVAILABLE: &str = "Resource is not available";
/// `Available` reason (status Unknown) when reading the object failed (OCM's).
pub const REASON_FETCH_FAILED: &str = "FetchingResourceFailed";
/// `Available` reason (status Unknown) when the manifest could not be
/// resolved to a resource, so there is nothing to look up (OCM's).
pub const REASON_INCOMPLETE_META: &str = "IncompleteResourceMeta";

/// `Progressing` reason while the object has not reached its desired state.
pub const REASON_PROGRESSING: &str = "ResourceProgressing";
/// `Progressing` reason once the object has reached its desired state (or
/// finished, for Jobs and Pods).
pub const REASON_SETTLED: &str = "ResourceSettled";
/// `Degraded` reason when the object failed (a failed Job or Pod, a
/// Deployment past its progress deadline).
pub const REASON_DEGRADED: &str = "ResourceDegraded";
/// `Degraded` reason when nothing is wrong with the object.
pub const REASON_NOT_DEGRADED: &str = "ResourceNotDegraded";

/// The health of a workload object: whether it is still moving towards its
/// desired state, whether it failed, and a message naming the numbers
/// (e.g. "0 of 3 replicas are available").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// The object has not reached its desired state yet.
    pub progressing: bool,
    /// The object failed, or cannot reach its desired state.
    pub degraded: bool,
    /// What the counts or conditions say.
    pub message: String,
}

/// The health of an object of a kind ferry knows, `None` for other kinds
/// (their `Progressing`/`Degraded` conditions are not reported).
///
/// - Deployment: settled when `status.availableReplicas >= spec.replicas`
///   (default 1); degraded when its `Progressing` condition is False with
///   reason `ProgressDeadlineExceeded`.
/// - StatefulSet: settled when `status.readyReplicas >= spec.replicas`
///   (default 1).
/// - DaemonSet: settled when `status.numberAvailable >=
///   status.desiredNumberScheduled`; progressing until the controller has
///   reported `desiredNumberScheduled` at all (it always writes it, even 0).
/// - For these three, also `status.observedGeneration >= metadata.generation`
///   (when the object has a generation): until the controller has seen the
///   latest spec its counts describe an older one.
/// - Job: settled once its `Complete` condition is "True"; degraded (and
///   still progressing: it never reached its goal) when `Failed` is.
/// - Pod: settled when `Ready` is "True" or the phase is `Succeeded`;
///   degraded (and still progressing) in phase `Failed`.
///
/// Degraded objects stay progressing so that a reader following OCM's
/// rollout rule (Progressing and Degraded both True means failed, Progressing
/// False means succeeded) never counts a failure as a success.
///
/// Never fails: missing or mistyped status fields count as 0 (or absent).
pub fn health(group: &str, kind: &str, live: &Value) -> Option<Health> {
    let settled = |done: bool, message: String| Health {
        progressing: !done,
        degraded: false,
        message,
    };
    Some(match (group, kind) {
        ("apps", "Deployment") => {
            let want = int_at(live, "/spec/replicas").unwrap_or(1);
            let have = int_at(live, "/status/availableReplicas").unwrap_or(0);
            let (done, message) = with_generation(
                live,
                have >= want,
                format!("{have} of {want} replicas are available"),
            );
            let stuck = condition(live, "Progressing").is_some_and(|c| {
                c.get("status").and_then(Value::as_str) == Some("False")
                    && c.get("reason").and_then(Value::as_str) == Some("ProgressDeadlineExceeded")
            });
            if stuck && !done {
                Health {
                    progressing: true,
                    degraded: true,
                    message: format!("the rollout exceeded its progress deadline; {message}"),
                }
            } else {
                settled(done, message)
            }
        }
        ("apps", "StatefulSet") => {
            let want = int_at(live, "/spec/replicas").unwrap_or(1);
            let have = int_at(live, "/status/readyReplicas").unwrap_or(0);
            let (done, message) = with_generation(
                live,
                have >= want,
                format!("{have} of {want} replicas are ready"),
            );
            settled(done, message)
        }
        ("apps", "DaemonSet") => match int_at(live, "/status/desiredNumberScheduled") {
            None => settled(
                false,
                "the DaemonSet controller has not reported status yet".to_string(),
            ),
            Some(want) => {
                let have = int_at(live, "/status/numberAvailable").unwrap_or(0);
                let (done, message) = with_generation(
                    live,
                    have >= want,
                    format!("{have} of {want} scheduled pods are available"),
                );
                settled(done, message)
            }
        },
        ("batch", "Job") => job_health(live),
        ("", "Pod") => {
            let phase = live
                .pointer("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            match phase {
                "Failed" => Health {
                    progressing: true,
                    degraded: true,
                    message: "the pod failed (phase Failed)".to_string(),
                },
                "Succeeded" => settled(true, "the pod succeeded (phase Succeeded)".to_string()),
                _ if condition_is(live, "Ready", "True") => {
                    settled(true, format!("the pod is ready (phase {phase})"))
                }
                _ => settled(false, format!("the pod is not ready (phase {phase})")),
            }
        }
        _ => return None,
    })
}

/// Adds the observed-generation check of workload controllers to a count
/// check: stale counts never make an object settled.
fn with_generation(live: &Value, counts_ok: bool, counts: String) -> (bool, String) {
    let Some(generation) = int_at(live, "/metadata/generation") else {
        return (counts_ok, counts);
    };
    match int_at(live, "/status/observedGeneration") {
        Some(observed) if observed >= generation => (counts_ok, counts),
        Some(observed) => (
            false,
            format!(
                "waiting for the controller to observe generation {generation} \
                 (observed {observed}); {counts}"
            ),
        ),
        None => (
            false,
            format!(
                "waiting for the controller to observe generation {generation} \
                 (observed none yet); {counts}"
            ),
        ),
    }
}

fn job_health(live: &Value) -> Health {
    let count = |field: &str| int_at(live, &format!("/status/{field}")).unwrap_or(0);
    let (active, succeeded, failed) = (count("active"), count("succeeded"), count("failed"));
    if condition_is(live, "Complete", "True") {
        return Health {
            progressing: false,
            degraded: false,
            message: format!("the job completed ({succeeded} succeeded)"),
        };
    }
    if condition_is(live, "Failed", "True") {
        // The condition's own reason (BackoffLimitExceeded, DeadlineExceeded,
        // ...) is what the user needs to act on.
        let why = condition(live, "Failed")
            .and_then(|c| c.get("reason"))
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        return Health {
            progressing: true,
            degraded: true,
            message: format!("the job failed{why} ({failed} failed, {succeeded} succeeded)"),
        };
    }
    Health {
        progressing: true,
        degraded: false,
        message: format!(
            "the job is running ({active} active, {succeeded} succeeded, {failed} failed)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn h(progressing: bool, degraded: bool, message: &str) -> Option<Health> {
        Some(Health {
            progressing,
            degraded,
            message: message.into(),
        })
    }

    fn deployment(
        spec_replicas: Option<i64>,
        available: i64,
        generation: i64,
        observed: i64,
    ) -> Value {
        let mut live = json!({
            "metadata": {"generation": generation},
            "spec": {},
            "status": {"availableReplicas": available, "observedGeneration": observed}
        });
        if let Some(r) = spec_replicas {
            live["spec"]["replicas"] = json!(r);
        }
        live
    }

    #[test]
    fn deployment_settles_when_enough_replicas_are_available() {
        assert_eq!(
            health("apps", "Deployment", &deployment(Some(3), 3, 2, 2)),
            h(false, false, "3 of 3 replicas are available")
        );
        assert_eq!(
            health("apps", "Deployment", &deployment(Some(3), 0, 2, 2)),
            h(true, false, "0 of 3 replicas are available")
        );
    }

    #[test]
    fn deployment_replicas_default_to_one_and_zero_replicas_is_settled() {
        assert_eq!(
            health("apps", "Deployment", &deployment(None, 1, 1, 1)),
            h(false, false, "1 of 1 replicas are available")
        );
        let fresh = json!({"metadata": {"generation": 1}, "spec": {}});
        assert_eq!(
            health("apps", "Deployment", &fresh),
            h(
                true,
                false,
                "waiting for the controller to observe generation 1 (observed none yet); \
                 0 of 1 replicas are available"
            )
        );
        assert!(
            !health("apps", "Deployment", &deployment(Some(0), 0, 1, 1))
                .expect("a known kind")
                .progressing
        );
    }

    #[test]
    fn deployment_with_a_lagging_observed_generation_is_progressing() {
        assert_eq!(
            health("apps", "Deployment", &deployment(Some(3), 3, 5, 4)),
            h(
                true,
                false,
                "waiting for the controller to observe generation 5 (observed 4); \
                 3 of 3 replicas are available"
            )
        );
        // An object without a generation has nothing to lag behind.
        let live = json!({"spec": {"replicas": 1}, "status": {"availableReplicas": 1}});
        assert!(
            !health("apps", "Deployment", &live)
                .expect("a known kind")
                .progressing
        );
    }

    #[test]
    fn deployment_past_its_progress_deadline_is_degraded() {
        let mut live = deployment(Some(2), 1, 1, 1);
        live["status"]["conditions"] = json!([
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
        ]);
        assert_eq!(
            health("apps", "Deployment", &live),
            h(
                true,
                true,
                "the rollout exceeded its progress deadline; 1 of 2 replicas are available"
            )
        );
    }

    #[test]
    fn statefulset_settles_when_enough_replicas_are_ready() {
        let live = |ready: i64| {
            json!({
                "metadata": {"generation": 1},
                "spec": {"replicas": 2},
                "status": {"readyReplicas": ready, "observedGeneration": 1}
            })
        };
        assert_eq!(
            health("apps", "StatefulSet", &live(2)),
            h(false, false, "2 of 2 replicas are ready")
        );
        assert_eq!(
            health("apps", "StatefulSet", &live(1)),
            h(true, false, "1 of 2 replicas are ready")
        );
        assert_eq!(
            health("apps", "StatefulSet", &json!({"spec": {}, "status": {}})),
            h(true, false, "0 of 1 replicas are ready")
        );
    }

    #[test]
    fn daemonset_settles_when_all_scheduled_pods_are_available() {
        let live = |desired: i64, available: i64| json!({"status": {"desiredNumberScheduled": desired, "numberAvailable": available}});
        assert_eq!(
            health("apps", "DaemonSet", &live(3, 3)),
            h(false, false, "3 of 3 scheduled pods are available")
        );
        assert_eq!(
            health("apps", "DaemonSet", &live(3, 2)),
            h(true, false, "2 of 3 scheduled pods are available")
        );
        assert!(
            !health("apps", "DaemonSet", &live(0, 0))
                .expect("a known kind")
                .progressing
        );
        assert_eq!(
            health("apps", "DaemonSet", &json!({"status": {}})),
            h(
                true,
                false,
                "the DaemonSet controller has not reported status yet"
            )
        );
    }

    #[test]
    fn job_progresses_while_running_settles_when_finished_and_degrades_when_failed() {
        let complete = json!({"status": {"succeeded": 1, "conditions": [
            {"type": "Complete", "status": "True"}
        ]}});
        assert_eq!(
            health("batch", "Job", &complete),
            h(false, false, "the job completed (1 succeeded)")
        );
        assert_eq!(
            health("batch", "Job", &json!({"status": {"active": 1}})),
            h(
                true,
                false,
                "the job is running (1 active, 0 succeeded, 0 failed)"
            )
        );
        let failed = json!({"status": {"failed": 6, "conditions": [
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
        ]}});
        assert_eq!(
            health("batch", "Job", &failed),
            h(
                true,
                true,
                "the job failed: BackoffLimitExceeded (6 failed, 0 succeeded)"
            )
        );
        let failed_false = json!({"status": {"conditions": [
            {"type": "Failed", "status": "False"}
        ]}});
        assert!(
            !health("batch", "Job", &failed_false)
                .expect("a known kind")
                .degraded
        );
    }

    #[test]
    fn pod_settles_when_ready_or_finished_and_degrades_when_failed() {
        let pod = |phase: &str, ready: &str| {
            json!({"status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": ready}
            ]}})
        };
        assert_eq!(
            health("", "Pod", &pod("Running", "True")),
            h(false, false, "the pod is ready (phase Running)")
        );
        assert_eq!(
            health("", "Pod", &pod("Running", "False")),
            h(true, false, "the pod is not ready (phase Running)")
        );
        assert_eq!(
            health("", "Pod", &pod("Succeeded", "False")),
            h(false, false, "the pod succeeded (phase Succeeded)")
        );
        assert_eq!(
            health("", "Pod", &pod("Failed", "False")),
            h(true, true, "the pod failed (phase Failed)")
        );
        assert_eq!(
            health("", "Pod", &json!({})),
            h(true, false, "the pod is not ready (phase unknown)")
        );
    }

    #[test]
    fn other_kinds_have_no_health() {
        assert_eq!(health("", "ConfigMap", &json!({"data": {}})), None);
        // Same kind name in another group is not the workload.
        assert_eq!(
            health(
                "example.com",
                "Deployment",
                &json!({"spec": {"replicas": 3}})
            ),
            None
        );
    }

    #[test]
    fn health_never_panics_on_odd_shapes() {
        for live in [
            json!(null),
            json!([]),
            json!({"spec": "x", "status": [1], "metadata": 4}),
            json!({"status": {"conditions": "Ready"}}),
            json!({"status": {"conditions": [1, null, {"type": 3}]}}),
        ] {
            for (group, kind) in [
                ("apps", "Deployment"),
                ("apps", "StatefulSet"),
                ("apps", "DaemonSet"),
                ("batch", "Job"),
                ("", "Pod"),
            ] {
                let health = health(group, kind, &live).expect("a known kind");
                assert!(!health.message.is_empty());
            }
        }
    }
}
