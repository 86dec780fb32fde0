//! Every TCP connection the hub and the agent open or accept has Nagle's
//! algorithm off (issue 32). With it on, a request or answer written in
//! more than one segment (an HTTP/2 HEADERS frame, then its DATA frame)
//! waits for the peer's delayed ACK of the first segment, up to 40 ms on
//! Linux: the agent's spoke client lost that on every write when it moved to
//! HTTP/2, and create → Applied went from 15 ms to 190 ms at p50.
//!
//! The real `ferry-hub` and `ferry-agent` binaries run; the test reads each
//! of their connected sockets' TCP_NODELAY as the kernel has it (copied
//! into this process with pidfd_getfd, see `harness::sockets`), after making
//! sure every kind of connection exists: the hub's to its API server, the
//! agents' port and the probe port it accepted, the webhook connection the
//! hub API server opened to it; the agent's to its spoke's API server and to
//! the hub, and its probe port.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::agent_process::AgentProcess;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_process::{HubProcess, HubProcessOptions};
use ferry_e2e::harness::sockets::{TcpConnection, tcp_connections};
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work, wait_applied};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long the connections may take to appear (the hub API server learns
/// of the webhook asynchronously).
const CONNECTIONS_TIMEOUT: Duration = Duration::from_secs(60);

fn free_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
}

fn port_of(url: &str) -> u16 {
    url.trim_end_matches('/')
        .rsplit(':')
        .next()
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("{url} names a port"))
}

/// An HTTP/1.1 keep-alive connection to `addr` that has had one answer:
/// the server accepted it and keeps it open while it is held.
async fn held_connection(addr: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: probe\r\n\r\n")
        .await
        .expect("request");
    let mut answer = [0u8; 512];
    let read = stream.read(&mut answer).await.expect("answer");
    assert!(
        answer[..read].starts_with(b"HTTP/1.1 200"),
        "{addr} answers /healthz: {:?}",
        String::from_utf8_lossy(&answer[..read])
    );
    stream
}

/// What each connection of a process is, by its ports.
struct Roles {
    /// (role, local port) of the ports the process accepts on.
    accepted: Vec<(&'static str, u16)>,
    /// (role, remote port) of the servers the process dials.
    opened: Vec<(&'static str, u16)>,
}

impl Roles {
    fn of(&self, connection: &TcpConnection) -> &'static str {
        self.accepted
            .iter()
            .find(|(_, port)| *port == connection.local.port())
            .or_else(|| {
                self.opened
                    .iter()
                    .find(|(_, port)| *port == connection.peer.port())
            })
            .map_or("other", |(role, _)| role)
    }

    fn all(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.accepted.iter().chain(&self.opened).map(|(r, _)| *r)
    }
}

/// Every connection of the two processes, by role.
fn connections(
    processes: &[(&'static str, u32, &Roles)],
) -> BTreeMap<&'static str, Vec<TcpConnection>> {
    let mut by_role: BTreeMap<&'static str, Vec<TcpConnection>> = BTreeMap::new();
    for (process, pid, roles) in processes {
        for connection in tcp_connections(*pid)
            .unwrap_or_else(|e| panic!("reading the sockets of the {process}: {e}"))
        {
            let role = match roles.of(&connection) {
                "other" if *process == "hub" => "hub: other",
                "other" => "agent: other",
                role => role,
            };
            by_role.entry(role).or_default().push(connection);
        }
    }
    by_role
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_the_hub_and_the_agent_open_has_nagle_off() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    fleet.stop_agent("cluster-a").await;
    fleet.stop_hub().await;
    let webhook = free_port();
    let mut hub = HubProcess::start(
        &fleet.hub,
        HubProcessOptions {
            grpc: free_port(),
            probes: free_port(),
            extra_args: vec![
                "--heartbeat-seconds=2".into(),
                format!("--webhook-addr={webhook}"),
                format!("--webhook-url=https://{webhook}"),
            ],
            env: vec![],
        },
    )
    .await
    .expect("the ferry-hub process starts");
    let hub_url = hub.url();
    let agent =
        AgentProcess::start_with_hub(&fleet, "cluster-a", (&hub_url, &hub.ca_pem), None, &[])
            .await
            .expect("ferry-agent starts");
    let hub_pid = hub.pid().expect("the hub runs");
    let agent_pid = agent.pid().expect("the agent runs");

    // A work applied end to end: the hub reads and writes its API server,
    // the agent its spoke's, and they talk to each other.
    let work = manifest_work(
        "cluster-a",
        "no-nagle",
        vec![config_map("default", "no-nagle", json!({"a": "1"}))],
    );
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "no-nagle")
        .await
        .unwrap_or_else(|e| panic!("work applied: {e}; agent log:\n{}", agent.log()));

    // Probe connections, held open while the sockets are read.
    let _hub_probe = held_connection(hub.probes()).await;
    let _agent_probe = held_connection(agent.probe_addr).await;

    let hub_roles = Roles {
        accepted: vec![
            ("hub: accepted from the agent", port_of(&hub_url)),
            ("hub: accepted on the probe port", hub.probes().port()),
            ("hub: accepted on the webhook port", webhook.port()),
        ],
        opened: vec![(
            "hub: opened to its API server",
            port_of(&fleet.hub.info.server),
        )],
    };
    let agent_roles = Roles {
        accepted: vec![("agent: accepted on the probe port", agent.probe_addr.port())],
        opened: vec![
            (
                "agent: opened to its spoke's API server",
                port_of(&fleet.spoke("cluster-a").control_plane.info.server),
            ),
            ("agent: opened to the hub", port_of(&hub_url)),
        ],
    };
    let processes = [
        ("hub", hub_pid, &hub_roles),
        ("agent", agent_pid, &agent_roles),
    ];

    // Wait until every kind of connection exists, so the check below checks
    // each. The hub API server calls the webhook once it has learned of it:
    // a dry-run create asks for a review without storing anything.
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let probe: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), "cluster-a");
    let mut probe_work = work.clone();
    probe_work.metadata.name = Some("no-nagle-review".into());
    let started = Instant::now();
    let by_role = loop {
        let by_role = connections(&processes);
        let missing: Vec<&str> = hub_roles
            .all()
            .chain(agent_roles.all())
            .filter(|role| !by_role.contains_key(role))
            .collect();
        if missing.is_empty() {
            break by_role;
        }
        assert!(
            started.elapsed() < CONNECTIONS_TIMEOUT,
            "within {CONNECTIONS_TIMEOUT:?} no connection appeared for {missing:?}; seen: \
             {by_role:#?}"
        );
        let _ = probe.create(&dry_run, &probe_work).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    for (role, connections) in &by_role {
        println!(
            "{role}: {} connection(s), TCP_NODELAY {:?}",
            connections.len(),
            connections.iter().map(|c| c.nodelay).collect::<Vec<_>>()
        );
    }
    // One line per role: how many of its connections have Nagle on, and
    // the first of them.
    let nagle_on: Vec<String> = by_role
        .iter()
        .filter_map(|(role, connections)| {
            let on: Vec<&TcpConnection> = connections.iter().filter(|c| !c.nodelay).collect();
            let first = on.first()?;
            Some(format!(
                "{role}: {} of {} (e.g. {} -> {}, fd {})",
                on.len(),
                connections.len(),
                first.local,
                first.peer,
                first.fd
            ))
        })
        .collect();
    assert!(
        nagle_on.is_empty(),
        "connections of the hub and the agent with Nagle on (TCP_NODELAY unset), by role:\n  {}",
        nagle_on.join("\n  ")
    );
    agent.kill().await;
    hub.kill().await;
    fleet.stop().await;
}
