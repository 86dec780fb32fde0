//! kubectl-style three-way merge for the `Update` strategy: what the object
//! should become given the manifest, the live object and the last-applied
//! manifest, and the JSON merge patch that gets it there.
//!
//! Lists merge by key when the API server's schema says so, else by
//! Metacontroller's conventions for schema-less lists, else are replaced.

use serde_json::{Map, Value};

use super::equality::values_equal;
use super::list_items::{ListSchema, find_item, list_keys, names};

/// The object `kubectl apply` would produce (seed 004). Fields in `desired`
/// take desired's value (objects merged recursively; a `null` deletes);
/// fields absent from desired but present in `last_applied` are removed;
/// fields in neither keep the live value. Lists keyed by the schema
/// ([`ListKind::Map`]) or, for [`ListKind::Unknown`], by a conventional key
/// shared by desired, live and last-applied items merge item by item:
/// desired items merge with the live and last-applied items of the same
/// key, items in last-applied but not desired are removed, live-only items
/// never applied by us (e.g. a sidecar) are kept. Live order is preserved
/// and new items are appended, so nobody fights over order. Other lists are
/// replaced by desired's. Never fails.
pub fn three_way_merge(
    last_applied: Option<&Value>,
    desired: &Value,
    live: &Value,
    schema: &dyn ListSchema,
) -> Value {
    Merger {
        schema,
        path: Vec::new(),
    }
    .value(last_applied, desired, Some(live))
}

struct Merger<'s> {
    schema: &'s dyn ListSchema,
    path: Vec<String>,
}

impl Merger<'_> {
    fn value(&mut self, last: Option<&Value>, desired: &Value, live: Option<&Value>) -> Value {
        match (desired, live) {
            (Value::Object(d), Some(Value::Object(l))) => {
                Value::Object(self.object(last.and_then(Value::as_object), d, l))
            }
            (Value::Array(d), Some(Value::Array(l))) => {
                self.list(last.and_then(Value::as_array).map(Vec::as_slice), d, l)
            }
            _ => without_nulls(desired),
        }
    }

    fn object(
        &mut self,
        last: Option<&Map<String, Value>>,
        desired: &Map<String, Value>,
        live: &Map<String, Value>,
    ) -> Map<String, Value> {
        let mut out = Map::new();
        for (k, l) in live {
            match desired.get(k) {
                Some(Value::Null) => {}
                Some(d) => {
                    self.path.push(k.clone());
                    let merged = self.value(last.and_then(|m| m.get(k)), d, Some(l));
                    self.path.pop();
                    out.insert(k.clone(), merged);
                }
                None if last.is_some_and(|m| m.contains_key(k)) => {}
                None => {
                    out.insert(k.clone(), l.clone());
                }
            }
        }
        for (k, d) in desired {
            if !live.contains_key(k) && !d.is_null() {
                out.insert(k.clone(), without_nulls(d));
            }
        }
        out
    }

    fn list(&mut self, last: Option<&[Value]>, desired: &[Value], live: &[Value]) -> Value {
        let last = last.unwrap_or_default();
        let Some(keys) = list_keys(self.schema, &self.path, &[desired, live, last]) else {
            return without_nulls(&Value::Array(desired.to_vec()));
        };
        let mut used = vec![false; live.len()];
        let mut match_of = vec![None; desired.len()];
        for (di, d) in desired.iter().enumerate() {
            if let Some(li) = find_item(d, live, &used, &keys) {
                used[li] = true;
                match_of[di] = Some(li);
            }
        }
        self.path.push("[]".to_string());
        let mut out = Vec::with_capacity(live.len() + desired.len());
        for (li, l) in live.iter().enumerate() {
            if let Some(di) = match_of.iter().position(|m| *m == Some(li)) {
                let d = &desired[di];
                let last_item = find_item(d, last, &[], &keys).map(|i| &last[i]);
                out.push(self.value(last_item, d, Some(l)));
            } else if !last.iter().any(|a| names(a, l, &keys)) {
                out.push(l.clone());
            }
        }
        for (d, m) in desired.iter().zip(&match_of) {
            if m.is_none() {
                out.push(without_nulls(d));
            }
        }
        self.path.pop();
        Value::Array(out)
    }
}

