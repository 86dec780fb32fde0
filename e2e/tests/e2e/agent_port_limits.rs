//! What one peer can hold of the agent port, and how large an authenticated
//! agent's messages may be (issue 20, items 4 and 5): a status report over
//! its cap costs only that work's details, not the session every other work
//! of the cluster reports through (issue 48, item 2); messages the hub
//! cannot take (over the transport's cap, a Hello over its own) end only
//! their own session with OUT_OF_RANGE; all are counted; one
//! address past its share of connections cannot take the slots the agent
//! needs; a connection that never carries an authenticated stream is closed
//! at its deadline (measured and printed) while the idle agent's session
//! goes on.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ferry_api::managed_cluster::ManagedCluster;
use ferry_e2e::harness::agent_client::agent_client;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::{hub_metric, wait_metric_above};
use ferry_e2e::helpers::sessions::{session_of, wait_new_session};
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work, wait_applied};
use ferry_hub::grpc::message_caps::{MAX_HELLO_WORKS, MessageCaps};
use ferry_hub::join::hub_side::join_cluster;
use ferry_proto::PROTOCOL_VERSION;
use ferry_proto::v1::{self, agent_message};
use kube::api::Api;
use prost::Message;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpSocket, TcpStream};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use tonic::transport::Channel;

const CLUSTER: &str = "cluster-a";
/// A cluster joined on the hub with no agent: the oversized sessions are
/// its, so the agent of `CLUSTER` shares nothing with them.
const RAW_CLUSTER: &str = "cluster-raw";

fn hello(known_works: Vec<v1::WorkVersion>) -> v1::AgentMessage {
    v1::AgentMessage {
        body: Some(agent_message::Body::Hello(v1::Hello {
            protocol_version: PROTOCOL_VERSION,
            cluster_name: RAW_CLUSTER.into(),
            agent_version: "oversized".into(),
            known_works,
            ..Default::default()
        })),
    }
}

/// A status report of about `bytes` bytes (one long condition message).
fn report(bytes: usize) -> v1::AgentMessage {
    v1::AgentMessage {
        body: Some(agent_message::Body::Status(v1::WorkStatus {
            work: Some(v1::WorkRef {
                uid: "00000000-0000-4000-8000-000000000000".into(),
                namespace: RAW_CLUSTER.into(),
                name: "big".into(),
            }),
            generation: 1,
            conditions: vec![v1::Condition {
                r#type: "Applied".into(),
                status: "True".into(),
                reason: "Big".into(),
                message: "x".repeat(bytes),
                ..Default::default()
            }],
            ..Default::default()
        })),
    }
}

/// Opens a stream with `token`, sends `messages`, keeps it open, and returns
/// how the hub ended it: the status, or None when it ended cleanly.
async fn ended_with(
    url: &str,
    token: &str,
    messages: Vec<v1::AgentMessage>,
) -> Option<tonic::Status> {
    let channel = Channel::from_shared(url.to_string())
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    for message in messages {
        tx.send(message).await.expect("queue");
    }
    let mut client = agent_client(channel, Some(token)).max_encoding_message_size(usize::MAX);
    let mut inbound = match client.sync(ReceiverStream::new(rx)).await {
        Ok(response) => response.into_inner(),
        Err(status) => return Some(status),
    };
    let ended = async {
        loop {
            match inbound.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => return None,
                Err(status) => return Some(status),
            }
        }
    };
    let end = tokio::time::timeout(Duration::from_secs(60), ended)
        .await
        .expect("the hub ends a stream with an oversized message");
    drop(tx);
    end
}

/// Opens a stream with `token`, sends `messages`, waits for `served` (a sign
/// that the hub handled them), then closes its side and returns how the hub
/// ended the stream: None when it ended cleanly.
async fn served_then_closed(
    url: &str,
    token: &str,
    messages: Vec<v1::AgentMessage>,
    served: impl std::future::Future<Output = ()>,
) -> Option<tonic::Status> {
    let channel = Channel::from_shared(url.to_string())
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    for message in messages {
        tx.send(message).await.expect("queue");
    }
    let mut client = agent_client(channel, Some(token)).max_encoding_message_size(usize::MAX);
    let mut inbound = match client.sync(ReceiverStream::new(rx)).await {
        Ok(response) => response.into_inner(),
        Err(status) => return Some(status),
    };
    served.await;
    drop(tx);
    loop {
        match inbound.message().await {
            Ok(Some(_)) => continue,
            Ok(None) => return None,
            Err(status) => return Some(status),
        }
    }
}

