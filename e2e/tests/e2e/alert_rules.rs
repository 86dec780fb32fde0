//! The alerts and the Grafana dashboard the hub chart ships (issue 34) are
//! sound, proven with Prometheus's own rule tester: the chart renders its
//! PrometheusRule (and the dashboard ConfigMap) only when asked; `promtool
//! check rules` accepts the rendered rules; `promtool test rules` shows each
//! alert firing once its series have been bad for its `for:` and not a
//! minute before, and never for the healthy series beside them, with the
//! annotations its templates expand to; every alert has a runbook section;
//! and every metric name the rules and the dashboard read is one a real hub
//! or agent exports, scraped after a work was applied.
//!
//! promtool is built from its Go module once and cached (see
//! ferry_e2e::harness::promtool), like Helm.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::agent_client::agent_client;
use ferry_e2e::harness::agent_process::AgentProcess;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::helm::render_with;
use ferry_e2e::harness::hub_metrics::{scrape, wait_metric_above};
use ferry_e2e::harness::image::workspace_dir;
use ferry_e2e::harness::promtool::promtool;
use ferry_e2e::helpers::placement_helpers::create_placement;
use ferry_e2e::helpers::spoke_actor::merge_as;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map, manifest_work, wait_applied};
use ferry_hub::grpc::message_caps::MessageCaps;
use ferry_hub::join::hub_side::join_cluster;
use ferry_proto::PROTOCOL_VERSION;
use ferry_proto::v1::{self, agent_message};
use kube::api::{Api, PostParams};
use prost::Message as _;
use serde::Deserialize as _;
use serde_json::{Value, json};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use tonic::transport::Channel;

/// The fleet's spoke, served by a `ferry-agent` process.
const CLUSTER: &str = "cluster-a";

/// A cluster joined on the hub with no agent: the oversized Hello is its.
const RAW_CLUSTER: &str = "cluster-raw";

/// The alerts the chart ships: one per condition issue 34 names, two for
/// a disconnected cluster (as the hub sees it, as its agent sees it), one
/// for deletions an agent's brake holds (issue 49).
const ALERTS: usize = 10;

/// The queries of the dashboard's panels.
const DASHBOARD_EXPRS: usize = 25;

/// The chart's default `prometheusRule.runbookBaseUrl`.
const RUNBOOKS: &str = "https://github.com/ferry-rs/ferry/blob/main/docs/runbooks.md";

/// How long a metric may take to move once what it counts has happened
/// (a deadline for a signal, not a performance assertion).
const METRIC_TIMEOUT: Duration = Duration::from_secs(90);

/// The minute every bad series of a case turns bad (its values are healthy
/// at minutes 0 to 4).
const TURNS_BAD: u64 = 5;

/// One alert's promtool test: series healthy until [`TURNS_BAD`] and bad
/// from then on, beside series that stay healthy.
struct Case {
    alert: &'static str,
    /// (series, values in promtool's expanding notation).
    series: &'static [(&'static str, &'static str)],
    /// The labels of the one alert expected, the rule's own left out.
    labels: &'static [(&'static str, &'static str)],
    /// `$value` of that alert, as Prometheus prints it.
    value: &'static str,
}

