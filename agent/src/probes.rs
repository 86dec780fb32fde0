//! HTTP endpoints for Kubernetes probes and Prometheus: `/healthz`,
//! `/readyz` and `/metrics`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use prometheus_client::registry::Registry;

use crate::readiness::Readiness;

#[derive(Clone)]
struct ProbeState {
    readiness: Readiness,
    registry: Arc<Registry>,
}

/// The probe and metrics router. `/healthz` answers while the process
/// serves requests (liveness); `/readyz` is 200 only while the agent holds a
/// hub session and the spoke API server answers (see [`Readiness`]), else
/// 503 with the reason; `/metrics` is the text exposition of `registry`.
pub fn router(readiness: Readiness, registry: Arc<Registry>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(ProbeState {
            readiness,
            registry,
        })
}

async fn readyz(State(state): State<ProbeState>) -> (StatusCode, String) {
    match state.readiness.verdict() {
        Ok(()) => (StatusCode::OK, "ok".into()),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason),
    }
}

async fn metrics(State(state): State<ProbeState>) -> (StatusCode, String) {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) => (StatusCode::OK, body),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
