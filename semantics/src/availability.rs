//! Whether an applied object is available, for the per-manifest
//! `Available` condition, from its live JSON.

use serde_json::Value;

use super::status_fields::{condition, condition_is, int_at};

/// `Available` condition reason when the object is available.
pub const REASON_AVAILABLE: &str = "ResourceAvailable";
/// `Available` condition reason when the object is not (yet) available.
pub const REASON_NOT_AVAILABLE: &str = "ResourceNotAvailable";

/// Whether an applied object is available, for the per-manifest `Available`
/// condition: `(available, reason, message)`, the reason being
/// [`REASON_AVAILABLE`] or [`REASON_NOT_AVAILABLE`] and the message naming
/// the numbers, e.g. "0 of 3 replicas are available".
///
/// - Deployment: `status.availableReplicas >= spec.replicas` (default 1).
/// - StatefulSet: `status.readyReplicas >= spec.replicas` (default 1).
/// - DaemonSet: `status.numberAvailable >= status.desiredNumberScheduled`;
///   not available before the controller has reported
///   `desiredNumberScheduled` at all (it always writes it, even when 0).
/// - For these three, also `status.observedGeneration >= metadata.generation`
///   (when the object has a generation): until the controller has seen the
///   latest spec its counts describe an older one.
/// - Job: available when a `Complete` condition is "True", or while no
///   `Failed` condition is "True"; a failed Job is not available.
/// - Pod: available when its `Ready` condition is "True".
/// - Any other kind: available because it exists.
///
/// Never fails: missing or mistyped status fields count as 0 (or absent).
pub fn availability(group: &str, kind: &str, live: &Value) -> (bool, &'static str, String) {
    let (available, message) = match (group, kind) {
        ("apps", "Deployment") => {
            let want = int_at(live, "/spec/replicas").unwrap_or(1);
            let have = int_at(live, "/status/availableReplicas").unwrap_or(0);
            with_generation(
                live,
                have >= want,
                format!("{have} of {want} replicas are available"),
            )
        }
        ("apps", "StatefulSet") => {
            let want = int_at(live, "/spec/replicas").unwrap_or(1);
            let have = int_at(live, "/status/readyReplicas").unwrap_or(0);
            with_generation(
                live,
                have >= want,
                format!("{have} of {want} replicas are ready"),
            )
        }
        ("apps", "DaemonSet") => match int_at(live, "/status/desiredNumberScheduled") {
            None => (
                false,
                "the DaemonSet controller has not reported status yet".to_string(),
            ),
            Some(want) => {
                let have = int_at(live, "/status/numberAvailable").unwrap_or(0);
                with_generation(
                    live,
                    have >= want,
                    format!("{have} of {want} scheduled pods are available"),
                )
            }
        },
        ("batch", "Job") => job_availability(live),
        ("", "Pod") => {
            let phase = live
                .pointer("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            if condition_is(live, "Ready", "True") {
                (true, format!("the pod is ready (phase {phase})"))
            } else {
                (false, format!("the pod is not ready (phase {phase})"))
            }
        }
        _ => (true, "the object exists".to_string()),
    };
    let reason = if available {
        REASON_AVAILABLE
    } else {
        REASON_NOT_AVAILABLE
    };
    (available, reason, message)
}

/// Adds the observed-generation check of workload controllers to a count
/// check: stale counts never make an object available.
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

