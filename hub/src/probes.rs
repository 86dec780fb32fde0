//! HTTP endpoints for Kubernetes probes and Prometheus: `/healthz`, `/readyz`,
//! `/metrics`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use crate::admission::watchdog::PolicyHealth;
use crate::works::index::WorkIndex;

/// `listener`, with Nagle's algorithm off on every connection it accepts.
/// axum's `serve` leaves it on, so a response written in two pieces (the
/// headers, then the body) waits for the client's delayed ACK of the first
/// (up to 40 ms on Linux) before the body leaves.
pub fn nodelay_listener(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = std::net::SocketAddr> {
    axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
        // Fails only on a socket already closed, which serves nothing.
        let _ = tcp.set_nodelay(true);
    })
}

/// Most findings `/readyz` names.
const MAX_NAMED: usize = 10;

#[derive(Clone)]
struct ProbeState {
    index: Arc<WorkIndex>,
    registry: Arc<Registry>,
    leading: Option<watch::Receiver<bool>>,
    policies: Option<PolicyHealth>,
}

/// The probe and metrics router. Ready means the work index holds a full list,
/// so a new replica takes no agents before it can serve them correctly; the
/// body says whether this replica leads (`leading` is None without leader
/// election). With `policies`, the leader is not ready while an admission
/// policy it installs is missing or altered, and says which (at most
/// [`MAX_NAMED`] findings).
pub fn router(
    index: Arc<WorkIndex>,
    registry: Arc<Registry>,
    leading: Option<watch::Receiver<bool>>,
    policies: Option<PolicyHealth>,
) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(ProbeState {
            index,
            registry,
            leading,
            policies,
        })
}

async fn readyz(State(state): State<ProbeState>) -> (StatusCode, String) {
    if !state.index.is_ready() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "work index not synced".into(),
        );
    }
    let leads = state.leading.as_ref().is_none_or(|l| *l.borrow());
    if let Some(health) = state.policies.as_ref().filter(|_| leads) {
        let findings = health.findings();
        if !findings.is_empty() {
            let named: Vec<String> = findings
                .iter()
                .take(MAX_NAMED)
                .map(ToString::to_string)
                .collect();
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "admission policies not in force ({} findings, first {}): {}",
                    findings.len(),
                    named.len(),
                    named.join("; ")
                ),
            );
        }
    }
    match state.leading.as_ref().map(|l| *l.borrow()) {
        None => (StatusCode::OK, "ok".into()),
        Some(true) => (StatusCode::OK, "ok: leader".into()),
        Some(false) => (StatusCode::OK, "ok: follower".into()),
    }
}

async fn metrics(State(state): State<ProbeState>) -> (StatusCode, String) {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) => (StatusCode::OK, body),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connections_to_the_probe_port_have_nagle_off() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let mut listener = nodelay_listener(listener);
        let (_client, (accepted, _)) = tokio::join!(
            async { tokio::net::TcpStream::connect(addr).await.expect("connect") },
            axum::serve::Listener::accept(&mut listener)
        );
        assert!(accepted.nodelay().expect("TCP_NODELAY readable"));
    }
}
