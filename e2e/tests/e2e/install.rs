//! The charts' RBAC is proven by use: both charts, rendered with their
//! default values, are installed into real hub and spoke control planes;
//! the real `ferry-hub` and `ferry-agent` binaries run with the arguments
//! and environment of the charts' Deployments and kubeconfigs holding only
//! tokens minted for the charts' ServiceAccounts, so they have exactly the
//! charts' permissions. The core path then works: the webhook registered by
//! a Service reference refuses an invalid work (the hub API server reaches it
//! through the Service's EndpointSlice), a work is applied with status and
//! feedback back, clusters show as connected, a deleted work is collected on
//! the spoke, and a second cluster joined by an admin is served (its agent in
//! the chart's restricted mode, `rbac.restricted=true`); a Placement and a
//! ManifestWorkReplicaSet put a work on both clusters, a cluster leaving the
//! placement loses its work, and the replica set is deleted. The API
//! servers' audit logs of that run then show that every grant of the hub's
//! roles (and the agent's fixed rules) was used, and nothing was refused. A
//! third test does the same for the rules `installCRDs=true` adds.
//!
//! Needs the binaries built next to the test (`cargo build -p ferry-hub -p
//! ferry-agent`, or `FERRY_HUB_BIN`/`FERRY_AGENT_BIN`) and an IPv4 address
//! that is not loopback (EndpointSlices refuse 127.0.0.0/8).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::sync::OnceLock;

use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::{
    FeedbackRule, FeedbackType, ManifestConfigOption, ManifestWork, NamedJsonPath,
    ResourceIdentifier,
};
use ferry_api::placement::{Placement, PlacementDecision};
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::audit::{Request, requests_by};
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::harness::helm::{charts_dir, helm, render};
use ferry_e2e::harness::local_pod::{
    LocalContainer, free_port, local_container, non_loopback_ipv4, service_account_kubeconfig,
    workspace_binary,
};
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, feedback_value, manifest_work, wait_applied,
};
use ferry_hub::admission::webhook::{
    WEBHOOK_CONFIGURATION_NAME, WEBHOOK_NAME, wait_until_enforced,
};
use ferry_hub::certs::tls::ServingCert;
use ferry_hub::join::hub_side::join_cluster;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::{Discovery, Scope};
use serde::Deserialize as _;
use serde_json::{Value, json};

/// The namespaces the charts are rendered for (ferry_e2e::harness::helm::CHARTS).
const HUB_NAMESPACE: &str = "ferry";
const AGENT_NAMESPACE: &str = "ferry-agent";
/// The charts' ServiceAccounts, as the API servers name their users.
const HUB_USER: &str = "system:serviceaccount:ferry:ferry-hub";
const AGENT_USER: &str = "system:serviceaccount:ferry-agent:ferry-agent";
/// The hub chart's webhook Service and the Secret its Deployment mounts.
const WEBHOOK_SERVICE: &str = "ferry-hub-webhook";
const HUB_TLS_SECRET: &str = "ferry-hub-tls";
/// The Secret the agent chart's Deployment reads (hub.secretName).
const AGENT_HUB_SECRET: &str = "ferry-agent-hub";

/// What the core-path run leaves for the least-privilege check.
struct Record {
    hub_requests: Vec<Request>,
    agent_requests: Vec<Request>,
    restricted_agent_requests: Vec<Request>,
    hub_rules: Vec<Value>,
    agent_rules: Vec<Value>,
}

/// The core path, run once for both tests of this file on a runtime of its
/// own; a failure is kept as its panic message.
fn record() -> &'static Result<Record, String> {
    static RECORD: OnceLock<Result<Record, String>> = OnceLock::new();
    RECORD.get_or_init(|| {
        std::thread::spawn(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(core_path())
        })
        .join()
        .map_err(|panic| {
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "the core path panicked".into())
        })
    })
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("blocking task")
}

fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).expect("rendered YAML parses"))
        .filter(|doc| !doc.is_null())
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kinds: &[&str]) -> Vec<&'a Value> {
    docs.iter()
        .filter(|d| kinds.iter().any(|k| d["kind"] == *k))
        .collect()
}