const CASES: [Case; ALERTS] = [
    Case {
        alert: "FerryClustersDisconnected",
        series: &[
            (
                r#"ferry_hub_clusters_disconnected{namespace="ferry",pod="ferry-hub-0"}"#,
                "0x4 2x100",
            ),
            (
                r#"ferry_hub_clusters_disconnected{namespace="ferry",pod="ferry-hub-1"}"#,
                "0x105",
            ),
        ],
        labels: &[],
        value: "2",
    },
    Case {
        alert: "FerryClusterDeletionsHeld",
        series: &[
            (
                r#"ferry_hub_clusters_deletions_held{namespace="ferry",pod="ferry-hub-0"}"#,
                "0x4 3x100",
            ),
            (
                r#"ferry_hub_clusters_deletions_held{namespace="ferry",pod="ferry-hub-1"}"#,
                "0x105",
            ),
        ],
        labels: &[],
        value: "3",
    },
    Case {
        alert: "FerryAgentNotConnected",
        series: &[
            (
                r#"ferry_agent_hub_connected{namespace="ferry-agent",pod="agent-a"}"#,
                "1x4 0x100",
            ),
            (
                r#"ferry_agent_hub_connected{namespace="ferry-agent",pod="agent-b"}"#,
                "1x105",
            ),
        ],
        labels: &[("namespace", "ferry-agent"), ("pod", "agent-a")],
        value: "0",
    },
    Case {
        alert: "FerryWorkAppliesFailing",
        series: &[
            (
                r#"ferry_agent_applies_total{namespace="ferry-agent",pod="agent-a",kind="apps/v1/Deployment",outcome="rejected"}"#,
                "0x4 1+1x100",
            ),
            // Successes keep coming; old failures stay as they were.
            (
                r#"ferry_agent_applies_total{namespace="ferry-agent",pod="agent-a",kind="apps/v1/Deployment",outcome="created"}"#,
                "0+5x105",
            ),
            (
                r#"ferry_agent_applies_total{namespace="ferry-agent",pod="agent-b",kind="v1/ConfigMap",outcome="conflict"}"#,
                "3x105",
            ),
        ],
        labels: &[
            ("namespace", "ferry-agent"),
            ("pod", "agent-a"),
            ("kind", "apps/v1/Deployment"),
            ("outcome", "rejected"),
        ],
        value: "",
    },
    Case {
        alert: "FerryHubStatusWritesFailing",
        series: &[
            (
                r#"ferry_hub_status_write_failures_total{namespace="ferry",pod="ferry-hub-0"}"#,
                "0x4 1+1x100",
            ),
            (
                r#"ferry_hub_status_write_failures_total{namespace="ferry",pod="ferry-hub-1"}"#,
                "7x105",
            ),
        ],
        labels: &[("namespace", "ferry"), ("pod", "ferry-hub-0")],
        value: "",
    },
    Case {
        alert: "FerryAgentReportTooLarge",
        series: &[
            (
                r#"ferry_hub_agent_messages_too_large_total{namespace="ferry",pod="ferry-hub-0",message="report"}"#,
                "0x4 1x100",
            ),
            (
                r#"ferry_hub_agent_messages_too_large_total{namespace="ferry",pod="ferry-hub-0",message="hello"}"#,
                "0x105",
            ),
        ],
        labels: &[("message", "report")],
        value: "",
    },
    Case {
        alert: "FerryRolloutHalted",
        series: &[
            (
                r#"ferry_hub_rollout_halted{namespace="ferry",pod="ferry-hub-0",replica_set_namespace="apps",replica_set="web"}"#,
                "0x4 1x100",
            ),
            (
                r#"ferry_hub_rollout_halted{namespace="ferry",pod="ferry-hub-0",replica_set_namespace="apps",replica_set="api"}"#,
                "0x105",
            ),
        ],
        labels: &[("replica_set_namespace", "apps"), ("replica_set", "web")],
        value: "",
    },
    Case {
        alert: "FerryRolloutRolledBack",
        series: &[
            (
                r#"ferry_hub_rollout_rolled_back{namespace="ferry",pod="ferry-hub-0",replica_set_namespace="apps",replica_set="web"}"#,
                "0x4 1x100",
            ),
            (
                r#"ferry_hub_rollout_rolled_back{namespace="ferry",pod="ferry-hub-0",replica_set_namespace="apps",replica_set="api"}"#,
                "0x105",
            ),
        ],
        labels: &[("replica_set_namespace", "apps"), ("replica_set", "web")],
        value: "",
    },
    Case {
        alert: "FerryRolloutGateHeld",
        series: &[
            (
                r#"ferry_hub_rollout_gates_holding{namespace="ferry",pod="ferry-hub-0",replica_set_namespace="apps",replica_set="web"}"#,
                "0x4 2x100",
            ),
            (
                r#"ferry_hub_rollout_gates_holding{namespace="ferry",pod="ferry-hub-0",replica_set_namespace="apps",replica_set="api"}"#,
                "0x105",
            ),
        ],
        labels: &[("replica_set_namespace", "apps"), ("replica_set", "web")],
        value: "2",
    },
    Case {
        alert: "FerryAdmissionPolicyNotInForce",
        series: &[
            (
                r#"ferry_hub_admission_policy_missing{namespace="ferry",pod="ferry-hub-0",policy="ferry-hub-owned-writes"}"#,
                "0x4 1x100",
            ),
            (
                r#"ferry_hub_admission_policy_missing{namespace="ferry",pod="ferry-hub-0",policy="ferry-duplicates"}"#,
                "0x105",
            ),
        ],
        labels: &[("policy", "ferry-hub-owned-writes")],
        value: "1",
    },
];

