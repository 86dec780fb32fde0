//! Tunables of the agent port: its TLS, the limits of its connections, and
//! those of the agent sessions on them. Plain data, read by the session, the
//! TLS acceptor and the composition root (`crate::hub`).

use std::time::Duration;

use crate::certs::reload::{CaSource, CertSource, DEFAULT_RELOAD_INTERVAL};
use crate::grpc::identity::AuthOptions;
use crate::grpc::message_caps::MessageCaps;

/// TLS of the port agents dial.
#[derive(Clone, Debug)]
pub struct GrpcTls {
    /// Serving certificate and key; files are followed, so a rotated
    /// certificate is served to new connections without a restart.
    pub cert: CertSource,
    /// When set, agents must present a client certificate signed by this
    /// CA (mutual TLS), on top of their token; a CA file is followed too.
    pub client_ca: Option<CaSource>,
    /// How often certificate files are checked for changes.
    pub reload_interval: Duration,
    /// Client certificates the hub issues to agents; None issues none. Off
    /// while `client_ca` is set (operator-run mutual TLS).
    pub agent_certificates: Option<AgentCertOptions>,
}

/// Client certificates the hub issues to agents.
#[derive(Clone, Debug)]
pub struct AgentCertOptions {
    /// Namespace and name of the Secret holding the agent CA; the first
    /// replica to start creates it.
    pub ca_secret: (String, String),
    /// How long an issued certificate is valid; agents renew at two thirds.
    pub lifetime: Duration,
}

impl GrpcTls {
    /// TLS from `cert`, checked for changes every
    /// [`DEFAULT_RELOAD_INTERVAL`], with no client certificates.
    pub fn new(cert: CertSource) -> Self {
        Self {
            cert,
            client_ca: None,
            reload_interval: DEFAULT_RELOAD_INTERVAL,
            agent_certificates: None,
        }
    }
}

/// How much longer than the longest session a connection may live, and how
/// long its streams then have to finish.
pub const CONNECTION_AGE_SLACK: Duration = Duration::from_secs(60);

/// Limits of the agent port's connections: what any peer, authenticated or
/// not, can hold open on the hub.
#[derive(Clone, Debug)]
pub struct TransportLimits {
    /// Streams one HTTP/2 connection may have open at once; more are refused
    /// by the transport. An agent needs one (and a health check).
    pub max_concurrent_streams: u32,
    /// Bytes a peer may send on one stream before the hub reads them (the
    /// HTTP/2 stream window). Nothing is read before authentication, so this
    /// bounds what an unauthenticated stream costs.
    pub stream_window_bytes: u32,
    /// Bytes a peer may send on one connection, all streams together, before
    /// the hub reads them.
    pub connection_window_bytes: u32,
    /// How often the hub pings an HTTP/2 connection, and how long it waits
    /// for the answer before closing it.
    pub http2_keepalive_interval: Duration,
    /// See `http2_keepalive_interval`.
    pub http2_keepalive_timeout: Duration,
    /// Longest a TLS handshake may take before the connection is closed.
    pub tls_handshake_timeout: Duration,
    /// TLS handshakes under way at once; accepted connections wait their
    /// turn, first come first served, for at most `unauthenticated_idle`.
    pub tls_handshakes_in_flight: usize,
    /// TCP keepalive of accepted connections, so dead peers are noticed by
    /// the kernel too.
    pub tcp_keepalive: Duration,
    /// Connections the agent port holds at once; more are closed as soon
    /// as they are accepted.
    pub max_connections: usize,
    /// Connections one peer address (IPv6: its /64) holds at once; more are
    /// closed as soon as they are accepted. Agents behind one NAT share it.
    pub max_connections_per_peer: usize,
    /// How long a connection may stay open without a stream whose token
    /// was accepted; an agent authenticates its stream at once.
    pub unauthenticated_idle: Duration,
    /// Largest Hello and status report an agent may send.
    pub message_caps: MessageCaps,
}

impl Default for TransportLimits {
    fn default() -> Self {
        Self {
            max_concurrent_streams: 16,
            stream_window_bytes: 256 * 1024,
            connection_window_bytes: 1024 * 1024,
            http2_keepalive_interval: Duration::from_secs(30),
            http2_keepalive_timeout: Duration::from_secs(10),
            tls_handshake_timeout: Duration::from_secs(5),
            // A few hundred keep two cores busy even with a WAN round trip
            // per handshake step (about 1 ms of hub CPU each, 100 ms apart),
            // and finish within a fraction of the timeout when they queue.
            tls_handshakes_in_flight: 256,
            tcp_keepalive: Duration::from_secs(60),
            max_connections: 10_000,
            // A tenth of the port: ten addresses are needed to fill it, and
            // a thousand agents behind one NAT address still connect (each
            // holds one connection, two while it reconnects).
            max_connections_per_peer: 1_000,
            unauthenticated_idle: Duration::from_secs(20),
            message_caps: MessageCaps::default(),
        }
    }
}

/// Tunables of agent sessions.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// How often the hub sends a heartbeat to each agent.
    pub heartbeat_interval: Duration,
    /// Longest a session lives; the agent then reconnects (and is
    /// authenticated afresh). Each session ends at a random point in the last
    /// tenth of it, so sessions opened together do not all end together.
    pub max_session_age: Duration,
    /// Who may be an agent, and how often tokens are reviewed.
    pub auth: AuthOptions,
    /// Limits of the agent port's connections.
    pub transport: TransportLimits,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            heartbeat_interval: Duration::from_secs(10),
            max_session_age: Duration::from_secs(3600),
            auth: AuthOptions::default(),
            transport: TransportLimits::default(),
        }
    }
}
