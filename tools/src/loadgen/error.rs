//! Why a simulated fleet could not be started or run.

use std::time::Duration;

/// The simulated fleet could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LoadgenError {
    /// The hub URL is not a URL.
    #[error("hub URL {url}: {source}")]
    BadUrl {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: tonic::transport::Error,
    },
    /// The TLS settings were refused.
    #[error("TLS for {url}: {source}")]
    Tls {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: tonic::transport::Error,
    },
    /// Not every agent was connected in time.
    #[error(
        "{connected} of {wanted} agents connected within {waited:?} (at the deadline {dialing} dialing, {awaiting_response} waiting for the hub's response, {awaiting_welcome} for its Welcome; {silent_hub} sessions given up on a silent hub)"
    )]
    NotConnected {
        /// Agents connected at the deadline.
        connected: u64,
        /// Agents dialing at the deadline.
        dialing: u64,
        /// Agents waiting for the hub's response headers at the deadline.
        awaiting_response: u64,
        /// Agents waiting for a Welcome at the deadline.
        awaiting_welcome: u64,
        /// Sessions given up on a silent hub until the deadline.
        silent_hub: u64,
        /// Agents started.
        wanted: usize,
        /// How long it waited.
        waited: Duration,
    },
    /// A child process running a share of the agents failed.
    #[error("the share of agents from index {first}: {detail}")]
    Share {
        /// The fleet-wide index of the share's first agent.
        first: usize,
        /// What failed.
        detail: String,
    },
}