/// The rules of the roles the chart binds (to its own ServiceAccount); a
/// role it only ships for users to bind (`ferry-hub-work-executor`,
/// `ferry-hub-clusterset-binder`) is not the process's right.
fn rules(docs: &[Value]) -> Vec<Value> {
    let bound: BTreeSet<(String, String)> = of_kind(docs, &["ClusterRoleBinding", "RoleBinding"])
        .into_iter()
        .map(|b| {
            (
                b["roleRef"]["kind"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                b["roleRef"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    of_kind(docs, &["ClusterRole", "Role"])
        .into_iter()
        .filter(|role| {
            bound.contains(&(
                role["kind"].as_str().unwrap_or_default().to_string(),
                role["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            ))
        })
        .flat_map(|role| role["rules"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// Installs `docs` with the admin client as `helm install` would (namespace
/// first, CRDs first and Established before the rest), by server-side apply.
async fn install(client: &kube::Client, namespace: &str, docs: &[Value]) {
    let ns: Namespace = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
    )
    .expect("namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create the release namespace");
    let mut docs = docs.to_vec();
    docs.sort_by_key(|d| d["kind"] != "CustomResourceDefinition");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let params = PatchParams::apply("ferry-install-test").force();
    for doc in &docs {
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
                doc["metadata"]["namespace"].as_str().unwrap_or(namespace),
                &resource,
            ),
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        api.patch(name, &params, &Patch::Apply(doc))
            .await
            .unwrap_or_else(|e| panic!("the API server refused {kind} {name}: {e}"));
        if kind == "CustomResourceDefinition" {
            wait_until(&crds, name, "CRD Established", APPLY_TIMEOUT, |crd| {
                crd.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| {
                        c.iter()
                            .any(|c| c.type_ == "Established" && c.status == "True")
                    })
            })
            .await
            .expect("CRD established");
        }
    }
}

async fn put_secret(client: &kube::Client, namespace: &str, name: &str, data: &[(&str, &str)]) {
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "stringData": data.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
    }))
    .expect("secret");
    Api::<Secret>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply("ferry-install-test").force(),
            &Patch::Apply(&secret),
        )
        .await
        .unwrap_or_else(|e| panic!("Secret {namespace}/{name}: {e}"));
}

/// A binary run as a chart's container, killed when dropped; output in a log.
struct Process {
    name: String,
    child: tokio::process::Child,
    log: std::path::PathBuf,
}

impl Process {
    fn start(container: &LocalContainer, env_binary: &str, kubeconfig: &Path, dir: &Path) -> Self {
        let log = dir.join(format!("{}.log", container.binary));
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = tokio::process::Command::new(workspace_binary(&container.binary, env_binary))
            .args(&container.args)
            .envs(container.env.iter().map(|(k, v)| (k, v)))
            .env("KUBECONFIG", kubeconfig)
            .env_remove("FERRY_LOG_JSON")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", container.binary));
        Self {
            name: container.binary.clone(),
            child,
            log,
        }
    }

    /// Its log, for failure messages; panics when it has exited.
    fn alive(&mut self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("{} exited with {status}:\n{log}", self.name);
        }
        log
    }
}

/// Starts the agent chart's container for `cluster` on `spoke`: the Secret
/// the chart reads (hub URL, cluster name, token, hub CA) as an admin's
/// join would leave it, a token of the chart's ServiceAccount, and the
/// Deployment's arguments with a free probe port.
async fn start_agent(
    spoke: &ControlPlane,
    hub_url: &str,
    hub_ca: &str,
    token: &str,
    cluster: &str,
    deployment: &Value,
    dir: &Path,
) -> Process {
    let admin = spoke.client().await.expect("spoke admin client");
    put_secret(
        &admin,
        AGENT_NAMESPACE,
        AGENT_HUB_SECRET,
        &[
            ("hub-url", hub_url),
            ("cluster-name", cluster),
            ("token", token),
            ("ca.crt", hub_ca),
        ],
    )
    .await;
    let dir = dir.join(cluster);
    std::fs::create_dir_all(&dir).expect("agent dir");
    let mut container = local_container(&admin, AGENT_NAMESPACE, deployment, &dir)
        .await
        .expect("the agent's container");
    let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
    assert!(container.set_arg(
        "--probe-addr=",
        &format!("127.0.0.1:{}", free_port(loopback))
    ));
    let kubeconfig = dir.join("kubeconfig");
    let config = service_account_kubeconfig(spoke, &admin, AGENT_NAMESPACE, "ferry-agent")
        .await
        .expect("agent token");
    std::fs::write(&kubeconfig, config).expect("agent kubeconfig");
    Process::start(&container, "FERRY_AGENT_BIN", &kubeconfig, &dir)
}

/// A work for `cluster` with one ConfigMap in `default` and a feedback rule
/// reading its `.data.key`.
fn work_with_feedback(cluster: &str, name: &str) -> ManifestWork {
    let mut work = manifest_work(
        cluster,
        name,
        vec![config_map("default", name, json!({"key": "value-1"}))],
    );
    work.spec.manifest_configs = vec![ManifestConfigOption {
        resource_identifier: ResourceIdentifier {
            group: String::new(),
            resource: "configmaps".into(),
            name: name.into(),
            namespace: "default".into(),
        },
        feedback_rules: vec![FeedbackRule {
            type_: FeedbackType::JsonPaths,
            json_paths: vec![NamedJsonPath {
                name: "key".into(),
                path: ".data.key".into(),
                version: None,
            }],
        }],
        ..Default::default()
    }];
    work
}

async fn wait_connected(clusters: &Api<ManagedCluster>, name: &str, agent: &mut Process) {
    let connected = |c: &ManagedCluster| c.status.as_ref().is_some_and(|s| s.connected);
    if let Err(e) = wait_until(clusters, name, "connected", APPLY_TIMEOUT, connected).await {
        panic!(
            "{name} never shows connected: {e}\nits agent:\n{}",
            agent.alive()
        );
    }
}

async fn core_path() -> Record {
    let audited = ControlPlaneOptions {
        audit: true,
        ..Default::default()
    };
    let (hub, spoke_a, spoke_b) = tokio::try_join!(
        ControlPlane::start("hub-install", audited.clone()),
        ControlPlane::start("spoke-install-a", audited.clone()),
        ControlPlane::start("spoke-install-b", audited),
    )
    .expect("control planes start");
    let hub_docs = documents(
        &blocking(|| render("ferry-hub", HUB_NAMESPACE))
            .await
            .expect("render the hub chart"),
    );
    let agent_docs = documents(
        &blocking(|| render("ferry-agent", AGENT_NAMESPACE))
            .await
            .expect("render the agent chart"),
    );
    // The second spoke's agent runs in the chart's restricted mode (only
    // the default rbac.allowedResources, no `*`).
    let restricted_docs = documents(
        &blocking(|| {
            helm(&[
                "template",
                "ferry-agent",
                &charts_dir().join("ferry-agent").to_string_lossy(),
                "--namespace",
                AGENT_NAMESPACE,
                "--set",
                "rbac.restricted=true",
            ])
        })
        .await
        .expect("render the restricted agent chart"),
    );
    let hub_admin = hub.client().await.expect("hub admin client");
    install(&hub_admin, HUB_NAMESPACE, &hub_docs).await;
    for (spoke, docs) in [(&spoke_a, &agent_docs), (&spoke_b, &restricted_docs)] {
        install(
            &spoke.client().await.expect("spoke admin client"),
            AGENT_NAMESPACE,
            docs,
        )
        .await;
    }
    let dir = tempfile::Builder::new()
        .prefix("ferry-install-")
        .tempdir()
        .expect("test dir");

    // The hub's serving certificate (gRPC and webhook, one Secret as the
    // chart's defaults have it) names the webhook Service and the loopback
    // address agents dial here.
    let webhook_dns = format!("{WEBHOOK_SERVICE}.{HUB_NAMESPACE}.svc");
    let cert =
        ServingCert::generate(&[webhook_dns.clone(), "127.0.0.1".into()]).expect("hub certificate");
    put_secret(
        &hub_admin,
        HUB_NAMESPACE,
        HUB_TLS_SECRET,
        &[
            ("tls.crt", &cert.chain_pem),
            ("tls.key", &cert.key_pem),
            ("ca.crt", &cert.ca_pem),
        ],
    )
    .await;

    // No kubelet runs the hub's pod and no kube-proxy routes ClusterIPs: the
    // chart's webhook Service gets an EndpointSlice pointing at the hub
    // process, and the API server (--enable-aggregator-routing) calls that.
    let ip = non_loopback_ipv4()
        .expect("an IPv4 address that is not loopback (this machine needs a default IPv4 route)");
    let webhook_port = free_port(ip.into());
    let slice: EndpointSlice = serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{WEBHOOK_SERVICE}-local"), "namespace": HUB_NAMESPACE,
                     "labels": {"kubernetes.io/service-name": WEBHOOK_SERVICE,
                                "endpointslice.kubernetes.io/managed-by": "ferry-install-test"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip.to_string()], "conditions": {"ready": true}}],
        "ports": [{"name": "webhook", "port": webhook_port, "protocol": "TCP"}],
    }))
    .expect("endpoint slice");
    Api::<EndpointSlice>::namespaced(hub_admin.clone(), HUB_NAMESPACE)
        .create(&PostParams::default(), &slice)
        .await
        .expect("create the webhook's EndpointSlice");

    // The hub, as the chart's Deployment runs it, with its ServiceAccount's token.
    let hub_deployment = of_kind(&hub_docs, &["Deployment"])[0].clone();
    let hub_dir = dir.path().join("hub");
    std::fs::create_dir_all(&hub_dir).expect("hub dir");
    let mut hub_container = local_container(&hub_admin, HUB_NAMESPACE, &hub_deployment, &hub_dir)
        .await
        .expect("the hub's container");
    assert_eq!(
        hub_container.arg("--webhook-service="),
        Some(format!("{HUB_NAMESPACE}/{WEBHOOK_SERVICE}:443").as_str()),
        "the chart registers the webhook by its Service: {:?}",
        hub_container.args
    );
    let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
    let grpc_port = free_port(loopback);
    assert!(hub_container.set_arg("--grpc-addr=", &format!("127.0.0.1:{grpc_port}")));
    assert!(hub_container.set_arg(
        "--probe-addr=",
        &format!("127.0.0.1:{}", free_port(loopback))
    ));
    assert!(hub_container.set_arg("--webhook-addr=", &format!("{ip}:{webhook_port}")));
    let hub_kubeconfig = hub_dir.join("kubeconfig");
    let config = service_account_kubeconfig(&hub, &hub_admin, HUB_NAMESPACE, "ferry-hub")
        .await
        .expect("hub token");
    std::fs::write(&hub_kubeconfig, config).expect("hub kubeconfig");
    let mut hub_process =
        Process::start(&hub_container, "FERRY_HUB_BIN", &hub_kubeconfig, &hub_dir);

    // Joining is an admin's act; the hub then serves the cluster with its
    // chart's rights.
    let hub_url = format!("https://127.0.0.1:{grpc_port}");
    let token_a = join_cluster(&hub_admin, "spoke-install-a", 3600)
        .await
        .expect("join spoke-install-a");
    let mut agent_a = start_agent(
        &spoke_a,
        &hub_url,
        &cert.ca_pem,
        &token_a,
        "spoke-install-a",
        of_kind(&agent_docs, &["Deployment"])[0],
        dir.path(),
    )
    .await;

    // The webhook registration names the Service, and the API server
    // reaches the hub through it: a work with an invalid JSONPath is refused.
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(hub_admin.clone());
    let registered = wait_until(
        &configs,
        WEBHOOK_CONFIGURATION_NAME,
        "webhook registered",
        APPLY_TIMEOUT,
        |_| true,
    )
    .await
    .unwrap_or_else(|e| panic!("the hub registers no webhook: {e}\n{}", hub_process.alive()));
    let client_config = &registered.webhooks.expect("webhooks")[0].client_config;
    assert_eq!(client_config.url, None);
    let service = client_config.service.as_ref().expect("a service reference");
    assert_eq!(
        (
            service.namespace.as_str(),
            service.name.as_str(),
            service.port
        ),
        (HUB_NAMESPACE, WEBHOOK_SERVICE, Some(443))
    );
    assert!(
        wait_until_enforced(&hub_admin, "spoke-install-a", APPLY_TIMEOUT).await,
        "the API server never called the webhook through its Service:\n{}",
        hub_process.alive()
    );
    let works: Api<ManifestWork> = Api::namespaced(hub_admin.clone(), "spoke-install-a");
    // Only the webhook checks JSONPath grammar (the CRD's rules and the
    // admission policy cannot), and it fails open: a refusal is its answer.
    let invalid: ManifestWork = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWork",
        "metadata": {"name": "invalid", "namespace": "spoke-install-a"},
        "spec": {
            "workload": {"manifests": [config_map("default", "invalid", json!({"a": "1"}))]},
            "manifestConfigs": [{
                "resourceIdentifier": {"group": "", "resource": "configmaps",
                                       "namespace": "default", "name": "invalid"},
                "updateStrategy": {"type": "ServerSideApply", "serverSideApply": {"ignoreFields": [
                    {"condition": "OnSpokePresent", "jsonPaths": ["$.data[?(@.x=="]}]}}}]}
    }))
    .expect("a ManifestWork");
    match works.create(&PostParams::default(), &invalid).await {
        Err(kube::Error::Api(status)) => assert!(
            status.message.contains(WEBHOOK_NAME) && status.message.contains("JSONPath"),
            "refused, but not by the webhook: {}",
            status.message
        ),
        other => panic!("a work with an invalid JSONPath was not refused: {other:?}"),
    }

    // A work is applied, with status and feedback back on the hub, and the
    // cluster shows as connected.
    let clusters: Api<ManagedCluster> = Api::all(hub_admin.clone());
    wait_connected(&clusters, "spoke-install-a", &mut agent_a).await;
    works
        .create(
            &PostParams::default(),
            &work_with_feedback("spoke-install-a", "install-a"),
        )
        .await
        .expect("create work");
    wait_applied(&works, "install-a").await.unwrap_or_else(|e| {
        panic!(
            "{e}\nhub:\n{}\nagent:\n{}",
            hub_process.alive(),
            agent_a.alive()
        )
    });
    wait_until(&works, "install-a", "feedback", APPLY_TIMEOUT, |w| {
        feedback_value(w, 0, "key").is_some_and(|v| v.string.as_deref() == Some("value-1"))
    })
    .await
    .expect("the feedback value reaches the hub");
    let spoke_a_config_maps: Api<ConfigMap> =
        Api::namespaced(spoke_a.client().await.expect("spoke client"), "default");
    assert!(
        spoke_a_config_maps
            .get_opt("install-a")
            .await
            .expect("read the spoke")
            .is_some(),
        "the work's ConfigMap is on the spoke"
    );

    // The work's deleteOption changes (it still deletes this ConfigMap): the
    // agent brings the record of what it applied up to date.
    works
        .patch(
            "install-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"deleteOption": {
                "propagationPolicy": "SelectivelyOrphan",
                "selectivelyOrphans": {"orphaningRules": [{"group": "", "resource": "configmaps",
                                                           "namespace": "default", "name": "another"}]}}}})),
        )
        .await
        .expect("edit the deleteOption");
    wait_applied(&works, "install-a")
        .await
        .unwrap_or_else(|e| panic!("{e}\nagent:\n{}", agent_a.alive()));

    // A second cluster joined by an admin is served by the same hub; its
    // agent, restricted to the chart's allowed kinds, applies a ConfigMap.
    let token_b = join_cluster(&hub_admin, "spoke-install-b", 3600)
        .await
        .expect("join spoke-install-b");
    let mut agent_b = start_agent(
        &spoke_b,
        &hub_url,
        &cert.ca_pem,
        &token_b,
        "spoke-install-b",
        of_kind(&restricted_docs, &["Deployment"])[0],
        dir.path(),
    )
    .await;
    wait_connected(&clusters, "spoke-install-b", &mut agent_b).await;
    let works_b: Api<ManifestWork> = Api::namespaced(hub_admin.clone(), "spoke-install-b");
    works_b
        .create(
            &PostParams::default(),
            &work_with_feedback("spoke-install-b", "install-b"),
        )
        .await
        .expect("create work b");
    wait_applied(&works_b, "install-b")
        .await
        .unwrap_or_else(|e| panic!("{e}\nagent b:\n{}", agent_b.alive()));

    // Deleting the work removes its ConfigMap from the spoke, then the work.
    works
        .delete("install-a", &DeleteParams::default())
        .await
        .expect("delete work");
    wait_deleted(&works, "install-a", "work deleted", APPLY_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{e}\nhub:\n{}", hub_process.alive()));
    wait_deleted(
        &spoke_a_config_maps,
        "install-a",
        "ConfigMap collected",
        APPLY_TIMEOUT,
    )
    .await
    .expect("the work's ConfigMap is collected on the spoke");

    fleet_distribution(&hub_admin, &clusters).await;

    hub_process.alive();
    agent_a.alive();
    agent_b.alive();
    let record = Record {
        hub_requests: requests_by(&hub.info.audit_log, HUB_USER),
        agent_requests: requests_by(&spoke_a.info.audit_log, AGENT_USER),
        restricted_agent_requests: requests_by(&spoke_b.info.audit_log, AGENT_USER),
        hub_rules: rules(&hub_docs),
        agent_rules: rules(&agent_docs),
    };
    drop((hub_process, agent_a, agent_b));
    for plane in [hub, spoke_a, spoke_b] {
        plane.stop().await;
    }
    record
}

