//! A raw gRPC client that authenticates as an agent would (a bearer token in
//! the `authorization` metadata), for tests that must send the hub what a real
//! agent never sends.

use ferry_proto::v1::work_distributor_client::WorkDistributorClient;
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
