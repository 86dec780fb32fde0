//! The hub's Kubernetes client: kube's own stack (base URI, retry of
//! 429/503/504, authentication, extra headers, timeouts, HTTP/1.1 as
//! `kube::Client::try_from` speaks it), over TCP connections with Nagle's
//! algorithm off.
//!
//! Why not `kube::Client::try_from`: its connector (hyper's `HttpConnector`)
//! leaves Nagle on, so a request written in more than one segment (headers,
//! then a body) waits for the API server's delayed ACK of the first one (up
//! to 40 ms on Linux) before the rest leaves. Every TokenReview, liveness
//! and status write of the hub paid that wait; the agent's spoke client
//! made create → Applied ten times slower the same way (issue 32).
//!
//! `requests` counts what the client sends (`ferry_hub_api_requests_total`).

/// Counting the hub's own API requests by verb and resource.
pub mod requests;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::retry::RetryPolicy;
use kube::client::{ClientBuilder, ConfigExt};
use kube::{Client, Config};
use tower::limit::ConcurrencyLimitLayer;
use tower::retry::RetryLayer;
use tower::util::MapRequestLayer;
use tower::{BoxError, ServiceBuilder};

use requests::ApiRequests;

/// The client could not be built from the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ApiClientError {
    /// The configuration names a proxy (`proxy-url`); like kube's client as
    /// the hub builds it (no proxy features), the hub connects directly.
    #[error("the Kubernetes connection names proxy {0}; the hub supports no proxy")]
    Proxy(String),
    /// The TLS settings (CA, client certificate, server name) are invalid.
    #[error("TLS settings of the Kubernetes connection: {0}")]
    Tls(#[source] kube::Error),
    /// The authentication settings (token file, exec plugin...) are invalid.
    #[error("authentication settings of the Kubernetes connection: {0}")]
    Auth(#[source] kube::Error),
    /// An extra header (impersonation included) is invalid.
    #[error("headers of the Kubernetes connection: {0}")]
    Headers(#[source] kube::Error),
}

/// The TCP connector under the hub's clients: any scheme (TLS is layered
/// on top), Nagle off.
pub fn tcp_connector() -> HttpConnector {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    // A request's body must not wait for the ACK of its headers.
    http.set_nodelay(true);
    http
}

/// A client of the API server described by `config`, with at most
/// `concurrency` requests awaiting an answer at once when given, counting
/// each request it sends into `counted` when given. Fails when the
/// configuration names a proxy, or its TLS, authentication or header
/// settings are invalid.
pub fn api_client(
    config: Config,
    concurrency: Option<usize>,
    counted: Option<ApiRequests>,
) -> Result<Client, ApiClientError> {
    if let Some(proxy) = &config.proxy_url {
        return Err(ApiClientError::Proxy(proxy.to_string()));
    }
    let https = config
        .rustls_https_connector_with_connector(tcp_connector())
        .map_err(ApiClientError::Tls)?;
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let http_client: hyper_util::client::legacy::Client<_, kube::client::Body> =
        hyper_util::client::legacy::Builder::new(TokioExecutor::new()).build(connector);
    let auth = config.auth_layer().map_err(ApiClientError::Auth)?;
    let headers = config
        .extra_headers_layer()
        .map_err(ApiClientError::Headers)?;
    let service = ServiceBuilder::new()
        // Outermost: the path is still the API path (no prefix of the
        // server's URL yet), and a retry below is the same request.
        .option_layer(counted.map(|counted| {
            MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
                counted.count(&request);
                request
            })
        }))
        .option_layer(concurrency.map(|n| ConcurrencyLimitLayer::new(n.max(1))))
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(auth)
        .layer(headers)
        .map_err(BoxError::from)
        .service(http_client);
    Ok(ClientBuilder::new(service, config.default_namespace).build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::Service;

    #[tokio::test]
    async fn the_hubs_connections_have_nagle_off() {
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
            "the hub's API connections must have Nagle off"
        );
    }

    #[tokio::test]
    async fn api_client_builds_for_an_https_or_http_api_server() {
        let config = |url: &str| Config::new(url.parse().expect("a URL"));
        api_client(config("https://127.0.0.1:6443"), Some(8), None).expect("an https client");
        api_client(
            config("http://127.0.0.1:8080"),
            None,
            Some(ApiRequests::default()),
        )
        .expect("a plain http client");
        let mut proxied = config("https://127.0.0.1:6443");
        proxied.proxy_url = Some("http://proxy:3128".parse().expect("a URL"));
        assert!(matches!(
            api_client(proxied, None, None),
            Err(ApiClientError::Proxy(_))
        ));
    }
}