/// Fleet distribution on the core path: a Placement over both clusters in
/// two decision groups and a ManifestWorkReplicaSet on it; narrowing the
/// placement deletes a PlacementDecision and the work of the cluster that
/// left; deleting the replica set removes its works and its finalizer.
async fn fleet_distribution(hub_admin: &kube::Client, clusters: &Api<ManagedCluster>) {
    let placements: Api<Placement> = Api::namespaced(hub_admin.clone(), "default");
    let placement: Placement = serde_json::from_value(json!({
        "apiVersion": "cluster.ferry.dev/v1alpha1",
        "kind": "Placement",
        "metadata": {"name": "install", "namespace": "default"},
        "spec": {
            "predicates": [{"requiredClusterSelector": {"labelSelector": {"matchExpressions": [{"key": "leave", "operator": "DoesNotExist"}]}}}],
            "decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": 1}},
        },
    }))
    .expect("placement");
    ferry_e2e::helpers::placement_helpers::bind_global(hub_admin, "default").await;
    placements
        .create(&PostParams::default(), &placement)
        .await
        .expect("create Placement");
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub_admin.clone(), "default");
    let set: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "install-fleet", "namespace": "default"},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [config_map("default", "install-fleet", json!({"k": "v"}))]}},
            "placementRefs": [{"name": "install"}],
        },
    }))
    .expect("replica set");
    sets.create(&PostParams::default(), &set)
        .await
        .expect("create ManifestWorkReplicaSet");
    let works_a: Api<ManifestWork> = Api::namespaced(hub_admin.clone(), "spoke-install-a");
    let works_b: Api<ManifestWork> = Api::namespaced(hub_admin.clone(), "spoke-install-b");
    for works in [&works_a, &works_b] {
        wait_applied(works, "install-fleet")
            .await
            .expect("the generated work is applied");
    }
    wait_until(&sets, "install-fleet", "applied", APPLY_TIMEOUT, |s| {
        s.status.as_ref().is_some_and(|s| s.summary.applied == 2)
    })
    .await
    .expect("the replica set counts both works applied");
    clusters
        .patch(
            "spoke-install-b",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"leave": "true"}}})),
        )
        .await
        .expect("label spoke-install-b");
    wait_deleted(
        &works_b,
        "install-fleet",
        "work of the leaving cluster",
        APPLY_TIMEOUT,
    )
    .await
    .expect("the leaving cluster's work is deleted");
    let decisions: Api<PlacementDecision> = Api::namespaced(hub_admin.clone(), "default");
    wait_deleted(
        &decisions,
        "install-decision-2",
        "second decision",
        APPLY_TIMEOUT,
    )
    .await
    .expect("the emptied decision group's PlacementDecision is deleted");
    sets.delete("install-fleet", &DeleteParams::default())
        .await
        .expect("delete the replica set");
    wait_deleted(&sets, "install-fleet", "replica set deleted", APPLY_TIMEOUT)
        .await
        .expect("the replica set goes");
    wait_deleted(&works_a, "install-fleet", "its work deleted", APPLY_TIMEOUT)
        .await
        .expect("its work goes");
}

