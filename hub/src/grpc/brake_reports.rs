//! What an agent's deletion brake holds, carried from its heartbeats to its
//! ManagedCluster's `status.deletionBrake`, so a hold on the spoke shows on
//! the hub where platform engineers look (and in
//! `ferry_hub_clusters_deletions_held`).
//!
//! The agent is not trusted with the text: it sends counts, a time and its
//! ledger's namespace; the hub checks the namespace is a name and writes
//! the release instructions itself. A session costs nothing here until its
//! agent first reports a hold; then one small task writes each change after
//! the session's connected write, at most once per [`MIN_WRITE_INTERVAL`]
//! however often the agent reports, and ends with the session. What the
//! status said last stays after the session ends (the hold is on the spoke
//! still); the next session's connected write clears it and its agent
//! reports again in its first heartbeat.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;
use tracing::warn;

use ferry_api::contract::{DELETION_BRAKE_LEDGER, RELEASE_DELETIONS_ANNOTATION};
use ferry_api::managed_cluster::DeletionBrakeStatus;
use ferry_proto::v1;
use ferry_semantics::contract::KUBE_TIME_FORMAT;

use crate::clusters::liveness::ClusterLiveness;

/// The least time between two brake writes of one session: an agent that
/// reports a new hold in every heartbeat costs its ManagedCluster one write
/// per interval at most.
pub const MIN_WRITE_INTERVAL: Duration = Duration::from_secs(2);

/// The longest namespace name Kubernetes accepts.
const MAX_NAMESPACE_LEN: usize = 63;

/// The status the hub writes for the report of `cluster`'s agent: the
/// counts as sent, the time as RFC 3339 (empty when out of range), and how
/// to release, naming the ledger's namespace only when it is a valid
/// namespace name.
pub fn brake_status(report: &v1::DeletionBrake, cluster: &str) -> DeletionBrakeStatus {
    let since = Timestamp::from_second(report.since_unix_seconds)
        .ok()
        .filter(|_| report.since_unix_seconds > 0)
        .map(|t| t.strftime(KUBE_TIME_FORMAT).to_string())
        .unwrap_or_default();
    let ledger_namespace = Some(report.ledger_namespace.as_str())
        .filter(|ns| is_namespace_name(ns))
        .unwrap_or_default();
    let namespace = Some(ledger_namespace)
        .filter(|ns| !ns.is_empty())
        .unwrap_or("<the agent's namespace>");
    DeletionBrakeStatus {
        held_works: report.held_works,
        held_objects: report.held_objects,
        since,
        release: format!(
            "kubectl ferry release-deletions {cluster} --reason \"<why>\" (with credentials for the spoke), or on the spoke: kubectl annotate --overwrite configmap -n {namespace} {DELETION_BRAKE_LEDGER} {RELEASE_DELETIONS_ANNOTATION}=\"<who and why>\""
        ),
        ledger_namespace: ledger_namespace.to_string(),
    }
}

/// Whether `name` is a valid namespace name (an RFC 1123 label).
fn is_namespace_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAMESPACE_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// One session's brake reports (see the module docs).
#[derive(Default)]
pub struct BrakeReports {
    /// Feeds the session's writer task, which ends once this is dropped
    /// with the session (after the write or pause it is in, if any: a
    /// write for an ended session is refused by its session check).
    latest: Option<watch::Sender<Option<DeletionBrakeStatus>>>,
}

impl BrakeReports {
    /// A heartbeat of session `session` of `cluster` reported `report`
    /// (None: the brake holds nothing). Never waits: the write is made by
    /// the session's writer task.
    pub fn heard(
        &mut self,
        report: Option<&v1::DeletionBrake>,
        liveness: &Arc<ClusterLiveness>,
        cluster: &str,
        session: &str,
    ) {
        let status = report.map(|r| brake_status(r, cluster));
        match &self.latest {
            Some(latest) => {
                latest.send_replace(status);
            }
            // The session's connected write cleared the field: nothing to
            // write until the agent reports a hold.
            None if status.is_none() => {}
            None => {
                let (latest, reports) = watch::channel(status);
                tokio::spawn(write_reports(
                    liveness.clone(),
                    cluster.to_string(),
                    session.to_string(),
                    reports,
                ));
                self.latest = Some(latest);
            }
        }
    }
}

/// Writes each report of `reports` that differs from the last written,
/// paced by [`MIN_WRITE_INTERVAL`]; a failed write is tried again at the
/// next report (the agent reports every heartbeat).
async fn write_reports(
    liveness: Arc<ClusterLiveness>,
    cluster: String,
    session: String,
    mut reports: watch::Receiver<Option<DeletionBrakeStatus>>,
) {
    let mut written = None;
    loop {
        let report = reports.borrow_and_update().clone();
        if report != written {
            match liveness
                .deletion_brake(&cluster, &session, report.as_ref())
                .await
            {
                Ok(()) => written = report,
                Err(error) => warn!(%cluster, %error, "cannot record the agent's deletion brake"),
            }
            // A pace, not a wait for readiness: however often the agent
            // reports, this cluster's ManagedCluster is written at most
            // once per interval; the latest report is written after it.
            tokio::time::sleep(MIN_WRITE_INTERVAL).await;
        }
        if reports.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(namespace: &str, since: i64) -> v1::DeletionBrake {
        v1::DeletionBrake {
            held_works: 6,
            held_objects: 9,
            since_unix_seconds: since,
            ledger_namespace: namespace.into(),
        }
    }

    #[test]
    fn a_report_becomes_counts_a_time_and_how_to_release() {
        let status = brake_status(&report("ferry-agent", 1_764_800_000), "cluster-a");
        assert_eq!(status.held_works, 6);
        assert_eq!(status.held_objects, 9);
        assert_eq!(status.since, "2025-12-03T22:13:20Z");
        assert_eq!(
            status.release,
            "kubectl ferry release-deletions cluster-a --reason \"<why>\" (with credentials for the spoke), or on the spoke: kubectl annotate --overwrite configmap -n ferry-agent ferry-deletion-brake work.ferry.dev/release-deletions=\"<who and why>\""
        );
        assert_eq!(status.ledger_namespace, "ferry-agent");
    }

    #[test]
    fn what_the_agent_sends_never_becomes_text_unchecked() {
        for namespace in [
            "",
            "-x",
            "x-",
            "Upper",
            "a b",
            "a;rm -rf /",
            &"a".repeat(64),
        ] {
            let status = brake_status(&report(namespace, 0), "cluster-a");
            assert!(
                status.release.contains("-n <the agent's namespace> "),
                "{namespace:?}: {}",
                status.release
            );
            assert!(status.since.is_empty());
            assert!(status.ledger_namespace.is_empty());
        }
        for since in [i64::MIN, -1, i64::MAX] {
            assert!(
                brake_status(&report("ns", since), "cluster-a")
                    .since
                    .is_empty()
            );
        }
        assert!(is_namespace_name(&"a".repeat(63)));
    }
}
