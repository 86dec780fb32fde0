//! The maintenance windows of the chosen clusters, as of a reconcile's
//! `now`: which are closed, until when, and the status condition naming
//! the clusters a rollout holds for their window. Pure; the rollout plan
//! holds the clusters, the decision looks again at the first opening.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ferry_api::manifest_work::Condition;
use ferry_fleet_semantics::maintenance_windows::{WindowState, parse_windows, state_at};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::conditions::condition_since;
use ferry_api::contract::MAINTENANCE_WINDOWS_ANNOTATION;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_semantics::contract::{KUBE_TIME_FORMAT, WAITING_FOR_MAINTENANCE_WINDOW};
use ferry_semantics::text::first_few;

/// Why a cluster is closed for new revisions now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closed {
    /// Outside its windows; the next one opens then (None: none opens
    /// within a year and a bit).
    Until(Option<Timestamp>),
    /// Its windows annotation cannot be used: closed until it is fixed
    /// (safe: nothing new is written to a cluster whose freeze is unknown).
    Invalid(String),
}

impl Closed {
    /// When the cluster opens by time alone, if it does. Never fails.
    pub fn opens_at(&self) -> Option<Timestamp> {
        match self {
            Closed::Until(at) => *at,
            Closed::Invalid(_) => None,
        }
    }
}

/// The clusters of `clusters` whose maintenance windows are closed at
/// `now`. A cluster without the annotation is always open. Each distinct
/// annotation is evaluated once, however many clusters share it. Never
/// fails: an unusable annotation closes its cluster, with the reason.
pub fn closed_clusters(
    clusters: &BTreeMap<String, Arc<ManagedCluster>>,
    now: Timestamp,
) -> BTreeMap<String, Closed> {
    let mut seen: HashMap<&str, Option<Closed>> = HashMap::new();
    clusters
        .iter()
        .filter_map(|(name, cluster)| {
            let text = cluster.annotations().get(MAINTENANCE_WINDOWS_ANNOTATION)?;
            let state = seen
                .entry(text.as_str())
                .or_insert_with(|| match parse_windows(text) {
                    Err(error) => Some(Closed::Invalid(error.to_string())),
                    Ok(windows) => match state_at(&windows, now) {
                        WindowState::Open { .. } => None,
                        WindowState::Closed { opens_at } => Some(Closed::Until(opens_at)),
                    },
                })
                .clone()?;
            Some((name.clone(), state))
        })
        .collect()
}

/// One waiting cluster for a message: `name until <time>`, `name (no
/// window opens within a year)` or `name (invalid windows: why)`.
fn waiting_entry(cluster: &str, closed: &Closed) -> String {
    match closed {
        Closed::Until(Some(at)) => format!("{cluster} until {}", at.strftime(KUBE_TIME_FORMAT)),
        Closed::Until(None) => format!("{cluster} (no window opens within a year)"),
        Closed::Invalid(why) => format!("{cluster} (invalid windows: {why})"),
    }
}

/// The `WaitingForMaintenanceWindow` condition for the clusters `waiting`
/// (those the rollout holds now), bounded: a count and the first few, the
/// soonest opening first. None when none wait (the condition is absent
/// then). Never fails.
pub fn waiting_condition(
    waiting: &[(String, Closed)],
    generation: i64,
    previous: &[Condition],
    now: Timestamp,
) -> Option<Condition> {
    if waiting.is_empty() {
        return None;
    }
    let mut sorted: Vec<&(String, Closed)> = waiting.iter().collect();
    // Soonest first; a cluster that opens by time alone before one that
    // does not.
    sorted.sort_by_key(|(name, closed)| (closed.opens_at().is_none(), closed.opens_at(), name));
    let entries: Vec<String> = sorted.iter().map(|(c, w)| waiting_entry(c, w)).collect();
    let invalid = waiting.iter().any(|(_, c)| matches!(c, Closed::Invalid(_)));
    Some(condition_since(
        WAITING_FOR_MAINTENANCE_WINDOW,
        true,
        if invalid {
            "InvalidMaintenanceWindows"
        } else {
            "OutsideMaintenanceWindow"
        },
        format!(
            "{} clusters wait for their maintenance window before the new revision is written: {}",
            waiting.len(),
            first_few(&entries, ", ")
        ),
        generation,
        previous,
        now,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(name: &str, windows: Option<&str>) -> (String, Arc<ManagedCluster>) {
        let annotations = windows.map_or(json!({}), |w| json!({MAINTENANCE_WINDOWS_ANNOTATION: w}));
        let c = serde_json::from_value(json!({"apiVersion": "cluster.ferry.dev/v1alpha1",
            "kind": "ManagedCluster", "metadata": {"name": name, "annotations": annotations},
            "spec": {}}))
        .expect("cluster");
        (name.to_string(), Arc::new(c))
    }

    const NIGHTLY: &str = r#"[{"schedule":"0 2 * * *","duration":"1h"}]"#;

    #[test]
    fn closed_invalid_and_open_clusters_are_told_apart() {
        let clusters: BTreeMap<_, _> = [
            cluster("always", None),
            cluster("nightly", Some(NIGHTLY)),
            cluster("broken", Some("[{")),
        ]
        .into_iter()
        .collect();
        let at_noon = closed_clusters(&clusters, "2026-11-28T12:00:00Z".parse().expect("time"));
        assert_eq!(at_noon.len(), 2);
        assert_eq!(
            at_noon["nightly"],
            Closed::Until(Some("2026-11-29T02:00:00Z".parse().expect("time")))
        );
        assert!(
            matches!(&at_noon["broken"], Closed::Invalid(why) if why.contains("not a JSON list"))
        );
        let at_two = closed_clusters(&clusters, "2026-11-29T02:00:00Z".parse().expect("time"));
        assert_eq!(at_two.keys().collect::<Vec<_>>(), ["broken"]);
    }

    #[test]
    fn the_condition_names_the_first_few_soonest_first_and_stays_small() {
        let waiting: Vec<(String, Closed)> = (0..10_000)
            .map(|i| {
                let at = Timestamp::from_second(1_800_000_000 - i).expect("time");
                (format!("cluster-{i:05}"), Closed::Until(Some(at)))
            })
            .chain([("odd".to_string(), Closed::Invalid("why".into()))])
            .collect();
        let c = waiting_condition(&waiting, 3, &[], Timestamp::UNIX_EPOCH).expect("clusters wait");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "InvalidMaintenanceWindows")
        );
        assert!(
            c.message.starts_with("10001 clusters wait"),
            "{}",
            c.message
        );
        assert!(
            c.message.contains("first 10: cluster-09999 until"),
            "{}",
            c.message
        );
        assert!(c.message.len() < 1024, "{}", c.message.len());
        assert_eq!(waiting_condition(&[], 3, &[], Timestamp::UNIX_EPOCH), None);
    }

    #[test]
    fn the_example_annotation_parses() {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../examples/maintenance-windows.yaml"),
        )
        .expect("the example");
        let patch: serde_json::Value = serde_yaml::from_str(&text).expect("yaml");
        let windows = patch["metadata"]["annotations"][MAINTENANCE_WINDOWS_ANNOTATION]
            .as_str()
            .expect("the annotation");
        let clusters: BTreeMap<_, _> = [cluster("cluster-a", Some(windows))].into_iter().collect();
        // Saturday 2026-11-28 03:00 Berlin: open.
        assert!(
            closed_clusters(&clusters, "2026-11-28T02:00:00Z".parse().expect("time")).is_empty()
        );
    }
}
