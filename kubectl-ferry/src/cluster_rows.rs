//! `get clusters`: one row per ManagedCluster, with the works of its
//! namespace counted.

use std::collections::BTreeMap;

use ferry_api::managed_cluster::ManagedClusterStatus;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

use crate::age::age_of_text;
use crate::table;
use crate::work_rows::WorkEntry;

/// The accept gate's field in a ManagedCluster's spec. A hub whose CRD has
/// no such field never shows it; one that has it treats absence as accepted.
pub const ACCEPTS_FIELD: &str = "hubAcceptsClient";

/// What `get clusters` knows of one cluster; `-o json|yaml` prints these.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRecord {
    /// Cluster name (= its namespace on the hub).
    pub name: String,
    /// `spec.hubAcceptsClient`, when the object has the field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted: Option<bool>,
    /// Whether an agent holds a session with the hub.
    pub connected: bool,
    /// The version the agent reported.
    pub agent_version: String,
    /// When the hub last heard from the agent, RFC 3339.
    pub last_seen_time: String,
    /// Why the agent is disconnected, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disconnect_reason: Option<String>,
    /// Works whose deletion the agent's deletion brake holds on the
    /// spoke, as the agent last reported (`status.deletionBrake`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_deletions: Option<u64>,
    /// Why the status could not be read, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_error: Option<String>,
    /// ManifestWorks in the cluster's namespace.
    pub works: usize,
    /// Of those, how many are failing (a `False` Applied or Available, on the
    /// work or on a manifest, or unreadable).
    pub failing_works: usize,
    /// The ManagedCluster as stored.
    pub managed_cluster: Value,
}

/// One record per ManagedCluster in `clusters` (raw objects, so fields this
/// build does not know, like the accept gate, are still read), sorted by
/// name, with the works of `works` counted per namespace.
pub fn cluster_records(clusters: &[Value], works: &[WorkEntry]) -> Vec<ClusterRecord> {
    let mut per_namespace: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for work in works {
        let counts = per_namespace.entry(work.namespace()).or_default();
        counts.0 += 1;
        if work.is_failing() {
            counts.1 += 1;
        }
    }
    let mut records: Vec<ClusterRecord> = clusters
        .iter()
        .map(|cluster| {
            let name = cluster["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let (status, status_error) = match cluster.get("status") {
                None | Some(Value::Null) => (ManagedClusterStatus::default(), None),
                Some(raw) => match serde_json::from_value::<ManagedClusterStatus>(raw.clone()) {
                    Ok(status) => (status, None),
                    Err(e) => (ManagedClusterStatus::default(), Some(e.to_string())),
                },
            };
            let accepted = cluster["spec"]
                .get(ACCEPTS_FIELD)
                .map(|v| v.as_bool().unwrap_or(true));
            let (works, failing_works) = per_namespace
                .get(name.as_str())
                .copied()
                .unwrap_or_default();
            ClusterRecord {
                accepted,
                held_deletions: status.deletion_brake.as_ref().map(|b| b.held_works),
                connected: status.connected,
                agent_version: status.agent_version,
                last_seen_time: status.last_seen_time,
                disconnect_reason: status.disconnect_reason,
                status_error,
                works,
                failing_works,
                managed_cluster: cluster.clone(),
                name,
            }
        })
        .collect();
    records.sort_by(|a, b| a.name.cmp(&b.name));
    records
}

/// The `get clusters` table at `now`. The ACCEPTED column appears when any
/// cluster carries the accept gate; a cluster without the field is
/// accepted, as the hub treats it. The HELD DELETIONS column appears when
/// any cluster's agent brake holds deletions (its ManagedCluster's
/// `status.deletionBrake.release` says how to release them).
pub fn clusters_table(records: &[ClusterRecord], now: Timestamp) -> String {
    let gated = records.iter().any(|r| r.accepted.is_some());
    let braked = records.iter().any(|r| r.held_deletions.is_some());
    let mut header = vec!["name"];
    if gated {
        header.push("accepted");
    }
    header.extend(["connected", "agent", "last seen", "works", "failing"]);
    if braked {
        header.push("held deletions");
    }
    header.push("reason");
    let rows = records
        .iter()
        .map(|r| {
            let mut row = vec![r.name.clone()];
            if gated {
                row.push(bool_cell(r.accepted.unwrap_or(true)));
            }
            let reason = match (&r.status_error, r.connected, &r.disconnect_reason) {
                (Some(error), _, _) => format!("unreadable status: {error}"),
                (None, false, Some(reason)) => reason.clone(),
                _ => "-".into(),
            };
            row.extend([
                bool_cell(r.connected),
                dash_if_empty(&r.agent_version),
                // A connected cluster's status is vouched for by its
                // replica's Lease: it is being heard now; lastSeenTime is
                // when its session began.
                if r.connected {
                    "now".to_string()
                } else {
                    age_of_text(now, &r.last_seen_time)
                },
                r.works.to_string(),
                r.failing_works.to_string(),
            ]);
            if braked {
                row.push(r.held_deletions.map_or("-".into(), |n| n.to_string()));
            }
            row.push(reason);
            row
        })
        .collect();
    table::render(&header, rows)
}

