//! Agent sessions as the hub records them, and a bare session a test drives
//! itself: an "older" or extra session of a cluster with its real token.

use std::time::Duration;

use ferry_api::managed_cluster::ManagedCluster;
use ferry_proto::PROTOCOL_VERSION;
use ferry_proto::v1::{self, agent_message};
use kube::api::Api;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

use crate::harness::agent_client::agent_client;
use crate::helpers::wait::{WaitError, wait_until};

/// The session the hub last recorded for `cluster` (empty when none).
/// Panics when the cluster cannot be read: a broken test setup.
pub async fn session_of(clusters: &Api<ManagedCluster>, cluster: &str) -> String {
    let found = clusters.get(cluster).await.expect("read cluster");
    found.status.map(|s| s.session_id).unwrap_or_default()
}

/// Waits until the hub records a connected session of `cluster` other than
/// `previous`: the signal that a newer session opened.
pub async fn wait_new_session(
    clusters: &Api<ManagedCluster>,
    cluster: &str,
    previous: String,
    timeout: Duration,
) -> Result<ManagedCluster, WaitError> {
    wait_until(clusters, cluster, "a newer session", timeout, move |c| {
        c.status
            .as_ref()
            .is_some_and(|s| s.connected && s.session_id != previous)
    })
    .await
}

/// The agent version a [`RawSession`] says in its Hello, so the hub's
/// record of a session tells a test's sessions from the agent's.
pub const RAW_SESSION_VERSION: &str = "raw-session";

/// Waits until the hub records a connected session of `cluster` opened by
/// its real agent (not a [`RawSession`]) other than `previous`: the signal
/// that the agent (re)connected, whatever test sessions opened meanwhile.
pub async fn wait_agent_session(
    clusters: &Api<ManagedCluster>,
    cluster: &str,
    previous: String,
    timeout: Duration,
) -> Result<ManagedCluster, WaitError> {
    wait_until(
        clusters,
        cluster,
        "a session of the agent",
        timeout,
        move |c| {
            c.status.as_ref().is_some_and(|s| {
                s.connected && s.session_id != previous && s.agent_version != RAW_SESSION_VERSION
            })
        },
    )
    .await
}

/// A session a test drives: what it sends, and a task that ends when the
/// hub ends the stream.
pub struct RawSession {
    /// Messages to the hub; the stream stays open while this lives.
    pub sender: tokio::sync::mpsc::Sender<v1::AgentMessage>,
    /// Drains what the hub sends; finishes when the hub ends the session.
    pub ended: tokio::task::JoinHandle<()>,
}

/// Opens a session for `cluster` at `url` (plaintext) with `token`, says
/// Hello and then sends `reports`; the stream stays open while the returned
/// sender lives, and what the hub sends is drained. Panics when the hub
/// refuses the session: the tests using it expect it to open.
pub async fn raw_session(
    url: &str,
    token: &str,
    cluster: &str,
    reports: Vec<v1::WorkStatus>,
) -> tokio::sync::mpsc::Sender<v1::AgentMessage> {
    open_raw_session(url, token, cluster, reports).await.sender
}

/// [`raw_session`], also telling when the hub ends it.
pub async fn open_raw_session(
    url: &str,
    token: &str,
    cluster: &str,
    reports: Vec<v1::WorkStatus>,
) -> RawSession {
    let channel = Channel::from_shared(url.to_string())
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tx.send(v1::AgentMessage {
        body: Some(agent_message::Body::Hello(v1::Hello {
            protocol_version: PROTOCOL_VERSION,
            cluster_name: cluster.into(),
            agent_version: RAW_SESSION_VERSION.into(),
            known_works: vec![],
            ..Default::default()
        })),
    })
    .await
    .expect("queue Hello");
    for report in reports {
        tx.send(v1::AgentMessage {
            body: Some(agent_message::Body::Status(report)),
        })
        .await
        .expect("queue report");
    }
    let mut inbound = agent_client(channel, Some(token))
        .sync(ReceiverStream::new(rx))
        .await
        .expect("session opens")
        .into_inner();
    // Drain what the hub sends so the session is not held up by its queue.
    let ended = tokio::spawn(async move { while let Ok(Some(_)) = inbound.message().await {} });
    RawSession { sender: tx, ended }
}