async fn recorded() -> &'static Record {
    match blocking(record).await {
        Ok(record) => record,
        Err(message) => panic!("the core path failed with the charts' permissions: {message}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_exactly_the_charts_permissions_hub_and_agents_serve_the_core_path() {
    let record = recorded().await;
    // Nothing the binaries asked for was forbidden.
    for (user, requests) in [
        (HUB_USER, &record.hub_requests),
        (AGENT_USER, &record.agent_requests),
        (AGENT_USER, &record.restricted_agent_requests),
    ] {
        assert!(!requests.is_empty(), "no request of {user} was audited");
        let refused: Vec<&Request> = requests.iter().filter(|r| r.code == 403).collect();
        assert!(refused.is_empty(), "{user} was refused: {refused:#?}");
    }
}

/// One granted (apiGroup, resource, verb), with the names it is limited to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Grant {
    group: String,
    resource: String,
    verb: String,
    names: Vec<String>,
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

fn grants(rules: &[Value]) -> Vec<Grant> {
    let mut out = Vec::new();
    for rule in rules {
        let names = strings(&rule["resourceNames"]);
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    out.push(Grant {
                        group: group.clone(),
                        resource: resource.clone(),
                        verb,
                        names: names.clone(),
                    });
                }
            }
        }
    }
    out
}

