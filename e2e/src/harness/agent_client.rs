//! A raw gRPC client that authenticates as an agent would (a bearer token in
//! the `authorization` metadata), for tests that must send the hub what a real
//! agent never sends.

use ferry_proto::PROTOCOL_VERSION;
use ferry_proto::v1::work_distributor_client::WorkDistributorClient;
use ferry_proto::v1::{self, agent_message};
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// Adds `authorization: Bearer <token>` to every request, or nothing when
/// there is no token (to test the hub's refusal of anonymous streams).
#[derive(Clone, Debug)]
pub struct BearerToken(Option<MetadataValue<Ascii>>);

impl Interceptor for BearerToken {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(header) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", header.clone());
        }
        Ok(request)
    }
}

/// The hub's `WorkDistributor` client as an agent holding `token` sees it.
pub type AgentClient = WorkDistributorClient<InterceptedService<Channel, BearerToken>>;

/// A client on `channel` sending `token` as its bearer token. Panics when the
/// token is not ASCII, which only a broken test passes.
pub fn agent_client(channel: Channel, token: Option<&str>) -> AgentClient {
    let header = token.map(|t| {
        format!("Bearer {t}")
            .parse::<MetadataValue<Ascii>>()
            .expect("an ASCII token")
    });
    WorkDistributorClient::with_interceptor(channel, BearerToken(header))
}

/// An agent's stream as a test holds it: the hub's messages, and the sender
/// that keeps the agent's side open (dropping it ends that side).
pub struct AgentStream {
    /// What the hub sends.
    pub inbound: tonic::Streaming<v1::HubMessage>,
    /// What the test sends as the agent.
    pub outbound: tokio::sync::mpsc::Sender<v1::AgentMessage>,
}

/// Opens a stream on `channel` with `token` (if any) and says Hello for
/// `cluster`, as an agent of version `test` holding no works would. Fails
/// with the status the hub refused the stream with.
pub async fn open_agent_stream(
    channel: Channel,
    token: Option<&str>,
    cluster: &str,
) -> Result<AgentStream, tonic::Status> {
    let mut client = agent_client(channel, token);
    let (outbound, rx) = tokio::sync::mpsc::channel(4);
    let hello = v1::AgentMessage {
        body: Some(agent_message::Body::Hello(v1::Hello {
            protocol_version: PROTOCOL_VERSION,
            cluster_name: cluster.into(),
            agent_version: "test".into(),
            known_works: vec![],
            ..Default::default()
        })),
    };
    outbound
        .send(hello)
        .await
        .map_err(|_| tonic::Status::internal("the stream's queue closed before the Hello"))?;
    let inbound = client.sync(ReceiverStream::new(rx)).await?.into_inner();
    Ok(AgentStream { inbound, outbound })
}