fn out_of_range_naming(end: &Option<tonic::Status>, what: &str, limit: usize) {
    let status = end.as_ref().expect("the stream ends with an error");
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    assert!(
        status.message().contains(what) && status.message().contains(&limit.to_string()),
        "the status names the message and the limit: {}",
        status.message()
    );
    println!("  ended with OUT_OF_RANGE: {}", status.message());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_over_its_cap_costs_only_its_details_and_larger_messages_end_only_their_own_session()
 {
    let fleet = Fleet::start(FleetOptions {
        tls: false,
        ..FleetOptions::with_spokes(&[CLUSTER])
    })
    .await
    .expect("fleet starts");
    let caps = MessageCaps::default();
    println!(
        "caps: Hello {} bytes ({MAX_HELLO_WORKS} works), report {} bytes, transport {} bytes (was {})",
        caps.hello,
        caps.report,
        caps.transport(),
        ferry_proto::MAX_MESSAGE_BYTES
    );
    let works = fleet
        .create_work(&manifest_work(
            CLUSTER,
            "before",
            vec![config_map("default", "before", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "before")
        .await
        .expect("the agent is served");
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    let agent_session = session_of(&clusters, CLUSTER).await;
    let token = join_cluster(&fleet.hub_client, RAW_CLUSTER, 3600)
        .await
        .expect("token");
    let metrics = fleet.hub_probes_addr;
    let counted = |message: &'static str| async move {
        hub_metric(
            metrics,
            &format!("ferry_hub_agent_messages_too_large_total{{message=\"{message}\"}}"),
        )
        .await
        .expect("scrape")
    };

    // A report over the report cap but under the transport's: bounded once
    // decoded and delivered (it names no work of the cluster, so it is
    // counted as such), and the session goes on until the peer closes it.
    let just_over = report(caps.report + 1024);
    println!("report of {} bytes:", just_over.encoded_len());
    let unknown = "ferry_hub_status_reports_total{outcome=\"unknown_work\"}";
    let before = hub_metric(metrics, unknown).await.expect("scrape");
    let delivered = async {
        wait_metric_above(metrics, unknown, before, Duration::from_secs(60))
            .await
            .expect("the bounded report is delivered");
    };
    let end = served_then_closed(
        &fleet.hub_url,
        &token,
        vec![hello(vec![]), just_over],
        delivered,
    )
    .await;
    assert!(end.is_none(), "the session outlives the report: {end:?}");
    println!("  delivered without its details; the session ended only when the peer closed it");
    // A report over the transport's cap: refused before it is buffered.
    let far_over = report(caps.transport() + 1024);
    println!("report of {} bytes:", far_over.encoded_len());
    let end = ended_with(&fleet.hub_url, &token, vec![hello(vec![]), far_over]).await;
    out_of_range_naming(&end, "message", caps.report);
    assert!(counted("report").await >= 2.0, "both reports are counted");

    // A Hello listing more works than any agent holds: real-looking UIDs
    // at generation 1 take 42 bytes each, so this is just over the cap
    // (and far under the 16 MiB the transport allowed before).
    let many: Vec<v1::WorkVersion> = (0..caps.hello / 42 + 1_000)
        .map(|i| v1::WorkVersion {
            uid: format!("{i:08x}-0000-4000-8000-000000000000"),
            generation: 1,
        })
        .collect();
    let big_hello = hello(many);
    println!("Hello of {} bytes:", big_hello.encoded_len());
    assert!(
        big_hello.encoded_len() > caps.hello
            && big_hello.encoded_len() < ferry_proto::MAX_MESSAGE_BYTES
    );
    let end = ended_with(&fleet.hub_url, &token, vec![big_hello]).await;
    out_of_range_naming(&end, "Hello", caps.hello);
    assert!(counted("hello").await >= 1.0, "the Hello is counted");

    // The real agent's session was never touched, and it is still served.
    assert_eq!(
        session_of(&clusters, CLUSTER).await,
        agent_session,
        "the agent kept its session"
    );
    let after = fleet
        .create_work(&manifest_work(
            CLUSTER,
            "after",
            vec![config_map("default", "after", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&after, "after")
        .await
        .expect("the agent is served after the oversized sessions");
    fleet.stop().await;
}

/// A TCP connection to `hub` from loopback address `from` (another peer
/// than the agent, which dials from 127.0.0.1).
async fn connect_from(from: &str, hub: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{from}:0").parse().expect("address"))
        .expect("bind a second loopback address");
    socket.connect(hub).await.expect("connect")
}

/// How long until the hub closes `connection` (its reads end), at most
/// `bound`; None when it stays open that long.
async fn closed_within(connection: &mut TcpStream, bound: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    let read_to_end = async {
        loop {
            match connection.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    };
    tokio::time::timeout(bound, read_to_end)
        .await
        .ok()
        .map(|()| started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_past_its_share_cannot_take_the_agents_slots_and_idle_unauthenticated_connections_are_closed()
 {
    const SHARE: usize = 4;
    const IDLE: Duration = Duration::from_secs(4);
    let mut options = FleetOptions::with_spokes(&[CLUSTER]);
    // Plaintext: an idle peer here has nothing to time out but the
    // unauthenticated deadline (no TLS handshake).
    options.tls = false;
    options.transport.max_connections = 12;
    options.transport.max_connections_per_peer = SHARE;
    options.transport.unauthenticated_idle = IDLE;
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    let works = fleet
        .create_work(&manifest_work(
            CLUSTER,
            "before",
            vec![config_map("default", "before", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "before")
        .await
        .expect("the agent is served");
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    let hub = fleet.hub_replica_addr(0);
    let metrics = fleet.hub_probes_addr;
    let per_peer = "ferry_hub_agent_connections_closed_total{reason=\"max_connections_per_peer\"}";
    let idled = "ferry_hub_agent_connections_closed_total{reason=\"unauthenticated_idle\"}";
    let per_peer_before = hub_metric(metrics, per_peer).await.expect("scrape");

    // One address opens 20 connections, more than the port's 12: it keeps
    // its share and the rest are closed at once.
    let opened = Instant::now();
    let mut flood = Vec::new();
    for _ in 0..20 {
        flood.push(connect_from("127.0.0.2", hub).await);
    }
    let mut kept = Vec::new();
    let mut refused = 0;
    for mut connection in flood {
        if closed_within(&mut connection, Duration::from_millis(500))
            .await
            .is_some()
        {
            refused += 1;
        } else {
            kept.push(connection);
        }
    }
    println!(
        "127.0.0.2 opened 20 connections: {} kept, {refused} closed at once",
        kept.len()
    );
    assert_eq!(kept.len(), SHARE, "the address keeps exactly its share");
    let counted = hub_metric(metrics, per_peer).await.expect("scrape") - per_peer_before;
    assert!(counted >= (20 - SHARE) as f64, "counted {counted}");

    // While the flood holds its share, the agent dials again and is served.
    let previous = session_of(&clusters, CLUSTER).await;
    fleet.kill_agent(CLUSTER).await;
    fleet.start_agent(CLUSTER);
    wait_new_session(&clusters, CLUSTER, previous, Duration::from_secs(60))
        .await
        .expect("the agent opens a new session beside the flood");
    let during = fleet
        .create_work(&manifest_work(
            CLUSTER,
            "during",
            vec![config_map("default", "during", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&during, "during")
        .await
        .expect("the agent is served while the flood holds its share");
    let agent_session = session_of(&clusters, CLUSTER).await;

    // The kept connections never carry a stream: each is closed at its
    // deadline, counted.
    let bound = IDLE + Duration::from_secs(10);
    let mut took = Vec::new();
    for connection in &mut kept {
        let elapsed = closed_within(connection, bound.saturating_sub(opened.elapsed()))
            .await
            .map(|_| opened.elapsed())
            .expect("an unauthenticated connection is closed at its deadline");
        took.push(elapsed);
    }
    let slowest = took.iter().max().copied().unwrap_or_default();
    println!(
        "unauthenticated idle connections closed {:.1} s to {:.1} s after they opened (deadline {} s)",
        took.iter().min().copied().unwrap_or_default().as_secs_f64(),
        slowest.as_secs_f64(),
        IDLE.as_secs()
    );
    assert!(
        took.iter().all(|t| *t + Duration::from_millis(200) >= IDLE),
        "not closed before the deadline: {took:?}"
    );
    wait_metric_above(metrics, idled, (SHARE - 1) as f64, Duration::from_secs(10))
        .await
        .expect("the closes are counted");

    // A peer that completes the HTTP/2 handshake and answers pings, but
    // opens no stream, is closed at its deadline too.
    let idle_h2 = connect_from("127.0.0.3", hub).await;
    let started = Instant::now();
    let (_sender, connection) = h2::client::handshake(idle_h2)
        .await
        .expect("HTTP/2 handshake");
    let ended = tokio::time::timeout(IDLE + Duration::from_secs(10), connection)
        .await
        .map(|_| started.elapsed())
        .expect("an idle HTTP/2 connection is closed at its deadline");
    println!(
        "an HTTP/2 connection with no stream was closed after {:.1} s",
        ended.as_secs_f64()
    );
    assert!(ended + Duration::from_millis(200) >= IDLE, "{ended:?}");

    // The agent's connection, idle but for heartbeats and far past the
    // deadline, keeps its session; its address was never refused.
    assert_eq!(
        session_of(&clusters, CLUSTER).await,
        agent_session,
        "the agent's session outlived the unauthenticated deadline"
    );
    let after = fleet
        .create_work(&manifest_work(
            CLUSTER,
            "after",
            vec![config_map("default", "after", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&after, "after")
        .await
        .expect("the agent is still served");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hello_over_its_cap_is_refused_even_where_reports_may_be_larger() {
    // A hub admitting works of 8 MB: its transport lets 8.3 MB through for
    // reports, and a Hello is still held to its own, smaller cap.
    let mut options = FleetOptions::with_spokes(&[CLUSTER]);
    options.tls = false;
    options.transport.message_caps = MessageCaps::for_max_work_bytes(8_000_000);
    let caps = options.transport.message_caps;
    assert!(caps.hello < caps.report && caps.transport() == caps.report);
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let token = join_cluster(&fleet.hub_client, RAW_CLUSTER, 3600)
        .await
        .expect("token");
    let before = hub_metric(
        fleet.hub_probes_addr,
        "ferry_hub_agent_messages_too_large_total{message=\"hello\"}",
    )
    .await
    .expect("scrape");
    let many: Vec<v1::WorkVersion> = (0..caps.hello / 42 + 1_000)
        .map(|i| v1::WorkVersion {
            uid: format!("{i:08x}-0000-4000-8000-000000000000"),
            generation: 1,
        })
        .collect();
    let big_hello = hello(many);
    let size = big_hello.encoded_len();
    assert!(size > caps.hello && size < caps.transport());
    println!(
        "Hello of {size} bytes, under the transport's {} bytes:",
        caps.transport()
    );
    let end = ended_with(&fleet.hub_url, &token, vec![big_hello]).await;
    out_of_range_naming(&end, &format!("Hello of {size} bytes"), caps.hello);
    let after = hub_metric(
        fleet.hub_probes_addr,
        "ferry_hub_agent_messages_too_large_total{message=\"hello\"}",
    )
    .await
    .expect("scrape");
    assert_eq!(after, before + 1.0, "the Hello is counted");

    // A real agent's Hello, and its reports, still pass.
    let works = fleet
        .create_work(&manifest_work(
            CLUSTER,
            "served",
            vec![config_map("default", "served", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "served")
        .await
        .expect("the agent is served");
    fleet.stop().await;
}
