//! HTTP endpoints for Kubernetes probes and Prometheus: `/healthz`, `/readyz`,
//! `/metrics`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use prometheus_client::registry::Registry;

use crate::works::index::WorkIndex;

#[derive(Clone)]
struct ProbeState {
    index: Arc<WorkIndex>,
    registry: Arc<Registry>,
}

/// The probe and metrics router. Ready means the work index holds a full list,
/// so a new replica takes no agents before it can serve them correctly.
pub fn router(index: Arc<WorkIndex>, registry: Arc<Registry>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(ProbeState { index, registry })
}

async fn readyz(State(state): State<ProbeState>) -> (StatusCode, &'static str) {
    if state.index.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "work index not synced")
    }
}

async fn metrics(State(state): State<ProbeState>) -> (StatusCode, String) {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) => (StatusCode::OK, body),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
