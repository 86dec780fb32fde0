//! The Helm charts are sound and the plain manifests are theirs: `helm lint
//! --strict` passes on both charts, `deploy/manifests/` is exactly what the
//! charts render with default values, the hub chart's CRDs are
//! `deploy/crds/`, and a real API server accepts every rendered object.
//!
//! Helm is built from its Go module once and cached (see ferry_e2e::harness::helm).
//! `FERRY_UPDATE_MANIFESTS=1` rewrites `deploy/manifests/` instead of failing.

use std::collections::BTreeMap;

use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::harness::helm::{CHARTS, charts_dir, helm, manifest_path, read_or_empty, render};
use ferry_e2e::harness::image::workspace_dir;
use ferry_hub::crds::POLICY_FILE;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::{Discovery, Scope};
use serde::Deserialize as _;
use serde_json::Value;

/// Runs blocking Helm work off the test runtime.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("blocking task")
}

/// The YAML documents of a multi-document stream, empty ones dropped.
fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).expect("rendered YAML parses"))
        .filter(|doc| !doc.is_null())
        .collect()
}

#[tokio::test]
async fn helm_lint_is_clean_on_both_charts() {
    for (chart, _) in CHARTS {
        let dir = charts_dir().join(chart);
        let out = blocking(move || helm(&["lint", "--strict", &dir.to_string_lossy()]))
            .await
            .unwrap_or_else(|e| panic!("helm lint {chart}: {e}"));
        assert!(
            out.contains("0 chart(s) failed") && !out.contains("[WARNING]"),
            "helm lint {chart}:\n{out}"
        );
    }
}

#[tokio::test]
async fn the_checked_in_manifests_are_the_charts_rendered_with_default_values() {
    let update = std::env::var_os("FERRY_UPDATE_MANIFESTS").is_some();
    for (chart, namespace) in CHARTS {
        let rendered = blocking(move || render(chart, namespace))
            .await
            .unwrap_or_else(|e| panic!("helm template {chart}: {e}"));
        let path = manifest_path(chart);
        if update {
            std::fs::create_dir_all(path.parent().expect("manifests dir")).expect("mkdir");
            std::fs::write(&path, &rendered).expect("write manifests");
            continue;
        }
        assert!(
            read_or_empty(&path) == rendered,
            "deploy/manifests/{chart}.yaml differs from deploy/charts/{chart} rendered with default values; \
             regenerate with: FERRY_UPDATE_MANIFESTS=1 cargo test -p ferry-e2e --test e2e charts::"
        );
    }
}

#[test]
fn the_hub_chart_ships_exactly_the_crds_and_the_admission_policy_of_deploy_crds() {
    let read_dir = |dir: std::path::PathBuf| -> BTreeMap<String, String> {
        std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
            .map(|entry| {
                let path = entry.expect("entry").path();
                let name = path
                    .file_name()
                    .expect("file name")
                    .to_string_lossy()
                    .into_owned();
                let text = std::fs::read_to_string(&path).expect("read CRD");
                (name, text)
            })
            .collect()
    };
    let mut source = read_dir(workspace_dir().join("deploy/crds"));
    // Helm's crds/ directory is for CRDs only; the admission policy that
    // checks works across manifests is an ordinary template of the chart.
    let policy = source
        .remove(POLICY_FILE)
        .expect("deploy/crds has the admission policy");
    let chart = read_dir(charts_dir().join("ferry-hub/crds"));
    assert!(!source.is_empty(), "deploy/crds is empty");
    assert!(
        source == chart,
        "deploy/charts/ferry-hub/crds differs from deploy/crds; copy them: cp deploy/crds/manifestworks.yaml deploy/crds/managedclusters.yaml deploy/charts/ferry-hub/crds/"
    );
    // Except that the hub-owned-writes policy names the release's hub
    // ServiceAccount rather than the default one.
    let policy = policy.replace(
        ferry_hub::admission::hub_writes_policy::DEFAULT_HUB_USERNAME,
        "system:serviceaccount:{{ .Release.Namespace }}:{{ include \"ferry-hub.serviceAccountName\" . }}",
    );
    let template = charts_dir().join("ferry-hub/templates").join(POLICY_FILE);
    assert!(
        std::fs::read_to_string(&template).ok().as_deref() == Some(policy.as_str()),
        "{} differs from deploy/crds/{POLICY_FILE}; copy it, naming the release's ServiceAccount: \
         sed 's|system:serviceaccount:ferry:ferry-hub|system:serviceaccount:{{{{ .Release.Namespace }}}}:{{{{ include \"ferry-hub.serviceAccountName\" . }}}}|'",
        template.display()
    );
}

/// Server-side applies `doc` with the resource discovery found for its kind.
async fn apply(client: &kube::Client, discovery: &Discovery, doc: &Value, dry_run: bool) {
    let api_version = doc["apiVersion"].as_str().expect("apiVersion");
    let kind = doc["kind"].as_str().expect("kind");
    let name = doc["metadata"]["name"].as_str().expect("name");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let (resource, capabilities) = discovery
        .resolve_gvk(&gvk)
        .unwrap_or_else(|| panic!("the API server does not serve {api_version} {kind}"));
    let api: Api<DynamicObject> = match capabilities.scope {
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            doc["metadata"]["namespace"]
                .as_str()
                .unwrap_or_else(|| panic!("{kind} {name} has no namespace")),
            &resource,
        ),
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    let mut params = PatchParams::apply("ferry-charts-test").force();
    params.dry_run = dry_run;
    api.patch(name, &params, &Patch::Apply(doc))
        .await
        .unwrap_or_else(|e| panic!("the API server refused {kind} {name}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_api_server_accepts_every_object_the_charts_render() {
    let plane = ControlPlane::start("charts", ControlPlaneOptions::default())
        .await
        .expect("control plane starts");
    let client = plane.client().await.expect("client");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for (_, namespace) in CHARTS {
        let ns: Namespace = serde_json::from_value(
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        )
        .expect("namespace");
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .expect("create namespace");
    }
    // The checked-in defaults, and the agent's restricted mode.
    let restricted = blocking(|| {
        helm(&[
            "template",
            "ferry-agent",
            &charts_dir().join("ferry-agent").to_string_lossy(),
            "--namespace",
            "ferry-agent",
            "--set",
            "rbac.restricted=true",
            "--set",
            "fullnameOverride=ferry-agent-restricted",
        ])
    })
    .await
    .expect("render restricted agent");
    let mut docs: Vec<Value> = CHARTS
        .iter()
        .flat_map(|(chart, _)| documents(&read_or_empty(&manifest_path(chart))))
        .chain(documents(&restricted))
        .collect();
    assert!(
        docs.len() > 10,
        "rendered {} objects: deploy/manifests missing?",
        docs.len()
    );
    // CRDs are really applied, so the kinds they define are served; the rest
    // goes through every admission step with server-side dry-run.
    docs.sort_by_key(|d| d["kind"] != "CustomResourceDefinition");
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let mut kinds = BTreeMap::<String, usize>::new();
    for doc in &docs {
        let is_crd = doc["kind"] == "CustomResourceDefinition";
        apply(&client, &discovery, doc, !is_crd).await;
        *kinds
            .entry(doc["kind"].as_str().unwrap_or_default().to_string())
            .or_default() += 1;
    }
    for kind in [
        "CustomResourceDefinition",
        "Deployment",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Service",
        "PodDisruptionBudget",
    ] {
        assert!(kinds.contains_key(kind), "no {kind} rendered: {kinds:?}");
    }
    eprintln!("applied: {kinds:?}");
    plane.stop().await;
}
