//! Malformed, oversized and out-of-order messages end that one stream with an
//! error; the hub keeps serving every other agent (issue 5, item 8).

use std::time::Duration;

use bytes::Bytes;
use ferry_e2e::harness::agent_client::agent_client;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work, wait_applied};
use ferry_hub::join::hub_side::join_cluster;
use ferry_proto::v1::{self, agent_message};
use ferry_proto::{MAX_MESSAGE_BYTES, PROTOCOL_VERSION};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::json;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use tonic::transport::Channel;

fn hello(cluster: &str, protocol_version: u32) -> v1::AgentMessage {
    v1::AgentMessage {
        body: Some(agent_message::Body::Hello(v1::Hello {
            protocol_version,
            cluster_name: cluster.into(),
            agent_version: "hostile".into(),
            known_works: vec![],
            ..Default::default()
        })),
    }
}

/// Opens a stream with `token` that sends `messages` then stays open, and
/// returns how the hub answered: the error code of the call or of the
/// stream, or Ok when the hub simply ended the stream.
async fn answer(
    channel: Channel,
    token: &str,
    messages: Vec<v1::AgentMessage>,
) -> Result<(), Code> {
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    for message in messages {
        tx.send(message).await.expect("queue");
    }
    let mut client = agent_client(channel, Some(token))
        .max_encoding_message_size(usize::MAX)
        .max_decoding_message_size(MAX_MESSAGE_BYTES);
    let mut inbound = client
        .sync(ReceiverStream::new(rx))
        .await
        .map_err(|s| s.code())?
        .into_inner();
    let ended = async {
        loop {
            match inbound.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => return Ok(()),
                Err(status) => return Err(status.code()),
            }
        }
    };
    let result = tokio::time::timeout(Duration::from_secs(30), ended)
        .await
        .expect("the hub ends a hostile stream");
    drop(tx);
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_streams_end_with_an_error_and_the_hub_keeps_serving() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.heartbeat = Duration::from_secs(1);
    // Plaintext, so raw bytes can be sent below without a TLS client.
    options.tls = false;
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let token = join_cluster(&fleet.hub_client, "cluster-a", 3600)
        .await
        .expect("token");
    let channel = Channel::from_shared(fleet.hub_url.clone())
        .expect("url")
        .connect()
        .await
        .expect("connect");

    let status_first = v1::AgentMessage {
        body: Some(agent_message::Body::Status(v1::WorkStatus::default())),
    };
    assert_eq!(
        answer(channel.clone(), &token, vec![status_first]).await,
        Err(Code::InvalidArgument),
        "a stream must open with Hello"
    );
    assert_eq!(
        answer(
            channel.clone(),
            &token,
            vec![hello("cluster-a", PROTOCOL_VERSION + 7)]
        )
        .await,
        Err(Code::FailedPrecondition),
        "an unknown protocol version is refused"
    );
    assert_eq!(
        answer(channel.clone(), &token, vec![hello("", PROTOCOL_VERSION)]).await,
        Err(Code::InvalidArgument),
        "a Hello without a cluster name is refused"
    );
    assert_eq!(
        answer(channel.clone(), &token, vec![]).await,
        Err(Code::DeadlineExceeded),
        "a stream that never says Hello is closed"
    );
    let oversized = v1::AgentMessage {
        body: Some(agent_message::Body::Hello(v1::Hello {
            protocol_version: PROTOCOL_VERSION,
            cluster_name: "cluster-x".into(),
            agent_version: "x".repeat(MAX_MESSAGE_BYTES + 1),
            known_works: vec![],
            ..Default::default()
        })),
    };
    assert_eq!(
        answer(channel.clone(), &token, vec![oversized]).await,
        Err(Code::OutOfRange),
        "a message over the limit is refused"
    );
    assert_eq!(
        answer(
            channel.clone(),
            &token,
            vec![
                hello("cluster-a", PROTOCOL_VERSION),
                hello("cluster-a", PROTOCOL_VERSION)
            ]
        )
        .await,
        Ok(()),
        "a second Hello ends the session"
    );

    // Bytes that are not a protobuf message at all, framed as gRPC.
    let mut frame = vec![0u8];
    let garbage = [0xffu8; 32];
    frame.extend_from_slice(&u32::try_from(garbage.len()).expect("len").to_be_bytes());
    frame.extend_from_slice(&garbage);
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("{}/ferry.v1.WorkDistributor/Sync", fleet.hub_url))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {token}"))
        .body(Full::new(Bytes::from(frame)))
        .expect("request");
    let client = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<Full<Bytes>>();
    let response = client.request(request).await.expect("the hub answers");
    let header_status = response.headers().get("grpc-status").cloned();
    let collected = response.into_body().collect().await.expect("body");
    let grpc_status = header_status
        .or_else(|| {
            collected
                .trailers()
                .and_then(|t| t.get("grpc-status").cloned())
        })
        .expect("a gRPC status");
    assert_ne!(grpc_status, "0", "undecodable bytes are an error");

    // After all that, the real agent is served as before.
    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "after",
            vec![config_map("default", "after", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "after")
        .await
        .expect("the hub still serves real agents");
    fleet.stop().await;
}
