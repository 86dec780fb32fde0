//! The fleet page: every cluster a tile in a grid, coloured by state, with
//! a legend of counts and a filter by cluster set and label selector.

use std::collections::{BTreeMap, BTreeSet};

use ferry_api::contract::CLUSTER_SET_LABEL;
use serde_json::Value;

use super::escape::{escape, url_component};
use super::selector::Selector;
use super::tile::{TileState, drifted_per_cluster, tile_state};
use crate::cluster_rows::cluster_records;
use crate::work_rows::WorkEntry;

/// The fleet page's filter, from its query string.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct FleetFilter {
    /// Only clusters whose cluster-set label has this value (empty: all).
    #[serde(default)]
    pub set: String,
    /// Only clusters whose labels match this selector (empty: all).
    #[serde(default)]
    pub selector: String,
}

/// The labels of a ManagedCluster as stored.
fn labels_of(cluster: &Value) -> BTreeMap<String, String> {
    cluster["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// The fleet page's content: filter form, legend and tiles of `clusters`
/// (with their `works`) that pass `filter`. A selector that does not parse
/// is reported in place of the tiles.
pub fn fleet_body(clusters: &[Value], works: &[WorkEntry], filter: &FleetFilter) -> String {
    let sets: BTreeSet<String> = clusters
        .iter()
        .filter_map(|c| labels_of(c).remove(CLUSTER_SET_LABEL))
        .collect();
    let mut out = String::from("<h1>Fleet</h1>");
    out.push_str(r#"<form class="filter" method="get" action="/" role="search">"#);
    out.push_str(r#"<label>Cluster set <select name="set"><option value="">all</option>"#);
    for set in &sets {
        let selected = if *set == filter.set { " selected" } else { "" };
        out.push_str(&format!(
            r#"<option value="{v}"{selected}>{v}</option>"#,
            v = escape(set)
        ));
    }
    out.push_str(&format!(
        concat!(
            "</select></label> <label>Labels <input name=\"selector\" value=\"{}\" ",
            "placeholder=\"env=prod,tier!=db\" size=\"28\"></label> ",
            "<button type=\"submit\">Filter</button></form>"
        ),
        escape(&filter.selector)
    ));
    let selector = match Selector::parse(&filter.selector) {
        Ok(selector) => selector,
        Err(error) => {
            out.push_str(&format!(
                r#"<p class="banner error" role="alert">{}</p>"#,
                escape(&error.to_string())
            ));
            return out;
        }
    };
    let drifted = drifted_per_cluster(works);
    let records = cluster_records(clusters, works);
    let mut counts: BTreeMap<TileState, usize> = BTreeMap::new();
    let mut tiles = String::new();
    let mut shown = 0usize;
    for (record, cluster) in records.iter().zip(sorted_by_name(clusters)) {
        let labels = labels_of(cluster);
        let in_set = filter.set.is_empty()
            || labels.get(CLUSTER_SET_LABEL).map(String::as_str) == Some(filter.set.as_str());
        if !in_set || !selector.matches(&labels) {
            continue;
        }
        shown += 1;
        let (state, why) = tile_state(
            record,
            drifted.get(record.name.as_str()).copied().unwrap_or(0),
        );
        *counts.entry(state).or_insert(0) += 1;
        tiles.push_str(&format!(
            concat!(
                "<li><a class=\"tile {class}\" href=\"/clusters/{href}\" data-cluster=\"{name}\" ",
                "data-state=\"{class}\" title=\"{name}: {class}, {why}\">",
                "<span class=\"name\">{name}</span><span class=\"why\">{why}</span></a></li>"
            ),
            class = state.class(),
            href = escape(&url_component(&record.name)),
            name = escape(&record.name),
            why = escape(&why),
        ));
    }
    out.push_str(r#"<ul class="legend" aria-label="Clusters by state">"#);
    for state in TileState::ALL {
        out.push_str(&format!(
            r#"<li><span class="swatch {c}"></span>{c} <strong data-count="{c}">{n}</strong></li>"#,
            c = state.class(),
            n = counts.get(&state).copied().unwrap_or(0)
        ));
    }
    out.push_str(&format!(
        r#"<li>shown <strong data-count="shown">{shown}</strong> of {}</li></ul>"#,
        clusters.len()
    ));
    if shown == 0 {
        out.push_str(if clusters.is_empty() {
            "<p>No clusters on the hub (or none you may list).</p>"
        } else {
            "<p>No cluster matches the filter.</p>"
        });
    } else {
        out.push_str(r#"<ul class="grid" aria-label="Clusters">"#);
        out.push_str(&tiles);
        out.push_str("</ul>");
    }
    out
}

/// `clusters` in the order [`cluster_records`] returns its records (by
/// name), so the two can be zipped.
fn sorted_by_name(clusters: &[Value]) -> Vec<&Value> {
    let mut sorted: Vec<&Value> = clusters.iter().collect();
    sorted.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .cmp(b["metadata"]["name"].as_str().unwrap_or_default())
    });
    sorted
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(name: &str, set: &str, connected: bool) -> Value {
        json!({"metadata": {"name": name, "labels": {CLUSTER_SET_LABEL: set, "env": "prod"}},
               "spec": {}, "status": {"connected": connected}})
    }

    fn failing_work(namespace: &str) -> WorkEntry {
        WorkEntry::from_raw(json!({
            "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWork",
            "metadata": {"name": "w", "namespace": namespace},
            "spec": {"workload": {"manifests": []}},
            "status": {"conditions": [{"type": "Applied", "status": "False", "reason": "Failed",
                                       "message": "", "observedGeneration": 1,
                                       "lastTransitionTime": "2026-11-23T17:00:00Z"}]}
        }))
    }

    #[test]
    fn tiles_are_coloured_by_state_and_link_to_their_cluster() {
        let clusters = [
            cluster("b", "blue", true),
            cluster("a", "blue", true),
            cluster("<c>", "red", false),
        ];
        let html = fleet_body(&clusters, &[failing_work("a")], &FleetFilter::default());
        assert!(
            html.contains(r#"href="/clusters/a" data-cluster="a" data-state="failing""#),
            "{html}"
        );
        assert!(
            html.contains(r#"data-cluster="b" data-state="healthy""#),
            "{html}"
        );
        assert!(
            html.contains(
                r#"href="/clusters/%3Cc%3E" data-cluster="&lt;c&gt;" data-state="disconnected""#
            ),
            "{html}"
        );
        assert!(!html.contains("<c>"), "names are escaped: {html}");
        assert!(html.contains(r#"data-count="failing">1<"#), "{html}");
        assert!(html.contains(r#"data-count="shown">3<"#), "{html}");
        // Sorted by name: a before b.
        assert!(html.find(r#"data-cluster="a""#) < html.find(r#"data-cluster="b""#));
    }

    #[test]
    fn the_filter_narrows_by_set_and_selector() {
        let clusters = [cluster("a", "blue", true), cluster("b", "red", true)];
        let by_set = FleetFilter {
            set: "red".into(),
            selector: String::new(),
        };
        let html = fleet_body(&clusters, &[], &by_set);
        assert!(html.contains(r#"data-cluster="b""#) && !html.contains(r#"data-cluster="a""#));
        assert!(html.contains(r#"<option value="red" selected>"#), "{html}");
        let by_label = FleetFilter {
            set: String::new(),
            selector: "env!=prod".into(),
        };
        assert!(fleet_body(&clusters, &[], &by_label).contains("No cluster matches the filter."));
        let bad = FleetFilter {
            set: String::new(),
            selector: "env in (x)".into(),
        };
        assert!(fleet_body(&clusters, &[], &bad).contains("cannot read the label selector"));
    }
}
