//! Who owns a field of a live object, read from `metadata.managedFields`
//! (FieldsV1). Server-side apply deletes a field when its last owner stops
//! applying it; this module tells the planner when that would happen.
//!
//! FieldsV1 is a tree of objects whose keys are `f:<field>` (object member),
//! `k:<json object>` (associative-list item, by its key fields),
//! `v:<json value>` (set item), `i:<index>` (atomic-list item) and `.` (the
//! node itself). An empty object is a leaf: the manager owns that node whole.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::paths::Segment;

/// How the managers of a live object share one location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// No manager owns the node or anything below it (e.g. a server default).
    Nobody,
    /// Only our manager owns it: omitting it from an apply deletes it.
    OnlyUs,
    /// These other managers own it or something below it (we may too).
    Others(BTreeSet<String>),
}

/// Every manager (ours included) whose FieldsV1 set includes the node at
/// `ptr`, anything below it, or an ancestor owned whole (an atomic list
/// owns its items). Entries of every operation and subresource count.
/// Malformed entries are skipped; a missing `managedFields` means no owners.
pub fn owners(live: &Value, ptr: &[Segment]) -> BTreeSet<String> {
    managed_fields(live)
        .filter(|(_, fields)| reaches(fields, live, ptr))
        .map(|(manager, _)| manager.to_string())
        .collect()
}

/// Every manager whose FieldsV1 set follows `ptr` to its end: it owns the
/// node itself or something below it. Unlike [`owners`], a manager whose
/// set stops at an ancestor is left out: after another manager's `Update`
/// takes `data.a`, the creator's entry still reads `"f:data": {}` (it
/// created the map), which does not make it the writer of `data.a`.
/// Malformed entries are skipped.
pub fn exact_owners(live: &Value, ptr: &[Segment]) -> BTreeSet<String> {
    managed_fields(live)
        .filter(|(_, fields)| descend(fields, live, ptr).is_some())
        .map(|(manager, _)| manager.to_string())
        .collect()
}

/// Classifies the owners of `ptr`. An entry is ours when its manager equals
/// `our_manager`, whatever its operation: an `Update` entry left by the
/// `Update` strategy is as much ours as an `Apply` one. Never fails.
pub fn ownership(live: &Value, ptr: &[Segment], our_manager: &str) -> Ownership {
    let mut all = owners(live, ptr);
    let ours = all.remove(our_manager);
    match (ours, all.is_empty()) {
        (_, false) => Ownership::Others(all),
        (true, true) => Ownership::OnlyUs,
        (false, true) => Ownership::Nobody,
    }
}

/// Whether the live object carries any managedFields at all. Without them
/// ownership is unknown, which callers must not read as "nobody".
pub fn has_managed_fields(live: &Value) -> bool {
    live.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .is_some_and(|entries| !entries.is_empty())
}

/// The key field names of the associative-list item at `ptr`, as recorded by
/// any manager (`k:{"name":...}` → `["name"]`). Empty when no manager keyed
/// the item (atomic or set lists, or no record).
pub fn item_key_fields(live: &Value, ptr: &[Segment]) -> Vec<String> {
    let Some((Segment::Index(index), parent)) = ptr.split_last() else {
        return Vec::new();
    };
    let Some(item) = super::paths::get(live, ptr) else {
        return Vec::new();
    };
    managed_fields(live)
        .filter_map(|(_, fields)| descend(fields, live, parent))
        .filter_map(Value::as_object)
        .flat_map(|children| children.keys())
        .filter(|key| item_selector_matches(key, item, *index))
        .find_map(|key| key_object(key).map(|keys| keys.keys().cloned().collect()))
        .unwrap_or_default()
}

fn managed_fields(live: &Value) -> impl Iterator<Item = (&str, &Value)> {
    live.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let manager = entry.get("manager")?.as_str()?;
            let fields = entry.get("fieldsV1")?;
            fields.is_object().then_some((manager, fields))
        })
}

