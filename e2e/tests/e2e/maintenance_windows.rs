//! Maintenance windows (issue 33) on real control planes with real agents:
//! a cluster annotated `cluster.ferry.dev/maintenance-windows` whose window
//! is closed is not written a new revision (nor its first work) by a
//! rollout; the replica set's `WaitingForMaintenanceWindow` condition and
//! `kubectl ferry rollout status` name it and say until when; when the
//! window opens by its schedule the rollout proceeds with no other trigger
//! (the hub's controller sweep is an hour here, so the reconcile that
//! writes it is the requeue at the opening). A rollback outside a window
//! is proven at unit level (`decide::tests`).

use std::time::Duration;

use ferry_api::contract::{MAINTENANCE_WINDOWS_ANNOTATION, REVISION_ANNOTATION};
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::{Condition, ManifestWork};
use ferry_api::placement::Placement;
use ferry_api::replica_set::{ManifestWorkReplicaSet, RevisionRef};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::kubectl_ferry::{kubectl_ferry, succeeded};
use ferry_e2e::helpers::placement_helpers::create_placement;
use ferry_e2e::helpers::replica_sets::rolled_out;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map};
use ferry_semantics::contract::{KUBE_TIME_FORMAT, WAITING_FOR_MAINTENANCE_WINDOW};
use k8s_openapi::jiff::{RoundMode, SignedDuration, Timestamp, TimestampRound, Unit};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const NAMESPACE: &str = "default";
const SPOKES: [&str; 2] = ["spoke-a", "spoke-b"];

fn spec(name: &str, version: &str) -> Value {
    json!({
        "manifestWorkTemplate": {"workload": {"manifests": [
            config_map(NAMESPACE, name, json!({"version": version}))]}},
        "placementRefs": [{"name": "both", "rolloutStrategy": {"type": "All"}}],
    })
}

async fn create_replica_set(hub: &Client, name: &str, spec: Value) {
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }))
    .expect("replica set");
    Api::<ManifestWorkReplicaSet>::namespaced(hub.clone(), NAMESPACE)
        .create(&PostParams::default(), &rs)
        .await
        .expect("create ManifestWorkReplicaSet");
}

fn waiting(rs: &ManifestWorkReplicaSet) -> Option<&Condition> {
    rs.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == WAITING_FOR_MAINTENANCE_WINDOW && c.status == "True")
}

fn revision(rs: &ManifestWorkReplicaSet) -> Option<RevisionRef> {
    rs.status.as_ref()?.rollout.as_ref()?.revision.clone()
}

/// The revision the work of replica set `name` on `spoke` holds, if any.
async fn held(hub: &Client, spoke: &str, name: &str) -> Option<String> {
    Api::<ManifestWork>::namespaced(hub.clone(), spoke)
        .get_opt(name)
        .await
        .expect("read work")
        .and_then(|w| w.annotations().get(REVISION_ANNOTATION).cloned())
}

/// Waits until `name` rolled out `generation` completely.
async fn wait_complete(hub: &Client, name: &str, generation: i64) -> ManifestWorkReplicaSet {
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), NAMESPACE);
    wait_until(&sets, name, "Complete", APPLY_TIMEOUT * 2, |rs| {
        rolled_out(rs)
            .is_some_and(|c| c.observed_generation == generation && c.reason == "Complete")
            && rs.status.as_ref().is_some_and(|s| s.summary.total == 2)
            && waiting(rs).is_none()
    })
    .await
    .unwrap_or_else(|e| panic!("{name} complete at generation {generation}: {e}"))
}

/// The first whole minute at least `lead` from now.
fn whole_minute_after(lead: SignedDuration) -> Timestamp {
    Timestamp::now()
        .checked_add(lead)
        .and_then(|t| {
            t.round(
                TimestampRound::new()
                    .smallest(Unit::Minute)
                    .mode(RoundMode::Ceil),
            )
        })
        .expect("a time")
}

/// Gives `cluster` one ten-minute window a day, opening daily at the UTC
/// time of day of `opens` (so, less than a day ahead, next at `opens`).
async fn set_daily_window(hub: &Client, cluster: &str, opens: Timestamp) {
    let utc = opens.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC);
    let windows = json!([{"schedule": format!("{} {} * * *", utc.minute(), utc.hour()),
        "duration": "10m", "timeZone": "UTC"}])
    .to_string();
    Api::<ManagedCluster>::all(hub.clone())
        .patch(
            cluster,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {MAINTENANCE_WINDOWS_ANNOTATION: windows}}}),
            ),
        )
        .await
        .unwrap_or_else(|e| panic!("annotate {cluster}: {e}"));
}

