//! Sealed Secrets (issue 52): a Secret sealed to one cluster's key reaches
//! that cluster and no other, and its plain text is nowhere the hub keeps
//! anything (its etcd, read directly: works, statuses, Events, profiles)
//! nor in the agent's log; a cluster that is not a recipient says so and
//! applies the rest of the work; a changed ciphertext is refused with its
//! reason and loses nothing; spoke drift of the Secret is corrected from
//! the sealed copy; feedback and condition rules see only "(sealed)"; a
//! rotated key keeps old seals opening until they are resealed (`kubectl
//! ferry sealed` names them as sealed to a retiring key), and a key
//! removed for good stops them with a reason naming the keys held.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ferry_api::managed_cluster::{ManagedCluster, SealingKey};
use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::agent_process::AgentProcess;
use ferry_e2e::harness::etcd::all_values;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::cluster_inventory::{cluster_profiles, install_cluster_profile_crd};
use ferry_e2e::helpers::kubectl_ferry::{kubectl_ferry, succeeded};
use ferry_e2e::helpers::namespaces::create_namespace;
use ferry_e2e::helpers::spoke_actor::merge_as;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    feedback_value, is_applied_at_current_generation, manifest_condition, work_condition,
};
use ferry_semantics::sealing::{SealTo, seal};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);
const INVENTORY: &str = "ferry";
/// Where the agents keep their keys (the fleet's agents' namespace).
const KEYS_NAMESPACE: &str = "default";
const KEYS_SECRET: &str = "ferry-agent-sealing-keys";

fn secret_manifest(password: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
           "metadata": {"name": "db", "namespace": "default"},
           "stringData": {"password": password}})
}

/// The work's manifests: a ConfigMap and `entry`.
fn manifests(entry: Value) -> Value {
    json!([
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "neighbour", "namespace": "default"}, "data": {"a": "1"}},
        entry,
    ])
}

/// A work of a ConfigMap and `entry` (the Secret `default/db`), whose
/// manifest config asks for the Secret's data as feedback and in a
/// condition rule's message: what a tenant would try to read it back with.
fn work(cluster: &str, entry: Value) -> ManifestWork {
    serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWork",
        "metadata": {"name": "sealed", "namespace": cluster},
        "spec": {
            "workload": {"manifests": manifests(entry)},
            "manifestConfigs": [{
                "resourceIdentifier": {"group": "", "resource": "secrets",
                                       "namespace": "default", "name": "db"},
                "feedbackRules": [{"type": "JSONPaths", "jsonPaths": [
                    {"name": "password", "path": ".data.password"},
                    {"name": "data", "path": ".data"}]}],
                "conditionRules": [{"condition": "Peek", "type": "CEL",
                    "celExpressions": ["has(object.data)"],
                    "messageExpression": "'password is ' + object.data.password"}],
            }],
        },
    }))
    .expect("a work")
}

/// The sealing keys `cluster`'s agent published, once it has.
async fn published_keys(fleet: &Fleet, cluster: &str) -> Vec<SealingKey> {
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    let published = wait_until(&clusters, cluster, "sealing keys published", TIMEOUT, |c| {
        c.status
            .as_ref()
            .is_some_and(|s| !s.sealing_keys.is_empty())
    })
    .await
    .expect("the agent publishes its keys");
    published.status.unwrap_or_default().sealing_keys
}

fn seal_to(password: &str, cluster: &str, key: &SealingKey) -> Value {
    seal(
        &secret_manifest(password),
        &[SealTo {
            cluster: cluster.into(),
            public_key: key.public_key.clone(),
        }],
    )
    .expect("sealed")
}

fn spoke_password(secret: &Secret) -> Option<String> {
    let bytes = secret.data.as_ref()?.get("password")?;
    String::from_utf8(bytes.0.clone()).ok()
}

