//! A work the hub no longer has (here: removed while the hub was down, the
//! way a rebuilt hub forgets everything) is evicted by the agent after the
//! configured grace period, and not before (issue 4, item 9); a grace
//! period of 100 years or more turns eviction off and calls off one already
//! started (OCM's bound).

use std::time::{Duration, Instant};

use ferry_agent::work_workers::EVICTION_OFF_AT;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::ownership::APPLIED_WORK_API_VERSION;
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map, manifest_work, wait_applied};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use serde_json::json;

const GRACE: Duration = Duration::from_secs(8);

/// The spoke's ConfigMaps and AppliedManifestWorks, and the UID of work
/// `name` (one ConfigMap of that name), which the agent applied and which
/// then vanished from the hub while no hub watched: its eviction has begun.
async fn evicting_work(
    fleet: &mut Fleet,
    name: &str,
) -> (Api<DynamicObject>, Api<DynamicObject>, String) {
    let spoke = fleet.spoke("cluster-a");
    let config_maps = spoke.api("v1", "ConfigMap", Some("default"));
    let records = spoke.api(APPLIED_WORK_API_VERSION, "AppliedManifestWork", None);
    let work = manifest_work(
        "cluster-a",
        name,
        vec![config_map("default", name, json!({"k": "v"}))],
    );
    let works = fleet.create_work(&work).await.expect("create work");
    let uid = wait_applied(&works, name)
        .await
        .expect("applied")
        .uid()
        .expect("uid");
    // The work disappears while no hub watches: nobody tells the agent.
    fleet
        .forget_work(&works, name)
        .await
        .expect("work forgotten");
    wait_until(&records, &uid, "eviction started", APPLY_TIMEOUT, evicting)
        .await
        .expect("the agent starts the grace period");
    (config_maps, records, uid)
}

fn evicting(record: &DynamicObject) -> bool {
    record.data["status"]["evictionStartTime"]
        .as_str()
        .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_the_hub_no_longer_has_is_evicted_after_the_grace_period_not_before() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.eviction_grace = GRACE;
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    let (config_maps, records, uid) = evicting_work(&mut fleet, "forgotten").await;
    let started = Instant::now();
    assert!(
        config_maps
            .get_opt("forgotten")
            .await
            .expect("read")
            .is_some(),
        "the object stays during the grace period"
    );
    tokio::time::sleep(GRACE / 2).await;
    assert!(
        config_maps
            .get_opt("forgotten")
            .await
            .expect("read")
            .is_some(),
        "the object still stays halfway through the grace period"
    );

    wait_deleted(&config_maps, "forgotten", "object evicted", APPLY_TIMEOUT)
        .await
        .expect("evicted after the grace period");
    assert!(
        started.elapsed() + Duration::from_secs(2) >= GRACE,
        "not evicted before the grace period ended ({:?} after it began)",
        started.elapsed()
    );
    wait_deleted(&records, &uid, "record removed", APPLY_TIMEOUT)
        .await
        .expect("the record goes too");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grace_period_of_a_hundred_years_turns_eviction_off_and_calls_off_a_started_one() {
    // An hour: the eviction starts and nothing is released during the test.
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let (config_maps, records, uid) = evicting_work(&mut fleet, "kept-forever").await;

    // Restarted with OCM's bound, the agent calls the eviction off.
    fleet.stop_agent("cluster-a").await;
    fleet.set_agent_options("cluster-a", |o| o.eviction_grace = EVICTION_OFF_AT);
    fleet.start_agent("cluster-a");
    wait_until(&records, &uid, "eviction called off", APPLY_TIMEOUT, |r| {
        !evicting(r)
    })
    .await
    .expect("evictionStartTime is cleared");
    assert!(
        config_maps
            .get_opt("kept-forever")
            .await
            .expect("read")
            .is_some(),
        "the object stays"
    );
    fleet.stop().await;
}
