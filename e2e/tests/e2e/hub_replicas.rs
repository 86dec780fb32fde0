//! Two hub replicas against one hub control plane: agents on either get
//! their works, status writes do not fight, and an agent moved to the other
//! replica carries on (issue 5, item 7); a replica that crashes has its
//! clusters swept to disconnected by the one that remains.

use std::time::Duration;

use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::agent_client::agent_client;
use ferry_e2e::harness::agent_process::free_loopback_port;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_process::{HubProcess, HubProcessOptions};
use ferry_e2e::harness::link::LinkState;
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, edit_manifests, is_applied_at_current_generation, manifest_work,
    wait_applied,
};
use ferry_hub::clusters::replica_lease::lease_name;
use ferry_hub::join::hub_side::join_cluster;
use ferry_proto::PROTOCOL_VERSION;
use ferry_proto::v1::{self, agent_message};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

async fn resource_versions(works: &[(&Api<ManifestWork>, &str)]) -> Vec<String> {
    let mut versions = Vec::new();
    for (api, name) in works {
        let work = api.get(name).await.expect("read");
        versions.push(work.resource_version().unwrap_or_default());
    }
    versions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_on_either_replica_are_served_and_status_writes_do_not_fight() {
    let mut options = FleetOptions::with_spokes(&["cluster-a", "cluster-b"]);
    options.hub_replicas = 2;
    options.heartbeat = Duration::from_secs(1);
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    let work = |cluster: &str, name: &str| {
        manifest_work(
            cluster,
            name,
            vec![config_map("default", name, json!({"v": "1"}))],
        )
    };
    // cluster-a dials replica 0, cluster-b replica 1.
    let a = fleet
        .create_work(&work("cluster-a", "on-a"))
        .await
        .expect("create");
    let b = fleet
        .create_work(&work("cluster-b", "on-b"))
        .await
        .expect("create");
    wait_applied(&a, "on-a").await.expect("served by replica 0");
    wait_applied(&b, "on-b").await.expect("served by replica 1");
    for (api, name) in [(&a, "on-a"), (&b, "on-b")] {
        edit_manifests(api, name, |m| m[0]["data"]["v"] = json!("2"))
            .await
            .expect("edit");
        wait_until(
            api,
            name,
            "edit applied",
            APPLY_TIMEOUT,
            is_applied_at_current_generation,
        )
        .await
        .expect("applied");
    }

    // Settled: nobody keeps rewriting a work's status, nor a cluster's. The
    // signal that both replicas kept working meanwhile: each renewed its own
    // Lease twice (the Lease vouches for its sessions) while their sweepers
    // ran.
    let settled = resource_versions(&[(&a, "on-a"), (&b, "on-b")]).await;
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    let mut replicas = Vec::new();
    let mut cluster_versions = Vec::new();
    for cluster in ["cluster-a", "cluster-b"] {
        let c = clusters.get(cluster).await.expect("read cluster");
        cluster_versions.push(c.resource_version());
        replicas.push(c.status.map(|s| s.served_by).unwrap_or_default());
    }
    assert_ne!(replicas[0], replicas[1], "each agent has its own replica");
    let leases: Api<Lease> = Api::namespaced(fleet.hub_client.clone(), "default");
    for replica in &replicas {
        let name = lease_name(replica);
        for _ in 0..2 {
            let renewed = |l: &Lease| l.spec.as_ref().and_then(|s| s.renew_time.clone());
            let before = renewed(&leases.get(&name).await.expect("the replica Lease"));
            wait_until(&leases, &name, "a renewal", APPLY_TIMEOUT, |l| {
                renewed(l) != before
            })
            .await
            .expect("each replica keeps renewing its Lease");
        }
    }
    assert_eq!(
        resource_versions(&[(&a, "on-a"), (&b, "on-b")]).await,
        settled,
        "two replicas leave a settled work alone"
    );
    for (cluster, version) in ["cluster-a", "cluster-b"].iter().zip(&cluster_versions) {
        let now = clusters.get(cluster).await.expect("read cluster");
        assert_eq!(
            &now.resource_version(),
            version,
            "an idle cluster is not written"
        );
    }

    // Replica 1 goes away; cluster-b's traffic is sent to replica 0.
    let before = clusters.get("cluster-b").await.expect("read");
    let old_session = before.status.map(|s| s.session_id).unwrap_or_default();
    fleet
        .spoke("cluster-b")
        .link
        .retarget(fleet.hub_replica_addr(0));
    fleet.stop_hub_replica(1).await;
    fleet.spoke("cluster-b").link.set(LinkState::Up);
    let moved = |c: &ManagedCluster| {
        c.status
            .as_ref()
            .is_some_and(|s| s.connected && s.session_id != old_session)
    };
    wait_until(
        &clusters,
        "cluster-b",
        "reconnected to replica 0",
        APPLY_TIMEOUT,
        moved,
    )
    .await
    .expect("the agent moves to the other replica");
    edit_manifests(&b, "on-b", |m| m[0]["data"]["v"] = json!("3"))
        .await
        .expect("edit");
    wait_until(
        &b,
        "on-b",
        "edit applied",
        APPLY_TIMEOUT,
        is_applied_at_current_generation,
    )
    .await
    .expect("served by the remaining replica");
    b.delete("on-b", &Default::default()).await.expect("delete");
    wait_deleted(&b, "on-b", "deleted", APPLY_TIMEOUT)
        .await
        .expect("deletion completes through the remaining replica");
    fleet.stop().await;
}

/// Keeps a session of `cluster` open on the hub at `url` (TLS, trusting
/// `ca_pem`) with `token`, sending a heartbeat every second, until the
/// returned task is aborted or the hub goes away.
async fn heartbeating_session(
    url: &str,
    ca_pem: &str,
    token: &str,
    cluster: &str,
) -> tokio::task::JoinHandle<()> {
    let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca_pem));
    let channel = Channel::from_shared(url.to_string())
        .expect("url")
        .tls_config(tls)
        .expect("TLS")
        .connect()
        .await
        .expect("connect");
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tx.send(v1::AgentMessage {
        body: Some(agent_message::Body::Hello(v1::Hello {
            protocol_version: PROTOCOL_VERSION,
            cluster_name: cluster.into(),
            agent_version: "heartbeating".into(),
            known_works: vec![],
            ..Default::default()
        })),
    })
    .await
    .expect("queue Hello");
    let mut inbound = agent_client(channel, Some(token))
        .sync(ReceiverStream::new(rx))
        .await
        .expect("session opens")
        .into_inner();
    tokio::spawn(async move {
        let mut beat = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = beat.tick() => {
                    let heartbeat = v1::AgentMessage {
                        body: Some(agent_message::Body::Heartbeat(v1::Heartbeat::now())),
                    };
                    if tx.send(heartbeat).await.is_err() {
                        return;
                    }
                }
                received = inbound.message() => if !matches!(received, Ok(Some(_))) {
                    return;
                },
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_replicas_clusters_are_swept_to_disconnected_by_the_remaining_replica() {
    // The crashed replica is the real `ferry-hub` binary, killed with
    // SIGKILL: nothing of it records the end of its sessions.
    tokio::task::spawn_blocking(ferry_e2e::harness::image::build_binaries)
        .await
        .expect("build task")
        .expect("ferry-hub builds");
    let mut options = FleetOptions::with_spokes(&[]);
    options.heartbeat = Duration::from_secs(1);
    let fleet = Fleet::start(options)
        .await
        .expect("the remaining replica starts");
    let free = || free_loopback_port().expect("a free port");
    let mut crashing = HubProcess::start(
        &fleet.hub,
        HubProcessOptions {
            grpc: free(),
            probes: free(),
            // Its Lease, beside the remaining replica's, vouches for its
            // sessions for 3 s without renewal.
            extra_args: vec![
                "--heartbeat-seconds=1".into(),
                "--replica-lease-namespace=default".into(),
                "--replica-lease-seconds=3".into(),
            ],
            env: vec![],
        },
    )
    .await
    .expect("the replica that will crash starts");

    let cluster = "cluster-crash";
    let token = join_cluster(&fleet.hub_client, cluster, 3600)
        .await
        .expect("join");
    let session = heartbeating_session(&crashing.url(), &crashing.ca_pem, &token, cluster).await;
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    let connected = wait_until(&clusters, cluster, "connected", APPLY_TIMEOUT, |c| {
        c.status
            .as_ref()
            .is_some_and(|s| s.connected && !s.served_by.is_empty())
    })
    .await
    .expect("the session on the crashing replica is recorded");
    let served_by = connected.status.map(|s| s.served_by).unwrap_or_default();
    let leases: Api<Lease> = Api::namespaced(fleet.hub_client.clone(), "default");
    leases
        .get(&lease_name(&served_by))
        .await
        .expect("the crashing replica keeps its own Lease");

    crashing.kill().await;
    let killed = std::time::Instant::now();
    session.abort();
    let swept = wait_until(&clusters, cluster, "disconnected", APPLY_TIMEOUT, |c| {
        c.status.as_ref().is_some_and(|s| !s.connected)
    })
    .await
    .expect("the remaining replica marks the cluster disconnected");
    let reason = swept
        .status
        .and_then(|s| s.disconnect_reason)
        .unwrap_or_default();
    println!(
        "cluster swept to disconnected {:.1} s after its replica was killed: {reason}",
        killed.elapsed().as_secs_f64()
    );
    assert!(
        reason.contains(&format!(
            "hub replica {served_by} stopped renewing its Lease"
        )),
        "the remaining replica's sweep marked it once the crashed one's Lease lapsed: {reason}"
    );
    fleet.stop().await;
}
