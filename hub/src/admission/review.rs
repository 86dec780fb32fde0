//! The admission decision for one `AdmissionReview` of a ManifestWork, and the
//! HTTP route that serves it.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};

use super::executor_policy::EXECUTOR_POLICY_NAME;
use super::watchdog::PolicyHealth;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use prometheus_client::metrics::histogram::Histogram;
use tracing::{info, warn};

use super::validate::{Problem, check_size, validate_replica_set, validate_work};
use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::ManifestWorkReplicaSet;

/// Path the API server posts reviews to.
pub const REVIEW_PATH: &str = "/validate/manifestworks";

/// Path the API server posts reviews of ManifestWorkReplicaSets to.
pub const REPLICA_SET_REVIEW_PATH: &str = "/validate/manifestworkreplicasets";

/// Largest review body read. A review of an UPDATE carries the old and the new
/// object, each up to the API server's 3 MiB request limit.
const MAX_REVIEW_BYTES: usize = 16 * 1024 * 1024;

/// What the review route needs.
struct ReviewState {
    max_work_bytes: usize,
    review_seconds: Histogram,
    policies: Option<PolicyHealth>,
}

/// The router serving [`REVIEW_PATH`]; works over `max_work_bytes` bytes of
/// JSON are refused, and each review's time is observed in `review_seconds`.
/// With `policies`, a write the executor policy would check is refused while the
/// executor policy is not in force (so the executor check fails closed).
pub fn router(
    max_work_bytes: usize,
    review_seconds: Histogram,
    policies: Option<PolicyHealth>,
) -> Router {
    Router::new()
        .route(REVIEW_PATH, post(review))
        .route(REPLICA_SET_REVIEW_PATH, post(review_replica_set))
        .layer(DefaultBodyLimit::max(MAX_REVIEW_BYTES))
        .with_state(Arc::new(ReviewState {
            max_work_bytes,
            review_seconds,
            policies,
        }))
}

async fn review(State(state): State<Arc<ReviewState>>, body: Bytes) -> Response {
    let started = Instant::now();
    let executor_unchecked = state
        .policies
        .as_ref()
        .is_some_and(|p| p.missing(EXECUTOR_POLICY_NAME));
    let response = answer(&body, state.max_work_bytes, executor_unchecked);
    state
        .review_seconds
        .observe(started.elapsed().as_secs_f64());
    response
}

async fn review_replica_set(State(state): State<Arc<ReviewState>>, body: Bytes) -> Response {
    let started = Instant::now();
    let response = respond(&body, decide_replica_set);
    state
        .review_seconds
        .observe(started.elapsed().as_secs_f64());
    response
}

/// The HTTP answer to one review body.
fn answer(body: &[u8], max_work_bytes: usize, executor_unchecked: bool) -> Response {
    respond(body, |request| {
        if executor_unchecked && needs_executor_check(request) {
            AdmissionResponse::from(request).deny(format!(
                "ManifestWork {}: the admission policy {EXECUTOR_POLICY_NAME} that checks who may \
                 name an executor is not in force; works naming an executor are neither created \
                 nor changed until the hub has re-applied it",
                request.name
            ))
        } else {
            decide(request, max_work_bytes)
        }
    })
}

