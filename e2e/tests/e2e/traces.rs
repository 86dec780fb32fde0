//! OpenTelemetry traces (issue 34): one work generation is one trace, from
//! the hub's send over the agent's stream to the agent's apply (a span per
//! manifest and per spoke API call) and back to the hub's status write. The
//! real `ferry-hub` and `ferry-agent` binaries export over OTLP to a real
//! Jaeger v2 (built from its Go module), and the test reads the trace back
//! through Jaeger's query API. A second test points the exporters at a
//! closed port: works still apply and both processes keep running.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use ferry_e2e::harness::agent_process::{AgentProcess, free_loopback_port};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::go_tool::{GoTool, ensure_go_module_tool};
use ferry_e2e::harness::hub_metrics::get;
use ferry_e2e::harness::hub_process::{HubProcess, HubProcessOptions};
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work, wait_applied};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

const JAEGER: GoTool = GoTool {
    binary: "jaeger",
    package: "github.com/jaegertracing/jaeger/cmd/jaeger",
    version: "v1.76.0",
};
const JAEGER_MODULE: &str = "github.com/jaegertracing/jaeger";

/// How long the trace may take to reach Jaeger: the exporters batch every
/// few seconds, and a loaded machine runs the suite in parallel.
const TRACE_TIMEOUT: Duration = Duration::from_secs(120);

/// A Jaeger v2 process: OTLP gRPC in, in-memory storage, the query API out.
struct Jaeger {
    child: Child,
    otlp: SocketAddr,
    query: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Jaeger {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

fn jaeger_config(otlp: SocketAddr, query: SocketAddr, query_grpc: SocketAddr) -> String {
    format!(
        r#"service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: "{query}"
    grpc:
      endpoint: "{query_grpc}"
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: "{otlp}"
processors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"#
    )
}

async fn start_jaeger() -> Jaeger {
    let binary: PathBuf =
        tokio::task::spawn_blocking(|| ensure_go_module_tool(JAEGER_MODULE, JAEGER))
            .await
            .expect("build task")
            .expect("jaeger builds");
    // Ports Jaeger binds itself: a Go listener cannot share a reserved
    // port (it sets no SO_REUSEPORT), so free ones are taken.
    let port = || free_loopback_port().expect("a free port");
    let (otlp, query, query_grpc) = (port(), port(), port());
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("jaeger.yaml");
    std::fs::write(&config, jaeger_config(otlp, query, query_grpc)).expect("config written");
    let log = std::fs::File::create(dir.path().join("jaeger.log")).expect("log file");
    let child = Command::new(&binary)
        .arg(format!("--config={}", config.display()))
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log handle"))
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("jaeger starts");
    let jaeger = Jaeger {
        child,
        otlp,
        query,
        _dir: dir,
    };
    // Ready once the query API answers (the OTLP receiver starts first).
    wait_for(
        &jaeger,
        "Jaeger's query API to answer",
        |_| true,
        "/api/services",
    )
    .await;
    jaeger
}

fn jaeger_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("jaeger.log")).unwrap_or_default()
}

