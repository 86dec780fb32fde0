//! Every YAML a newcomer copies works (issue 50): each ```yaml block of the
//! README and of `docs/`, and each file under `examples/`, parses; each
//! whole object in them (one with `apiVersion` and `kind`) is accepted by a
//! real API server with ferry's CRDs and admission policies and the
//! cluster inventory's CRDs (server-side
//! apply, dry run; namespaces it names are created). A block without
//! `apiVersion` and `kind` is a fragment of a spec or status shown for
//! reading: it must parse as a mapping. Before this test the README and
//! `examples/maintenance-windows.yaml` named ManagedCluster in the wrong
//! API group, and `kubectl apply` refused them.

use std::path::{Path, PathBuf};

use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::harness::image::workspace_dir;
use ferry_e2e::helpers::cluster_inventory::{
    PLACEMENT_DECISION_CRD, install_cluster_profile_crd, install_module_crd,
};
use ferry_hub::crds::install_crds;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use serde_json::Value;

/// Field manager of the dry-run applies.
const MANAGER: &str = "ferry-documented-yaml";

/// One YAML text: where it is and what it says.
struct Source {
    place: String,
    text: String,
}

/// The ```yaml blocks of the markdown file at `path`, each named by its
/// file and first line.
fn yaml_blocks(path: &Path) -> Vec<Source> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (number, line) in text.lines().enumerate() {
        match &mut current {
            None if line.trim_start().starts_with("```yaml") => {
                current = Some((number + 1, String::new()));
            }
            Some((start, body)) if line.trim_start().starts_with("```") => {
                blocks.push(Source {
                    place: format!("{}:{start}", path.display()),
                    text: std::mem::take(body),
                });
                current = None;
            }
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
            None => {}
        }
    }
    assert!(
        current.is_none(),
        "{}: a ```yaml block is not closed",
        path.display()
    );
    blocks
}

/// Every `.yaml` file under `dir`, recursively.
fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

/// What the README, `docs/` and `examples/` hold, in a stable order.
fn sources() -> Vec<Source> {
    let root = workspace_dir();
    let mut markdown = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    markdown.extend(docs);
    let mut sources: Vec<Source> = markdown.iter().flat_map(|p| yaml_blocks(p)).collect();
    let mut examples = Vec::new();
    yaml_files(&root.join("examples"), &mut examples);
    examples.sort();
    for path in examples {
        sources.push(Source {
            place: path.display().to_string(),
            text: std::fs::read_to_string(&path).expect("read example"),
        });
    }
    sources
}

/// Creates namespace `name` unless it exists.
async fn ensure_namespace(client: &Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
    }))
    .expect("namespace");
    match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create namespace {name}: {e}"),
    }
}

/// Applies `object` (from `place`) as a dry run; panics with the API
/// server's answer when it is refused.
async fn dry_run_apply(client: &Client, place: &str, object: &Value) {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, capabilities) = pinned_kind(client, &gvk)
        .await
        .unwrap_or_else(|e| panic!("{place}: the API server serves no {api_version} {kind}: {e}"));
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("{place}: {kind} without metadata.name"));
    let api: Api<DynamicObject> = match capabilities.scope {
        Scope::Namespaced => {
            let namespace = object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default");
            ensure_namespace(client, namespace).await;
            Api::namespaced_with(client.clone(), namespace, &resource)
        }
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        name,
        &PatchParams::apply(MANAGER).dry_run(),
        &Patch::Apply(object),
    )
    .await
    .unwrap_or_else(|e| panic!("{place}: the API server refuses {kind} {name}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_yaml_in_the_readme_docs_and_examples_parses_and_every_object_is_accepted() {
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let client = hub.client().await.expect("admin client");
    install_crds(&client).await.expect("CRDs and policies");
    // The cluster inventory's own CRDs, from its Go module, as a consumer
    // of ferry's inventory installs them.
    install_cluster_profile_crd(&client)
        .await
        .expect("ClusterProfile CRD");
    install_module_crd(&client, PLACEMENT_DECISION_CRD)
        .await
        .expect("inventory PlacementDecision CRD");
    // An approval is accepted only from the user it names as `approvedBy`
    // (policy `rolloutapprovals.work.ferry.dev`): such an object is applied
    // as that user (with every right, in `system:masters`), so the outcome
    // does not depend on when the policy comes into force.
    let (mut objects, mut fragments) = (0, 0);
    for source in sources() {
        for document in serde_yaml::Deserializer::from_str(&source.text) {
            let value: Value = serde::Deserialize::deserialize(document)
                .unwrap_or_else(|e| panic!("{}: not YAML: {e}", source.place));
            if value.is_null() {
                continue;
            }
            let whole = value.get("apiVersion").is_some() && value.get("kind").is_some();
            if whole {
                let as_user = match value["spec"]["approvedBy"].as_str() {
                    Some(user) => hub
                        .admin_client_as(user)
                        .await
                        .expect("client as the approver"),
                    None => client.clone(),
                };
                dry_run_apply(&as_user, &source.place, &value).await;
                objects += 1;
            } else {
                assert!(
                    value.is_object(),
                    "{}: a fragment must be a mapping, got {value}",
                    source.place
                );
                fragments += 1;
            }
        }
    }
    eprintln!("{objects} objects accepted, {fragments} fragments parsed");
    assert!(objects >= 10, "too few objects found: {objects}");
    hub.stop().await;
}
