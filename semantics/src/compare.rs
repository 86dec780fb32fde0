//! "Would a write change anything?" — so the steady state sends zero writes
//! to the spoke.

use serde_json::Value;

use super::equality::values_equal;
use super::list_items::{ListSchema, find_item, list_keys};

/// Whether every field in `body` is present in `live` with an equal value.
/// Objects compare recursively and extra live fields (server defaults,
/// `status`, `managedFields`, `resourceVersion`) don't matter; a `null` in
/// the body means "absent". Lists compare item by item in order with the
/// same length — except lists keyed by the schema or by a conventional merge
/// key, whose items are matched by key, so extra live items (a sidecar) and
/// order don't count. Numbers compare by value. Never fails.
pub fn is_subset(body: &Value, live: &Value, schema: &dyn ListSchema) -> bool {
    subset(body, live, schema, &mut Vec::new())
}

fn subset(body: &Value, live: &Value, schema: &dyn ListSchema, path: &mut Vec<String>) -> bool {
    match (body, live) {
        (Value::Object(b), Value::Object(l)) => b.iter().all(|(k, bv)| match l.get(k) {
            None => bv.is_null(),
            Some(lv) => {
                path.push(k.clone());
                let ok = subset(bv, lv, schema, path);
                path.pop();
                ok
            }
        }),
        (Value::Array(b), Value::Array(l)) => {
            let keys = list_keys(schema, path, &[b, l]);
            path.push("[]".to_string());
            let ok = match keys {
                Some(keys) => {
                    let mut used = vec![false; l.len()];
                    b.iter().all(|item| match find_item(item, l, &used, &keys) {
                        Some(i) => {
                            used[i] = true;
                            subset(item, &l[i], schema, path)
                        }
                        None => false,
                    })
                }
                None => {
                    b.len() == l.len()
                        && b.iter().zip(l).all(|(bi, li)| subset(bi, li, schema, path))
                }
            };
            path.pop();
            ok
        }
        _ => values_equal(body, live),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::list_items::{ListKind, NoSchema};
    use serde_json::json;

    #[test]
    fn server_added_fields_do_not_count() {
        let body = json!({"metadata": {"name": "web"}, "spec": {"replicas": 2}});
        let live = json!({
            "metadata": {"name": "web", "resourceVersion": "7", "managedFields": []},
            "spec": {"replicas": 2, "revisionHistoryLimit": 10},
            "status": {"replicas": 2}
        });
        assert!(is_subset(&body, &live, &NoSchema));
    }

    #[test]
    fn a_changed_or_missing_field_is_a_difference() {
        let live = json!({"spec": {"replicas": 2}});
        assert!(!is_subset(
            &json!({"spec": {"replicas": 3}}),
            &live,
            &NoSchema
        ));
        assert!(!is_subset(
            &json!({"spec": {"paused": true}}),
            &live,
            &NoSchema
        ));
        assert!(!is_subset(
            &json!({"spec": {"replicas": {"a": 1}}}),
            &live,
            &NoSchema
        ));
    }

    #[test]
    fn a_null_in_the_body_matches_an_absent_field() {
        assert!(is_subset(&json!({"a": null}), &json!({}), &NoSchema));
        assert!(!is_subset(&json!({"a": null}), &json!({"a": 1}), &NoSchema));
    }

    #[test]
    fn keyed_lists_ignore_extra_live_items_and_order() {
        let body = json!({"containers": [{"name": "app", "image": "v1"}]});
        let live = json!({"containers": [
            {"name": "sidecar", "image": "proxy"},
            {"name": "app", "image": "v1", "imagePullPolicy": "Always"}
        ]});
        assert!(is_subset(&body, &live, &NoSchema));
        let changed = json!({"containers": [{"name": "app", "image": "v2"}]});
        assert!(!is_subset(&changed, &live, &NoSchema));
        let missing = json!({"containers": [{"name": "other"}]});
        assert!(!is_subset(&missing, &live, &NoSchema));
    }

    #[test]
    fn atomic_lists_compare_in_order_with_the_same_length() {
        let atomic = |_: &[String]| ListKind::Atomic;
        let body = json!({"containers": [{"name": "app"}]});
        let live = json!({"containers": [{"name": "app"}, {"name": "sidecar"}]});
        assert!(!is_subset(&body, &live, &atomic));
        assert!(is_subset(
            &json!({"args": ["a", "b"]}),
            &json!({"args": ["a", "b"]}),
            &NoSchema
        ));
        assert!(!is_subset(
            &json!({"args": ["a", "b"]}),
            &json!({"args": ["b", "a"]}),
            &NoSchema
        ));
        assert!(!is_subset(
            &json!({"args": ["a"]}),
            &json!({"args": ["a", "b"]}),
            &NoSchema
        ));
        // Items of an atomic list may still carry server defaults.
        assert!(is_subset(
            &json!({"l": [{"a": 1}]}),
            &json!({"l": [{"a": 1, "default": true}]}),
            &atomic
        ));
    }

    #[test]
    fn numbers_compare_by_value() {
        assert!(is_subset(&json!({"a": 1.0}), &json!({"a": 1}), &NoSchema));
        assert!(!is_subset(&json!({"a": 1.5}), &json!({"a": 1}), &NoSchema));
        assert!(values_equal(
            &json!({"a": [1, 2.0]}),
            &json!({"a": [1.0, 2]})
        ));
        assert!(!values_equal(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    }
}