/// Whether `rs` says spoke-b alone waits, until `opens`.
fn says_waits_until(rs: &ManifestWorkReplicaSet, opens: Timestamp) -> bool {
    let until = opens.strftime(KUBE_TIME_FORMAT).to_string();
    waiting(rs).is_some_and(|c| {
        c.reason == "OutsideMaintenanceWindow"
            && c.message.contains("1 clusters wait")
            && c.message.contains(&format!("spoke-b until {until}"))
    })
}

#[tokio::test]
async fn a_rollout_waits_for_a_closed_window_and_proceeds_when_it_opens() {
    let fleet = Fleet::start(FleetOptions {
        controller_sweep: Duration::from_secs(3600),
        ..FleetOptions::with_spokes(&SPOKES)
    })
    .await
    .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    create_placement(&hub, NAMESPACE, "both", json!({})).await;
    let placements: Api<Placement> = Api::namespaced(hub.clone(), NAMESPACE);
    wait_until(&placements, "both", "two clusters", APPLY_TIMEOUT, |p| {
        p.status
            .as_ref()
            .is_some_and(|s| s.number_of_selected_clusters == 2)
    })
    .await
    .expect("both spokes are chosen");

    // Revision 1 everywhere while no cluster has windows.
    create_replica_set(&hub, "app", spec("app", "v1")).await;
    let first = revision(&wait_complete(&hub, "app", 1).await).expect("revision 1");
    assert_eq!(first.number, 1);

    // spoke-b gets one ten-minute window a day, opening at a whole minute
    // six hours ahead: closed through every check below, whatever the
    // machine's load.
    let far = whole_minute_after(SignedDuration::from_hours(6));
    set_daily_window(&hub, "spoke-b", far).await;
    let says_b_waits = |rs: &ManifestWorkReplicaSet| says_waits_until(rs, far);
    // A new replica set's first work waits too: once it says so, the
    // hub's cluster cache holds the window (no race with the revision
    // below).
    create_replica_set(&hub, "probe", spec("probe", "v1")).await;
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), NAMESPACE);
    wait_until(&sets, "probe", "spoke-b waits", APPLY_TIMEOUT, says_b_waits)
        .await
        .expect("the probe's first work on spoke-b waits for its window");
    assert!(
        held(&hub, "spoke-b", "probe").await.is_none(),
        "no first work outside the window"
    );

    // Revision 2: spoke-a gets it, spoke-b keeps revision 1 and the status
    // says until when.
    let generation = sets
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": spec("app", "v2")})),
        )
        .await
        .expect("revision 2")
        .metadata
        .generation
        .unwrap_or(0);
    let held_back = wait_until(&sets, "app", "spoke-b waits", APPLY_TIMEOUT, |rs| {
        says_b_waits(rs) && revision(rs).is_some_and(|r| r.number == 2)
    })
    .await
    .expect("revision 2 waits for spoke-b's window");
    let second = revision(&held_back).expect("revision 2");
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), "spoke-a");
    wait_until(&works, "app", "revision 2", APPLY_TIMEOUT, |w| {
        w.annotations().get(REVISION_ANNOTATION) == Some(&second.hash)
    })
    .await
    .expect("spoke-a, always open, gets revision 2");
    assert_eq!(held(&hub, "spoke-b", "app").await, Some(first.hash.clone()));
    let until = far.strftime(KUBE_TIME_FORMAT).to_string();
    let status = succeeded(
        &kubectl_ferry(
            &fleet.hub.info.kubeconfig,
            &["rollout", "status", "default/app"],
        )
        .await,
        "rollout status",
    );
    assert!(
        status.contains("Waiting for maintenance windows: 1 clusters wait")
            && status.contains(&format!("spoke-b until {until}")),
        "{status}"
    );

    // The window moves to open at a whole minute at least a minute ahead.
    // Once the hub says both wait until then, it has decided with the new
    // window while still closed; at the opening both replica sets go on
    // with nothing else touched (the sweep is an hour away), so the
    // reconcile that writes spoke-b is the requeue at the opening.
    let soon = whole_minute_after(SignedDuration::from_secs(60));
    set_daily_window(&hub, "spoke-b", soon).await;
    // Both watched at once: each must be seen before the opening.
    let moved = |rs: &ManifestWorkReplicaSet| says_waits_until(rs, soon);
    let (app, probe) = tokio::join!(
        wait_until(
            &sets,
            "app",
            "spoke-b waits for the moved window",
            APPLY_TIMEOUT,
            moved
        ),
        wait_until(
            &sets,
            "probe",
            "spoke-b waits for the moved window",
            APPLY_TIMEOUT,
            moved
        ),
    );
    app.expect("app waits for the moved window");
    probe.expect("probe waits for the moved window");
    let done = wait_complete(&hub, "app", generation).await;
    assert_eq!(revision(&done), Some(second.clone()));
    assert_eq!(held(&hub, "spoke-b", "app").await, Some(second.hash));
    wait_complete(&hub, "probe", 1).await;
    assert!(held(&hub, "spoke-b", "probe").await.is_some());
}
