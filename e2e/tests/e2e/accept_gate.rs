//! The accept gate (issue 10, item 4), after OCM's `hubAcceptsClient`: the
//! hub refuses the agent of a cluster it does not accept, with
//! PERMISSION_DENIED and the reason on its ManagedCluster; accepting lets
//! the agent in; un-accepting ends its live session, found by the hub's
//! periodic sweep of ManagedClusters rather than the token re-review.

use std::time::Duration;

use ferry_api::contract::AGENT_SERVICE_ACCOUNT;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::hub_metric;
use ferry_e2e::harness::joined_agent::JoinedAgent;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work, wait_applied};
use ferry_hub::join::accept::set_accepted;
use ferry_hub::join::both::{JoinOptions, SpokeTarget, join_both_sides};
use ferry_hub::join::hub_side::Change;
use ferry_proto::PROTOCOL_VERSION;
use ferry_proto::v1::work_distributor_client::WorkDistributorClient;
use ferry_proto::v1::{self, agent_message};
use kube::api::Api;
use serde_json::json;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

const CLUSTER: &str = "cluster-a";
/// Past the agent's longest reconnect backoff (30 s), with room for a slow
/// machine.
const GATE_TIMEOUT: Duration = Duration::from_secs(90);

/// Opens a session as `cluster`'s agent with `token`, as the agent does, and
/// returns the hub's answer.
async fn hello(fleet: &Fleet, token: &str) -> Result<(), tonic::Status> {
    let channel = Endpoint::from_shared(fleet.hub_url.clone())
        .expect("url")
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&fleet.hub_ca_pem)))
        .expect("tls")
        .connect()
        .await
        .expect("the hub accepts connections");
    let header: MetadataValue<_> = format!("Bearer {token}").parse().expect("ascii token");
    let mut client =
        WorkDistributorClient::with_interceptor(channel, move |mut request: tonic::Request<()>| {
            request
                .metadata_mut()
                .insert("authorization", header.clone());
            Ok(request)
        });
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(v1::AgentMessage {
        body: Some(agent_message::Body::Hello(v1::Hello {
            protocol_version: PROTOCOL_VERSION,
            cluster_name: CLUSTER.into(),
            agent_version: "test".into(),
            known_works: vec![],
            ..Default::default()
        })),
    })
    .await
    .expect("queue");
    client.sync(ReceiverStream::new(rx)).await.map(|_| ())
}

fn refused_as_not_accepted(status: &Result<(), tonic::Status>) -> bool {
    matches!(status, Err(s) if s.code() == tonic::Code::PermissionDenied
        && s.message().contains("ferry-hub accept --cluster cluster-a"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_the_hub_does_not_accept_is_refused_until_accepted_and_cut_off_when_denied() {
    // Token reviews an hour apart: only the hub's sweep of ManagedClusters
    // (every heartbeat, 5 s here) can end the session of a denied cluster.
    let (fleet, spoke_plane) = tokio::join!(
        Fleet::start(FleetOptions {
            token_review_interval: Duration::from_secs(3600),
            ..FleetOptions::with_spokes(&[])
        }),
        ControlPlane::start(CLUSTER, ControlPlaneOptions::default())
    );
    let fleet = fleet.expect("the hub starts");
    let spoke_plane = spoke_plane.expect("the spoke starts");
    let spoke = spoke_plane.client().await.expect("spoke client");
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());

    // Joined pending: the ManagedCluster exists but does not accept the agent.
    let options = JoinOptions {
        cluster: CLUSTER.into(),
        service_account: AGENT_SERVICE_ACCOUNT.into(),
        hub_url: fleet.hub_url.clone(),
        ca_pem: fleet.hub_ca_pem.clone(),
        image: None,
        token_seconds: 3600,
        rotate_token: false,
        accept: false,
    };
    let report = join_both_sides(&fleet.hub_client, SpokeTarget::Cluster(&spoke), &options)
        .await
        .expect("join succeeds");
    assert!(!report.accepted);
    assert!(
        report.notes.iter().any(|n| n.contains("ferry-hub accept")),
        "{:?}",
        report.notes
    );
    let agent = JoinedAgent::start(&spoke, Duration::from_secs(5))
        .await
        .expect("an agent from the Secret");
    let refused = wait_until(
        &clusters,
        CLUSTER,
        "the refusal recorded on the ManagedCluster",
        GATE_TIMEOUT,
        |c| {
            c.status.as_ref().is_some_and(|s| {
                !s.connected
                    && s.disconnect_reason
                        .as_deref()
                        .is_some_and(|r| r.contains("not accepted"))
            })
        },
    )
    .await
    .expect("the agent is refused and the cluster says why");
    assert!(!refused.spec.hub_accepts_client);
    let token = agent.access.token.clone();
    let not_accepted = "ferry_hub_agent_refusals_total{reason=\"not_accepted\"}";
    let refusals_before = hub_metric(fleet.hub_probes_addr, not_accepted)
        .await
        .expect("scrape");
    let answer = hello(&fleet, &token).await;
    assert!(refused_as_not_accepted(&answer), "{answer:?}");
    // The refusal metric counts it under its own reason.
    let refusals = hub_metric(fleet.hub_probes_addr, not_accepted)
        .await
        .expect("scrape");
    assert!(
        refusals > refusals_before && refusals_before >= 1.0,
        "not_accepted refusals: {refusals_before} before this Hello (the agent's own), {refusals} after"
    );

    // Accepted: the agent gets in and applies works.
    let accepted = set_accepted(&fleet.hub_client, CLUSTER, true)
        .await
        .expect("accept");
    assert_eq!(accepted.change, Change::Configured);
    assert_eq!(
        set_accepted(&fleet.hub_client, CLUSTER, true)
            .await
            .expect("accept again")
            .change,
        Change::Unchanged
    );
    wait_until(
        &clusters,
        CLUSTER,
        "the accepted agent connected",
        GATE_TIMEOUT,
        |c| c.status.as_ref().is_some_and(|s| s.connected),
    )
    .await
    .expect("the agent connects once accepted");
    let work = manifest_work(
        CLUSTER,
        "gated",
        vec![config_map("default", "gated", json!({"a": "1"}))],
    );
    let works = fleet.create_work(&work).await.expect("work created");
    wait_applied(&works, "gated")
        .await
        .expect("the accepted agent applies works");

    // Denied again: the live session ends, and the agent stays out.
    let denied_at = std::time::Instant::now();
    set_accepted(&fleet.hub_client, CLUSTER, false)
        .await
        .expect("deny");
    wait_until(
        &clusters,
        CLUSTER,
        "the denied agent's session ended",
        GATE_TIMEOUT,
        |c| {
            c.status.as_ref().is_some_and(|s| {
                !s.connected
                    && s.disconnect_reason
                        .as_deref()
                        .is_some_and(|r| r.contains("not accepted"))
            })
        },
    )
    .await
    .expect("un-accepting ends the session");
    // A figure for the README, not a limit.
    println!(
        "accept gate: a denied cluster's session ended {} ms after the deny (sweep every 5 s)",
        denied_at.elapsed().as_millis()
    );
    let answer = hello(&fleet, &token).await;
    assert!(refused_as_not_accepted(&answer), "{answer:?}");

    agent.stop().await;
    fleet.stop().await;
}