fn job_availability(live: &Value) -> (bool, String) {
    let count = |field: &str| int_at(live, &format!("/status/{field}")).unwrap_or(0);
    let (active, succeeded, failed) = (count("active"), count("succeeded"), count("failed"));
    if condition_is(live, "Complete", "True") {
        return (true, format!("the job completed ({succeeded} succeeded)"));
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
        return (
            false,
            format!("the job failed{why} ({failed} failed, {succeeded} succeeded)"),
        );
    }
    (
        true,
        format!("the job is running ({active} active, {succeeded} succeeded, {failed} failed)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn deployment_is_available_when_enough_replicas_are_available() {
        assert_eq!(
            availability("apps", "Deployment", &deployment(Some(3), 3, 2, 2)),
            (
                true,
                REASON_AVAILABLE,
                "3 of 3 replicas are available".into()
            )
        );
        assert_eq!(
            availability("apps", "Deployment", &deployment(Some(3), 0, 2, 2)),
            (
                false,
                REASON_NOT_AVAILABLE,
                "0 of 3 replicas are available".into()
            )
        );
    }

    #[test]
    fn deployment_replicas_default_to_one() {
        assert_eq!(
            availability("apps", "Deployment", &deployment(None, 1, 1, 1)),
            (
                true,
                REASON_AVAILABLE,
                "1 of 1 replicas are available".into()
            )
        );
        let fresh = json!({"metadata": {"generation": 1}, "spec": {}});
        assert_eq!(
            availability("apps", "Deployment", &fresh),
            (
                false,
                REASON_NOT_AVAILABLE,
                "waiting for the controller to observe generation 1 (observed none yet); \
                 0 of 1 replicas are available"
                    .into()
            )
        );
    }

    #[test]
    fn deployment_scaled_to_zero_is_available() {
        let (ok, reason, _) = availability("apps", "Deployment", &deployment(Some(0), 0, 1, 1));
        assert!(ok);
        assert_eq!(reason, REASON_AVAILABLE);
    }

    #[test]
    fn deployment_with_a_lagging_observed_generation_is_not_available() {
        assert_eq!(
            availability("apps", "Deployment", &deployment(Some(3), 3, 5, 4)),
            (
                false,
                REASON_NOT_AVAILABLE,
                "waiting for the controller to observe generation 5 (observed 4); \
                 3 of 3 replicas are available"
                    .into()
            )
        );
        // An object without a generation has nothing to lag behind.
        let live = json!({"spec": {"replicas": 1}, "status": {"availableReplicas": 1}});
        assert!(availability("apps", "Deployment", &live).0);
    }

    #[test]
    fn statefulset_is_available_when_enough_replicas_are_ready() {
        let live = |ready: i64| {
            json!({
                "metadata": {"generation": 1},
                "spec": {"replicas": 2},
                "status": {"readyReplicas": ready, "observedGeneration": 1}
            })
        };
        assert_eq!(
            availability("apps", "StatefulSet", &live(2)),
            (true, REASON_AVAILABLE, "2 of 2 replicas are ready".into())
        );
        assert_eq!(
            availability("apps", "StatefulSet", &live(1)),
            (
                false,
                REASON_NOT_AVAILABLE,
                "1 of 2 replicas are ready".into()
            )
        );
        let defaulted = json!({"spec": {}, "status": {}});
        assert_eq!(
            availability("apps", "StatefulSet", &defaulted),
            (
                false,
                REASON_NOT_AVAILABLE,
                "0 of 1 replicas are ready".into()
            )
        );
        let lagging = json!({
            "metadata": {"generation": 3},
            "spec": {"replicas": 1},
            "status": {"readyReplicas": 1, "observedGeneration": 2}
        });
        assert!(!availability("apps", "StatefulSet", &lagging).0);
    }

    #[test]
    fn daemonset_is_available_when_all_scheduled_pods_are_available() {
        let live = |desired: i64, available: i64| json!({"status": {"desiredNumberScheduled": desired, "numberAvailable": available}});
        assert_eq!(
            availability("apps", "DaemonSet", &live(3, 3)),
            (
                true,
                REASON_AVAILABLE,
                "3 of 3 scheduled pods are available".into()
            )
        );
        assert_eq!(
            availability("apps", "DaemonSet", &live(3, 2)),
            (
                false,
                REASON_NOT_AVAILABLE,
                "2 of 3 scheduled pods are available".into()
            )
        );
        // No nodes match: nothing to wait for.
        assert!(availability("apps", "DaemonSet", &live(0, 0)).0);
        assert_eq!(
            availability("apps", "DaemonSet", &json!({"status": {}})),
            (
                false,
                REASON_NOT_AVAILABLE,
                "the DaemonSet controller has not reported status yet".into()
            )
        );
    }

    #[test]
    fn job_is_available_when_complete_or_running_but_not_when_failed() {
        let complete = json!({"status": {"succeeded": 1, "conditions": [
            {"type": "Complete", "status": "True"}
        ]}});
        assert_eq!(
            availability("batch", "Job", &complete),
            (
                true,
                REASON_AVAILABLE,
                "the job completed (1 succeeded)".into()
            )
        );
        let running = json!({"status": {"active": 1}});
        assert_eq!(
            availability("batch", "Job", &running),
            (
                true,
                REASON_AVAILABLE,
                "the job is running (1 active, 0 succeeded, 0 failed)".into()
            )
        );
        let failed = json!({"status": {"failed": 6, "conditions": [
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
        ]}});
        assert_eq!(
            availability("batch", "Job", &failed),
            (
                false,
                REASON_NOT_AVAILABLE,
                "the job failed: BackoffLimitExceeded (6 failed, 0 succeeded)".into()
            )
        );
        let failed_false = json!({"status": {"conditions": [
            {"type": "Failed", "status": "False"}
        ]}});
        assert!(availability("batch", "Job", &failed_false).0);
    }

    #[test]
    fn pod_is_available_when_ready() {
        let pod = |ready: &str| {
            json!({"status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": ready}
            ]}})
        };
        assert_eq!(
            availability("", "Pod", &pod("True")),
            (
                true,
                REASON_AVAILABLE,
                "the pod is ready (phase Running)".into()
            )
        );
        assert_eq!(
            availability("", "Pod", &pod("False")),
            (
                false,
                REASON_NOT_AVAILABLE,
                "the pod is not ready (phase Running)".into()
            )
        );
        assert_eq!(
            availability("", "Pod", &json!({})),
            (
                false,
                REASON_NOT_AVAILABLE,
                "the pod is not ready (phase unknown)".into()
            )
        );
    }

    #[test]
    fn other_kinds_are_available_when_they_exist() {
        assert_eq!(
            availability("", "ConfigMap", &json!({"data": {}})),
            (true, REASON_AVAILABLE, "the object exists".into())
        );
        // Same kind name in another group is not the workload.
        assert!(
            availability(
                "example.com",
                "Deployment",
                &json!({"spec": {"replicas": 3}})
            )
            .0
        );
    }

    #[test]
    fn availability_never_panics_on_odd_shapes() {
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
                let (_, reason, message) = availability(group, kind, &live);
                assert!(!message.is_empty());
                assert!([REASON_AVAILABLE, REASON_NOT_AVAILABLE].contains(&reason));
            }
        }
    }
}