fn bool_cell(value: bool) -> String {
    if value { "True" } else { "False" }.into()
}

fn dash_if_empty(text: &str) -> String {
    if text.is_empty() {
        "-".into()
    } else {
        text.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::work_summary::tests::{condition, manifest, work_with};
    use ferry_semantics::contract::APPLIED;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-11-23T18:00:00Z".parse().expect("now")
    }

    fn cluster(name: &str, spec: Value, status: Value) -> Value {
        json!({"apiVersion": "cluster.ferry.dev/v1alpha1", "kind": "ManagedCluster",
               "metadata": {"name": name}, "spec": spec, "status": status})
    }

    fn works() -> Vec<WorkEntry> {
        let ok = work_with(
            vec![condition(APPLIED, "True", "Applied", 1)],
            vec![manifest(0, vec![condition(APPLIED, "True", "Applied", 1)])],
        );
        let mut bad = work_with(
            vec![condition(APPLIED, "False", "Failed", 1)],
            vec![manifest(
                0,
                vec![condition(APPLIED, "False", "UnknownKind", 1)],
            )],
        );
        bad.metadata.name = Some("bad".into());
        let mut elsewhere = ok.clone();
        elsewhere.metadata.namespace = Some("cluster-b".into());
        [ok, bad, elsewhere]
            .iter()
            .map(|w| WorkEntry::from_raw(serde_json::to_value(w).expect("serialise")))
            .collect()
    }

    #[test]
    fn a_connected_cluster_shows_its_agent_and_counts_its_failing_works() {
        let clusters = [cluster(
            "cluster-a",
            json!({}),
            json!({"connected": true, "agentVersion": "0.1.0",
                   "lastSeenTime": "2026-11-23T17:59:58Z", "sessionId": "s"}),
        )];
        let records = cluster_records(&clusters, &works());
        assert_eq!(records.len(), 1);
        let a = &records[0];
        assert_eq!((a.works, a.failing_works), (2, 1));
        assert_eq!(a.accepted, None);
        let text = clusters_table(&records, now());
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            [
                "NAME        CONNECTED   AGENT   LAST SEEN   WORKS   FAILING   REASON",
                "cluster-a   True        0.1.0   now         2       1         -",
            ]
        );
    }

    #[test]
    fn held_deletions_show_when_any_clusters_brake_holds() {
        let clusters = [
            cluster(
                "cluster-a",
                json!({}),
                json!({"connected": true, "agentVersion": "0.1.0", "sessionId": "s",
                       "deletionBrake": {"heldWorks": 6, "heldObjects": 9,
                                         "since": "2026-11-23T17:50:00Z", "release": "on the spoke"}}),
            ),
            cluster(
                "cluster-b",
                json!({}),
                json!({"connected": true, "agentVersion": "0.1.0"}),
            ),
        ];
        let records = cluster_records(&clusters, &[]);
        assert_eq!(records[0].held_deletions, Some(6));
        assert_eq!(records[1].held_deletions, None);
        let text = clusters_table(&records, now());
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            [
                "NAME        CONNECTED   AGENT   LAST SEEN   WORKS   FAILING   HELD DELETIONS   REASON",
                "cluster-a   True        0.1.0   now         0       0         6                -",
                "cluster-b   True        0.1.0   now         0       0         -                -",
            ]
        );
        let nothing_held = clusters_table(&records[1..], now());
        assert!(!nothing_held.contains("HELD"), "{nothing_held}");
    }

    #[test]
    fn the_accept_gate_shows_when_any_cluster_has_it() {
        let clusters = [
            cluster(
                "b",
                json!({"hubAcceptsClient": false}),
                json!({"connected": false, "disconnectReason": "NotAccepted"}),
            ),
            cluster("a", json!({}), Value::Null),
        ];
        let records = cluster_records(&clusters, &[]);
        assert_eq!(records[0].name, "a");
        assert_eq!(records[1].accepted, Some(false));
        let text = clusters_table(&records, now());
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("NAME   ACCEPTED   CONNECTED"),
            "{text}"
        );
        assert!(lines[1].starts_with("a      True       False"), "{text}");
        assert!(lines[2].starts_with("b      False      False"), "{text}");
        assert!(lines[2].ends_with("NotAccepted"), "{text}");
    }

    #[test]
    fn an_unreadable_status_is_reported_not_hidden() {
        let clusters = [cluster("a", json!({}), json!({"connected": "yes"}))];
        let records = cluster_records(&clusters, &[]);
        assert!(records[0].status_error.is_some());
        assert!(clusters_table(&records, now()).contains("unreadable status: "));
    }

    #[test]
    fn records_serialise_with_counts_and_the_object() {
        let clusters = [cluster("cluster-b", json!({}), json!({"connected": true}))];
        let record = &cluster_records(&clusters, &works())[0];
        let value = serde_json::to_value(record).expect("serialise");
        assert_eq!(value["works"], 1);
        assert_eq!(value["failingWorks"], 0);
        assert_eq!(value["managedCluster"]["metadata"]["name"], "cluster-b");
        assert!(value.get("accepted").is_none());
    }
}
