//! The real `ferry-agent` binary speaks HTTP/2 to its spoke's API server
//! (issue 22, agent memory): works applied together share one connection,
//! as client-go's requests do, instead of one HTTP/1.1 connection (TLS
//! state and buffers in the agent, a connection on the API server) per
//! request in flight, each kept idle in the pool afterwards.

use std::collections::HashSet;

use ferry_e2e::harness::agent_process::AgentProcess;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work, wait_applied};
use serde_json::json;

/// Works created at once; over HTTP/1.1 each apply in flight held a
/// connection of its own.
const WORKS: usize = 40;

/// The inodes of the sockets process `pid` holds open.
fn socket_inodes(pid: u32) -> HashSet<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the agent's open files")
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            target
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// Established TCP connections of process `pid` to remote port `port`
/// (/proc/PID/net/tcp{,6} lists its network namespace's sockets; the
/// process's own are those whose inode it holds).
fn established_to(pid: u32, port: u16) -> usize {
    let mine = socket_inodes(pid);
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).ok())
        .flat_map(|text| text.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let remote_port = fields
                .get(2)
                .and_then(|remote| remote.rsplit(':').next())
                .and_then(|hex| u16::from_str_radix(hex, 16).ok());
            let established = fields.get(3) == Some(&"01");
            let inode = fields.get(9).and_then(|i| i.parse::<u64>().ok());
            established
                && remote_port == Some(port)
                && inode.is_some_and(|inode| mine.contains(&inode))
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_applies_works_created_together_over_one_http2_connection_to_the_spoke() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    fleet.stop_agent("cluster-a").await;
    let agent = AgentProcess::start(&fleet, "cluster-a", None, &[])
        .await
        .expect("ferry-agent starts");
    let pid = agent.pid().expect("the agent runs");
    let server = &fleet.spoke("cluster-a").control_plane.info.server;
    let port: u16 = server
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the spoke's API server URL {server} names a port"));

    let creates = (0..WORKS).map(|i| {
        let name = format!("together-{i}");
        let work = manifest_work(
            "cluster-a",
            &name,
            vec![config_map("default", &name, json!({"i": i.to_string()}))],
        );
        let fleet = &fleet;
        async move { fleet.create_work(&work).await.expect("create work") }
    });
    let apis = futures::future::join_all(creates).await;
    for (i, works) in apis.iter().enumerate() {
        wait_applied(works, &format!("together-{i}"))
            .await
            .unwrap_or_else(|e| panic!("work {i} applied: {e}; log:\n{}", agent.log()));
    }

    // Every apply has answered; the pool holds what the burst opened.
    let connections = established_to(pid, port);
    println!(
        "{WORKS} works applied together: the agent holds {connections} connection(s) to the spoke's API server"
    );
    assert!(
        (1..=2).contains(&connections),
        "the agent should share one HTTP/2 connection to the spoke (its watches and every \
         apply), not hold {connections}; log:\n{}",
        agent.log()
    );
    agent.kill().await;
    fleet.stop().await;
}
