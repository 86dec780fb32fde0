//! The start of an agent stream, before anything of it is served: the
//! token in its metadata is authenticated (nothing is read from a stream
//! before that), then its first message must be a Hello naming the same
//! cluster, in a protocol version this hub serves. Every refusal is logged
//! and counted; a cluster refused because the hub does not accept it is told
//! why on its ManagedCluster too.

use std::net::IpAddr;
use std::time::Duration;

use ferry_proto::v1::{self, agent_message};
use prost::Message;
use tonic::{Code, Request, Status, Streaming};
use tracing::{debug, warn};

use crate::agent_certs::issuing::AgentCertificates;
use crate::agent_certs::presented::{ClientCertificate, Presented};
use crate::agent_certs::revocation::Revoked;
use crate::clusters::liveness::ClusterLiveness;
use crate::grpc::connection_limit::AgentConnectInfo;
use crate::grpc::identity::{AgentAuthenticator, AuthError, bearer_token};
use crate::grpc::message_caps::{MAX_HELLO_WORKS, MessageCaps};
use crate::grpc::protocol::check_agent_protocol;
use crate::metrics::{HubMetrics, RefusalReason};

/// How long an authenticated agent has to send its Hello. Agents send it as
/// soon as the stream opens; nothing is read from a stream before its token
/// is accepted.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connect with a certificate waits for the replica's caches
/// to be listed (just after the hub started) before it is told to come back.
const CACHES_WAIT: Duration = Duration::from_secs(5);

/// What an agent proved who it is with.
pub enum Credential {
    /// Its bearer token, reviewed again while the session lives.
    Token(String),
    /// A client certificate of the hub's agent CA that stands.
    Certificate(ClientCertificate),
}

impl Credential {
    /// `token` or `certificate`, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Credential::Token(_) => "token",
            Credential::Certificate(_) => "certificate",
        }
    }
}

/// An agent stream that passed the handshake.
pub struct Handshake {
    /// The cluster the agent's credential is for (and its Hello names).
    pub cluster: String,
    /// What the agent authenticated with.
    pub credential: Credential,
    /// The agent's Hello.
    pub hello: v1::Hello,
    /// The rest of the agent's messages, after its Hello.
    pub inbound: Streaming<v1::AgentMessage>,
}

/// Authenticates the stream of `request` and reads its Hello.
///
/// Fails with the gRPC status the agent gets: UNAUTHENTICATED (or another
/// code, by [`AuthError::to_status`]) for a refused token,
/// DEADLINE_EXCEEDED when no Hello comes within [`HELLO_TIMEOUT`],
/// INVALID_ARGUMENT for a first message that is no Hello or names no
/// cluster, OUT_OF_RANGE for a Hello over `caps.hello` (counted in
/// `ferry_hub_agent_messages_too_large_total`), PERMISSION_DENIED for a Hello naming another cluster than the
/// token, FAILED_PRECONDITION for a protocol version this hub does not serve.
pub async fn handshake(
    request: Request<Streaming<v1::AgentMessage>>,
    auth: &AgentAuthenticator,
    certificates: Option<&AgentCertificates>,
    liveness: &ClusterLiveness,
    metrics: &HubMetrics,
    caps: MessageCaps,
) -> Result<Handshake, Status> {
    // Who is calling is settled on the metadata alone: an unauthenticated
    // peer gets nothing read, so it costs the hub no memory but the
    // transport's flow-control windows.
    let connection = request.extensions().get::<AgentConnectInfo>().cloned();
    let peer = connection
        .as_ref()
        .and_then(AgentConnectInfo::remote_addr)
        .map(|a| a.ip());
    let presented = connection.as_ref().and_then(AgentConnectInfo::presented);
    let authenticated = match (presented, certificates) {
        (Some(presented), Some(certificates)) => {
            by_certificate(&presented, certificates, request.metadata(), metrics, peer).await?
        }
        _ => {
            let token = bearer_token(request.metadata()).map(str::to_string);
            auth.authenticate(request.metadata(), peer)
                .await
                .and_then(|cluster| Ok((cluster, Credential::Token(token?))))
        }
    };
    let (cluster, credential) = match authenticated {
        Ok(authenticated) => {
            // The connection carries an agent: it is no longer closed for
            // staying unauthenticated.
            if let Some(connection) = &connection {
                connection.authenticated();
            }
            authenticated
        }
        Err(refusal) => {
            log_refusal(peer, &refusal);
            metrics.refused(RefusalReason::from(&refusal));
            // A cluster the hub does not accept is told why on its
            // ManagedCluster too, where whoever can accept it looks.
            if let AuthError::NotAccepted(cluster) = &refusal {
                let liveness = liveness.clone();
                let cluster = cluster.clone();
                let reason = refusal.to_string();
                tokio::spawn(async move {
                    if let Err(error) = liveness.refused(&cluster, &reason).await {
                        warn!(%cluster, %error, "cannot record why the agent was refused");
                    }
                });
            }
            return Err(refusal.to_status());
        }
    };
    let mut inbound = request.into_inner();
    let refuse = |reason: RefusalReason, status: Status| {
        metrics.refused(reason);
        status
    };
    let first = tokio::time::timeout(HELLO_TIMEOUT, inbound.message())
        .await
        .map_err(|_| {
            let status =
                Status::deadline_exceeded(format!("no Hello within {} s", HELLO_TIMEOUT.as_secs()));
            refuse(RefusalReason::BadHello, status)
        })?;
    let too_large = |size: Option<usize>| {
        metrics.message_too_large("hello");
        let size = size.map(|n| format!(" of {n} bytes")).unwrap_or_default();
        warn!(%cluster, ?peer, limit = caps.hello, "agent refused: its Hello is over the limit");
        refuse(
            RefusalReason::BadHello,
            Status::out_of_range(format!(
                "the Hello{size} is over the hub's limit of {} bytes (a Hello lists at most {MAX_HELLO_WORKS} works)",
                caps.hello
            )),
        )
    };
    let first = match first {
        Err(status) if status.code() == Code::OutOfRange => return Err(too_large(None)),
        other => other.map_err(|status| refuse(RefusalReason::BadHello, status))?,
    };
    // The transport lets through the larger of the two caps; a Hello is
    // held to its own.
    if let Some(size) = first.as_ref().map(Message::encoded_len)
        && size > caps.hello
    {
        return Err(too_large(Some(size)));
    }
    let hello = match first {
        Some(v1::AgentMessage {
            body: Some(agent_message::Body::Hello(hello)),
        }) => hello,
        _ => {
            return Err(refuse(
                RefusalReason::BadHello,
                Status::invalid_argument("the first message must be a Hello"),
            ));
        }
    };
    if let Err(skew) = check_agent_protocol(hello.protocol_version) {
        warn!(%cluster, ?peer, agent_version = %hello.agent_version, %skew, "agent refused");
        return Err(refuse(RefusalReason::ProtocolVersion, skew.to_status()));
    }
    if hello.cluster_name.is_empty() {
        return Err(refuse(
            RefusalReason::BadHello,
            Status::invalid_argument("Hello names no cluster"),
        ));
    }
    // The name in Hello is only compared, never echoed: the token says
    // which cluster this is.
    if hello.cluster_name != cluster {
        warn!(%cluster, ?peer, "agent refused: its Hello names another cluster than its token");
        return Err(refuse(
            RefusalReason::WrongCluster,
            AuthError::WrongCluster {
                authenticated: cluster,
            }
            .to_status(),
        ));
    }
    Ok(Handshake {
        cluster,
        credential,
        hello,
        inbound,
    })
}

