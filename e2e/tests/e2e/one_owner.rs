//! One owner per object: two works on one cluster that want different values
//! for one field of one object settle at once (the older work owns it, the
//! younger reports `ConflictsWithWork` and writes nothing), and a spoke
//! controller that keeps rewriting a field ferry owns meets the write-loop
//! breaker: ferry's writes stay bounded and the manifest names the fighter.
//! Writes are counted from the spoke API server's audit log.

use std::time::Duration;

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::passes::{reads_so_far, wait_for_passes};
use ferry_e2e::helpers::spoke_actor::merge_as;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_condition, manifest_work, wait_applied,
};
use ferry_semantics::contract::{REASON_CONFLICTS_WITH_WORK, REASON_WRITE_LOOP};

/// The field manager of the test's spoke-side controller.
const FIGHTER: &str = "fighting-controller";
use serde_json::{Value, json};

/// Write requests (create, update, patch, delete) to the ConfigMap `name`
/// so far, by the admin identity the in-process agent uses, except those
/// sent with field manager `except` (the test's own spoke-side writer, which
/// shares the identity), as `verb requestURI` lines.
fn writes_to(audit: &str, name: &str, except: &str) -> Vec<String> {
    let text = std::fs::read_to_string(audit).unwrap_or_default();
    let foreign = format!("fieldManager={except}");
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["user"]["username"] == "ferry-admin")
        .filter(|e| {
            matches!(
                e["verb"].as_str(),
                Some("create" | "update" | "patch" | "delete")
            )
        })
        .filter(|e| e["objectRef"]["resource"] == "configmaps" && e["objectRef"]["name"] == name)
        .map(|e| {
            format!(
                "{} {}",
                e["verb"].as_str().unwrap_or_default(),
                e["requestURI"].as_str().unwrap_or_default()
            )
        })
        .filter(|line| !line.contains(&foreign))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_disagreeing_works_settle_with_the_younger_reporting_the_conflict() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.audit_spokes = true;
    options.resync = Duration::from_secs(1);
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let audit = fleet
        .spoke("cluster-a")
        .control_plane
        .info
        .audit_log
        .clone();
    const NAME: &str = "contested";
    let uri = "/api/v1/namespaces/default/configmaps/contested";
    let contested = |owner: &str| {
        config_map(
            "default",
            "contested",
            json!({"owner": owner, "shared": "same"}),
        )
    };
    let works = fleet
        .create_work(&manifest_work("cluster-a", "one", vec![contested("one")]))
        .await
        .expect("create one");
    wait_applied(&works, "one").await.expect("one applied");
    let started = std::time::Instant::now();
    fleet
        .create_work(&manifest_work("cluster-a", "two", vec![contested("two")]))
        .await
        .expect("create two");
    let two = wait_until(
        &works,
        "two",
        "two reports the conflict",
        APPLY_TIMEOUT,
        |w| {
            manifest_condition(w, 0, "Applied")
                .is_some_and(|c| c.status == "False" && c.reason == REASON_CONFLICTS_WITH_WORK)
        },
    )
    .await
    .expect("the younger work shows the conflict");
    let settled = started.elapsed();
    let condition = manifest_condition(&two, 0, "Applied").expect("condition");
    assert!(
        condition.message.contains("cluster-a/one") && condition.message.contains("data.owner"),
        "the message names the owning work and the field: {}",
        condition.message
    );
    assert!(
        !condition.message.contains("data.shared"),
        "a field both works agree on is no conflict: {}",
        condition.message
    );

    // Both works keep passing over the object (resync every second); count
    // ferry's writes over ten more reads of it, i.e. several passes of each.
    // One more read (a pass under way), then ten more reads after it.
    wait_for_passes(&audit, uri, reads_so_far(&audit, uri), 0, APPLY_TIMEOUT)
        .await
        .expect("the agent keeps reading the object");
    let reads = reads_so_far(&audit, uri);
    let writes_then = writes_to(&audit, NAME, FIGHTER).len();
    wait_for_passes(&audit, uri, reads, 9, APPLY_TIMEOUT)
        .await
        .expect("ten more reads of the object");
    let writes = writes_to(&audit, NAME, FIGHTER);
    println!(
        "two disagreeing works: conflict shown after {settled:?}; {} writes to the contested ConfigMap in all, {} after it settled",
        writes.len(),
        writes.len() - writes_then
    );
    assert_eq!(
        writes.len(),
        writes_then,
        "no write once settled: {writes:?}"
    );
    assert!(
        !writes.is_empty(),
        "the count sees the owner's create of the object"
    );
    assert!(
        writes.len() <= 5,
        "at most a handful of writes to the contested object: {writes:?}"
    );
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    let live = spoke.get("contested").await.expect("contested exists");
    assert_eq!(live.data["data"]["owner"], "one", "the older work owns it");
    let one = works.get("one").await.expect("one");
    assert!(
        manifest_condition(&one, 0, "Applied").is_some_and(|c| c.status == "True"),
        "the owner stays applied"
    );

    // The owner goes: the younger work takes the object over.
    works
        .delete("one", &Default::default())
        .await
        .expect("delete one");
    wait_until(
        &works,
        "two",
        "two applied once one is gone",
        APPLY_TIMEOUT,
        |w| manifest_condition(w, 0, "Applied").is_some_and(|c| c.status == "True"),
    )
    .await
    .expect("two takes over");
    wait_until(&spoke, "contested", "two's value", APPLY_TIMEOUT, |o| {
        o.data["data"]["owner"] == "two"
    })
    .await
    .expect("the object carries two's value");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoke_controller_fighting_a_work_meets_bounded_writes_and_is_named() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.audit_spokes = true;
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let audit = fleet
        .spoke("cluster-a")
        .control_plane
        .info
        .audit_log
        .clone();
    const NAME: &str = "fought";
    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "fought",
            vec![config_map("default", "fought", json!({"a": "hub"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "fought").await.expect("applied");
    let before = writes_to(&audit, NAME, FIGHTER).len();
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));

    // A controller on the spoke that sets the field back ten times a second,
    // for ten seconds.
    let fighter = {
        let spoke = spoke.clone();
        tokio::spawn(async move {
            let mut patches = 0;
            for i in 0..100 {
                let patch = json!({"data": {"a": format!("spoke-{i}")}});
                if merge_as(&spoke, "fought", FIGHTER, &patch).await.is_ok() {
                    patches += 1;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            patches
        })
    };
    let held = wait_until(
        &works,
        "fought",
        "the write loop reported",
        APPLY_TIMEOUT,
        |w| {
            manifest_condition(w, 0, "Applied")
                .is_some_and(|c| c.status == "False" && c.reason == REASON_WRITE_LOOP)
        },
    )
    .await
    .expect("the breaker reports the fight");
    let message = &manifest_condition(&held, 0, "Applied")
        .expect("condition")
        .message;
    assert!(
        message.contains(FIGHTER),
        "the condition names the other writer: {message}"
    );
    let patches = fighter.await.expect("fighter");
    let writes = writes_to(&audit, NAME, FIGHTER);
    let fight_writes = writes.len() - before;
    println!(
        "spoke controller fight: the controller wrote {patches} times in 10 s; ferry wrote {fight_writes} times"
    );
    assert!(patches >= 50, "the fighter kept writing: {patches}");
    assert!(
        fight_writes >= 3,
        "the count sees ferry correcting the drift before it backs off: {fight_writes}"
    );
    assert!(
        fight_writes <= 15,
        "ferry's rewrites stay bounded: {fight_writes} ({:?})",
        &writes[before..]
    );
    fleet.stop().await;
}