/// Whether some request used `grant`. A server-side apply that creates its
/// object is audited as a `patch` answered 201 Created, but the API server
/// authorizes it as `create` as well (with the object's name): such a patch
/// uses a `create` grant.
fn used(grant: &Grant, requests: &[Request]) -> bool {
    requests.iter().any(|r| {
        let verb =
            r.verb == grant.verb || (grant.verb == "create" && r.verb == "patch" && r.code == 201);
        (grant.group == "*" || r.group == grant.group)
            && (grant.resource == "*" || r.resource == grant.resource)
            && verb
            && (grant.names.is_empty() || grant.names.contains(&r.name))
    })
}

/// Grants of the hub's roles the core path does not use, each with the rare
/// path that does. Keep it short: every entry is a right no test exercises.
const HUB_RARELY_USED: &[(&str, &str, &str, &str)] = &[
    (
        "cluster.ferry.dev",
        "managedclusters",
        "create",
        // hub/src/clusters/legacy_group.rs creates a cluster only when an
        // earlier hub left it in work.ferry.dev; a fresh install has none
        // (e2e/tests/e2e/managed_cluster_group_upgrade.rs carries some).
        "carrying over the clusters of an earlier hub",
    ),
    (
        "work.ferry.dev",
        "managedclusters",
        "list",
        // hub/src/clusters/legacy_group.rs lists the clusters an earlier hub
        // kept there only when discovery says the API server serves them.
        "reading the clusters of an earlier hub",
    ),
    (
        "work.ferry.dev",
        "manifestworks",
        "delete",
        // hub/src/work_ttl.rs deletes a work only once it is Complete and its
        // deleteOption.ttlSecondsAfterFinished ran out; the core path sets no
        // TTL (e2e/tests/e2e/work_completion.rs uses it).
        "deleting a completed work after its ttlSecondsAfterFinished",
    ),
    (
        "work.ferry.dev",
        "manifestworks",
        "execute-as",
        // Not a request: the executor admission policy asks the API server's
        // authorizer whether the hub may name an executor when the
        // replica-set controller writes a work whose template names one
        // (e2e/tests/e2e/executor_authorization.rs); the core path names none.
        "writing generated works whose template names an executor",
    ),
    (
        "coordination.k8s.io",
        "leases",
        "delete",
        // hub/src/clusters/liveness.rs deletes a replica Lease only an hour
        // after it was released or lapsed (a replica gone for good); the
        // core path is shorter (the sweep itself runs in e2e liveness::).
        "deleting the Lease of a replica gone for an hour",
    ),
    (
        "apps",
        "controllerrevisions",
        "patch",
        // hub/src/replica_set/revisions.rs renumbers a revision only when a
        // replica set's spec returns to an older template (an undo); the
        // core path never goes back (e2e rollout_rollback:: does).
        "renumbering a revision the spec returned to",
    ),
    (
        "apps",
        "controllerrevisions",
        "delete",
        // Pruning happens only past revisionHistoryLimit (default 10); the
        // core path makes one revision (e2e rollout_rollback:: prunes).
        "pruning revisions beyond revisionHistoryLimit",
    ),
    (
        "multicluster.x-k8s.io",
        "clusterprofiles",
        "delete",
        // hub/src/cluster_profile/controller.rs deletes a profile only when
        // its ManagedCluster is deleted or a ferry profile names no cluster;
        // the core path deletes no cluster (e2e cluster_profiles:: does both).
        "deleting the ClusterProfile of a deleted cluster or of no cluster",
    ),
    (
        "work.ferry.dev",
        "manifestworkreplicasets",
        "get",
        // hub/src/replica_set/controller.rs reads a replica set from the API
        // server only when its cached copy is behind the status this hub
        // last wrote (the gates' memory); the core path's cache keeps up.
        "re-reading a replica set whose cached copy is behind its last status write",
    ),
    (
        "cluster.ferry.dev",
        "managedclusters",
        "get",
        // hub/src/grpc/identity.rs answers a connect's accept check from the
        // replica's ManagedCluster cache and reads the API server only for a
        // cluster that cache has not seen yet (a connect right after its
        // join); the core path's cache has every cluster.
        "reading a cluster the accept check's cache has not seen yet",
    ),
    (
        "cluster.ferry.dev",
        "managedclusters",
        "patch",
        // hub/src/clusters/taints.rs taints a cluster only once its agent
        // stayed away past the grace, and a join no longer writes it twice
        // (e2e placement:: and liveness:: take agents away).
        "tainting a cluster whose agent stayed away past the grace, and removing it",
    ),
    (
        "cluster.ferry.dev",
        "placementdecisions",
        "patch",
        // hub/src/placement/act.rs creates a new decision object (so one
        // that appeared since the decision was made is never applied over)
        // and patches one only to relabel it, when a decision group's index
        // or name changes (e2e placement::decision_groups_...).
        "relabelling a decision object whose group changed",
    ),
];