/// Whether a FieldsV1 tree reaches `ptr`: every segment found, or a leaf
/// (owned whole) met on the way.
fn reaches(fields: &Value, live: &Value, ptr: &[Segment]) -> bool {
    let mut node = fields;
    let mut live_node = Some(live);
    for (depth, seg) in ptr.iter().enumerate() {
        let Some(children) = node.as_object() else {
            return false;
        };
        if depth > 0 && children.is_empty() {
            return true;
        }
        match step(children, live_node, seg) {
            Some((next, next_live)) => {
                node = next;
                live_node = next_live;
            }
            None => return false,
        }
    }
    true
}

/// Follows `ptr` exactly through a FieldsV1 tree.
fn descend<'a>(fields: &'a Value, live: &Value, ptr: &[Segment]) -> Option<&'a Value> {
    let mut node = fields;
    let mut live_node = Some(live);
    for seg in ptr {
        let (next, next_live) = step(node.as_object()?, live_node, seg)?;
        node = next;
        live_node = next_live;
    }
    Some(node)
}

/// One step through FieldsV1 alongside the live value (list items are
/// recorded by content, so the live item is needed to find their entry).
fn step<'f, 'l>(
    children: &'f Map<String, Value>,
    live_node: Option<&'l Value>,
    seg: &Segment,
) -> Option<(&'f Value, Option<&'l Value>)> {
    match seg {
        Segment::Key(k) => {
            let next = children.get(&format!("f:{k}"))?;
            Some((next, live_node.and_then(|l| l.get(k))))
        }
        Segment::Index(i) => {
            let item = live_node?.as_array()?.get(*i)?;
            let next = children
                .iter()
                .find(|(key, _)| item_selector_matches(key, item, *i))
                .map(|(_, v)| v)?;
            Some((next, Some(item)))
        }
    }
}

/// Whether a FieldsV1 list-item key (`k:`, `v:` or `i:`) names `item`.
fn item_selector_matches(key: &str, item: &Value, index: usize) -> bool {
    if let Some(keys) = key_object(key) {
        return item
            .as_object()
            .is_some_and(|obj| keys.iter().all(|(k, v)| obj.get(k) == Some(v)));
    }
    if let Some(value) = key.strip_prefix("v:") {
        return serde_json::from_str::<Value>(value).is_ok_and(|v| &v == item);
    }
    if let Some(n) = key.strip_prefix("i:") {
        return n.parse::<usize>() == Ok(index);
    }
    false
}

