//! `kubectl ferry` (the kubectl-ferry binary) shows a real fleet as people
//! read it: the cluster connected with its agent's version and its failing
//! work, every work with its state, a failing manifest's reason and the
//! Events about the work, the same objects as JSON/YAML, and clear errors
//! for a missing work, a refused request and a cluster that is not a hub
//! (issue 10, item 6).

use std::process::Output;

use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::{
    FeedbackRule, FeedbackType, ManifestWork, NamedJsonPath, UpdateStrategyType,
};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::kubectl_ferry::{kubectl_ferry, succeeded};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_condition, manifest_work, strategy_config, wait_applied,
    work_condition,
};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

/// Its stderr, after checking that it failed and printed nothing else.
fn failure(output: &Output, what: &str) -> String {
    assert!(!output.status.success(), "{what} exits non-zero");
    assert!(output.stdout.is_empty(), "{what} prints no result");
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    stderr
}

/// The table row whose first cells are `keys`, split into cells.
fn row<'a>(table: &'a str, keys: &[&str]) -> Vec<&'a str> {
    table
        .lines()
        .map(|line| {
            line.split("   ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
        })
        .find(|cells| cells.len() >= keys.len() && cells[..keys.len()] == *keys)
        .unwrap_or_else(|| panic!("no row {keys:?} in\n{table}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_ferry_shows_clusters_works_failures_feedback_and_events_of_a_real_fleet() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let kubeconfig = fleet.hub.info.kubeconfig.clone();

    // A work that applies, with a feedback value to show.
    let mut served = manifest_work(
        "cluster-a",
        "served",
        vec![config_map("default", "served", json!({"color": "blue"}))],
    );
    let mut config = strategy_config(
        "",
        "configmaps",
        "default",
        "served",
        UpdateStrategyType::Update,
    );
    config.feedback_rules = vec![FeedbackRule {
        type_: FeedbackType::JsonPaths,
        json_paths: vec![NamedJsonPath {
            name: "color".into(),
            path: ".data.color".into(),
            version: None,
        }],
    }];
    served.spec.manifest_configs = vec![config];
    let works = fleet.create_work(&served).await.expect("create served");
    // And one whose second manifest is of a kind the spoke does not serve.
    let broken = manifest_work(
        "cluster-a",
        "broken",
        vec![
            config_map("default", "fine", json!({"x": "1"})),
            json!({"apiVersion": "gadgets.example.com/v1", "kind": "Gadget",
                   "metadata": {"name": "g", "namespace": "default"}}),
        ],
    );
    fleet.create_work(&broken).await.expect("create broken");
    wait_until(
        &works,
        "served",
        "feedback reported and the work available",
        APPLY_TIMEOUT,
        |w: &ManifestWork| {
            manifest_condition(w, 0, "StatusFeedbackSynced").is_some_and(|c| c.status == "True")
                && work_condition(w, "Available").is_some_and(|c| c.status == "True")
        },
    )
    .await
    .expect("served reports feedback and is available");
    wait_applied(&works, "served")
        .await
        .expect("served applies");
    let broken = wait_until(&works, "broken", "the Gadget fails", APPLY_TIMEOUT, |w| {
        manifest_condition(w, 1, "Applied").is_some_and(|c| c.status == "False")
    })
    .await
    .expect("broken reports its failure");
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    wait_until(
        &clusters,
        "cluster-a",
        "cluster-a connected",
        APPLY_TIMEOUT,
        |c| {
            c.status
                .as_ref()
                .is_some_and(|s| s.connected && !s.agent_version.is_empty())
        },
    )
    .await
    .expect("cluster-a is connected");

    // An Event about the broken work, written as kube's Recorder writes them
    // (events.k8s.io/v1); describe reads core/v1, which serves the same objects.
    let reference = broken.object_ref(&());
    let event = Event {
        metadata: ObjectMeta {
            generate_name: Some("broken-".into()),
            namespace: Some("cluster-a".into()),
            ..Default::default()
        },
        event_time: Some(MicroTime(now())),
        action: Some("Apply".into()),
        reason: Some("PluginTestFailed".into()),
        note: Some("Gadget g cannot be applied: no such kind on cluster-a".into()),
        type_: Some("Warning".into()),
        reporting_controller: Some("ferry.dev/e2e".into()),
        reporting_instance: Some("kubectl-plugin-test".into()),
        regarding: Some(ObjectReference {
            api_version: reference.api_version.clone(),
            kind: reference.kind.clone(),
            name: reference.name.clone(),
            namespace: reference.namespace.clone(),
            uid: reference.uid.clone(),
            ..Default::default()
        }),
        ..Default::default()
    };
    Api::<Event>::namespaced(fleet.hub_client.clone(), "cluster-a")
        .create(&PostParams::default(), &event)
        .await
        .expect("create the event");

    // get clusters: connected, with the agent's version, 2 works, 1 failing.
    let out = succeeded(
        &kubectl_ferry(&kubeconfig, &["get", "clusters"]).await,
        "get clusters",
    );
    let agent_version = env!("CARGO_PKG_VERSION");
    let cells = row(&out, &["cluster-a"]);
    let header = row(&out, &["NAME"]);
    let cell = |name: &str| {
        let index = header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("{name} in {out}"));
        cells[index]
    };
    assert_eq!(cell("CONNECTED"), "True", "{out}");
    assert_eq!(cell("AGENT"), agent_version, "{out}");
    assert_eq!(cell("WORKS"), "2", "{out}");
    assert_eq!(cell("FAILING"), "1", "{out}");
    assert_eq!(cell("REASON"), "-", "{out}");

    // get clustersets: the well-known sets, counted once the hub has.
    for set in ["global", "default"] {
        ferry_e2e::helpers::wait::wait_until(
            &Api::<ferry_api::cluster_set::ManagedClusterSet>::all(fleet.hub_client.clone()),
            set,
            "set counted",
            ferry_e2e::helpers::work_helpers::APPLY_TIMEOUT,
            |s| s.status.as_ref().is_some_and(|st| st.cluster_count == 1),
        )
        .await
        .expect("the hub counts cluster-a in the well-known sets");
    }
    let out = succeeded(
        &kubectl_ferry(&kubeconfig, &["get", "clustersets"]).await,
        "get clustersets",
    );
    let header = row(&out, &["NAME"]);
    assert_eq!(header, ["NAME", "SELECTOR", "CLUSTERS", "EMPTY"], "{out}");
    let default_row = row(&out, &["default"]);
    assert_eq!(
        default_row,
        ["default", "ExclusiveClusterSetLabel", "1", "False"],
        "{out}"
    );
    let global_row = row(&out, &["global"]);
    assert_eq!(
        global_row,
        ["global", "LabelSelector (every cluster)", "1", "False"],
        "{out}"
    );

    // get works -A: both works and their states.
    let out = succeeded(
        &kubectl_ferry(&kubeconfig, &["get", "works", "-A"]).await,
        "get works -A",
    );
    assert!(out.starts_with("NAMESPACE   NAME"), "{out}");
    assert_eq!(
        row(&out, &["cluster-a", "served"])[2..6],
        ["1", "True", "True", "-"],
        "{out}"
    );
    let broken_row = row(&out, &["cluster-a", "broken"]);
    assert_eq!(broken_row[2..4], ["2", "False"], "{out}");
    assert_eq!(broken_row[5], "1 (UnknownKind)", "{out}");
    // The same with -n, and an empty namespace says so.
    let out = succeeded(
        &kubectl_ferry(&kubeconfig, &["get", "works", "-n", "cluster-a"]).await,
        "get works -n",
    );
    row(&out, &["cluster-a", "broken"]);
    let out = succeeded(
        &kubectl_ferry(&kubeconfig, &["get", "works", "-n", "default"]).await,
        "get works -n default",
    );
    assert_eq!(out, "No works found in namespace default.\n");

    // describe: the failing manifest's reason and message, and the Event.
    let out = succeeded(
        &kubectl_ferry(&kubeconfig, &["describe", "work", "cluster-a/broken"]).await,
        "describe broken",
    );
    let gadget = manifest_condition(&broken, 1, "Applied").expect("gadget condition");
    for expected in [
        "Name:       broken",
        "Namespace:  cluster-a",
        "[0] v1 ConfigMap default/fine (configmaps)",
        "[1] gadgets.example.com/v1 Gadget default/g",
        "UnknownKind",
        gadget.message.as_str(),
        "Events:",
        "PluginTestFailed",
        "ferry.dev/e2e",
        "Gadget g cannot be applied: no such kind on cluster-a",
    ] {
        assert!(
            out.contains(expected),
            "describe shows {expected:?}:\n{out}"
        );
    }
    // describe of the healthy work shows its feedback value.
    let out = succeeded(
        &kubectl_ferry(
            &kubeconfig,
            &["describe", "work", "served", "-n", "cluster-a"],
        )
        .await,
        "describe served",
    );
    assert!(out.contains("Feedback:"), "{out}");
    row(&out, &["color", "blue"]);
    // (Its events, if the hub records any, are not checked: this test's own
    // Event is on the broken work.)
    assert!(out.contains("\nEvents:\n"), "{out}");

    // -o json holds the works as stored; -o yaml the cluster records.
    let out = succeeded(
        &kubectl_ferry(&kubeconfig, &["get", "works", "-A", "-o", "json"]).await,
        "get works -o json",
    );
    let list: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(list["kind"], "List");
    let items: Vec<ManifestWork> =
        serde_json::from_value(list["items"].clone()).expect("the items are ManifestWorks");
    let names: Vec<String> = items.iter().map(|w| w.name_any()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let from_json = items
        .iter()
        .find(|w| w.name_any() == "broken")
        .expect("broken listed");
    assert_eq!(from_json.uid(), broken.uid());
    assert_eq!(
        manifest_condition(from_json, 1, "Applied").map(|c| c.reason.as_str()),
        Some("UnknownKind")
    );
    assert!(names.contains(&"served".to_string()), "{names:?}");
    assert!(
        from_json.metadata.managed_fields.is_none(),
        "managedFields are hidden as kubectl hides them"
    );
    let out = succeeded(
        &kubectl_ferry(&kubeconfig, &["get", "clusters", "-o", "yaml"]).await,
        "get clusters -o yaml",
    );
    let records: Value = serde_yaml::from_str(&out).expect("YAML");
    let record = &records["items"][0];
    assert_eq!(record["name"], "cluster-a");
    assert_eq!(
        (record["works"].as_u64(), record["failingWorks"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(record["managedCluster"]["kind"], "ManagedCluster");
    let out = succeeded(
        &kubectl_ferry(
            &kubeconfig,
            &["describe", "work", "cluster-a/broken", "-o", "json"],
        )
        .await,
        "describe -o json",
    );
    let described: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(described["work"]["metadata"]["name"], "broken");
    assert!(
        described["events"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["reason"] == "PluginTestFailed")),
        "{out}"
    );

    // A missing work: non-zero exit and a message naming it.
    let stderr = failure(
        &kubectl_ferry(&kubeconfig, &["describe", "work", "cluster-a/missing"]).await,
        "describe missing",
    );
    assert_eq!(
        stderr.trim(),
        "error: manifestwork cluster-a/missing not found on the hub"
    );

    // A refused request: a kubeconfig whose token the hub does not know.
    let dir = tempfile::tempdir().expect("tempdir");
    let refused = dir.path().join("kubeconfig");
    let text = std::fs::read_to_string(&kubeconfig).expect("read kubeconfig");
    assert!(
        text.contains(&fleet.hub.info.token),
        "the admin kubeconfig holds the token"
    );
    std::fs::write(
        &refused,
        text.replace(&fleet.hub.info.token, "not-a-valid-token"),
    )
    .expect("write kubeconfig");
    let stderr = failure(
        &kubectl_ferry(&refused, &["get", "clusters"]).await,
        "get clusters with a bad token",
    );
    assert!(
        stderr.starts_with("error: the API server refused to list managedclusters")
            && stderr.contains("Unauthorized, HTTP 401"),
        "{stderr}"
    );

    // A cluster that is not a hub: the spoke serves no ferry hub resources.
    let spoke_kubeconfig = &fleet.spoke("cluster-a").control_plane.info.kubeconfig;
    let stderr = failure(
        &kubectl_ferry(spoke_kubeconfig, &["get", "works", "-A"]).await,
        "get works on a spoke",
    );
    assert!(
        stderr.starts_with(
            "error: the API server does not serve manifestworks.work.ferry.dev: is this the hub cluster's kubeconfig"
        ),
        "{stderr}"
    );

    fleet.stop().await;
}

/// Now, for the event's time.
fn now() -> k8s_openapi::jiff::Timestamp {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs();
    k8s_openapi::jiff::Timestamp::from_second(i64::try_from(seconds).expect("seconds fit"))
        .expect("a valid timestamp")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_ferry_lists_replica_sets_and_placements_with_their_state() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet");
    let kubeconfig = fleet.hub.info.kubeconfig.clone();
    ferry_e2e::helpers::placement_helpers::create_placement(
        &fleet.hub_client,
        "default",
        "everywhere",
        json!({}),
    )
    .await;
    let rs: ferry_api::replica_set::ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "listed", "namespace": "default"},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [
                config_map("default", "listed", json!({"v": "1"}))]}},
            "placementRefs": [{"name": "everywhere"}],
        },
    }))
    .expect("replica set");
    let sets: Api<ferry_api::replica_set::ManifestWorkReplicaSet> =
        Api::namespaced(fleet.hub_client.clone(), "default");
    sets.create(&PostParams::default(), &rs)
        .await
        .expect("create replica set");
    wait_until(&sets, "listed", "rolled out", APPLY_TIMEOUT, |rs| {
        rs.status.as_ref().is_some_and(|s| {
            s.summary.available == 1
                && s.conditions
                    .iter()
                    .any(|c| c.type_ == "PlacementRolledOut" && c.reason == "Complete")
        })
    })
    .await
    .expect("the work reaches cluster-a");

    let table = succeeded(
        &kubectl_ferry(&kubeconfig, &["get", "replicasets", "-n", "default"]).await,
        "get replicasets",
    );
    println!("{table}");
    let cells = row(&table, &["listed"]);
    assert_eq!(
        &cells[1..8],
        ["everywhere", "1", "1", "1", "1", "0", "Complete"],
        "{table}"
    );
    let table = succeeded(
        &kubectl_ferry(&kubeconfig, &["get", "placements", "-A"]).await,
        "get placements -A",
    );
    println!("{table}");
    let cells = row(&table, &["default", "everywhere"]);
    assert_eq!(&cells[2..4], ["1", "1"], "{table}");
    assert!(cells[4].starts_with("True"), "{table}");
    let json_out = succeeded(
        &kubectl_ferry(&kubeconfig, &["get", "mwrs", "-n", "default", "-o", "json"]).await,
        "get mwrs -o json",
    );
    let list: Value = serde_json::from_str(&json_out).expect("json");
    assert_eq!(list["items"][0]["metadata"]["name"], "listed");
    let empty = succeeded(
        &kubectl_ferry(&kubeconfig, &["get", "placements", "-n", "nowhere"]).await,
        "get placements in an empty namespace",
    );
    assert_eq!(empty, "No placements found in namespace nowhere.\n");
    fleet.stop().await;
}
