//! Hands a fleet's leadership to a real `ferry-hub` process, so a test can
//! kill the leader with SIGKILL (an in-process replica can only be stopped
//! cleanly, which releases its Lease): the fleet's replica steps down, the
//! process takes the Lease, and the replica comes back as the follower that
//! takes over once the process dies.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use super::agent_process::free_loopback_port;
use super::fleet::{Fleet, LEADER_LEASE, LEADER_LEASE_DURATION};
use super::hub_process::{HubProcess, HubProcessOptions};

/// How long the handover may take: the process starts, the replica stops
/// and releases the Lease, the process takes it.
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(90);

/// The holder of the fleet's leader Lease, if any.
pub fn holder(lease: &Lease) -> Option<String> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty())
}

/// Waits until the fleet's leader Lease is held by `identity`; panics with
/// what `what` names after `timeout`.
pub async fn wait_leader(fleet: &Fleet, identity: &str, what: &str, timeout: Duration) {
    let leases: Api<Lease> = Api::namespaced(fleet.hub_client.clone(), LEADER_LEASE.0);
    crate::helpers::wait::wait_until(&leases, LEADER_LEASE.1, what, timeout, |l| {
        holder(l).as_deref() == Some(identity)
    })
    .await
    .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// Starts `ferry-hub serve` (built beside the test binary, see
/// [`super::image::build_binaries`]) in the fleet's election under
/// `identity`, stops the fleet's replica so the process leads, and starts
/// the replica again as follower. The fleet must run with `elect_leader`
/// and one replica, whose identity is `replica-0`. Panics when a step
/// fails: it is test setup.
pub async fn lead_from_process(fleet: &mut Fleet, identity: &str) -> HubProcess {
    wait_leader(fleet, "replica-0", "replica-0 leads", HANDOVER_TIMEOUT).await;
    let free = || free_loopback_port().expect("a free port");
    let lease_seconds = LEADER_LEASE_DURATION.as_secs().to_string();
    let leader = HubProcess::start(
        &fleet.hub,
        HubProcessOptions {
            grpc: free(),
            probes: free(),
            extra_args: vec![
                "--heartbeat-seconds=1".into(),
                format!("--leader-election-namespace={}", LEADER_LEASE.0),
                format!("--leader-election-lease={}", LEADER_LEASE.1),
                format!("--leader-lease-seconds={lease_seconds}"),
                format!("--replica-lease-namespace={}", LEADER_LEASE.0),
            ],
            env: vec![("POD_NAME".into(), identity.into())],
        },
    )
    .await
    .expect("the hub process starts");
    fleet.stop_hub().await;
    wait_leader(
        fleet,
        identity,
        "the process takes the Lease the fleet's replica released",
        HANDOVER_TIMEOUT,
    )
    .await;
    fleet
        .start_hub()
        .await
        .expect("the fleet's replica restarts as follower");
    leader
}
