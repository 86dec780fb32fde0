//! Client certificates for agents. An agent authenticates its first session
//! with its ServiceAccount token (one TokenReview), asks for a certificate on
//! the stream, and connects with it from then on: the hub checks the chain
//! against its own CA and the certificate's standing against its watched
//! ManagedClusters and agent ServiceAccounts, with no call to its API server.
//! A denied, deleted, re-joined or rotated cluster is refused at its next
//! connect and its live sessions end as soon as the watch delivers the change.

/// The hub's agent CA: made once, kept in a Secret, signs requests.
pub mod authority;
/// The agent CA Secret: read, or created by the first replica to start.
pub mod ca_secret;
/// Why the agent CA or a certificate could not be made or read.
pub mod error;
/// Serving certificate requests that arrive on a session.
pub mod issuing;
/// A certificate an agent presented, checked against the CA after the TLS handshake.
pub mod presented;
/// Whether a presented certificate still stands (pure).
pub mod revocation;
/// What revocation reads: the watched clusters and agent accounts, and
/// the wake-ups of the sessions they concern.
pub mod standing;
/// Who a certificate is for, as written into it.
pub mod subject;
/// The TLS layer's half: client certificates are asked for, never required.
pub mod tls_verifier;
