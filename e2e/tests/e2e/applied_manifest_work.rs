//! The spoke's AppliedManifestWork records what was applied, with UIDs, and
//! lets a restarted agent finish a deletion (issue 4, item 8); it carries
//! the work's labels, as OCM's does.

use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::ownership::{APPLIED_WORK_API_VERSION, hold, unhold};
use ferry_e2e::helpers::spoke_actor::read_json;
use ferry_e2e::helpers::two_config_maps::{CLUSTER, TwoConfigMaps};
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_work, wait_applied, work_condition,
};
use kube::ResourceExt;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spoke_records_every_applied_object_with_its_uid() {
    let TwoConfigMaps {
        fleet,
        config_maps,
        applied,
        ..
    } = TwoConfigMaps::start("recorded", "one", "two").await;
    let spoke = fleet.spoke(CLUSTER);
    let uid = applied.uid().expect("work uid");

    let records = spoke.api(APPLIED_WORK_API_VERSION, "AppliedManifestWork", None);
    // The UIDs are written right after the report of the pass that learnt
    // them: the signal is a list of two with UIDs.
    let listed = |record: &DynamicObject| {
        record.data["status"]["appliedResources"]
            .as_array()
            .is_some_and(|list| list.len() == 2 && list.iter().all(|r| r["uid"] != ""))
    };
    wait_until(&records, &uid, "objects recorded", APPLY_TIMEOUT, listed)
        .await
        .expect("the record lists both objects with their UIDs");
    let record = read_json(&records, &uid).await;
    assert_eq!(record["spec"]["workName"], "recorded");
    assert_eq!(record["spec"]["workNamespace"], "cluster-a");
    let resources = record["status"]["appliedResources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(resources.len(), 2, "both objects recorded: {record}");
    for name in ["one", "two"] {
        let live = read_json(&config_maps, name).await;
        let entry = resources
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} recorded"));
        assert_eq!(entry["uid"], live["metadata"]["uid"]);
        assert_eq!(entry["resource"], "configmaps");
        let owner = &live["metadata"]["ownerReferences"][0];
        assert_eq!(
            owner["uid"], record["metadata"]["uid"],
            "the object points at its record"
        );
    }
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_was_down_when_its_work_was_deleted_deletes_the_objects_on_return() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let config_maps = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    let work = manifest_work(
        "cluster-a",
        "away",
        vec![config_map("default", "away", json!({"k": "v"}))],
    );
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "away").await.expect("applied");

    fleet.stop_agent("cluster-a").await;
    works
        .delete("away", &Default::default())
        .await
        .expect("delete work");
    // The hub has seen the deletion and waits for the agent: it must not let
    // the work go while the objects may still be on the spoke.
    let waiting = |w: &ManifestWork| {
        work_condition(w, "Deleting").is_some_and(|c| c.reason == "WaitingForAgent")
    };
    let held = wait_until(&works, "away", "Deleting", APPLY_TIMEOUT, waiting)
        .await
        .expect("the hub waits for the agent");
    assert!(
        held.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty()),
        "the finalizer holds the work while its agent is away"
    );
    fleet.start_agent("cluster-a");

    wait_deleted(&config_maps, "away", "object deleted", APPLY_TIMEOUT)
        .await
        .expect("the restarted agent deletes the object");
    wait_deleted(&works, "away", "work gone", APPLY_TIMEOUT)
        .await
        .expect("and lets the work go");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_restarted_in_the_middle_of_a_deletion_finishes_it() {
    let TwoConfigMaps {
        mut fleet,
        works,
        config_maps,
        ..
    } = TwoConfigMaps::start("halfway", "held", "free").await;
    hold(&config_maps, "held").await.expect("hold");
    works
        .delete("halfway", &Default::default())
        .await
        .expect("delete work");
    wait_deleted(&config_maps, "free", "free object deleted", APPLY_TIMEOUT)
        .await
        .expect("half done");
    let waiting = |w: &ManifestWork| {
        work_condition(w, "Deleting").is_some_and(|c| c.message.contains("ConfigMap default/held"))
    };
    wait_until(&works, "halfway", "Deleting", APPLY_TIMEOUT, waiting)
        .await
        .expect("waiting for the held object");

    // The new agent knows the work from the spoke's record alone. Once it has
    // reported on it (its first report comes after its first pass), the hub
    // must still be waiting for the held object instead of letting it go.
    fleet
        .restart_agent_until_it_reports("cluster-a", APPLY_TIMEOUT)
        .await
        .expect("the restarted agent reports");
    let work = works
        .get_opt("halfway")
        .await
        .expect("read")
        .expect("the work stays while an object is left");
    assert!(
        work_condition(&work, "Deleting")
            .is_some_and(|c| c.message.contains("ConfigMap default/held")),
        "and still names the object it waits for: {:?}",
        work.status
    );
    unhold(&config_maps, "held").await.expect("release");
    wait_deleted(&works, "halfway", "work gone", APPLY_TIMEOUT)
        .await
        .expect("the restarted agent finishes the deletion");
    assert!(config_maps.get_opt("held").await.expect("read").is_none());
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_works_labels_are_copied_to_its_record_and_follow_label_changes() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let mut work = manifest_work(
        "cluster-a",
        "labelled",
        vec![config_map("default", "labelled", json!({"k": "v"}))],
    );
    work.labels_mut().insert("app".into(), "web".into());
    work.labels_mut().insert("stage".into(), "canary".into());
    let works = fleet.create_work(&work).await.expect("create work");
    let uid = wait_applied(&works, "labelled")
        .await
        .expect("applied")
        .uid()
        .expect("uid");
    let records =
        fleet
            .spoke("cluster-a")
            .api(APPLIED_WORK_API_VERSION, "AppliedManifestWork", None);
    let labelled = |wanted: serde_json::Value| {
        move |r: &kube::api::DynamicObject| {
            serde_json::to_value(&r.metadata.labels).unwrap_or_default() == wanted
        }
    };
    wait_until(
        &records,
        &uid,
        "the work's labels on the record",
        APPLY_TIMEOUT,
        labelled(json!({"app": "web", "stage": "canary"})),
    )
    .await
    .expect("labels copied at creation");

    // A label change alone (no new generation), as OCM's test makes it.
    works
        .patch(
            "labelled",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"stage": null, "team": "a"}}})),
        )
        .await
        .expect("relabel the work");
    wait_until(
        &records,
        &uid,
        "the new labels on the record",
        APPLY_TIMEOUT,
        labelled(json!({"app": "web", "team": "a"})),
    )
    .await
    .expect("labels follow the work");
    fleet.stop().await;
}

