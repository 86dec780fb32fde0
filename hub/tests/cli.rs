//! The `ferry-hub` binary's command line. Also the reason `cargo test
//! --workspace` builds `target/<profile>/ferry-hub`, which the e2e test
//! `install` runs as the chart's Deployment would.

use std::process::Command;

const HUB: &str = env!("CARGO_BIN_EXE_ferry-hub");

#[test]
fn the_crds_command_writes_the_checked_in_crds() {
    let out = tempfile::tempdir().expect("tempdir");
    let status = Command::new(HUB)
        .arg("crds")
        .arg("--out")
        .arg(out.path())
        .status()
        .expect("run ferry-hub crds");
    assert!(status.success(), "ferry-hub crds exits 0, got {status}");
    let checked_in = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds");
    for file in ["manifestworks.yaml", "managedclusters.yaml"] {
        let written = std::fs::read_to_string(out.path().join(file)).expect("written");
        let expected = std::fs::read_to_string(checked_in.join(file)).expect("checked in");
        assert!(
            written == expected,
            "the binary writes the checked-in {file}"
        );
    }
}

#[test]
fn a_webhook_address_without_a_target_is_refused_naming_the_missing_flags() {
    let output = Command::new(HUB)
        .args([
            "serve",
            "--insecure-plaintext",
            "--webhook-addr",
            "127.0.0.1:0",
        ])
        .env_remove("FERRY_WEBHOOK_SERVICE")
        .env_remove("FERRY_WEBHOOK_URL")
        .output()
        .expect("run ferry-hub serve");
    assert!(!output.status.success(), "refused");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--webhook-service") || stderr.contains("--webhook-url"),
        "the error names what is missing:\n{stderr}"
    );
}

const REPLICA_SET_FILE: &str = r#"apiVersion: work.ferry.dev/v1alpha1
kind: ManifestWorkReplicaSet
metadata:
  name: web
  namespace: apps
spec:
  manifestWorkTemplate:
    workload:
      manifests:
        - apiVersion: v1
          kind: ConfigMap
          metadata: {name: web, namespace: default}
          data: {cluster: "${CLUSTER_NAME}"}
  placementRefs:
    - name: everywhere
  overrides:
    - name: gold
      clusterSelector: {matchLabels: {tier: gold}}
      resourceIdentifier: {kind: ConfigMap, namespace: default, name: web}
      jsonPatch:
        - {op: add, path: /data/tier, value: "${CLUSTER_LABEL:tier}"}
    - name: broken
      clusterSelector: {matchLabels: {broken: "yes"}}
      resourceIdentifier: {kind: ConfigMap, namespace: default, name: web}
      jsonPatch:
        - {op: remove, path: /data/missing}
"#;

#[test]
fn render_prints_each_clusters_work_with_its_overrides_without_a_hub() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("rs.yaml");
    std::fs::write(&file, REPLICA_SET_FILE).expect("write");
    let output = Command::new(HUB)
        .args(["render", "-f"])
        .arg(&file)
        .args([
            "--clusters",
            "a,b",
            "--cluster-labels",
            "a:tier=gold",
            "--hub-kubeconfig",
            "/nonexistent",
        ])
        .output()
        .expect("run ferry-hub render");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "render exits 0: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let works: Vec<serde_json::Value> = serde_yaml::Deserializer::from_str(&stdout)
        .map(|d| serde::Deserialize::deserialize(d).expect("a YAML document"))
        .collect();
    assert_eq!(works.len(), 2, "{stdout}");
    let data = |i: usize| works[i]["spec"]["workload"]["manifests"][0]["data"].clone();
    assert_eq!(works[0]["metadata"]["namespace"], "a");
    assert_eq!(data(0), serde_json::json!({"cluster": "a", "tier": "gold"}));
    assert_eq!(works[1]["metadata"]["namespace"], "b");
    assert_eq!(data(1), serde_json::json!({"cluster": "b"}));
    assert_eq!(
        works[0]["metadata"]["labels"]["work.ferry.dev/manifestworkreplicaset"],
        "apps.web"
    );
}

#[test]
fn render_names_the_failing_override_and_exits_nonzero() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("rs.yaml");
    std::fs::write(&file, REPLICA_SET_FILE).expect("write");
    let output = Command::new(HUB)
        .args(["render", "-f"])
        .arg(&file)
        .args(["--clusters", "a,c", "--cluster-labels", "c:broken=yes"])
        .output()
        .expect("run ferry-hub render");
    assert!(!output.status.success(), "a failing cluster fails the run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(
            "# cluster c: no work: override \"broken\": jsonPatch[0] (remove /data/missing) failed"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("namespace: a"), "{stdout}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("1 of 2 clusters would get no work"),
        "{stderr}"
    );
}
