//! Version skew (issue 10, item 5): a hub serves agents of its own protocol
//! version and of the one before; an older or newer agent is refused with
//! FAILED_PRECONDITION and a message naming both versions and which side to
//! upgrade (hub first, then agents).

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_hub::join::hub_side::join_cluster;
use ferry_proto::v1::work_distributor_client::WorkDistributorClient;
use ferry_proto::v1::{self, agent_message, hub_message};
use ferry_proto::{MIN_AGENT_PROTOCOL_VERSION, PROTOCOL_VERSION};
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

/// Says Hello as an agent speaking `version`; Ok with the hub's first
/// message when it accepts, else the status it refused with.
async fn hello_as(
    channel: Channel,
    token: &str,
    version: u32,
) -> Result<v1::HubMessage, tonic::Status> {
    let bearer: MetadataValue<_> = format!("Bearer {token}").parse().expect("ascii");
    let mut client =
        WorkDistributorClient::with_interceptor(channel, move |mut r: tonic::Request<()>| {
            r.metadata_mut().insert("authorization", bearer.clone());
            Ok(r)
        });
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(v1::AgentMessage {
        body: Some(agent_message::Body::Hello(v1::Hello {
            protocol_version: version,
            cluster_name: "cluster-a".into(),
            agent_version: format!("skew-{version}"),
            known_works: vec![],
            ..Default::default()
        })),
    })
    .await
    .expect("queue");
    let mut inbound = client.sync(ReceiverStream::new(rx)).await?.into_inner();
    let first = inbound.message().await?;
    drop(tx);
    Ok(first.expect("the hub answers an accepted Hello"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_one_version_behind_are_served_and_others_are_told_what_to_upgrade() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[]))
        .await
        .expect("fleet starts");
    let token = join_cluster(&fleet.hub_client, "cluster-a", 3600)
        .await
        .expect("token");
    let channel = Endpoint::from_shared(fleet.hub_url.clone())
        .expect("url")
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&fleet.hub_ca_pem)))
        .expect("tls")
        .connect()
        .await
        .expect("connect");

    for served in [MIN_AGENT_PROTOCOL_VERSION, PROTOCOL_VERSION] {
        let first = hello_as(channel.clone(), &token, served)
            .await
            .unwrap_or_else(|s| panic!("protocol {served} is served: {s:?}"));
        assert!(
            matches!(first.body, Some(hub_message::Body::Welcome(_))),
            "{first:?}"
        );
    }

    let newer = hello_as(channel.clone(), &token, PROTOCOL_VERSION + 1)
        .await
        .expect_err("a newer agent is refused");
    assert_eq!(newer.code(), tonic::Code::FailedPrecondition);
    let message = newer.message();
    assert!(
        message.contains(&format!("agent speaks protocol {}", PROTOCOL_VERSION + 1))
            && message.contains(&format!("this hub (protocol {PROTOCOL_VERSION})"))
            && message.contains("upgrade the hub first"),
        "{message}"
    );

    let older = hello_as(channel.clone(), &token, MIN_AGENT_PROTOCOL_VERSION - 1)
        .await
        .expect_err("an older agent is refused");
    assert_eq!(older.code(), tonic::Code::FailedPrecondition);
    let message = older.message();
    assert!(
        message.contains(&format!(
            "agent speaks protocol {}",
            MIN_AGENT_PROTOCOL_VERSION - 1
        )) && message.contains(&format!(
            "serves protocols {MIN_AGENT_PROTOCOL_VERSION} to {PROTOCOL_VERSION}"
        )) && message.contains("upgrade the agent"),
        "{message}"
    );
    fleet.stop().await;
}