fn key_object(key: &str) -> Option<Map<String, Value>> {
    serde_json::from_str(key.strip_prefix("k:")?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(k: &str) -> Segment {
        Segment::Key(k.to_string())
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    /// A Deployment as the API server returns it: ferry applied it, the
    /// controller manager scaled it, and someone injected a sidecar.
    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "web",
                "annotations": {"example.com/owner": "team-a"},
                "managedFields": [
                    {
                        "manager": "ferry-agent",
                        "operation": "Apply",
                        "apiVersion": "apps/v1",
                        "fieldsType": "FieldsV1",
                        "fieldsV1": {
                            "f:metadata": {"f:annotations": {"f:example.com/owner": {}}},
                            "f:spec": {
                                "f:selector": {},
                                "f:template": {"f:spec": {"f:containers": {
                                    "k:{\"name\":\"app\"}": {
                                        ".": {}, "f:name": {}, "f:image": {},
                                        "f:args": {}
                                    }
                                }}}
                            }
                        }
                    },
                    {
                        "manager": "kube-controller-manager",
                        "operation": "Update",
                        "apiVersion": "apps/v1",
                        "subresource": "scale",
                        "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:spec": {"f:replicas": {}}}
                    },
                    {
                        "manager": "injector",
                        "operation": "Update",
                        "apiVersion": "apps/v1",
                        "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {
                            "k:{\"name\":\"sidecar\"}": {".": {}, "f:name": {}, "f:image": {}},
                            "k:{\"name\":\"app\"}": {"f:env": {}}
                        }}}}}
                    }
                ]
            },
            "spec": {
                "replicas": 5,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [
                    {"name": "sidecar", "image": "proxy:1"},
                    {"name": "app", "image": "web:2", "args": ["-v", "-x"], "env": []}
                ]}}
            }
        })
    }

    fn app_image() -> Vec<Segment> {
        vec![
            key("spec"),
            key("template"),
            key("spec"),
            key("containers"),
            Segment::Index(1),
            key("image"),
        ]
    }

    #[test]
    fn replicas_scaled_by_the_controller_manager_belong_to_it() {
        let live = deployment();
        let ptr = [key("spec"), key("replicas")];
        assert_eq!(owners(&live, &ptr), set(&["kube-controller-manager"]));
        assert_eq!(
            ownership(&live, &ptr, "ferry-agent"),
            Ownership::Others(set(&["kube-controller-manager"]))
        );
    }

    #[test]
    fn a_container_image_we_applied_is_only_ours() {
        let live = deployment();
        assert_eq!(
            ownership(&live, &app_image(), "ferry-agent"),
            Ownership::OnlyUs
        );
    }

    #[test]
    fn an_item_is_found_by_its_key_not_its_position() {
        let live = deployment();
        let mut sidecar = app_image();
        sidecar[4] = Segment::Index(0);
        assert_eq!(owners(&live, &sidecar), set(&["injector"]));
    }

    #[test]
    fn a_parent_counts_everyone_owning_something_below_it() {
        let live = deployment();
        let containers = &app_image()[..4];
        assert_eq!(owners(&live, containers), set(&["ferry-agent", "injector"]));
        assert_eq!(
            ownership(&live, &[key("spec")], "ferry-agent"),
            Ownership::Others(set(&["injector", "kube-controller-manager"]))
        );
    }

    #[test]
    fn owning_an_atomic_list_owns_its_items() {
        let live = deployment();
        let mut arg = app_image();
        arg[5] = key("args");
        arg.push(Segment::Index(1));
        assert_eq!(ownership(&live, &arg, "ferry-agent"), Ownership::OnlyUs);
    }

    #[test]
    fn annotation_keys_with_slashes_are_matched_whole() {
        let live = deployment();
        let ptr = [
            key("metadata"),
            key("annotations"),
            key("example.com/owner"),
        ];
        assert_eq!(ownership(&live, &ptr, "ferry-agent"), Ownership::OnlyUs);
    }

    #[test]
    fn unmanaged_fields_belong_to_nobody() {
        let live = deployment();
        let ptr = [key("spec"), key("paused")];
        assert_eq!(ownership(&live, &ptr, "ferry-agent"), Ownership::Nobody);
        assert_eq!(
            ownership(&json!({}), &ptr, "ferry-agent"),
            Ownership::Nobody
        );
        assert!(!has_managed_fields(&json!({"metadata": {}})));
        assert!(has_managed_fields(&live));
    }

    #[test]
    fn set_and_index_items_are_matched() {
        let live = json!({
            "metadata": {"managedFields": [
                {"manager": "a", "fieldsV1": {"f:finalizers": {"v:\"x\"": {}}}},
                {"manager": "b", "fieldsV1": {"f:list": {"i:1": {}}}}
            ]},
            "finalizers": ["y", "x"],
            "list": [0, 1]
        });
        let fin = |i| [key("finalizers"), Segment::Index(i)];
        assert_eq!(owners(&live, &fin(1)), set(&["a"]));
        assert!(owners(&live, &fin(0)).is_empty());
        assert_eq!(
            owners(&live, &[key("list"), Segment::Index(1)]),
            set(&["b"])
        );
        assert!(owners(&live, &[key("list"), Segment::Index(0)]).is_empty());
    }

    #[test]
    fn malformed_managed_fields_are_skipped() {
        let live = json!({
            "metadata": {"managedFields": [
                {"manager": 3, "fieldsV1": {"f:a": {}}},
                {"fieldsV1": {"f:a": {}}},
                {"manager": "x", "fieldsV1": "f:a"},
                {"manager": "y", "fieldsV1": {"f:a": {"k:not json": {}}}},
                "junk"
            ]},
            "a": [{"name": "n"}]
        });
        assert!(owners(&live, &[key("a"), Segment::Index(0)]).is_empty());
        assert_eq!(owners(&live, &[key("a")]), set(&["y"]));
    }

    #[test]
    fn item_key_fields_come_from_the_k_entry() {
        let live = deployment();
        let item = &app_image()[..5];
        assert_eq!(item_key_fields(&live, item), vec!["name".to_string()]);
        assert!(item_key_fields(&live, &[key("spec")]).is_empty());
    }
}
