//! What colour a cluster's tile is: the cluster's state from the same
//! records `kubectl ferry get clusters` prints (connected, failing works)
//! plus whether any of its works reports drift not yet corrected.

use std::collections::BTreeMap;

use crate::cluster_rows::ClusterRecord;
use crate::work_rows::WorkEntry;

/// A tile's state, worst first: the first that applies wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TileState {
    /// The cluster's status does not decode.
    Unreadable,
    /// Its agent is not connected.
    Disconnected,
    /// At least one of its works fails (or does not decode).
    Failing,
    /// At least one of its works reports drift not yet corrected.
    Drifted,
    /// Connected, nothing failing, no drift.
    Healthy,
}

impl TileState {
    /// The CSS class (and the word shown on the tile).
    pub fn class(self) -> &'static str {
        match self {
            TileState::Unreadable => "unreadable",
            TileState::Disconnected => "disconnected",
            TileState::Failing => "failing",
            TileState::Drifted => "drifted",
            TileState::Healthy => "healthy",
        }
    }

    /// Every state, in legend order.
    pub const ALL: [TileState; 5] = [
        TileState::Healthy,
        TileState::Drifted,
        TileState::Failing,
        TileState::Disconnected,
        TileState::Unreadable,
    ];
}

/// Whether `work` reports a drifted field that is not yet corrected.
pub fn has_open_drift(work: &WorkEntry) -> bool {
    let Ok(work) = &work.typed else {
        return false;
    };
    work.status
        .iter()
        .filter_map(|s| s.resource_status.as_ref())
        .flat_map(|r| &r.manifests)
        .filter_map(|m| m.drift.as_ref())
        .any(|d| d.omitted > 0 || d.fields.iter().any(|f| f.corrected_time.is_none()))
}

/// Number of drifted works per namespace (= cluster).
pub fn drifted_per_cluster(works: &[WorkEntry]) -> BTreeMap<&str, usize> {
    let mut counts = BTreeMap::new();
    for work in works.iter().filter(|w| has_open_drift(w)) {
        *counts.entry(work.namespace()).or_insert(0) += 1;
    }
    counts
}

/// The state of the cluster of `record` with `drifted` drifted works, and a
/// short text saying why (shown on the tile, so colour is never the only
/// signal).
pub fn tile_state(record: &ClusterRecord, drifted: usize) -> (TileState, String) {
    if record.status_error.is_some() {
        return (TileState::Unreadable, "status unreadable".into());
    }
    if !record.connected {
        let why = record
            .disconnect_reason
            .clone()
            .unwrap_or_else(|| "not connected".into());
        return (TileState::Disconnected, why);
    }
    if record.failing_works > 0 {
        return (
            TileState::Failing,
            format!("{} of {} failing", record.failing_works, record.works),
        );
    }
    if drifted > 0 {
        return (TileState::Drifted, format!("{} drifted", works(drifted)));
    }
    (TileState::Healthy, works(record.works))
}

/// "1 work", "3 works".
fn works(count: usize) -> String {
    if count == 1 {
        "1 work".into()
    } else {
        format!("{count} works")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_rows::cluster_records;
    use serde_json::json;

    fn record(status: serde_json::Value, works: usize, failing: usize) -> ClusterRecord {
        let cluster = json!({"metadata": {"name": "c"}, "spec": {}, "status": status});
        let mut record = cluster_records(&[cluster], &[]).remove(0);
        record.works = works;
        record.failing_works = failing;
        record
    }

    #[test]
    fn the_worst_state_wins() {
        let connected = json!({"connected": true});
        assert_eq!(
            tile_state(&record(connected.clone(), 3, 0), 0).0,
            TileState::Healthy
        );
        assert_eq!(
            tile_state(&record(connected.clone(), 3, 0), 1).0,
            TileState::Drifted
        );
        let (state, text) = tile_state(&record(connected, 3, 2), 1);
        assert_eq!(
            (state, text.as_str()),
            (TileState::Failing, "2 of 3 failing")
        );
        let (state, text) = tile_state(
            &record(
                json!({"connected": false, "disconnectReason": "LeaseExpired"}),
                3,
                2,
            ),
            1,
        );
        assert_eq!(
            (state, text.as_str()),
            (TileState::Disconnected, "LeaseExpired")
        );
        assert_eq!(
            tile_state(&record(json!({"connected": "yes"}), 0, 0), 0).0,
            TileState::Unreadable
        );
    }

    #[test]
    fn only_uncorrected_drift_counts() {
        let work = |corrected: serde_json::Value| {
            WorkEntry::from_raw(json!({
                "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWork",
                "metadata": {"name": "w", "namespace": "c"},
                "spec": {"workload": {"manifests": []}},
                "status": {"conditions": [], "resourceStatus": {"manifests": [{
                    "resourceMeta": {"ordinal": 0, "group": "", "version": "v1", "kind": "ConfigMap",
                                     "resource": "configmaps", "name": "x", "namespace": "d"},
                    "conditions": [],
                    "drift": {"fields": [{"pointer": "/data/a", "hubValue": "1", "spokeValue": "2",
                                          "firstSeenTime": "2026-11-23T17:00:00Z",
                                          "correctedTime": corrected}]}
                }]}}
            }))
        };
        let open = work(serde_json::Value::Null);
        assert!(open.typed.is_ok(), "{:?}", open.typed);
        assert!(has_open_drift(&open));
        assert!(!has_open_drift(&work(json!("2026-11-23T17:01:00Z"))));
        assert_eq!(drifted_per_cluster(&[open]).get("c"), Some(&1));
    }
}