/// The HTTP answer to one review body, decided by `decide`.
fn respond(
    body: &[u8],
    decide: impl Fn(&AdmissionRequest<DynamicObject>) -> AdmissionResponse,
) -> Response {
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(body) {
        Ok(review) => review,
        Err(e) => {
            warn!(error = %e, "admission review does not parse");
            return (
                StatusCode::BAD_REQUEST,
                format!("not an AdmissionReview: {e}"),
            )
                .into_response();
        }
    };
    let request: Result<AdmissionRequest<DynamicObject>, _> = review.try_into();
    let response = match request {
        Ok(request) => decide(&request),
        Err(e) => AdmissionResponse::invalid(e),
    };
    match serde_json::to_vec(&response.into_review()) {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// The answer to one request: allowed, or denied with a message listing every
/// problem. Only CREATE and UPDATE of the spec are checked: an UPDATE that
/// leaves the spec as it was (finalizers, labels, annotations) is allowed, so
/// a work admitted under older rules can still be finalized and deleted.
pub fn decide(
    request: &AdmissionRequest<DynamicObject>,
    max_work_bytes: usize,
) -> AdmissionResponse {
    decide_with(request, "ManifestWork", |object| {
        problems_of(object, max_work_bytes)
    })
}

/// The answer to one request about a ManifestWorkReplicaSet: allowed, or
/// denied listing every gate health expression over the length or static
/// cost limit. Only CREATE and UPDATE of the spec are
/// checked, as for works.
pub fn decide_replica_set(request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
    decide_with(request, "ManifestWorkReplicaSet", |object| {
        match object.clone().try_parse::<ManifestWorkReplicaSet>() {
            Ok(rs) => validate_replica_set(&rs),
            Err(e) => vec![Problem {
                subject: "spec".into(),
                message: format!("does not match the ManifestWorkReplicaSet schema: {e}"),
            }],
        }
    })
}

/// The decision shared by both kinds: `problems` of the written object.
fn decide_with(
    request: &AdmissionRequest<DynamicObject>,
    kind: &str,
    problems: impl Fn(&DynamicObject) -> Vec<Problem>,
) -> AdmissionResponse {
    let response = AdmissionResponse::from(request);
    let name = match &request.namespace {
        Some(ns) => format!("{ns}/{}", request.name),
        None => request.name.clone(),
    };
    let Some(object) = &request.object else {
        return response;
    };
    match request.operation {
        Operation::Create => {}
        Operation::Update => {
            let spec_unchanged = request
                .old_object
                .as_ref()
                .is_some_and(|old| old.data.get("spec") == object.data.get("spec"));
            if spec_unchanged {
                return response;
            }
        }
        _ => return response,
    }
    let problems = problems(object);
    if problems.is_empty() {
        return response;
    }
    info!(object = %name, kind, problems = problems.len(), "refusing");
    let listed: Vec<String> = problems.iter().map(Problem::to_string).collect();
    response.deny(format!(
        "{kind} {name} is invalid ({} problem{}): {}",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" },
        listed.join("; ")
    ))
}

/// Whether `request` is one the executor policy checks: it creates a work
/// naming an executor, or updates the spec (the generation moved) or the
/// executor of a work naming one. Metadata-only updates are not checked.
pub fn needs_executor_check(request: &AdmissionRequest<DynamicObject>) -> bool {
    let executor = |o: &DynamicObject| {
        o.data
            .pointer("/spec/executor/subject/serviceAccount")
            .cloned()
    };
    let Some(new) = request.object.as_ref().and_then(executor) else {
        return false;
    };
    match request.operation {
        Operation::Create => true,
        Operation::Update => {
            let old = request.old_object.as_ref();
            old.and_then(executor) != Some(new)
                || old.and_then(|o| o.metadata.generation)
                    != request.object.as_ref().and_then(|o| o.metadata.generation)
        }
        _ => false,
    }
}

/// Size first, then everything [`validate_work`] finds.
fn problems_of(object: &DynamicObject, max_work_bytes: usize) -> Vec<Problem> {
    let mut problems = Vec::new();
    // What the API server stores is this object as JSON; compact encoding is
    // what it writes, so the count is close to what reaches etcd.
    match serde_json::to_vec(object) {
        Ok(json) => problems.extend(check_size(json.len(), max_work_bytes)),
        Err(e) => problems.push(Problem {
            subject: "work".into(),
            message: format!("cannot be encoded as JSON: {e}"),
        }),
    }
    match object.clone().try_parse::<ManifestWork>() {
        Ok(work) => problems.extend(validate_work(&work)),
        Err(e) => problems.push(Problem {
            subject: "spec".into(),
            message: format!("does not match the ManifestWork schema: {e}"),
        }),
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(
        operation: &str,
        object: serde_json::Value,
        old: Option<serde_json::Value>,
    ) -> AdmissionRequest<DynamicObject> {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {"group": "work.ferry.dev", "version": "v1alpha1", "kind": "ManifestWork"},
                "resource": {"group": "work.ferry.dev", "version": "v1alpha1", "resource": "manifestworks"},
                "name": "w",
                "namespace": "cluster-a",
                "operation": operation,
                "userInfo": {"username": "me"},
                "object": object,
                "oldObject": old,
            }
        });
        let review: AdmissionReview<DynamicObject> =
            serde_json::from_value(review).expect("review parses");
        review.try_into().expect("has a request")
    }

    fn work(manifests: serde_json::Value) -> serde_json::Value {
        json!({
            "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWork",
            "metadata": {"name": "w", "namespace": "cluster-a"},
            "spec": {"workload": {"manifests": manifests}}
        })
    }

    fn cm(name: &str) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}})
    }

    /// A work at `generation` naming executor `team/NAME` (None: no executor).
    fn work_with_executor(generation: i64, executor: Option<&str>) -> serde_json::Value {
        let mut work = work(json!([cm("a")]));
        work["metadata"]["generation"] = json!(generation);
        if let Some(name) = executor {
            work["spec"]["executor"] = json!({"subject": {"type": "ServiceAccount",
                "serviceAccount": {"namespace": "team", "name": name}}});
        }
        work
    }

    #[test]
    fn every_write_the_executor_policy_checks_is_one_the_webhook_holds_while_it_is_missing() {
        let named = |generation| work_with_executor(generation, Some("deployer"));
        assert!(needs_executor_check(&request("CREATE", named(1), None)));
        assert!(
            needs_executor_check(&request("UPDATE", named(2), Some(named(1)))),
            "a spec change keeping the executor"
        );
        assert!(
            needs_executor_check(&request(
                "UPDATE",
                work_with_executor(2, Some("other")),
                Some(named(1))
            )),
            "a new executor"
        );
        assert!(
            !needs_executor_check(&request("UPDATE", named(1), Some(named(1)))),
            "metadata only: the generation stays"
        );
        assert!(!needs_executor_check(&request(
            "CREATE",
            work_with_executor(1, None),
            None
        )));
        assert!(!needs_executor_check(&request(
            "UPDATE",
            work_with_executor(2, None),
            Some(named(1))
        )));
    }

    /// A work whose only problem is a feedback path that is not JSONPath.
    fn bad_path_work() -> serde_json::Value {
        let mut object = work(json!([cm("a")]));
        object["spec"]["manifestConfigs"] = json!([{
            "resourceIdentifier": {"group": "", "resource": "configmaps", "namespace": "default", "name": "a"},
            "feedbackRules": [{"type": "JSONPaths", "jsonPaths": [{"name": "x", "path": "$.data["}]}]
        }]);
        object
    }

    #[test]
    fn a_valid_create_is_allowed() {
        let response = decide(&request("CREATE", work(json!([cm("a")])), None), 1 << 20);
        assert!(response.allowed, "{:?}", response.result);
    }

    #[test]
    fn an_invalid_create_is_denied_naming_work_manifest_and_problem() {
        let response = decide(&request("CREATE", bad_path_work(), None), 1 << 20);
        assert!(!response.allowed);
        let message = &response.result.message;
        assert!(message.contains("ManifestWork cluster-a/w"), "{message}");
        assert!(
            message.contains("manifestConfigs[0] configmaps default/a"),
            "{message}"
        );
        assert!(message.contains("$.data["), "{message}");
    }

    #[test]
    fn an_update_that_keeps_an_invalid_spec_is_allowed() {
        let old = bad_path_work();
        let mut new = old.clone();
        new["metadata"]["finalizers"] = json!(["work.ferry.dev/cleanup"]);
        let response = decide(&request("UPDATE", new, Some(old)), 1 << 20);
        assert!(response.allowed, "{:?}", response.result);
    }

    #[test]
    fn an_update_that_changes_the_spec_is_checked() {
        let old = work(json!([cm("a")]));
        let new = bad_path_work();
        let response = decide(&request("UPDATE", new, Some(old)), 1 << 20);
        assert!(!response.allowed);
    }

    #[test]
    fn a_work_over_the_limit_is_denied_with_both_sizes() {
        let object = work(json!([cm("a")]));
        let size = serde_json::to_vec(&object).expect("json").len();
        let response = decide(&request("CREATE", object, None), size - 1);
        assert!(!response.allowed);
        let message = &response.result.message;
        assert!(message.contains(&format!("{size} bytes")), "{message}");
        assert!(
            message.contains(&format!("{} bytes", size - 1)),
            "{message}"
        );
    }

    #[test]
    fn a_spec_that_does_not_fit_the_types_is_denied_not_a_panic() {
        let mut object = work(json!([cm("a")]));
        object["spec"]["manifestConfigs"] = json!("not a list");
        let response = decide(&request("CREATE", object, None), 1 << 20);
        assert!(!response.allowed);
        assert!(
            response.result.message.contains("spec: does not match"),
            "{}",
            response.result.message
        );
    }

    #[test]
    fn a_replica_set_with_a_runaway_health_gate_is_denied_naming_the_limit() {
        let list = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]";
        let mut expression = "true".to_string();
        for level in 0..9 {
            expression = format!("{list}.all(x{level}, {expression})");
        }
        let rs = |expression: &str| {
            json!({
                "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
                "metadata": {"name": "rs", "namespace": "team-a"},
                "spec": {"manifestWorkTemplate": {}, "placementRefs": [{"name": "p",
                    "rolloutStrategy": {"type": "Progressive", "progressive": {
                        "gates": [{"afterGroup": "canary",
                                   "health": {"expression": expression}}]}}}]}
            })
        };
        let response = decide_replica_set(&request("CREATE", rs(&expression), None));
        assert!(!response.allowed);
        let message = &response.result.message;
        assert!(message.contains("ManifestWorkReplicaSet"), "{message}");
        assert!(message.contains("static cost limit"), "{message}");
        assert!(message.contains("10000000"), "{message}");
        let fine = decide_replica_set(&request("CREATE", rs("clusters.all(c, c.available)"), None));
        assert!(fine.allowed, "{:?}", fine.result);
    }
}
