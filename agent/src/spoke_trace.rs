//! One trace span per call the agent makes to its spoke's API server, a
//! child of whatever span made the call (a manifest's apply). Layered into
//! the spoke client only while traces are exported, so without an exporter
//! the client is exactly what it was.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tracing::Instrument as _;

/// Wraps a spoke HTTP service so every request runs in a `spoke_call` span
/// named for its method and path (never the query, which may carry
/// selectors of any length).
#[derive(Debug, Clone, Copy, Default)]
pub struct SpokeTraceLayer;

impl<S> tower::Layer<S> for SpokeTraceLayer {
    type Service = SpokeTrace<S>;

    fn layer(&self, inner: S) -> Self::Service {
        SpokeTrace { inner }
    }
}

/// The service [`SpokeTraceLayer`] builds; fails as the inner service does.
#[derive(Debug, Clone)]
pub struct SpokeTrace<S> {
    inner: S,
}

impl<S, B, R> tower::Service<http::Request<B>> for SpokeTrace<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let span = tracing::info_span!(
            "spoke_call",
            otel.name = %span_name(request.method(), request.uri().path()),
            http.request.method = %request.method(),
            url.path = %request.uri().path(),
            http.response.status_code = tracing::field::Empty,
        );
        let response = self.inner.call(request);
        let recorder = span.clone();
        Box::pin(
            async move {
                let result = response.await;
                if let Ok(response) = &result {
                    recorder.record("http.response.status_code", response.status().as_u16());
                }
                result
            }
            .instrument(span),
        )
    }
}

/// `GET /api/v1/namespaces/x/configmaps/y`: what a trace viewer lists.
fn span_name(method: &http::Method, path: &str) -> String {
    format!("{method} {path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_method_and_path() {
        assert_eq!(
            span_name(&http::Method::PATCH, "/api/v1/namespaces/a/configmaps/b"),
            "PATCH /api/v1/namespaces/a/configmaps/b"
        );
    }
}
