//! The agent port: the `ferry.v1.WorkDistributor` gRPC service and what
//! guards it.

/// What an agent's deletion brake holds, written to its ManagedCluster.
pub mod brake_reports;
/// Tunables of the agent port: TLS, transport limits and sessions.
pub mod config;
/// A bound on the connections the port holds at once.
pub mod connection_limit;
/// The start of a stream: the agent's token, its Hello and its protocol.
pub mod handshake;
/// What one agent holds: each work's generation and labels as last sent.
pub mod held;
/// Who an agent is: its token, reviewed for ferry's audience.
pub mod identity;
/// How long a session may go on: token reviews, certificate revocation.
pub mod lifetime;
/// How large a Hello and a status report may be.
pub mod message_caps;
/// The stream of messages the hub sends one agent.
pub mod outbound;
/// How many unknown tokens one network peer may make the hub review.
pub mod peer_budget;
/// Which agent protocol versions this hub serves.
pub mod protocol;
/// Connect reviews in flight at once, so a connect storm's reviews are answered in time.
pub mod review_admission;
/// The replica-wide pace of live sessions' periodic token reviews.
pub mod review_pace;
/// One agent's stream: works out, status in, until the session ends.
pub mod session;
/// TLS handshakes of the agent port, with reloading certificates.
pub mod tls;