/// Grants of the agent's fixed rules the core path does not use, each with
/// the path that does.
const AGENT_RARELY_USED: &[(&str, &str, &str, &str)] = &[
    (
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "watch",
        // kube's await_condition lists first and watches only while the
        // condition does not hold: the agent's wait for its AppliedManifestWork
        // CRD watches only when the first list finds it not yet Established (a
        // race the core path wins or loses), and drift watches on CRDs that a
        // work applies (e2e/tests/e2e/mixed_kinds.rs) use it every time.
        "waiting for a CRD to be established; drift watches on applied CRDs",
    ),
    (
        "authorization.k8s.io",
        "subjectaccessreviews",
        "create",
        // Only works that name an executor ask the cluster.
        "works with spec.executor (e2e/tests/e2e/executor.rs)",
    ),
    (
        "",
        "serviceaccounts",
        "impersonate",
        // Only an executor work carrying a Role, ClusterRole or binding is
        // dry-run created as its executor (escalation check).
        "executor works with RBAC objects (e2e/tests/e2e/executor.rs)",
    ),
    (
        "",
        "secrets",
        "update",
        // Written again only when a platform admin asks for a new key.
        "rotating the sealing keys (e2e/tests/e2e/sealed_secrets.rs)",
    ),
];

fn unused<'a>(
    grants: &'a [Grant],
    requests: &[Request],
    rare: &[(&str, &str, &str, &str)],
) -> Vec<&'a Grant> {
    grants
        .iter()
        .filter(|g| !used(g, requests))
        .filter(|g| {
            !rare.iter().any(|(group, resource, verb, _why)| {
                g.group == *group && g.resource == *resource && g.verb == *verb
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_roles_grant_no_wildcards_and_every_grant_is_used_by_the_core_path() {
    let record = recorded().await;
    let hub = grants(&record.hub_rules);
    assert!(!hub.is_empty(), "the hub chart renders no role");
    let wild: Vec<&Grant> = hub
        .iter()
        .filter(|g| {
            g.group == "*" || g.resource == "*" || g.verb == "*" || g.resource.contains('*')
        })
        .collect();
    assert!(wild.is_empty(), "wildcards in the hub's roles: {wild:#?}");
    let hub_unused = unused(&hub, &record.hub_requests, HUB_RARELY_USED);
    // The figures: what the hub asked its API server for during the core path.
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for r in &record.hub_requests {
        *counts
            .entry(format!("{} {}/{}", r.verb, r.group, r.resource))
            .or_default() += 1;
    }
    eprintln!(
        "hub requests during the core path ({} in all): {counts:#?}",
        record.hub_requests.len()
    );
    let seen: BTreeSet<String> = record
        .hub_requests
        .iter()
        .map(|r| {
            format!(
                "{} {}/{} {} {}",
                r.verb, r.group, r.resource, r.name, r.code
            )
        })
        .collect();
    assert!(
        hub_unused.is_empty(),
        "the hub's roles grant what the core path never used: {hub_unused:#?}\nthe hub's requests: {seen:#?}"
    );
    // Allow-list entries must name real grants, so the list cannot rot.
    for (group, resource, verb, _) in HUB_RARELY_USED {
        assert!(
            hub.iter()
                .any(|g| g.group == *group && g.resource == *resource && g.verb == *verb),
            "HUB_RARELY_USED names {verb} {group}/{resource}, which the hub is not granted"
        );
    }

    // The agent applies arbitrary kinds, so its chart grants `*` resources
    // by design; its fixed rules (its own records, CRDs) are checked like
    // the hub's, and each verb of the `*` rule is used on some resource.
    let agent = grants(&record.agent_rules);
    let (wide, fixed): (Vec<Grant>, Vec<Grant>) =
        agent.into_iter().partition(|g| g.resource == "*");
    assert!(
        !wide.is_empty(),
        "the agent's default role lost its `*` rule"
    );
    let agent_unused: Vec<&Grant> = unused(&fixed, &record.agent_requests, AGENT_RARELY_USED)
        .into_iter()
        .chain(unused(&wide, &record.agent_requests, AGENT_RARELY_USED))
        .collect();
    let agent_seen: BTreeSet<String> = record
        .agent_requests
        .iter()
        .map(|r| {
            format!(
                "{} {}/{} {} {}",
                r.verb, r.group, r.resource, r.name, r.code
            )
        })
        .collect();
    for (group, resource, verb, _) in AGENT_RARELY_USED {
        assert!(
            fixed
                .iter()
                .chain(&wide)
                .any(|g| g.group == *group && g.resource == *resource && g.verb == *verb),
            "AGENT_RARELY_USED names {verb} {group}/{resource}, which the agent is not granted"
        );
    }
    assert!(
        agent_unused.is_empty(),
        "the agent's role grants what the core path never used: {agent_unused:#?}\nthe agent's requests: {agent_seen:#?}"
    );
}

/// Grants that only `installCRDs=true` adds and that a hub installing its
/// CRDs into an API server without them does not use, each with the path
/// that does.
const INSTALL_CRDS_RARELY_USED: &[(&str, &str, &str, &str)] = &[
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
        "create",
        "the chart installs the admission policy itself (a template), so the hub's apply \
         only creates it when someone deleted it (hub/src/admission/policy.rs install_policy)",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
        "create",
        "as for the policy: the chart installs the binding, the hub recreates a deleted one",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_install_crds_the_hub_installs_its_crds_with_the_charts_permissions_and_uses_each_added_grant()
 {
    let hub = ControlPlane::start(
        "hub-install-crds",
        ControlPlaneOptions {
            audit: true,
            ..Default::default()
        },
    )
    .await
    .expect("control plane starts");
    let admin = hub.client().await.expect("admin client");
    // As `helm install --skip-crds --set installCRDs=true`: the hub is the
    // one to create its CRDs.
    let chart = charts_dir().join("ferry-hub");
    let rendered = blocking(move || {
        helm(&[
            "template",
            "ferry-hub",
            &chart.to_string_lossy(),
            "--namespace",
            HUB_NAMESPACE,
            "--set",
            "installCRDs=true",
        ])
    })
    .await
    .expect("render the hub chart with installCRDs");
    let docs = documents(&rendered);
    assert!(
        of_kind(&docs, &["CustomResourceDefinition"]).is_empty(),
        "helm template without --include-crds renders no CRD"
    );
    install(&admin, HUB_NAMESPACE, &docs).await;
    let cert = ServingCert::generate(&["127.0.0.1".into()]).expect("hub certificate");
    put_secret(
        &admin,
        HUB_NAMESPACE,
        HUB_TLS_SECRET,
        &[
            ("tls.crt", &cert.chain_pem),
            ("tls.key", &cert.key_pem),
            ("ca.crt", &cert.ca_pem),
        ],
    )
    .await;
    let dir = tempfile::Builder::new()
        .prefix("ferry-install-crds-")
        .tempdir()
        .expect("test dir");
    let mut container = local_container(
        &admin,
        HUB_NAMESPACE,
        of_kind(&docs, &["Deployment"])[0],
        dir.path(),
    )
    .await
    .expect("the hub's container");
    assert!(container.args.iter().any(|a| a == "--install-crds"));
    let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
    for flag in ["--grpc-addr=", "--probe-addr=", "--webhook-addr="] {
        assert!(container.set_arg(flag, &format!("127.0.0.1:{}", free_port(loopback))));
    }
    let kubeconfig = dir.path().join("kubeconfig");
    let config = service_account_kubeconfig(&hub, &admin, HUB_NAMESPACE, "ferry-hub")
        .await
        .expect("hub token");
    std::fs::write(&kubeconfig, config).expect("hub kubeconfig");
    let mut process = Process::start(&container, "FERRY_HUB_BIN", &kubeconfig, dir.path());

    // The hub installs its CRDs, then serves: its webhook is registered
    // after the CRDs are Established and the policy is applied.
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    wait_until(
        &configs,
        WEBHOOK_CONFIGURATION_NAME,
        "webhook registered",
        APPLY_TIMEOUT,
        |_| true,
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "the hub did not get past its CRDs: {e}\n{}",
            process.alive()
        )
    });
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for name in [
        "manifestworks.work.ferry.dev",
        "managedclusters.cluster.ferry.dev",
    ] {
        assert!(
            crds.get_opt(name).await.expect("read CRDs").is_some(),
            "{name} was not installed"
        );
    }
    process.alive();
    let requests = requests_by(&hub.info.audit_log, HUB_USER);
    drop(process);
    hub.stop().await;

    let refused: Vec<&Request> = requests.iter().filter(|r| r.code == 403).collect();
    assert!(refused.is_empty(), "the hub was refused: {refused:#?}");
    let default_docs = documents(
        &blocking(|| render("ferry-hub", HUB_NAMESPACE))
            .await
            .expect("render the hub chart"),
    );
    let default_grants = grants(&rules(&default_docs));
    let added: Vec<Grant> = grants(&rules(&docs))
        .into_iter()
        .filter(|g| !default_grants.contains(g))
        .collect();
    assert!(!added.is_empty(), "installCRDs adds no rule");
    let unused_added = unused(&added, &requests, INSTALL_CRDS_RARELY_USED);
    assert!(
        unused_added.is_empty(),
        "installCRDs grants what --install-crds never used: {unused_added:#?}\nthe hub's requests: {requests:#?}"
    );
    for (group, resource, verb, _) in INSTALL_CRDS_RARELY_USED {
        assert!(
            added
                .iter()
                .any(|g| g.group == *group && g.resource == *resource && g.verb == *verb),
            "INSTALL_CRDS_RARELY_USED names {verb} {group}/{resource}, which installCRDs does not add"
        );
    }
}
