//! `ferry-scale`: the hub at fleet scale. Starts a hub control plane and the
//! real `ferry-hub` process, joins N simulated clusters, connects N
//! simulated agents (in this process, or for P3 and P6 in as many processes as
//! the open-file limit needs) and runs the scenarios P3 (idle
//! clusters), P2 (one change in each of many clusters), P6 (hub restart)
//! and P9 (status throughput); prints one table.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;

use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::harness::hub_process::{HubProcess, HubProcessOptions};
use ferry_e2e::harness::local_pod::free_port;
use ferry_tools::loadgen::agent::Behaviour;
use ferry_tools::loadgen::clusters::join_clusters;
use ferry_tools::loadgen::open_files::{RESERVED_FILES, check_agents_fit, open_files_limit};
use ferry_tools::loadgen::report::{Row, table};
use ferry_tools::loadgen::run::{SimFleet, hub_endpoint};
use ferry_tools::loadgen::scenarios::{
    Bench, api_requests, hubs_usage, p2_fan_out, p3_idle, p6_restart, p9_status,
    requests_per_cluster, wait_backlog_drained,
};
use ferry_tools::loadgen::share_child::serve_share;
use ferry_tools::loadgen::shares::{HubTarget, RemoteShare, ShareSpec, share_sizes};

/// A connect backlog is over after this long without a ManagedCluster write.
const BACKLOG_QUIET: Duration = Duration::from_secs(5);

#[derive(Parser, Debug)]
#[command(about = "Measure the ferry hub with many simulated agents")]
struct Args {
    /// Simulated clusters (each one ServiceAccount, ManagedCluster and agent).
    #[arg(long, default_value_t = 100)]
    clusters: usize,
    /// Clusters whose work is changed in P2 (default min(clusters, 1000)).
    #[arg(long)]
    p2_clusters: Option<usize>,
    /// Clusters holding `--works-per-cluster` works in P6 (default min(clusters, 1000)).
    #[arg(long)]
    p6_clusters: Option<usize>,
    /// Works per cluster in P6.
    #[arg(long, default_value_t = 50)]
    works_per_cluster: usize,
    /// How long P9 churns status.
    #[arg(long, default_value_t = 20)]
    p9_seconds: u64,
    /// Scenarios to run, in order.
    #[arg(long, value_delimiter = ',', default_value = "p3,p2,p6,p9")]
    scenarios: Vec<String>,
    /// Joins (namespace, ServiceAccount, ManagedCluster, token) in flight at once.
    #[arg(long, default_value_t = 32)]
    join_concurrency: usize,
    /// Work writes in flight at once.
    #[arg(long, default_value_t = 32)]
    write_concurrency: usize,
    /// Longest wait of any step, seconds.
    #[arg(long, default_value_t = 600)]
    timeout_seconds: u64,
    /// More `ferry-hub serve` arguments (repeatable), e.g. `--hub-arg=--heartbeat-seconds=30`.
    #[arg(long, allow_hyphen_values = true)]
    hub_arg: Vec<String>,
    /// Environment of the hub process, `NAME=VALUE` (repeatable).
    #[arg(long)]
    hub_env: Vec<String>,
    /// Milliseconds each simulated agent waits before reporting a work.
    #[arg(long, default_value_t = 0)]
    status_delay_ms: u64,
    /// Seconds after which each simulated agent drops and redials its stream.
    #[arg(long)]
    flap_seconds: Option<u64>,
    /// Longest wait, in seconds, after the agents connect for the connect
    /// backlog to drain (no ManagedCluster write on the hub API server for
    /// 5 s) before the scenarios run; the bench says whether it drained.
    #[arg(long, default_value_t = 300)]
    settle_seconds: u64,
    /// Seconds over which P3 counts the hub API server's writes with every
    /// agent connected and idle (a hub heartbeat is 10 s by default, so
    /// 60 s sees every per-cluster periodic write several times).
    #[arg(long, default_value_t = 60)]
    idle_window_seconds: u64,
    /// Hub replicas (processes). With more than one they elect a leader
    /// through a Lease and agent `i` dials replica `i % replicas`; P6 kills
    /// and restarts them all.
    #[arg(long, default_value_t = 1)]
    hub_replicas: usize,
    /// Simulate agents of an older version: they keep dialling with their
    /// token instead of asking the hub for a client certificate.
    #[arg(long)]
    token_only_agents: bool,
    /// Internal: run the share of simulated agents described on stdin (a
    /// child that ferry-scale starts itself when one process may not hold
    /// every agent's connection).
    #[arg(long, hide = true)]
    serve_agents: bool,
}

fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let args = Args::parse();
    if args.serve_agents {
        return Ok(serve_share().await?);
    }
    let n = args.clusters;
    // Every agent is a connection, and one process may hold only as many as
    // its open-file limit allows: past it agents would redial forever and
    // look like a stalled hub. So the agents run in shares, the first here,
    // the others in child processes (which count only for P3: the other
    // scenarios read arrivals and steer churn in this process).
    let limit = open_files_limit();
    let shares = share_sizes(
        n,
        limit.map_or(n, |l| {
            usize::try_from(l.saturating_sub(RESERVED_FILES)).unwrap_or(n)
        }),
    );
    // P3 and P6 read only the counters every share reports.
    if shares.len() > 1 && args.scenarios.iter().any(|s| s != "p3" && s != "p6") {
        anyhow::bail!(
            "{n} agents need {} processes under this open-file limit ({limit:?}), and only P3 and P6 run with agents in other processes: run `--scenarios p3,p6`, or at most {} clusters",
            shares.len(),
            shares[0]
        );
    }
    // Each hub replica (a child, with the same limit) holds one connection
    // per agent it serves.
    check_agents_fit(n.div_ceil(args.hub_replicas.max(1)), limit).map_err(|e| {
        anyhow::anyhow!(
            "each of the {} hub replica(s) would hold {} agent connections: {e}",
            args.hub_replicas.max(1),
            n.div_ceil(args.hub_replicas.max(1))
        )
    })?;
    let timeout = Duration::from_secs(args.timeout_seconds);
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get()) as f64;
    let ticks = ticks_per_second();

    let plane = ControlPlane::start("scale-hub", ControlPlaneOptions::default()).await?;
    let admin = plane.client().await?;
    ferry_hub::crds::install_crds(&admin).await?;
    let ip = std::net::IpAddr::from([127, 0, 0, 1]);
    let mut extra = vec![
        // One process dials every agent from 127.0.0.1: the per-peer review
        // budget (meant for one peer per agent) would throttle it.
        "--peer-token-reviews-per-minute=1000000".to_string(),
        format!("--max-connections={}", n + 1000),
        // ...and the per-peer connection cap, for the same reason.
        format!("--max-connections-per-peer={}", n + 1000),
    ];
    let replicas = args.hub_replicas.max(1);
    if replicas > 1 {
        extra.push("--leader-election-namespace=default".into());
        extra.push("--replica-lease-namespace=default".into());
    }
    extra.extend(args.hub_arg.iter().cloned());
    let env: Vec<(String, String)> = args
        .hub_env
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut hubs = Vec::new();
    for replica in 0..replicas {
        let mut env = env.clone();
        // Each replica its own name in the leader Lease.
        env.push(("POD_NAME".into(), format!("scale-hub-{replica}")));
        hubs.push(
            HubProcess::start(
                &plane,
                HubProcessOptions {
                    grpc: (ip, free_port(ip)).into(),
                    probes: (ip, free_port(ip)).into(),
                    extra_args: extra.clone(),
                    env,
                },
            )
            .await?,
        );
    }
    // The hubs have listed the (empty) fleet; their RSS now is the baseline.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (baseline, cpu_start) = hubs_usage(&hubs, ticks)?;
    eprintln!("{replicas} hub replica(s), RSS {baseline} KiB with no agents");

    let before_join = api_requests(&admin).await;
    let join_start = Instant::now();
    let clusters = join_clusters(&admin, 0, n, args.join_concurrency, 24 * 3600).await?;
    let joined = join_start.elapsed();
    let after_join = api_requests(&admin).await;
    eprintln!(
        "joined {n} clusters in {:.1} s; hub API requests per joined cluster: {}",
        joined.as_secs_f64(),
        requests_per_cluster(&before_join, &after_join, n)
    );
    let names: Vec<String> = clusters.iter().map(|c| c.name.clone()).collect();
    let behaviour = Behaviour {
        heartbeat: Duration::from_secs(10),
        status_delay: Duration::from_millis(args.status_delay_ms),
        flap_every: args.flap_seconds.map(Duration::from_secs),
        // Each replica serves with a CA of its own.
        certificates: (!args.token_only_agents)
            .then(|| hubs.iter().map(|hub| hub.ca_pem.clone()).collect()),
    };
    let endpoints = hubs
        .iter()
        .map(|hub| hub_endpoint(&hub.url(), Some(&hub.ca_pem)))
        .collect::<Result<Vec<_>, _>>()?;
    let connect_start = Instant::now();
    let mut clusters = clusters;
    let mut rest = clusters.split_off(shares[0].min(clusters.len()));
    let mut fleet = SimFleet::spread(clusters, endpoints, behaviour.clone());
    let hub_targets: Vec<HubTarget> = hubs
        .iter()
        .map(|hub| HubTarget {
            url: hub.url(),
            ca_pem: Some(hub.ca_pem.clone()),
        })
        .collect();
    let exe = std::env::current_exe().context("finding ferry-scale's own binary")?;
    let mut first = shares[0];
    for size in &shares[1..] {
        let tail = rest.split_off((*size).min(rest.len()));
        let spec = ShareSpec {
            hubs: hub_targets.clone(),
            first,
            clusters: std::mem::replace(&mut rest, tail),
            heartbeat_ms: u64::try_from(behaviour.heartbeat.as_millis()).unwrap_or(u64::MAX),
            status_delay_ms: args.status_delay_ms,
            flap_seconds: args.flap_seconds,
            certificates: !args.token_only_agents,
        };
        first += size;
        fleet.add_remote(RemoteShare::start(&exe, &["--serve-agents"], &spec).await?);
    }
    if shares.len() > 1 {
        eprintln!(
            "agents in {} processes (open-file limit {limit:?}): {shares:?}",
            shares.len()
        );
    }
    let connect = fleet.wait_connected(timeout).await?;
    let connected_requests = api_requests(&admin).await;
    eprintln!(
        "{n} agents connected in {:.1} s; hub API requests per connected cluster until then: {}",
        connect_start.elapsed().as_secs_f64(),
        requests_per_cluster(&after_join, &connected_requests, n)
    );
    // The connect storm's backlog (writes that follow a session in the
    // background) is over once the API server sees no ManagedCluster write
    // for a while; --settle-seconds bounds the wait.
    let (waited, drained) = wait_backlog_drained(
        &admin,
        BACKLOG_QUIET,
        Duration::from_secs(args.settle_seconds).max(BACKLOG_QUIET),
    )
    .await;
    let settled_requests = api_requests(&admin).await;
    eprintln!(
        "backlog {} after {:.1} s more; hub API requests per connected cluster, connect and backlog: {}",
        if drained { "drained" } else { "NOT drained" },
        waited.as_secs_f64(),
        requests_per_cluster(&after_join, &settled_requests, n)
    );

    let mut bench = Bench {
        hubs: &mut hubs,
        admin: admin.clone(),
        fleet: &fleet,
        clusters: &names,
        write_concurrency: args.write_concurrency,
        ticks_per_second: ticks,
        timeout,
    };
    let mut rows: Vec<Row> = Vec::new();
    for scenario in &args.scenarios {
        let row = match scenario.as_str() {
            "p3" => {
                let window = Duration::from_secs(args.idle_window_seconds);
                p3_idle(&bench, baseline, cpu_start, connect, window).await?
            }
            "p2" => {
                let count = args.p2_clusters.unwrap_or(n.min(1000)).min(n);
                p2_fan_out(&bench, &names[..count]).await?
            }
            "p6" => {
                let count = args.p6_clusters.unwrap_or(n.min(1000)).min(n);
                p6_restart(&mut bench, &names[..count], args.works_per_cluster).await?
            }
            "p9" => p9_status(&bench, Duration::from_secs(args.p9_seconds), cores).await?,
            other => anyhow::bail!("unknown scenario {other}: use p2, p3, p6, p9"),
        };
        eprintln!("{}", table(std::slice::from_ref(&row)));
        rows.push(row);
    }
    println!(
        "\nferry-scale: {n} simulated clusters, {replicas} hub replica(s), {cores} cores, load average at the end {}\n",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    println!("{}", table(&rows));
    fleet.stop().await;
    drop(hubs);
    plane.stop().await;
    Ok(())
}
