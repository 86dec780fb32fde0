//! Why the agent CA could not be made, kept or used.

/// The agent CA could not be made, read or stored, or a request not signed.
#[derive(Debug, thiserror::Error)]
pub enum AgentCaError {
    /// Generating the CA key or certificate failed.
    #[error("generating the agent CA: {0}")]
    Generate(#[source] rcgen::Error),
    /// The CA Secret holds no usable certificate and key.
    #[error("the agent CA Secret {namespace}/{name} is not usable: {reason}")]
    Malformed {
        /// Namespace of the Secret.
        namespace: String,
        /// Name of the Secret.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The API server refused to read or create the CA Secret.
    #[error("{action} the agent CA Secret {namespace}/{name}: {source}")]
    Api {
        /// What the hub was doing.
        action: &'static str,
        /// Namespace of the Secret.
        namespace: String,
        /// Name of the Secret.
        name: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
}

/// Why a certificate request was not signed. The agent is told the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IssueError {
    /// The request is not a PKCS#10 request with a valid signature by a key
    /// of a kind the hub signs for.
    #[error("the certificate request is not a signed PKCS#10 request: {0}")]
    BadRequest(String),
    /// The hub does not yet see the cluster or its agent account in its
    /// caches (just joined); the agent asks again in a later session.
    #[error("the hub does not see {0} yet; ask again later")]
    NotSeen(String),
    /// The cluster's identity rotation time is ahead of the hub's clock by
    /// more than the skew it forgives, or is not a time.
    #[error(
        "the agent identity rotation time on the ManagedCluster is ahead of the hub's clock; mend the annotation or wait"
    )]
    RotationAhead,
    /// The session asked more often than a session may.
    #[error("this session asked for {0} certificates already; reconnect to ask again")]
    TooMany(u32),
    /// Signing failed.
    #[error("signing the certificate: {0}")]
    Sign(String),
}