/// Runs blocking work (Helm, promtool) off the test runtime.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("blocking task")
}

/// The hub chart's objects rendered with `sets`, empty documents dropped.
fn rendered(sets: &[&str]) -> Vec<Value> {
    let yaml = render_with("ferry-hub", "ferry", sets).expect("helm template ferry-hub");
    serde_yaml::Deserializer::from_str(&yaml)
        .map(|doc| Value::deserialize(doc).expect("rendered YAML parses"))
        .filter(|doc| !doc.is_null())
        .collect()
}

/// The one object of `kind` among `objects`.
fn only_of_kind<'a>(objects: &'a [Value], kind: &str, what: &str) -> &'a Value {
    let found: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == kind)
        .filter(|o| kind != "ConfigMap" || o["metadata"]["labels"]["grafana_dashboard"] == "1")
        .collect();
    assert_eq!(found.len(), 1, "one {what} rendered: {found:?}");
    found[0]
}

/// The rule groups of the chart's PrometheusRule (`spec.groups`).
fn rule_groups() -> Value {
    let objects = rendered(&["prometheusRule.enabled=true"]);
    only_of_kind(&objects, "PrometheusRule", "PrometheusRule")["spec"]["groups"].clone()
}

/// Every alerting rule of `groups`.
fn alerting_rules(groups: &Value) -> Vec<Value> {
    groups
        .as_array()
        .expect("groups is a list")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules is a list").clone())
        .filter(|r| r.get("alert").is_some())
        .collect()
}

/// The dashboard the chart ships, as its ConfigMap carries it.
fn rendered_dashboard() -> Value {
    let objects = rendered(&["grafanaDashboard.enabled=true"]);
    let map = only_of_kind(&objects, "ConfigMap", "dashboard ConfigMap");
    let text = map["data"]["ferry.json"]
        .as_str()
        .expect("the ConfigMap holds ferry.json");
    serde_json::from_str(text).expect("the dashboard is JSON")
}

