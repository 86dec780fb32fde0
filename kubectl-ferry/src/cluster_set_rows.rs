//! `get clustersets`: one row per ManagedClusterSet: how it selects clusters,
//! how many it holds, and whether the hub reports it empty.

use serde_json::Value;

use crate::table::render;

/// The `get clustersets` table of `sets` (raw objects, so a field this build
/// does not know never fails the list). A set the hub has not counted yet
/// shows `-` for CLUSTERS and EMPTY.
pub fn cluster_sets_table(sets: &[Value]) -> String {
    let mut rows: Vec<Vec<String>> = sets
        .iter()
        .map(|set| {
            let name = set["metadata"]["name"].as_str().unwrap_or("").to_string();
            let selector = &set["spec"]["clusterSelector"];
            let selector = match selector["selectorType"].as_str() {
                Some("LabelSelector") => match &selector["labelSelector"] {
                    Value::Object(s) if s.values().all(is_empty) => {
                        "LabelSelector (every cluster)".to_string()
                    }
                    Value::Null => "LabelSelector (none)".to_string(),
                    s => format!("LabelSelector {s}"),
                },
                _ => "ExclusiveClusterSetLabel".to_string(),
            };
            let status = &set["status"];
            let clusters = status["clusterCount"]
                .as_i64()
                .map_or_else(|| "-".to_string(), |c| c.to_string());
            let empty = status["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "ClusterSetEmpty"))
                .and_then(|c| c["status"].as_str())
                .unwrap_or("-")
                .to_string();
            vec![name, selector, clusters, empty]
        })
        .collect();
    rows.sort();
    render(&["name", "selector", "clusters", "empty"], rows)
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(o) => o.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_set_shows_its_selector_count_and_emptiness() {
        let sets = [
            json!({"metadata": {"name": "global"},
                   "spec": {"clusterSelector": {"selectorType": "LabelSelector", "labelSelector": {}}},
                   "status": {"clusterCount": 3, "conditions": [{"type": "ClusterSetEmpty", "status": "False"}]}}),
            json!({"metadata": {"name": "default"}, "spec": {"clusterSelector": {}},
                   "status": {"clusterCount": 0, "conditions": [{"type": "ClusterSetEmpty", "status": "True"}]}}),
            json!({"metadata": {"name": "prod"},
                   "spec": {"clusterSelector": {"selectorType": "LabelSelector",
                            "labelSelector": {"matchLabels": {"env": "prod"}}}}}),
        ];
        let text = cluster_sets_table(&sets);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(
            lines[0].starts_with("NAME") && lines[0].contains("SELECTOR"),
            "{text}"
        );
        assert!(
            lines[1].starts_with("default")
                && lines[1].contains("ExclusiveClusterSetLabel")
                && lines[1].ends_with("True"),
            "{text}"
        );
        assert!(
            lines[2].starts_with("global")
                && lines[2].contains("(every cluster)")
                && lines[2].contains(" 3 "),
            "{text}"
        );
        assert!(
            lines[3].starts_with("prod")
                && lines[3].contains(r#"{"matchLabels":{"env":"prod"}}"#)
                && lines[3].ends_with("-"),
            "{text}"
        );
    }
}
