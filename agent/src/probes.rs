//! HTTP endpoints for Kubernetes probes: `/healthz` and `/readyz`.

use axum::Router;
use axum::routing::get;

/// The probe router. The agent is ready as soon as it runs: it holds no state
/// that a restart would need to rebuild before serving.
pub fn router() -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
}