/// Polls `path` on Jaeger's query API until `done` holds for its JSON.
async fn wait_for(jaeger: &Jaeger, what: &str, done: impl Fn(&Value) -> bool, path: &str) -> Value {
    let last = std::sync::Mutex::new(String::new());
    let poll = async {
        loop {
            if let Ok((200, body)) = get(jaeger.query, path).await
                && let Ok(value) = serde_json::from_str::<Value>(&body)
            {
                if done(&value) {
                    return value;
                }
                *last.lock().unwrap_or_else(|p| p.into_inner()) = body;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    match tokio::time::timeout(TRACE_TIMEOUT, poll).await {
        Ok(value) => value,
        Err(_) => panic!(
            "waiting for {what}; last answer of {path}:\n{}\njaeger log:\n{}",
            last.lock().unwrap_or_else(|p| p.into_inner()),
            jaeger_log(jaeger._dir.path())
        ),
    }
}

/// One trace of Jaeger's v1 JSON: its spans as (service, operation).
fn spans_of(trace: &Value) -> Vec<(String, String)> {
    let services: HashMap<&str, &str> = trace["processes"]
        .as_object()
        .map(|processes| {
            processes
                .iter()
                .filter_map(|(id, p)| Some((id.as_str(), p["serviceName"].as_str()?)))
                .collect()
        })
        .unwrap_or_default();
    trace["spans"]
        .as_array()
        .map(|spans| {
            spans
                .iter()
                .map(|span| {
                    let service = span["processID"]
                        .as_str()
                        .and_then(|id| services.get(id))
                        .copied()
                        .unwrap_or_default();
                    let operation = span["operationName"].as_str().unwrap_or_default();
                    (service.to_owned(), operation.to_owned())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `trace` is the whole journey of one generation with `manifests`
/// manifests: the hub's send and status write, the agent's apply with a
/// span per manifest and at least one spoke call per manifest.
fn is_whole_journey(trace: &Value, manifests: usize) -> bool {
    let spans = spans_of(trace);
    let count = |service: &str, operation: &str| {
        spans
            .iter()
            .filter(|(s, o)| s == service && (o == operation || o.starts_with(operation)))
            .count()
    };
    count("ferry-hub", "send_work") == 1
        && count("ferry-agent", "apply_work") >= 1
        && count("ferry-agent", "apply_manifest") >= manifests
        && spans
            .iter()
            .filter(|(s, o)| {
                s == "ferry-agent"
                    && (o.starts_with("GET ") || o.starts_with("PATCH ") || o.starts_with("POST "))
            })
            .count()
            >= manifests
        && count("ferry-agent", "report_status") >= 1
        && count("ferry-hub", "write_status") >= 1
}

async fn start_processes(fleet: &Fleet, endpoint: &str) -> (HubProcess, AgentProcess) {
    let trace_args = [
        format!("--otlp-endpoint={endpoint}"),
        "--trace-sampling-ratio=1".to_owned(),
    ];
    let hub = HubProcess::start(
        &fleet.hub,
        HubProcessOptions {
            grpc: free_loopback_port().expect("a free port"),
            probes: free_loopback_port().expect("a free port"),
            extra_args: trace_args.to_vec(),
            env: vec![],
        },
    )
    .await
    .expect("the ferry-hub process starts");
    let agent_args: Vec<&str> = trace_args.iter().map(String::as_str).collect();
    let agent = AgentProcess::start_with_hub(
        fleet,
        "cluster-a",
        (&hub.url(), &hub.ca_pem),
        None,
        &agent_args,
    )
    .await
    .expect("ferry-agent starts");
    (hub, agent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_work_generation_is_one_trace_across_hub_and_agent() {
    let jaeger = start_jaeger().await;
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    fleet.stop_agent("cluster-a").await;
    fleet.stop_hub().await;
    let (hub, agent) = start_processes(&fleet, &format!("http://{}", jaeger.otlp)).await;

    let work = manifest_work(
        "cluster-a",
        "traced",
        vec![
            config_map("default", "traced-a", json!({"a": "1"})),
            config_map("default", "traced-b", json!({"b": "2"})),
        ],
    );
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "traced").await.unwrap_or_else(|e| {
        panic!(
            "work applied: {e}; hub log:\n{}\nagent log:\n{}",
            hub.log(),
            agent.log()
        )
    });

    let found = wait_for(
        &jaeger,
        "one trace with the hub's send and status write and the agent's apply of both manifests",
        |answer| {
            answer["data"]
                .as_array()
                .is_some_and(|traces| traces.iter().any(|t| is_whole_journey(t, 2)))
        },
        "/api/traces?service=ferry-agent&operation=apply_work&limit=50",
    )
    .await;
    let trace = found["data"]
        .as_array()
        .and_then(|traces| traces.iter().find(|t| is_whole_journey(t, 2)))
        .expect("the trace found above");
    // Every span of it carries the one trace id.
    let ids: BTreeSet<&str> = trace["spans"]
        .as_array()
        .expect("spans")
        .iter()
        .filter_map(|s| s["traceID"].as_str())
        .collect();
    assert_eq!(ids.len(), 1, "one trace id: {ids:?}");
    let services: BTreeSet<String> = spans_of(trace).into_iter().map(|(s, _)| s).collect();
    assert_eq!(
        services,
        BTreeSet::from(["ferry-agent".to_owned(), "ferry-hub".to_owned()]),
        "spans from both processes"
    );
    // The agent's resource names its cluster.
    let tagged = trace["processes"]
        .as_object()
        .expect("processes")
        .values()
        .filter(|p| p["serviceName"] == "ferry-agent")
        .flat_map(|p| p["tags"].as_array().cloned().unwrap_or_default())
        .any(|tag| tag["key"] == "ferry.cluster" && tag["value"] == "cluster-a");
    assert!(tagged, "the agent's spans name its cluster: {trace}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absent_collector_does_not_stop_works() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    fleet.stop_agent("cluster-a").await;
    fleet.stop_hub().await;
    // A port nothing listens on: every export fails.
    let closed = free_loopback_port().expect("a free port");
    let (hub, agent) = start_processes(&fleet, &format!("http://{closed}")).await;

    for i in 0..5 {
        let name = format!("untraced-{i}");
        let work = manifest_work(
            "cluster-a",
            &name,
            vec![config_map("default", &name, json!({"i": i.to_string()}))],
        );
        let works = fleet.create_work(&work).await.expect("create work");
        wait_applied(&works, &name).await.unwrap_or_else(|e| {
            panic!(
                "work applied: {e}; hub log:\n{}\nagent log:\n{}",
                hub.log(),
                agent.log()
            )
        });
    }
    // Both still serve their probes after failing every export.
    hub.wait_ready(Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("the hub is ready: {e}\n{}", hub.log()));
    agent
        .wait_for_answer("/healthz", 200, "ok", Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("the agent is alive: {e}\n{}", agent.log()));
}