/// A new work costs the record's create (naming the objects the pass is
/// about to write, so a crash leaks nothing, and not preceded by a read of
/// a record the agent knows is not there), the objects, and one status
/// write with their UIDs: no separate write of the intents in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_works_record_names_its_objects_from_its_create_and_is_written_once_more_with_their_uids()
 {
    use ferry_e2e::harness::audit::requests_by;
    use futures::{StreamExt, TryStreamExt};
    use kube::api::{ListParams, WatchEvent, WatchParams};

    let mut options = FleetOptions::with_spokes(&[CLUSTER]);
    options.audit_spokes = true;
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let spoke = fleet.spoke(CLUSTER);
    let records = spoke.api(APPLIED_WORK_API_VERSION, "AppliedManifestWork", None);
    let config_maps = spoke.api("v1", "ConfigMap", Some("default"));
    // The signal that the agent serves records: a first work is applied.
    let works = fleet
        .create_work(&manifest_work(
            CLUSTER,
            "before",
            vec![config_map("default", "before", json!({"k": "v"}))],
        ))
        .await
        .expect("create work");
    wait_applied(&works, "before").await.expect("applied");
    // Every version of every record from here on, in order.
    let from = records
        .list(&ListParams::default())
        .await
        .expect("list records")
        .metadata
        .resource_version
        .expect("list resourceVersion");
    let mut versions = records
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch records")
        .boxed();
    fleet
        .create_work(&manifest_work(
            CLUSTER,
            "one-write-less",
            vec![
                config_map("default", "first", json!({"k": "v"})),
                config_map("default", "second", json!({"k": "v"})),
            ],
        ))
        .await
        .expect("create work");
    let applied = wait_applied(&works, "one-write-less")
        .await
        .expect("applied");
    let uid = applied.uid().expect("work uid");
    let mut seen = Vec::new();
    // The signal: the version whose list holds both UIDs.
    let deadline = tokio::time::Instant::now() + APPLY_TIMEOUT;
    loop {
        let event = tokio::time::timeout_at(deadline, versions.try_next())
            .await
            .expect("the record gets the objects' UIDs in time")
            .expect("watch")
            .expect("the watch stays open");
        let (kind, object) = match event {
            WatchEvent::Added(o) => ("added", o),
            WatchEvent::Modified(o) => ("modified", o),
            other => panic!("unexpected event on a new record: {other:?}"),
        };
        if object.metadata.name.as_deref() != Some(uid.as_str()) {
            continue;
        }
        let json = serde_json::to_value(&object).expect("json");
        let listed = json["status"]["appliedResources"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let done = listed.len() == 2 && listed.iter().all(|r| r["uid"] != "");
        seen.push((kind, json));
        if done {
            break;
        }
    }
    let (kind, created) = &seen[0];
    assert_eq!(*kind, "added", "{seen:?}");
    assert!(
        created["status"]["appliedResources"].is_null(),
        "no list is written by the create: {created}"
    );
    let intents: Vec<serde_json::Value> = serde_json::from_str(
        created["metadata"]["annotations"]["work.ferry.dev/creation-intents"]
            .as_str()
            .unwrap_or_else(|| panic!("the record is created naming its intents: {created}")),
    )
    .expect("the intents are JSON");
    let mut named: Vec<&str> = intents.iter().filter_map(|i| i["name"].as_str()).collect();
    named.sort_unstable();
    assert_eq!(named, ["first", "second"], "{intents:?}");
    assert!(intents.iter().all(|i| i["uid"] == ""), "{intents:?}");
    assert_eq!(
        seen.len(),
        2,
        "the create and the write of the UIDs, nothing between: {seen:?}"
    );
    for name in ["first", "second"] {
        let live = read_json(&config_maps, name).await;
        assert!(
            seen[1].1["status"]["appliedResources"]
                .as_array()
                .expect("list")
                .iter()
                .any(|r| r["name"] == name && r["uid"] == live["metadata"]["uid"]),
            "{name} recorded with its UID"
        );
    }
    let audit_log = &spoke.control_plane.info.audit_log;
    let first = requests_by(audit_log, "ferry-admin")
        .into_iter()
        .find(|r| r.resource == "appliedmanifestworks" && r.name == uid)
        .expect("the agent's requests on the record are audited");
    assert_eq!(
        (first.verb.as_str(), first.code),
        ("create", 201),
        "the record of a new work is created without a read first"
    );
    for name in ["first", "second"] {
        let requests: Vec<(String, u16)> = requests_by(audit_log, "ferry-admin")
            .into_iter()
            .filter(|r| r.resource == "configmaps" && r.name == name)
            .map(|r| (r.verb, r.code))
            .collect();
        assert_eq!(
            requests.first(),
            Some(&("create".to_string(), 201)),
            "{name}, absent, is created without a read first: {requests:?}"
        );
    }
    fleet.stop().await;
}

/// A new work's object is created without a read only because it is most
/// likely absent: one that is on the spoke already is read after the
/// refused create and brought to the manifest like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_works_object_already_on_the_spoke_is_read_after_its_refused_create_and_updated() {
    use ferry_e2e::harness::audit::requests_by;
    use kube::api::PostParams;

    let mut options = FleetOptions::with_spokes(&[CLUSTER]);
    options.audit_spokes = true;
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let spoke = fleet.spoke(CLUSTER);
    let config_maps = spoke.api("v1", "ConfigMap", Some("default"));
    let there: DynamicObject =
        serde_json::from_value(config_map("default", "already-there", json!({"k": "old"})))
            .expect("config map");
    config_maps
        .create(&PostParams::default(), &there)
        .await
        .expect("create the ConfigMap before the work");
    let works = fleet
        .create_work(&manifest_work(
            CLUSTER,
            "over-an-object",
            vec![config_map("default", "already-there", json!({"k": "new"}))],
        ))
        .await
        .expect("create work");
    wait_applied(&works, "over-an-object")
        .await
        .expect("applied");
    let live = read_json(&config_maps, "already-there").await;
    assert_eq!(live["data"]["k"], "new", "the manifest's value: {live}");
    let requests: Vec<(String, u16)> =
        requests_by(&spoke.control_plane.info.audit_log, "ferry-admin")
            .into_iter()
            .filter(|r| r.resource == "configmaps" && r.name == "already-there")
            .map(|r| (r.verb, r.code))
            .collect();
    // The first is this test's own create: the spoke's admin is the agent's
    // user here.
    assert_eq!(
        requests.get(1..4),
        Some(
            &[
                ("create".to_string(), 409),
                ("get".to_string(), 200),
                ("patch".to_string(), 200),
            ][..]
        ),
        "a refused create, a read, the update: {requests:?}"
    );
    fleet.stop().await;
}