/// The cluster a connection's presented certificate authenticates, with the
/// credential: a certificate of the agent CA that still stands by the
/// replica's watched state, for the cluster the metadata names (if it names
/// one). Nothing is asked of the API server. Fails (the outer error) with
/// UNAUTHENTICATED for a certificate that is not the CA's or is revoked,
/// PERMISSION_DENIED for a cluster not accepted, UNAVAILABLE while the
/// replica's caches are not listed yet; the inner error is a refusal the
/// token path would give too (another cluster named).
async fn by_certificate(
    presented: &Presented,
    certificates: &AgentCertificates,
    metadata: &tonic::metadata::MetadataMap,
    metrics: &HubMetrics,
    peer: Option<IpAddr>,
) -> Result<Result<(String, Credential), AuthError>, Status> {
    let cert = match presented {
        Presented::Verified(cert) => cert,
        Presented::Refused(reason) => {
            debug!(?peer, %reason, "agent refused: its client certificate is not the hub's");
            metrics.refused(RefusalReason::Certificate);
            return Err(Status::unauthenticated(format!(
                "the client certificate is not accepted: {reason}; connect with the ServiceAccount token"
            )));
        }
    };
    if !certificates.standing.ready(CACHES_WAIT).await {
        metrics.refused(RefusalReason::ReviewBusy);
        return Err(Status::unavailable(
            "the hub has not listed its clusters yet; try again",
        ));
    }
    let now = crate::grpc::lifetime::unix_now();
    let cluster = cert.subject.cluster.clone();
    match certificates.standing.check(cert, now) {
        Ok(()) => {}
        // Refused as a token of a cluster not accepted is: counted, logged
        // and written on the ManagedCluster by the caller.
        Err(Revoked::NotAccepted(_)) => return Ok(Err(AuthError::NotAccepted(cluster))),
        Err(revoked) => {
            warn!(%cluster, ?peer, %revoked, "agent refused: its client certificate no longer stands");
            metrics.refused(RefusalReason::Certificate);
            return Err(revoked.to_status());
        }
    }
    Ok(match crate::grpc::identity::claimed_cluster(metadata) {
        Err(refusal) => Err(refusal),
        Ok(Some(claimed)) if claimed != cluster => Err(AuthError::WrongCluster {
            authenticated: cluster,
        }),
        Ok(_) => Ok((cluster, Credential::Certificate(cert.clone()))),
    })
}

/// Logs a refused stream: quietly when anyone could cause it (no token, a
/// junk one, a flood), loudly when an agent is misconfigured.
fn log_refusal(peer: Option<IpAddr>, refusal: &AuthError) {
    match refusal {
        AuthError::Missing
        | AuthError::Malformed
        | AuthError::BadClusterName(_)
        | AuthError::Invalid(_)
        | AuthError::WrongAudience
        | AuthError::RateLimited
        // Thousands a second in a connect storm: the refusal counter says it.
        | AuthError::Busy { .. } => debug!(?peer, %refusal, "agent refused"),
        AuthError::NotAgent { .. }
        | AuthError::WrongCluster { .. }
        | AuthError::NotJoined(_)
        | AuthError::NotAccepted(_)
        | AuthError::Review(_) => warn!(?peer, %refusal, "agent refused"),
    }
}