/// Every query of the dashboard's panels, rows' panels included.
fn dashboard_exprs(dashboard: &Value) -> Vec<String> {
    fn walk(panels: &Value, out: &mut Vec<String>) {
        for panel in panels.as_array().into_iter().flatten() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                out.push(
                    target["expr"]
                        .as_str()
                        .expect("a target's expr")
                        .to_string(),
                );
            }
            walk(&panel["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// Minutes in a Prometheus duration of whole minutes or hours (`10m`,
/// `1h`), 0 when absent.
fn minutes(duration: Option<&str>) -> u64 {
    let Some(duration) = duration else { return 0 };
    let (number, unit) = duration.split_at(duration.len() - 1);
    let number: u64 = number
        .parse()
        .unwrap_or_else(|_| panic!("a whole duration: {duration}"));
    match unit {
        "m" => number,
        "h" => number * 60,
        _ => panic!("a duration in minutes or hours: {duration}"),
    }
}

/// `template` with each `{{ $labels.NAME }}` and `{{ $value }}` replaced;
/// any other template action, or a label the alert does not carry, fails.
fn expand(template: &str, labels: &BTreeMap<&str, &str>, value: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find("}}")
            .unwrap_or_else(|| panic!("unclosed action in {template}"))
            + start;
        let action = rest[start + 2..end].trim();
        if action == "$value" {
            assert!(!value.is_empty(), "a case of {template} names its value");
            out.push_str(value);
        } else if let Some(name) = action.strip_prefix("$labels.") {
            out.push_str(
                labels
                    .get(name)
                    .unwrap_or_else(|| panic!("{template} reads label {name}, not on the alert")),
            );
        } else {
            panic!("an action the test does not expand: {action}");
        }
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The promtool test group of `case`, for the alerting `rule`: quiet a
/// minute before its series turn bad and a minute before its `for:` is
/// over; then firing for the bad series alone.
fn test_group(case: &Case, rule: &Value) -> Value {
    let held = minutes(rule["for"].as_str());
    let fires = TURNS_BAD + held;
    let labels: BTreeMap<&str, &str> = case.labels.iter().copied().collect();
    let annotations: BTreeMap<String, String> = rule["annotations"]
        .as_object()
        .expect("annotations")
        .iter()
        .map(|(k, v)| {
            let template = v.as_str().expect("annotation text");
            (k.clone(), expand(template, &labels, case.value))
        })
        .collect();
    let mut expected_labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (k, v) in rule["labels"].as_object().expect("rule labels") {
        expected_labels.insert(k.clone(), v.as_str().expect("label text").to_string());
    }
    let quiet = |minute: u64| json!({"eval_time": format!("{minute}m"), "alertname": case.alert, "exp_alerts": []});
    let mut evals = vec![quiet(TURNS_BAD - 1)];
    if held > 0 {
        evals.push(quiet(fires - 1));
    }
    evals.push(json!({
        "eval_time": format!("{fires}m"),
        "alertname": case.alert,
        "exp_alerts": [{"exp_labels": expected_labels, "exp_annotations": annotations}],
    }));
    json!({
        "name": case.alert,
        "interval": "1m",
        "input_series": case
            .series
            .iter()
            .map(|(series, values)| json!({"series": series, "values": values}))
            .collect::<Vec<_>>(),
        "alert_rule_test": evals,
    })
}

#[test]
fn the_chart_renders_no_rule_and_no_dashboard_unless_asked() {
    let objects = rendered(&[]);
    assert!(
        objects.iter().all(|o| o["kind"] != "PrometheusRule"),
        "no PrometheusRule by default"
    );
    assert!(
        objects
            .iter()
            .all(|o| o["metadata"]["labels"]["grafana_dashboard"].is_null()),
        "no dashboard ConfigMap by default"
    );
    let labelled = rendered(&[
        "prometheusRule.enabled=true",
        "prometheusRule.labels.release=kube-prometheus",
    ]);
    let rule = only_of_kind(&labelled, "PrometheusRule", "PrometheusRule");
    assert_eq!(rule["metadata"]["labels"]["release"], "kube-prometheus");
    assert_eq!(rule["metadata"]["namespace"], "ferry");
    let shipped: Value = serde_json::from_str(
        &std::fs::read_to_string(
            workspace_dir().join("deploy/charts/ferry-hub/dashboards/ferry.json"),
        )
        .expect("read the chart's dashboard"),
    )
    .expect("the chart's dashboard is JSON");
    assert_eq!(
        rendered_dashboard(),
        shipped,
        "the ConfigMap carries the chart's dashboard file"
    );
}

#[test]
fn promtool_accepts_the_rules_and_each_alert_fires_after_its_for_on_bad_series_only() {
    let groups = rule_groups();
    let rules = alerting_rules(&groups);
    assert_eq!(rules.len(), ALERTS, "alerts in the chart: {rules:#?}");
    let by_name: BTreeMap<&str, &Value> = rules
        .iter()
        .map(|r| (r["alert"].as_str().expect("alert name"), r))
        .collect();
    let tested: BTreeSet<&str> = CASES.iter().map(|c| c.alert).collect();
    assert_eq!(
        by_name.keys().copied().collect::<BTreeSet<_>>(),
        tested,
        "every alert has exactly one case"
    );

    // Each alert explains itself and links a runbook section that exists.
    let runbook = std::fs::read_to_string(workspace_dir().join("docs/runbooks.md"))
        .expect("read docs/runbooks.md");
    let headings: BTreeSet<String> = runbook
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| h.trim().to_lowercase())
        .collect();
    for (name, rule) in &by_name {
        for key in ["summary", "description", "runbook_url"] {
            assert!(
                rule["annotations"][key]
                    .as_str()
                    .is_some_and(|t| !t.trim().is_empty()),
                "{name} has a {key}"
            );
        }
        let anchor = name.to_lowercase();
        assert_eq!(
            rule["annotations"]["runbook_url"],
            format!("{RUNBOOKS}#{anchor}"),
            "{name}'s runbook"
        );
        assert!(
            headings.contains(&anchor),
            "docs/runbooks.md has a section `## {name}`"
        );
        assert!(
            rule["labels"]["severity"].is_string(),
            "{name} has a severity"
        );
    }

    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("rules.yaml"),
        serde_yaml::to_string(&json!({ "groups": groups })).expect("rules YAML"),
    )
    .expect("write rules");
    let tests = json!({
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": CASES
            .iter()
            .map(|case| test_group(case, by_name[case.alert]))
            .collect::<Vec<_>>(),
    });
    std::fs::write(
        dir.path().join("tests.yaml"),
        serde_yaml::to_string(&tests).expect("tests YAML"),
    )
    .expect("write tests");

    let check = promtool(dir.path(), &["check", "rules", "rules.yaml"]).expect("promtool runs");
    assert!(check.success, "promtool check rules:\n{}", check.output);
    assert!(
        check
            .output
            .contains(&format!("SUCCESS: {ALERTS} rules found")),
        "promtool checked every rule:\n{}",
        check.output
    );
    let test = promtool(dir.path(), &["test", "rules", "tests.yaml"]).expect("promtool runs");
    assert!(
        test.success,
        "promtool test rules:\n{}\ntests:\n{}",
        test.output,
        serde_yaml::to_string(&tests).unwrap_or_default()
    );
    assert!(
        test.output.contains("SUCCESS"),
        "promtool ran the tests:\n{}",
        test.output
    );
}

/// PromQL functions, aggregations, keywords and modifiers: identifiers of
/// an expression that are not metric names.
const NOT_METRICS: [&str; 17] = [
    "sum",
    "max",
    "min",
    "avg",
    "count",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "topk",
];

/// The metric names `expr` reads: its identifiers, less strings, label
/// matchers (`{...}`), ranges (`[...]`), numbers, function calls, the
/// keywords above and the label lists after `by (`, `without (`, `on (`,
/// `ignoring (` and `group_left (`.
fn metric_names(expr: &str) -> Vec<String> {
    let chars: Vec<char> = expr.chars().collect();
    let skip_to = |from: usize, close: char| -> usize {
        let mut i = from + 1;
        let mut quote: Option<char> = None;
        while i < chars.len() {
            let c = chars[i];
            match quote {
                Some(_) if c == '\\' => i += 1,
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None if c == '"' || c == '\'' || c == '`' => quote = Some(c),
                None if c == close => return i + 1,
                None => {}
            }
            i += 1;
        }
        panic!("unclosed {close} in {expr}");
    };
    let next_non_space = |from: usize| chars[from..].iter().copied().find(|c| !c.is_whitespace());
    let mut names = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_to(i, c);
        } else if c == '{' {
            i = skip_to(i, '}');
        } else if c == '[' {
            i = skip_to(i, ']');
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let ident: String = chars[start..i].iter().collect();
            let next = next_non_space(i);
            if [
                "by",
                "without",
                "on",
                "ignoring",
                "group_left",
                "group_right",
            ]
            .contains(&ident.as_str())
            {
                if next == Some('(') {
                    let open = i + chars[i..]
                        .iter()
                        .position(|c| *c == '(')
                        .expect("the paren just seen");
                    i = skip_to(open, ')');
                }
            } else if NOT_METRICS.contains(&ident.as_str()) || next == Some('(') {
                // A keyword, or a function called.
            } else {
                names.push(ident);
            }
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn the_promql_name_parser_finds_metric_names_only() {
    assert_eq!(
        metric_names(
            r#"histogram_quantile(0.9, sum by (le) (rate(ferry_a_bucket{le="0.5",x=~"a|b"}[5m]))) > 0 and on (pod) group_left ferry_b unless sum without(kind)(ferry_c_total)"#
        ),
        ["ferry_a_bucket", "ferry_b", "ferry_c_total"]
    );
}

/// Whether `exposition` exports `name` as Prometheus stores it: a sample
/// of that name, or the family it belongs to (a counter's `_total`, a
/// histogram's `_bucket`, `_sum`, `_count`, a gauge itself) declared by a
/// `# TYPE` line even before it has a sample.
fn exported(exposition: &str, name: &str) -> bool {
    let sampled = exposition.lines().filter(|l| !l.starts_with('#')).any(|l| {
        l.strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
    });
    let typed = |family: &str, kind: &str| {
        exposition
            .lines()
            .any(|l| l == format!("# TYPE {family} {kind}"))
    };
    let declared = if let Some(family) = name.strip_suffix("_total") {
        typed(family, "counter")
    } else if let Some(family) = ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
    {
        typed(family, "histogram")
    } else {
        typed(name, "gauge")
    };
    sampled || declared
}

/// Waits until every name of `names` is exported at one of `addrs`
/// ([`exported`]), scraping every 50 ms the way a monitoring system would;
/// on timeout, fails with the names still missing and the last scrapes.
async fn wait_exported(
    addrs: &[SocketAddr],
    names: &[&str],
    timeout: Duration,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let mut texts = Vec::new();
        for addr in addrs {
            texts.push(scrape(*addr).await.map_err(|e| e.to_string())?);
        }
        let missing: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| !texts.iter().any(|t| exported(t, n)))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "not exported after {timeout:?}: {missing:?}\n{}",
                texts.join("\n")
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A Hello from `cluster` listing more works than the hub's Hello cap,
/// sent with `token` over a plaintext stream to `url`; returns once the
/// hub has ended the stream (it must, with `OUT_OF_RANGE`).
async fn send_oversized_hello(url: &str, token: &str, cluster: &str) {
    let caps = MessageCaps::default();
    let hello = v1::AgentMessage {
        body: Some(agent_message::Body::Hello(v1::Hello {
            protocol_version: PROTOCOL_VERSION,
            cluster_name: cluster.into(),
            agent_version: "oversized".into(),
            // Real-looking UIDs at generation 1 take 42 bytes each.
            known_works: (0..caps.hello / 42 + 1_000)
                .map(|i| v1::WorkVersion {
                    uid: format!("{i:08x}-0000-4000-8000-000000000000"),
                    generation: 1,
                })
                .collect(),
            ..Default::default()
        })),
    };
    assert!(
        hello.encoded_len() > caps.hello,
        "the Hello is over its cap"
    );
    let channel = Channel::from_shared(url.to_string())
        .expect("hub url")
        .connect()
        .await
        .expect("connect to the hub");
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(hello).await.expect("queue the Hello");
    let mut client = agent_client(channel, Some(token)).max_encoding_message_size(usize::MAX);
    let end = match client.sync(ReceiverStream::new(rx)).await {
        Err(status) => status,
        Ok(response) => {
            let mut inbound = response.into_inner();
            loop {
                match tokio::time::timeout(METRIC_TIMEOUT, inbound.message()).await {
                    Err(_) => panic!("the hub ends a stream with an oversized Hello"),
                    Ok(Ok(Some(_))) => continue,
                    Ok(Ok(None)) => panic!("the stream ended cleanly, not for its size"),
                    Ok(Err(status)) => break status,
                }
            }
        }
    };
    drop(tx);
    assert_eq!(end.code(), Code::OutOfRange, "{end:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_alerts_and_the_dashboard_read_is_exported_by_a_real_hub_or_agent() {
    let (groups, dashboard) = blocking(|| (rule_groups(), rendered_dashboard())).await;
    let rule_exprs: Vec<String> = alerting_rules(&groups)
        .iter()
        .map(|r| r["expr"].as_str().expect("expr").to_string())
        .collect();
    assert_eq!(rule_exprs.len(), ALERTS, "alert expressions");
    let panel_exprs = dashboard_exprs(&dashboard);
    assert_eq!(panel_exprs.len(), DASHBOARD_EXPRS, "dashboard queries");
    let mut read: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for expr in rule_exprs.iter().chain(&panel_exprs) {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{expr} reads a metric");
        for name in names {
            read.entry(name).or_default().push(expr.clone());
        }
    }
    let rule_names: BTreeSet<String> = rule_exprs.iter().flat_map(|e| metric_names(e)).collect();
    assert_eq!(
        rule_names.len(),
        ALERTS,
        "each alert reads a metric of its own: {rule_names:?}"
    );
    let (hub_names, agent_names): (Vec<&str>, Vec<&str>) = read
        .keys()
        .map(String::as_str)
        .partition(|n| n.starts_with("ferry_hub_"));
    if let Some(foreign) = agent_names.iter().find(|n| !n.starts_with("ferry_agent_")) {
        panic!(
            "{foreign} (read by {:?}) is no ferry metric",
            read[*foreign]
        );
    }

    // A labelled family is exported once it has a series, as Prometheus
    // sees it: the fleet makes each happen. The leader checks the admission
    // policies (one series per policy); sessions end by age (the agent's
    // ended-session reasons); the raw oversized Hello dials plaintext.
    let mut options = FleetOptions::with_spokes(&[CLUSTER]);
    options.tls = false;
    options.watch_policies = true;
    options.max_session_age = Duration::from_secs(8);
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    // The agent binary serves /metrics; the in-process one does not.
    fleet.stop_agent(CLUSTER).await;
    let agent = AgentProcess::start(&fleet, CLUSTER, None, &[])
        .await
        .expect("ferry-agent starts");
    wait_metric_above(
        agent.probe_addr,
        "ferry_agent_hub_connected",
        0.0,
        METRIC_TIMEOUT,
    )
    .await
    .unwrap_or_else(|e| panic!("the agent connects: {e}; log:\n{}", agent.log()));
    // Refused: the hub counts why, the agent its failed connects.
    let refused = AgentProcess::start(&fleet, CLUSTER, Some("not-a-token"), &[])
        .await
        .expect("a refused ferry-agent starts");

    // A work applied, then drifted on the spoke and corrected.
    let works = fleet
        .create_work(&manifest_work(
            CLUSTER,
            "watched",
            vec![config_map("default", "watched", json!({"k": "hub"}))],
        ))
        .await
        .expect("create work");
    wait_applied(&works, "watched").await.expect("applied");
    let spoke = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    merge_as(
        &spoke,
        "watched",
        "kubectl-edit",
        &json!({"data": {"k": "drifted"}}),
    )
    .await
    .expect("drift the object");
    wait_until(&spoke, "watched", "drift corrected", APPLY_TIMEOUT, |o| {
        o.data["data"]["k"] == "hub"
    })
    .await
    .expect("the agent corrects the drift");

    // A replica set's rollout, for the rollout gauges.
    let hub_client = fleet.hub_client.clone();
    create_placement(&hub_client, "default", "everywhere", json!({})).await;
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "rolled", "namespace": "default"},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [
                config_map("default", "rolled", json!({"k": "v"}))
            ]}},
            "placementRefs": [{"name": "everywhere"}],
        },
    }))
    .expect("replica set");
    Api::<ManifestWorkReplicaSet>::namespaced(hub_client.clone(), "default")
        .create(&PostParams::default(), &rs)
        .await
        .expect("create replica set");

    // A session ended for an oversized message.
    let token = join_cluster(&hub_client, RAW_CLUSTER, 3600)
        .await
        .expect("join a cluster with no agent");
    send_oversized_hello(&fleet.hub_url, &token, RAW_CLUSTER).await;

    let describe = |names: &[&str]| {
        names
            .iter()
            .map(|n| format!("{n} (read by {:?})", read[*n]))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if let Err(e) = wait_exported(&[fleet.hub_probes_addr], &hub_names, METRIC_TIMEOUT).await {
        panic!("hub metrics read:\n{}\n{e}", describe(&hub_names));
    }
    // What only a refused agent does is exported by the refused one.
    let agents = [agent.probe_addr, refused.probe_addr];
    if let Err(e) = wait_exported(&agents, &agent_names, METRIC_TIMEOUT).await {
        panic!("agent metrics read:\n{}\n{e}", describe(&agent_names));
    }
    println!(
        "{} metric names ({} hub, {} agent) of {} alert and {} dashboard queries exported by the hub and the agents",
        read.len(),
        hub_names.len(),
        agent_names.len(),
        rule_exprs.len(),
        panel_exprs.len()
    );
    refused.kill().await;
    agent.kill().await;
    fleet.stop().await;
}