/// A desired value with `null` members dropped: `null` means "unset", and
/// the API server would drop them anyway.
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// RFC 7386 JSON merge patch that turns `live` into `merged`; None when they
/// are equal. Differing lists are sent whole; fields equal in both are not
/// sent, so untouched immutable fields (a Service's clusterIP, a Job's
/// selector) never appear. Numbers compare by value (`1` equals `1.0`).
pub fn merge_patch(live: &Value, merged: &Value) -> Option<Value> {
    let (Value::Object(l), Value::Object(m)) = (live, merged) else {
        return (!values_equal(live, merged)).then(|| merged.clone());
    };
    let mut patch = Map::new();
    for (k, mv) in m {
        let change = match l.get(k) {
            Some(lv) => merge_patch(lv, mv),
            None => Some(mv.clone()),
        };
        if let Some(change) = change {
            patch.insert(k.clone(), change);
        }
    }
    for k in l.keys().filter(|k| !m.contains_key(*k)) {
        patch.insert(k.clone(), Value::Null);
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::tests::arb_json;
    use crate::list_items::{ListKind, NoSchema};
    use proptest::prelude::*;
    use serde_json::json;

    fn containers_by_name(path: &[String]) -> ListKind {
        if path.last().is_some_and(|p| p == "containers") {
            ListKind::Map(vec!["name".into()])
        } else {
            ListKind::Atomic
        }
    }

    /// RFC 7386 section 2, to check patches against.
    fn apply_merge_patch(target: &Value, patch: &Value) -> Value {
        let Value::Object(p) = patch else {
            return patch.clone();
        };
        let mut out = match target {
            Value::Object(t) => t.clone(),
            _ => Map::new(),
        };
        for (k, v) in p {
            if v.is_null() {
                out.remove(k);
            } else {
                let next = apply_merge_patch(out.get(k).unwrap_or(&Value::Null), v);
                out.insert(k.clone(), next);
            }
        }
        Value::Object(out)
    }

    struct Row {
        name: &'static str,
        last: Option<Value>,
        desired: Value,
        live: Value,
        schema: &'static dyn ListSchema,
        expected: Value,
    }

    /// One row per row of seed 004's tables (primitive, map, list).
    fn seed_004_rows() -> Vec<Row> {
        let by_name: &'static dyn ListSchema = &containers_by_name;
        vec![
            Row {
                name: "primitive in config and live: set to config",
                last: Some(json!({"a": 1})),
                desired: json!({"a": 2}),
                live: json!({"a": 1}),
                schema: &NoSchema,
                expected: json!({"a": 2}),
            },
            Row {
                name: "primitive in config not live: set to config",
                last: Some(json!({})),
                desired: json!({"a": 2}),
                live: json!({}),
                schema: &NoSchema,
                expected: json!({"a": 2}),
            },
            Row {
                name: "primitive not in config, in last applied: clear",
                last: Some(json!({"a": 1})),
                desired: json!({}),
                live: json!({"a": 1}),
                schema: &NoSchema,
                expected: json!({}),
            },
            Row {
                name: "primitive in neither: keep live",
                last: Some(json!({})),
                desired: json!({}),
                live: json!({"a": 1}),
                schema: &NoSchema,
                expected: json!({"a": 1}),
            },
            Row {
                name: "map key in config and live: compare subfields",
                last: Some(json!({"m": {"x": 0}})),
                desired: json!({"m": {"x": 1}}),
                live: json!({"m": {"x": 0, "y": 2}}),
                schema: &NoSchema,
                expected: json!({"m": {"x": 1, "y": 2}}),
            },
            Row {
                name: "map key in config not live: set",
                last: None,
                desired: json!({"m": {"x": 1}}),
                live: json!({}),
                schema: &NoSchema,
                expected: json!({"m": {"x": 1}}),
            },
            Row {
                name: "map key not in config, in last applied: delete",
                last: Some(json!({"m": {"x": 1}})),
                desired: json!({}),
                live: json!({"m": {"x": 1, "y": 2}}),
                schema: &NoSchema,
                expected: json!({}),
            },
            Row {
                name: "map key in neither: keep live",
                last: Some(json!({})),
                desired: json!({}),
                live: json!({"m": {"x": 1}}),
                schema: &NoSchema,
                expected: json!({"m": {"x": 1}}),
            },
            Row {
                name: "list without patch strategy: replaced",
                last: Some(json!({"args": ["-a"]})),
                desired: json!({"args": ["-b", "-c"]}),
                live: json!({"args": ["-a", "-z"]}),
                schema: &NoSchema,
                expected: json!({"args": ["-b", "-c"]}),
            },
            Row {
                name: "atomic list of objects: replaced",
                last: None,
                desired: json!({"containers": [{"name": "a"}]}),
                live: json!({"containers": [{"name": "a", "x": 1}, {"name": "b"}]}),
                schema: &|_: &[String]| ListKind::Atomic,
                expected: json!({"containers": [{"name": "a"}]}),
            },
            Row {
                name: "list with merge key: items added, updated and deleted by key",
                last: Some(json!({"containers": [
                    {"name": "app", "image": "v1"}, {"name": "old", "image": "o"}
                ]})),
                desired: json!({"containers": [
                    {"name": "app", "image": "v2"}, {"name": "new", "image": "n"}
                ]}),
                live: json!({"containers": [
                    {"name": "old", "image": "o"},
                    {"name": "app", "image": "v1", "imagePullPolicy": "Always"}
                ]}),
                schema: by_name,
                expected: json!({"containers": [
                    {"name": "app", "image": "v2", "imagePullPolicy": "Always"},
                    {"name": "new", "image": "n"}
                ]}),
            },
            Row {
                name: "list of primitives: replaced (no merging of scalars)",
                last: Some(json!({"finalizers": ["a"]})),
                desired: json!({"finalizers": ["b"]}),
                live: json!({"finalizers": ["a", "c"]}),
                schema: &NoSchema,
                expected: json!({"finalizers": ["b"]}),
            },
        ]
    }

    #[test]
    fn every_row_of_the_kubectl_merge_tables() {
        for row in seed_004_rows() {
            let merged = three_way_merge(row.last.as_ref(), &row.desired, &row.live, row.schema);
            assert_eq!(merged, row.expected, "{}", row.name);
        }
    }

    #[test]
    fn a_sidecar_added_by_another_actor_survives_with_a_schema() {
        let last = json!({"spec": {"containers": [{"name": "app", "image": "v1"}]}});
        let desired = json!({"spec": {"containers": [{"name": "app", "image": "v2"}]}});
        let live = json!({"spec": {"containers": [
            {"name": "app", "image": "v1"}, {"name": "sidecar", "image": "proxy"}
        ]}});
        let merged = three_way_merge(Some(&last), &desired, &live, &containers_by_name);
        assert_eq!(
            merged,
            json!({"spec": {"containers": [
                {"name": "app", "image": "v2"}, {"name": "sidecar", "image": "proxy"}
            ]}})
        );
    }

    #[test]
    fn a_sidecar_added_by_another_actor_survives_by_convention_without_a_schema() {
        let last = json!({"spec": {"containers": [{"name": "app", "image": "v1"}]}});
        let desired = json!({"spec": {"containers": [{"name": "app", "image": "v2"}]}});
        let live = json!({"spec": {"containers": [
            {"name": "sidecar", "image": "proxy"}, {"name": "app", "image": "v1"}
        ]}});
        let merged = three_way_merge(Some(&last), &desired, &live, &NoSchema);
        assert_eq!(
            merged,
            json!({"spec": {"containers": [
                {"name": "sidecar", "image": "proxy"}, {"name": "app", "image": "v2"}
            ]}})
        );
    }

    #[test]
    fn a_field_removed_from_the_manifest_since_last_apply_is_removed() {
        let last = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
        let desired = json!({"metadata": {"labels": {"a": "1"}}});
        let live = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
        let merged = three_way_merge(Some(&last), &desired, &live, &NoSchema);
        assert_eq!(merged, json!({"metadata": {"labels": {"a": "1"}}}));
        assert_eq!(
            merge_patch(&live, &merged),
            Some(json!({"metadata": {"labels": {"b": null}}}))
        );
    }

    #[test]
    fn a_field_set_by_another_actor_is_kept() {
        let last = json!({"metadata": {"labels": {"a": "1"}}});
        let desired = last.clone();
        let live = json!({"metadata": {"labels": {"a": "1", "team": "x"}}});
        let merged = three_way_merge(Some(&last), &desired, &live, &NoSchema);
        assert_eq!(merged, live);
        assert_eq!(merge_patch(&live, &merged), None);
    }

    #[test]
    fn a_null_in_the_manifest_deletes_the_field() {
        let merged = three_way_merge(
            None,
            &json!({"a": null, "b": {"c": null}}),
            &json!({"a": 1}),
            &NoSchema,
        );
        assert_eq!(merged, json!({"b": {}}));
    }

    #[test]
    fn an_untouched_immutable_field_is_not_in_the_patch() {
        let last = json!({"spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}});
        let desired = json!({"spec": {"ports": [{"port": 8080}], "selector": {"app": "web"}}});
        let live = json!({"spec": {
            "clusterIP": "10.0.0.7",
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
            "selector": {"app": "web"}
        }});
        let merged = three_way_merge(Some(&last), &desired, &live, &NoSchema);
        let patch = merge_patch(&live, &merged).expect("the port changed");
        assert_eq!(patch, json!({"spec": {"ports": [{"port": 8080}]}}));
    }

    #[test]
    fn a_schema_key_left_out_by_the_manifest_still_matches_the_defaulted_item() {
        let schema = |p: &[String]| {
            if p.last().is_some_and(|s| s == "ports") {
                ListKind::Map(vec!["port".into(), "protocol".into()])
            } else {
                ListKind::Unknown
            }
        };
        let desired = json!({"ports": [{"port": 80, "name": "http"}]});
        let live =
            json!({"ports": [{"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "UDP"}]});
        let merged = three_way_merge(None, &desired, &live, &schema);
        assert_eq!(
            merged,
            json!({"ports": [
                {"port": 80, "protocol": "TCP", "name": "http"},
                {"port": 80, "protocol": "UDP"}
            ]})
        );
    }

    #[test]
    fn merge_patch_of_equal_values_is_none_and_numbers_compare_by_value() {
        assert_eq!(merge_patch(&json!({"a": [1]}), &json!({"a": [1]})), None);
        assert_eq!(merge_patch(&json!({"a": 1}), &json!({"a": 1.0})), None);
        assert_eq!(
            merge_patch(&json!({"a": [1, 2]}), &json!({"a": [1]})),
            Some(json!({"a": [1]}))
        );
        assert_eq!(merge_patch(&json!(1), &json!("x")), Some(json!("x")));
    }

    /// Objects shaped like manifests: random fields plus a keyed list with
    /// unique names, so both merge paths get exercised.
    fn arb_manifest() -> impl Strategy<Value = Value> {
        let item =
            ("[abc]", arb_json()).prop_map(|(name, extra)| json!({"name": name, "x": extra}));
        (
            prop::collection::btree_map("[a-e]", arb_json(), 0..4),
            prop::option::of(prop::collection::vec(item, 0..4)),
        )
            .prop_map(|(fields, items)| {
                let mut obj: Map<String, Value> = fields.into_iter().collect();
                if let Some(mut items) = items {
                    items.sort_by_key(|i| i["name"].to_string());
                    items.dedup_by_key(|i| i["name"].to_string());
                    obj.insert("items".into(), Value::Array(items));
                }
                Value::Object(obj)
            })
    }

    proptest! {
        #[test]
        fn merging_twice_changes_nothing(
            last in prop::option::of(arb_manifest()),
            desired in arb_manifest(),
            live in arb_manifest(),
        ) {
            let merged = three_way_merge(last.as_ref(), &desired, &live, &NoSchema);
            let again = three_way_merge(Some(&desired), &desired, &merged, &NoSchema);
            prop_assert_eq!(merge_patch(&merged, &again), None);
        }

        #[test]
        fn the_patch_turns_live_into_merged(
            last in prop::option::of(arb_manifest()),
            desired in arb_manifest(),
            live in arb_manifest(),
        ) {
            let merged = three_way_merge(last.as_ref(), &desired, &live, &NoSchema);
            let patched = match merge_patch(&live, &merged) {
                Some(patch) => apply_merge_patch(&live, &patch),
                None => live.clone(),
            };
            prop_assert_eq!(patched, merged);
        }
    }
}