async fn wait_spoke_password(secrets: &Api<Secret>, password: &str, what: &str) {
    wait_until(secrets, "db", what, TIMEOUT, |s| {
        spoke_password(s).as_deref() == Some(password)
    })
    .await
    .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// Every place `text` (or its base64) occurs among the hub etcd's values.
async fn stored_anywhere(fleet: &Fleet, text: &str) -> Vec<String> {
    let needles = [text.as_bytes().to_vec(), STANDARD.encode(text).into_bytes()];
    let values = all_values(fleet.hub.info.etcd_client_port)
        .await
        .expect("read the hub's etcd");
    assert!(
        values.len() > 50,
        "read the whole store: {} keys",
        values.len()
    );
    values
        .into_iter()
        .filter(|(_, value)| {
            needles
                .iter()
                .any(|n| value.windows(n.len()).any(|w| w == n.as_slice()))
        })
        .map(|(key, _)| key)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_secret_opens_only_on_its_cluster_and_its_plain_text_stays_off_the_hub() {
    let mut options = FleetOptions::with_spokes(&["cluster-a", "cluster-b"]);
    options.cluster_profile_namespace = Some(INVENTORY.into());
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    // cluster-a's agent is the real binary, so its log can be read.
    fleet.stop_agent("cluster-a").await;
    let agent = AgentProcess::start(&fleet, "cluster-a", None, &[])
        .await
        .expect("the agent binary starts");
    let key_a = published_keys(&fleet, "cluster-a").await[0].clone();
    let key_b = published_keys(&fleet, "cluster-b").await[0].clone();
    assert_ne!(key_a.key_id, key_b.key_id, "a key per cluster");

    let password = format!("horse-battery-{:016x}", rand::random::<u64>());
    let entry = seal_to(&password, "cluster-a", &key_a);
    let works_a = fleet
        .create_work(&work("cluster-a", entry.clone()))
        .await
        .expect("create on cluster-a");
    let works_b = fleet
        .create_work(&work("cluster-b", entry.clone()))
        .await
        .expect("create on cluster-b");

    // The recipient opens and applies it; the rules see no value.
    let opened = wait_until(&works_a, "sealed", "applied and opened", TIMEOUT, |w| {
        is_applied_at_current_generation(w)
            && work_condition(w, "Sealed").is_some_and(|c| c.status == "True")
            && feedback_value(w, 1, "password").is_some()
    })
    .await
    .expect("cluster-a opens it");
    let secrets_a: Api<Secret> =
        Api::namespaced(fleet.spoke("cluster-a").client.clone(), "default");
    wait_spoke_password(&secrets_a, &password, "the Secret on cluster-a").await;
    let fed_back = feedback_value(&opened, 1, "password").expect("feedback");
    assert_eq!(fed_back.string.as_deref(), Some("(sealed)"), "{fed_back:?}");
    let peek = manifest_condition(&opened, 1, "Peek").expect("the rule ran");
    assert_eq!(peek.message, "password is (sealed)");

    // Not a recipient: says so, names its key, applies the rest.
    let refused = wait_until(&works_b, "sealed", "not a recipient", TIMEOUT, |w| {
        manifest_condition(w, 1, "Sealed").is_some_and(|c| c.reason == "NotARecipient")
            && manifest_condition(w, 0, "Applied").is_some_and(|c| c.status == "True")
    })
    .await
    .expect("cluster-b reports it cannot open it");
    let why = manifest_condition(&refused, 1, "Sealed").expect("condition");
    assert!(
        why.message.contains(&key_b.key_id) && why.message.contains(&key_a.key_id),
        "{why:?}"
    );
    let secrets_b: Api<Secret> =
        Api::namespaced(fleet.spoke("cluster-b").client.clone(), "default");
    assert!(
        secrets_b.get_opt("db").await.expect("read").is_none(),
        "no Secret on cluster-b"
    );

    // Drift on the spoke is corrected from the sealed copy.
    let spoke_secrets = fleet
        .spoke("cluster-a")
        .api("v1", "Secret", Some("default"));
    merge_as(
        &spoke_secrets,
        "db",
        "kubectl-edit",
        &json!({"data": {"password": STANDARD.encode("changed-on-the-spoke")}}),
    )
    .await
    .expect("drift");
    wait_spoke_password(&secrets_a, &password, "drift corrected").await;

    // A changed ciphertext: refused with its reason, nothing lost.
    let mut tampered = entry.clone();
    let text = tampered["spec"]["ciphertext"]
        .as_str()
        .expect("ciphertext")
        .to_string();
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.len() - 2;
    let mut changed: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let first = changed[at].remove(0);
    changed[at].insert(0, if first == 'A' { 'B' } else { 'A' });
    tampered["spec"]["ciphertext"] = Value::String(changed.join("\n") + "\n");
    works_a
        .patch(
            "sealed",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"workload": {"manifests": manifests(tampered)}}})),
        )
        .await
        .expect("tamper");
    let held = wait_until(&works_a, "sealed", "tampering refused", TIMEOUT, |w| {
        work_condition(w, "Sealed").is_some_and(|c| {
            c.status == "False" && Some(c.observed_generation) == w.metadata.generation
        })
    })
    .await
    .expect("the changed ciphertext is refused");
    let reason = manifest_condition(&held, 1, "Sealed").expect("condition");
    assert!(
        ["CannotOpen", "MalformedCiphertext"].contains(&reason.reason.as_str()),
        "{reason:?}"
    );
    assert_eq!(
        manifest_condition(&held, 0, "Applied").map(|c| c.status.as_str()),
        Some("True")
    );
    assert_eq!(
        spoke_password(&secrets_a.get("db").await.expect("still there")).as_deref(),
        Some(password.as_str()),
        "the applied Secret is kept"
    );

    // The inventory: the spoke's version and the key to seal to.
    install_cluster_profile_crd(&fleet.hub_client)
        .await
        .expect("install the ClusterProfile CRD");
    create_namespace(&fleet.hub_client, INVENTORY).await;
    let version = fleet
        .spoke("cluster-a")
        .client
        .apiserver_version()
        .await
        .expect("spoke version")
        .git_version;
    let profiles = cluster_profiles(&fleet.hub_client, INVENTORY);
    let profile = wait_until(
        &profiles,
        "cluster-a",
        "version and key published",
        TIMEOUT,
        |p: &DynamicObject| p.data["status"]["version"]["kubernetes"] == version.as_str(),
    )
    .await
    .expect("the profile carries the spoke's version");
    let properties = profile.data["status"]["properties"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        properties
            .iter()
            .any(|p| p["name"] == "sealing.ferry.dev/public-key"
                && p["value"] == key_a.public_key.as_str()),
        "{properties:?}"
    );

    // Nowhere on the hub, nor in the agent's log.
    assert!(
        stored_anywhere(&fleet, "BEGIN AGE ENCRYPTED FILE")
            .await
            .iter()
            .any(|k| k.contains("manifestworks")),
        "the search reads the works"
    );
    let leaked = stored_anywhere(&fleet, &password).await;
    assert!(leaked.is_empty(), "plain text stored under {leaked:?}");
    let log = agent.log();
    assert!(!log.is_empty(), "the agent logged nothing");
    assert!(
        !log.contains(&password) && !log.contains(&STANDARD.encode(&password)),
        "{log}"
    );
    drop(agent);
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_keeps_old_seals_opening_until_it_is_removed() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let old = published_keys(&fleet, "cluster-a").await[0].clone();
    let works = fleet
        .create_work(&work("cluster-a", seal_to("first", "cluster-a", &old)))
        .await
        .expect("create");
    let secrets: Api<Secret> = Api::namespaced(fleet.spoke("cluster-a").client.clone(), "default");
    wait_spoke_password(&secrets, "first", "sealed to the first key").await;

    // A platform admin asks for a new key; the agent makes it at its next
    // session's start and keeps the old one, retiring.
    let keys: Api<Secret> =
        Api::namespaced(fleet.spoke("cluster-a").client.clone(), KEYS_NAMESPACE);
    keys.patch(
        KEYS_SECRET,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"sealing.ferry.dev/rotate": "1"}}})),
    )
    .await
    .expect("ask for a new key");
    fleet
        .restart_agent_until_it_reports("cluster-a", TIMEOUT)
        .await
        .expect("restart");
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    let rotated = wait_until(&clusters, "cluster-a", "new key current", TIMEOUT, |c| {
        c.status.as_ref().is_some_and(|s| {
            s.sealing_keys.len() == 2
                && s.sealing_keys[0].key_id != old.key_id
                && !s.sealing_keys[0].retiring
        })
    })
    .await
    .expect("the new key is published");
    let keys_now = rotated.status.unwrap_or_default().sealing_keys;
    let new = keys_now[0].clone();
    assert_eq!(
        (keys_now[1].key_id.as_str(), keys_now[1].retiring),
        (old.key_id.as_str(), true)
    );

    // `kubectl ferry sealed` names the work as sealed only to a retiring key.
    let listed = succeeded(
        &kubectl_ferry(&fleet.hub.info.kubeconfig, &["sealed", "-n", "cluster-a"]).await,
        "sealed",
    );
    assert!(
        listed
            .lines()
            .any(|l| l.contains("default/db") && l.ends_with("retiring")),
        "{listed}"
    );

    // Still sealed to the old key: a new generation still opens.
    let reseal = |password: &str, key: &SealingKey| {
        let entry = seal_to(password, "cluster-a", key);
        Patch::Merge(json!({"spec": {"workload": {"manifests": manifests(entry)}}}))
    };
    works
        .patch("sealed", &PatchParams::default(), &reseal("second", &old))
        .await
        .expect("update sealed to the retiring key");
    wait_spoke_password(&secrets, "second", "the retiring key still opens").await;
    works
        .patch("sealed", &PatchParams::default(), &reseal("third", &new))
        .await
        .expect("resealed to the new key");
    wait_spoke_password(&secrets, "third", "the new key opens").await;

    // The old key removed for good: what is still sealed to it stops,
    // with a reason naming the key the cluster holds.
    keys.patch(
        KEYS_SECRET,
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(
                json!([{"op": "remove", "path": format!("/data/{}", old.key_id)}]),
            )
            .expect("patch"),
        ),
    )
    .await
    .expect("remove the old key");
    fleet
        .restart_agent_until_it_reports("cluster-a", TIMEOUT)
        .await
        .expect("restart");
    wait_until(&clusters, "cluster-a", "old key gone", TIMEOUT, |c| {
        c.status.as_ref().is_some_and(|s| s.sealing_keys.len() == 1)
    })
    .await
    .expect("only the new key is published");
    works
        .patch("sealed", &PatchParams::default(), &reseal("fourth", &old))
        .await
        .expect("sealed to the removed key");
    let refused = wait_until(&works, "sealed", "not opened", TIMEOUT, |w| {
        work_condition(w, "Sealed").is_some_and(|c| {
            c.status == "False" && Some(c.observed_generation) == w.metadata.generation
        })
    })
    .await
    .expect("the removed key opens nothing");
    let why = work_condition(&refused, "Sealed").expect("condition");
    assert_eq!(why.reason, "NotARecipient", "{why:?}");
    assert!(why.message.contains(&new.key_id), "{why:?}");
    wait_spoke_password(&secrets, "third", "what was applied stays").await;
    fleet.stop().await;
}
