//! The agent's Kubernetes client for its spoke: kube's own stack (base URI,
//! retry of 429/503/504, authentication, extra headers, timeouts), but
//! speaking HTTP/2 when the API server offers it, as client-go does.
//!
//! Why not `kube::Client::try_from`: that client speaks HTTP/1.1 only, so
//! every request in flight holds its own TLS connection, and the pool keeps
//! each one idle for 90 s. Works applied together (100 at once) opened about
//! 100 connections, each holding TLS and read buffers: most of the agent's
//! heap, and as many connections on the spoke's API server. Over HTTP/2 the
//! requests and watches share one connection.

use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::retry::RetryPolicy;
use kube::client::{ClientBuilder, ConfigExt};
use kube::{Client, Config};
use tower::retry::RetryLayer;
use tower::{BoxError, ServiceBuilder};

/// How long an idle HTTP/1.1 connection (an API server without HTTP/2) stays
/// pooled.
const POOL_IDLE: Duration = Duration::from_secs(30);
/// Idle HTTP/1.1 connections kept at most; more are closed once done.
const POOL_MAX_IDLE: usize = 4;
/// HTTP/2 pings while the connection is idle, so a dead connection (a
/// restarted API server, a dropped NAT entry) is found and replaced rather
/// than hanging every watch on it; client-go's ReadIdleTimeout is 30 s.
const H2_KEEP_ALIVE: Duration = Duration::from_secs(30);
/// How long an HTTP/2 ping may go unanswered before the connection is closed.
const H2_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(15);

/// The client could not be built from the configuration.
#[derive(Debug, thiserror::Error)]
pub enum SpokeClientError {
    /// The TLS settings (CA, client certificate, server name) are invalid.
    #[error("TLS settings of the spoke connection: {0}")]
    Tls(#[source] kube::Error),
    /// The kubeconfig names a proxy (`proxy-url`); the agent connects to the
    /// API server directly only.
    #[error("the spoke connection names proxy {0}; the agent supports no proxy")]
    Proxy(String),
    /// The TLS server name to verify is not a valid DNS name or IP address.
    #[error("invalid TLS server name {0:?} for the spoke connection")]
    ServerName(String),
    /// The authentication settings (token file, exec plugin...) are invalid.
    #[error("authentication settings of the spoke connection: {0}")]
    Auth(#[source] kube::Error),
    /// An extra header (impersonation included) is invalid.
    #[error("headers of the spoke connection: {0}")]
    Headers(#[source] kube::Error),
}

/// The TCP connector under the spoke client: any scheme (TLS is layered on
/// top), Nagle off.
pub fn tcp_connector() -> HttpConnector {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    // Nagle off (hyper's connector leaves it on). Over HTTP/2 a request is
    // a HEADERS frame then a small DATA frame: with Nagle the DATA frame
    // waits for the ACK of the HEADERS, which the API server delays (up to
    // 40 ms on Linux), so every write paid that wait: create → Applied went
    // from 15 ms to 190 ms at p50 when this client moved to HTTP/2 (issue 32).
    http.set_nodelay(true);
    http
}

/// A client for the spoke's API server described by `config`, over HTTP/2
/// when the server negotiates it (ALPN), HTTP/1.1 otherwise. Fails when the
/// configuration names a proxy, or its TLS, authentication or header
/// settings are invalid.
pub fn spoke_client(config: Config) -> Result<Client, SpokeClientError> {
    // kube's client without its proxy features refuses these too.
    if let Some(proxy) = &config.proxy_url {
        return Err(SpokeClientError::Proxy(proxy.to_string()));
    }
    let http = tcp_connector();
    let tls = config
        .rustls_client_config()
        .map_err(SpokeClientError::Tls)?;
    let mut https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    if let Some(name) = config.tls_server_name.as_ref() {
        let name = name
            .clone()
            .try_into()
            .map_err(|_| SpokeClientError::ServerName(name.clone()))?;
        https = https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let https = https.enable_http1().enable_http2().wrap_connector(http);
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let http_client: hyper_util::client::legacy::Client<_, kube::client::Body> =
        hyper_util::client::legacy::Builder::new(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_max_idle_per_host(POOL_MAX_IDLE)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .http2_keep_alive_interval(H2_KEEP_ALIVE)
            .http2_keep_alive_timeout(H2_KEEP_ALIVE_TIMEOUT)
            .http2_keep_alive_while_idle(true)
            .build(connector);
    let auth = config.auth_layer().map_err(SpokeClientError::Auth)?;
    let headers = config
        .extra_headers_layer()
        .map_err(SpokeClientError::Headers)?;
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(auth)
        .layer(headers)
        // Spans only while traces are exported (set before this client is
        // built); otherwise the stack is unchanged.
        .option_layer(ferry_telemetry::enabled().then_some(crate::spoke_trace::SpokeTraceLayer))
        .map_err(BoxError::from)
        .service(http_client);
    Ok(ClientBuilder::new(service, config.default_namespace).build())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> Config {
        Config::new(url.parse().expect("a URL"))
    }

    #[tokio::test]
    async fn spoke_connections_have_nagle_off() {
        use tower::Service;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let uri: http::Uri = format!("http://{addr}").parse().expect("a URI");
        let mut connector = tcp_connector();
        let (connected, _accepted) = tokio::join!(connector.call(uri), listener.accept());
        let stream = connected.expect("connects").into_inner();
        assert!(
            stream.nodelay().expect("TCP_NODELAY readable"),
            "the agent's spoke connections must have Nagle off"
        );
    }

    #[tokio::test]
    async fn spoke_client_builds_for_an_https_or_http_api_server() {
        spoke_client(config("https://127.0.0.1:6443")).expect("an https client");
        spoke_client(config("http://127.0.0.1:8080")).expect("a plain http client");
    }

    #[tokio::test]
    async fn spoke_client_refuses_a_proxy_it_would_not_use() {
        let mut config = config("https://127.0.0.1:6443");
        config.proxy_url = Some("http://proxy:3128".parse().expect("a URL"));
        assert!(matches!(
            spoke_client(config),
            Err(SpokeClientError::Proxy(_))
        ));
    }

    #[tokio::test]
    async fn spoke_client_refuses_a_tls_server_name_that_is_no_name() {
        let mut config = config("https://127.0.0.1:6443");
        config.tls_server_name = Some("not a name!".into());
        match spoke_client(config) {
            Err(SpokeClientError::ServerName(name)) => assert_eq!(name, "not a name!"),
            other => panic!("expected a ServerName error, got {:?}", other.err()),
        }
    }
}
