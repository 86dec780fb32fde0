//! The pure rules of letting go of an applied object: which objects a work's
//! `deleteOption` deletes and which it orphans, how ferry marks the objects it
//! owns (an owner reference to the work's `AppliedManifestWork`), and how
//! those marks are added and removed. Objects listed by several works carry
//! one owner reference per work and are deleted only by the last of them.

use ferry_proto::v1;
use serde_json::{Map, Value, json};

use crate::hash::{is_ferry_annotation, metadata_map_mut};

/// `apiVersion` of the owner references ferry puts on applied objects.
pub const OWNER_API_VERSION: &str = "work.ferry.dev/v1alpha1";
/// `kind` of the owner references ferry puts on applied objects.
pub const OWNER_KIND: &str = "AppliedManifestWork";

/// Label ferry puts on every object it writes, so that the agent's drift
/// watches ask the spoke's API server for ferry's objects only (a label
/// selector) instead of streaming every object of a kind. Removed with
/// ferry's annotations when the last work lets the object go.
pub const MANAGED_LABEL: &str = "work.ferry.dev/managed";
/// The value of [`MANAGED_LABEL`].
pub const MANAGED_LABEL_VALUE: &str = "true";

/// Puts [`MANAGED_LABEL`] on a body about to be written, creating
/// `metadata.labels` (or replacing a non-object there) as needed. Does
/// nothing to a value that is not an object.
pub fn add_managed_label(body: &mut Value) {
    if let Some(labels) = metadata_map_mut(body, "labels") {
        labels.insert(
            MANAGED_LABEL.into(),
            Value::String(MANAGED_LABEL_VALUE.into()),
        );
    }
}

/// Whether `object` carries [`MANAGED_LABEL`] with ferry's value: whether
/// the label-selected drift watch of its kind sees it. Never fails.
pub fn has_managed_label(object: &Value) -> bool {
    object["metadata"]["labels"][MANAGED_LABEL] == MANAGED_LABEL_VALUE
}

/// The record that owns a work's objects on the spoke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Name of the AppliedManifestWork.
    pub name: String,
    /// Its UID, which the owner reference names.
    pub uid: String,
}

/// What happens to one object when its work lets go of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Delete it (unless another work still holds it).
    Delete,
    /// Leave it on the cluster without ferry's marks.
    Orphan,
}

/// A work's `deleteOption`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeletePolicy {
    /// Delete every object (the default).
    Foreground,
    /// Leave every object.
    Orphan,
    /// Leave the objects the rules match, delete the others.
    SelectivelyOrphan(Vec<v1::OrphaningRule>),
}

impl DeletePolicy {
    /// Reads the wire form. An unknown policy orphans: leaving an object
    /// behind can be undone, deleting it cannot. The hub's CRD refuses
    /// unknown policies, so this only guards against a newer hub.
    pub fn from_wire(option: Option<&v1::DeleteOption>) -> Self {
        let Some(option) = option else {
            return DeletePolicy::Foreground;
        };
        match option.propagation_policy.as_str() {
            "" | "Foreground" => DeletePolicy::Foreground,
            "SelectivelyOrphan" => DeletePolicy::SelectivelyOrphan(option.orphaning_rules.clone()),
            _ => DeletePolicy::Orphan,
        }
    }

    /// What this policy does with the object `(group, resource, namespace, name)`.
    pub fn disposition(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Disposition {
        match self {
            DeletePolicy::Foreground => Disposition::Delete,
            DeletePolicy::Orphan => Disposition::Orphan,
            DeletePolicy::SelectivelyOrphan(rules) => {
                let matched = rules.iter().any(|r| {
                    r.group == group
                        && r.resource == resource
                        && r.namespace == namespace
                        && r.name == name
                });
                if matched {
                    Disposition::Orphan
                } else {
                    Disposition::Delete
                }
            }
        }
    }
}

/// The owner reference that marks an object as applied by `owner`'s work.
/// It never blocks the owner's deletion: ferry deletes objects itself, in
/// order, and the reference is only the mark and a safety net for the
/// cluster's garbage collector.
pub fn owner_reference(owner: &Owner) -> Value {
    json!({
        "apiVersion": OWNER_API_VERSION,
        "kind": OWNER_KIND,
        "name": owner.name,
        "uid": owner.uid,
    })
}

fn owner_references(object: &Value) -> Vec<Value> {
    object["metadata"]["ownerReferences"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn is_ferry_reference(reference: &Value) -> bool {
    reference["kind"] == OWNER_KIND
        && reference["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("work.ferry.dev/"))
}

/// Whether `object` carries `owner`'s mark.
pub fn is_owned_by(object: &Value, owner: &Owner) -> bool {
    owner_references(object)
        .iter()
        .any(|r| r["uid"] == owner.uid.as_str())
}

/// How many other ferry works hold `object` besides `owner`.
pub fn other_ferry_owners(object: &Value, owner: &Owner) -> usize {
    owner_references(object)
        .iter()
        .filter(|r| is_ferry_reference(r) && r["uid"] != owner.uid.as_str())
        .count()
}

/// What an apply body carries in `metadata.ownerReferences`, and whether it
/// must be pinned to the live object's resourceVersion.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyReferences {
    /// The owner references to put in the body.
    pub references: Vec<Value>,
    /// The live resourceVersion the apply must be pinned to, when the body
    /// carries another work's mark: that work may be removing it right now,
    /// and an unpinned apply would put it back.
    pub pin: Option<String>,
}

/// The ferry owner references a server-side apply by `manager` must carry.
/// A create (no live object) carries `owner`'s mark, so the object is never
/// on the cluster without it. An existing object gets back every ferry mark
/// that `manager`'s Apply entry owns (a mark this or another work created
/// with the same manager): omitting it would make the API server delete it.
/// Marks added by ferry's merge patch (an `Update` entry) are not carried:
/// an apply never removes fields another entry owns. Never fails.
pub fn apply_references(live: Option<&Value>, owner: &Owner, manager: &str) -> ApplyReferences {
    let Some(live) = live else {
        return ApplyReferences {
            references: vec![owner_reference(owner)],
            pin: None,
        };
    };
    let owned = applied_reference_uids(live, manager);
    let references: Vec<Value> = owner_references(live)
        .into_iter()
        .filter(is_ferry_reference)
        .filter(|r| {
            r["uid"]
                .as_str()
                .is_some_and(|uid| owned.iter().any(|o| o == uid))
        })
        .collect();
    let foreign = references.iter().any(|r| r["uid"] != owner.uid.as_str());
    let pin = foreign
        .then(|| {
            live["metadata"]["resourceVersion"]
                .as_str()
                .map(String::from)
        })
        .flatten();
    ApplyReferences { references, pin }
}

/// UIDs of the owner references `manager`'s Apply entry owns, read from
/// `metadata.managedFields` (`f:metadata` → `f:ownerReferences` →
/// `k:{"uid":"…"}`). Malformed entries are skipped.
fn applied_reference_uids(live: &Value, manager: &str) -> Vec<String> {
    live["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["manager"] == manager && e["operation"] == "Apply")
        .filter(|e| e["subresource"].as_str().unwrap_or_default().is_empty())
        .filter_map(|e| e["fieldsV1"]["f:metadata"]["f:ownerReferences"].as_object())
        .flat_map(|items| items.keys())
        .filter_map(|key| key.strip_prefix("k:"))
        .filter_map(|key| serde_json::from_str::<Value>(key).ok())
        .filter_map(|key| key["uid"].as_str().map(String::from))
        .collect()
}

/// Puts `references` into `body`'s `metadata.ownerReferences`, next to any
/// the manifest itself lists (one per UID), and pins the resourceVersion
/// when asked. A body that is not an object is left alone.
pub fn add_references(body: &mut Value, references: &ApplyReferences) {
    let Some(object) = body.as_object_mut() else {
        return;
    };
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    if !references.references.is_empty() {
        let list = metadata
            .entry("ownerReferences")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !list.is_array() {
            *list = Value::Array(Vec::new());
        }
        if let Some(list) = list.as_array_mut() {
            for reference in &references.references {
                if !list.iter().any(|r| r["uid"] == reference["uid"]) {
                    list.push(reference.clone());
                }
            }
        }
    }
    if let Some(version) = &references.pin {
        metadata.insert("resourceVersion".into(), Value::String(version.clone()));
    }
}

// Every list change carries the resourceVersion it was computed from: a
// merge patch replaces the whole list, so a concurrent change by another
// work must fail the patch instead of being overwritten.
fn metadata_patch(object: &Value, metadata: Map<String, Value>) -> Value {
    let mut metadata = metadata;
    if let Some(version) = object["metadata"]["resourceVersion"].as_str() {
        metadata.insert("resourceVersion".into(), Value::String(version.into()));
    }
    json!({ "metadata": Value::Object(metadata) })
}

fn references_value(references: Vec<Value>) -> Value {
    if references.is_empty() {
        Value::Null
    } else {
        Value::Array(references)
    }
}

/// The merge patch that adds `owner`'s mark to `object`, or None when it
/// is already there.
pub fn adopt_patch(object: &Value, owner: &Owner) -> Option<Value> {
    if is_owned_by(object, owner) {
        return None;
    }
    let mut references = owner_references(object);
    references.push(owner_reference(owner));
    let mut metadata = Map::new();
    metadata.insert("ownerReferences".into(), Value::Array(references));
    Some(metadata_patch(object, metadata))
}

/// API group of the AppliedManifestWork that OCM's work agent puts in the
/// owner references of what it applies.
pub const OCM_OWNER_GROUP: &str = "work.open-cluster-management.io";

/// Whether `reference` points at an AppliedManifestWork of OCM's work agent.
fn is_ocm_reference(reference: &Value) -> bool {
    reference["kind"] == OWNER_KIND
        && reference["apiVersion"]
            .as_str()
            .and_then(|v| v.split_once('/'))
            .is_some_and(|(group, _)| group == OCM_OWNER_GROUP)
}

/// The merge patch that removes every owner reference to an OCM
/// AppliedManifestWork from `object`, so that removing OCM's agent and its
/// records after a migration to ferry cannot garbage-collect the object.
/// Other owner references stay. None when there is none.
pub fn drop_ocm_marks_patch(object: &Value) -> Option<Value> {
    let all = owner_references(object);
    let kept: Vec<Value> = all
        .iter()
        .filter(|r| !is_ocm_reference(r))
        .cloned()
        .collect();
    if kept.len() == all.len() {
        return None;
    }
    let mut metadata = Map::new();
    metadata.insert("ownerReferences".into(), references_value(kept));
    Some(metadata_patch(object, metadata))
}

/// The merge patch that removes `owner`'s mark from `object` while the work
/// still applies it, for an object the work will orphan: without the mark,
/// deleting the work's AppliedManifestWork by hand cannot garbage-collect
/// it. ferry's annotations stay (the work still applies the object). None
/// when the object carries no such mark.
pub fn unmark_patch(object: &Value, owner: &Owner) -> Option<Value> {
    let all = owner_references(object);
    let kept: Vec<Value> = all
        .iter()
        .filter(|r| r["uid"] != owner.uid.as_str())
        .cloned()
        .collect();
    if kept.len() == all.len() {
        return None;
    }
    let mut metadata = Map::new();
    metadata.insert("ownerReferences".into(), references_value(kept));
    Some(metadata_patch(object, metadata))
}

/// `references` without `owner`'s mark: what an apply of an object the
/// work orphans carries.
pub fn without_owner(mut references: ApplyReferences, owner: &Owner) -> ApplyReferences {
    references
        .references
        .retain(|r| r["uid"] != owner.uid.as_str());
    references
}

/// The merge patch that removes `owner`'s mark from `object` and, when no
/// other ferry work holds it any more, ferry's annotations and
/// [`MANAGED_LABEL`] too. None when
/// there is nothing to remove.
pub fn release_patch(object: &Value, owner: &Owner) -> Option<Value> {
    let all = owner_references(object);
    let kept: Vec<Value> = all
        .iter()
        .filter(|r| r["uid"] != owner.uid.as_str())
        .cloned()
        .collect();
    let mut metadata = Map::new();
    if kept.len() != all.len() {
        metadata.insert("ownerReferences".into(), references_value(kept));
    }
    if other_ferry_owners(object, owner) == 0 {
        let annotations = object["metadata"]["annotations"].as_object();
        // Every manager's bookkeeping keys, not only ferry-agent's.
        let removed: Map<String, Value> = annotations
            .into_iter()
            .flat_map(|a| a.keys())
            .filter(|key| is_ferry_annotation(key))
            .map(|key| (key.clone(), Value::Null))
            .collect();
        if !removed.is_empty() {
            metadata.insert("annotations".into(), Value::Object(removed));
        }
        if object["metadata"]["labels"].get(MANAGED_LABEL).is_some() {
            metadata.insert("labels".into(), json!({ MANAGED_LABEL: null }));
        }
    }
    if metadata.is_empty() {
        return None;
    }
    Some(metadata_patch(object, metadata))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::{FIELD_HASHES_ANNOTATION, OBJECT_HASH_ANNOTATION, bookkeeping_keys};

    fn owner(uid: &str) -> Owner {
        Owner {
            name: uid.into(),
            uid: uid.into(),
        }
    }

    fn object(references: Value) -> Value {
        json!({"metadata": {"name": "x", "resourceVersion": "7", "ownerReferences": references,
            "annotations": {OBJECT_HASH_ANNOTATION: "h", "keep": "me"}}})
    }

    #[test]
    fn a_missing_delete_option_deletes_everything() {
        let policy = DeletePolicy::from_wire(None);
        assert_eq!(
            policy.disposition("", "configmaps", "ns", "a"),
            Disposition::Delete
        );
    }

    #[test]
    fn selectively_orphan_orphans_only_exact_matches() {
        let policy = DeletePolicy::from_wire(Some(&v1::DeleteOption {
            propagation_policy: "SelectivelyOrphan".into(),
            orphaning_rules: vec![v1::OrphaningRule {
                group: "".into(),
                resource: "configmaps".into(),
                name: "keep".into(),
                namespace: "ns".into(),
            }],
        }));
        assert_eq!(
            policy.disposition("", "configmaps", "ns", "keep"),
            Disposition::Orphan
        );
        assert_eq!(
            policy.disposition("", "configmaps", "other", "keep"),
            Disposition::Delete
        );
        assert_eq!(
            policy.disposition("", "secrets", "ns", "keep"),
            Disposition::Delete
        );
    }

    #[test]
    fn an_unknown_policy_orphans_rather_than_deletes() {
        let policy = DeletePolicy::from_wire(Some(&v1::DeleteOption {
            propagation_policy: "Sideways".into(),
            orphaning_rules: vec![],
        }));
        assert_eq!(policy, DeletePolicy::Orphan);
    }

    #[test]
    fn adopting_appends_the_reference_and_pins_the_resource_version() {
        let other = owner_reference(&owner("b"));
        let patch = adopt_patch(&object(json!([other.clone()])), &owner("a")).expect("patch");
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(
            patch["metadata"]["ownerReferences"],
            json!([other, owner_reference(&owner("a"))])
        );
        let adopted = object(json!([owner_reference(&owner("a"))]));
        assert_eq!(adopt_patch(&adopted, &owner("a")), None);
    }

    #[test]
    fn releasing_the_last_ferry_owner_strips_ferrys_annotations_only() {
        let patch = release_patch(&object(json!([owner_reference(&owner("a"))])), &owner("a"))
            .expect("patch");
        assert_eq!(patch["metadata"]["ownerReferences"], Value::Null);
        assert_eq!(
            patch["metadata"]["annotations"],
            json!({OBJECT_HASH_ANNOTATION: null})
        );
    }

    #[test]
    fn releasing_the_last_ferry_owner_strips_every_managers_bookkeeping() {
        let (object_hash_key, field_hashes_key) = bookkeeping_keys("work-agent");
        let mut obj = object(json!([owner_reference(&owner("a"))]));
        obj["metadata"]["annotations"] = json!({
            OBJECT_HASH_ANNOTATION: "h", FIELD_HASHES_ANNOTATION: "{}",
            (object_hash_key.clone()): "h2", (field_hashes_key.clone()): "{}", "keep": "me"});
        let patch = release_patch(&obj, &owner("a")).expect("patch");
        assert_eq!(
            patch["metadata"]["annotations"],
            json!({OBJECT_HASH_ANNOTATION: null, FIELD_HASHES_ANNOTATION: null,
                   (object_hash_key): null, (field_hashes_key): null})
        );
    }

    #[test]
    fn adopting_from_ocm_drops_only_ocm_applied_manifest_work_references() {
        let ocm = json!({"apiVersion": "work.open-cluster-management.io/v1",
                         "kind": "AppliedManifestWork", "name": "h-w", "uid": "o"});
        let other_kind = json!({"apiVersion": "work.open-cluster-management.io/v1",
                                "kind": "ManifestWork", "name": "x", "uid": "x"});
        let ours = owner_reference(&owner("a"));
        let obj = object(json!([ocm, ours.clone(), other_kind.clone()]));
        let patch = drop_ocm_marks_patch(&obj).expect("patch");
        assert_eq!(
            patch["metadata"]["ownerReferences"],
            json!([ours, other_kind])
        );
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(drop_ocm_marks_patch(&object(json!([ours]))), None);
    }

    #[test]
    fn unmarking_drops_only_this_works_reference_and_keeps_the_annotations() {
        let b = owner_reference(&owner("b"));
        let mut obj = object(json!([owner_reference(&owner("a")), b.clone()]));
        obj["metadata"]["annotations"] = json!({OBJECT_HASH_ANNOTATION: "h"});
        let patch = unmark_patch(&obj, &owner("a")).expect("patch");
        assert_eq!(patch["metadata"]["ownerReferences"], json!([b]));
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert!(patch["metadata"].get("annotations").is_none());
        let only_b = object(json!([owner_reference(&owner("b"))]));
        assert_eq!(unmark_patch(&only_b, &owner("a")), None);
        let alone = object(json!([owner_reference(&owner("a"))]));
        assert_eq!(
            unmark_patch(&alone, &owner("a")).expect("patch")["metadata"]["ownerReferences"],
            Value::Null
        );
        let refs = without_owner(apply_references(None, &owner("a"), "m"), &owner("a"));
        assert!(refs.references.is_empty());
    }

    #[test]
    fn releasing_a_shared_object_keeps_the_other_works_mark_and_annotations() {
        let b = owner_reference(&owner("b"));
        let shared = object(json!([owner_reference(&owner("a")), b.clone()]));
        assert_eq!(other_ferry_owners(&shared, &owner("a")), 1);
        let patch = release_patch(&shared, &owner("a")).expect("patch");
        assert_eq!(patch["metadata"]["ownerReferences"], json!([b]));
        assert!(patch["metadata"].get("annotations").is_none());
        assert!(patch["metadata"].get("labels").is_none());
    }

    #[test]
    fn releasing_the_last_ferry_owner_removes_the_managed_label_and_keeps_the_others() {
        let mut obj = object(json!([owner_reference(&owner("a"))]));
        obj["metadata"]["labels"] = json!({MANAGED_LABEL: MANAGED_LABEL_VALUE, "app": "web"});
        let patch = release_patch(&obj, &owner("a")).expect("patch");
        assert_eq!(patch["metadata"]["labels"], json!({MANAGED_LABEL: null}));
        let mut shared = object(json!([
            owner_reference(&owner("a")),
            owner_reference(&owner("b"))
        ]));
        shared["metadata"]["labels"] = json!({MANAGED_LABEL: MANAGED_LABEL_VALUE});
        let patch = release_patch(&shared, &owner("a")).expect("patch");
        assert!(patch["metadata"].get("labels").is_none());
    }

    #[test]
    fn the_managed_label_is_added_beside_the_manifests_labels_and_read_back() {
        let mut body = json!({"metadata": {"name": "x", "labels": {"app": "web"}}});
        assert!(!has_managed_label(&body));
        add_managed_label(&mut body);
        assert_eq!(
            body["metadata"]["labels"],
            json!({"app": "web", MANAGED_LABEL: MANAGED_LABEL_VALUE})
        );
        assert!(has_managed_label(&body));
        let mut bare = json!({"kind": "ConfigMap"});
        add_managed_label(&mut bare);
        assert!(has_managed_label(&bare));
        let mut odd = json!({"metadata": {"labels": "not a map"}});
        add_managed_label(&mut odd);
        assert!(has_managed_label(&odd));
        let mut scalar = json!(3);
        add_managed_label(&mut scalar);
        assert_eq!(scalar, json!(3));
    }

    #[test]
    fn owners_that_are_not_ferry_works_do_not_count_as_sharing() {
        let deployment =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "z"});
        let mixed = object(json!([owner_reference(&owner("a")), deployment]));
        assert_eq!(other_ferry_owners(&mixed, &owner("a")), 0);
    }

    fn applied_by(manager: &str, operation: &str, uids: &[&str]) -> Value {
        let items: Map<String, Value> = uids
            .iter()
            .map(|u| (format!("k:{{\"uid\":\"{u}\"}}"), json!({".": {}})))
            .collect();
        json!({"manager": manager, "operation": operation,
            "fieldsV1": {"f:metadata": {"f:ownerReferences": items}}})
    }

    #[test]
    fn a_create_carries_the_works_mark() {
        let refs = apply_references(None, &owner("a"), "ferry-agent");
        assert_eq!(refs.references, vec![owner_reference(&owner("a"))]);
        assert_eq!(refs.pin, None);
    }

    #[test]
    fn an_apply_keeps_the_marks_its_manager_owns_and_pins_when_one_is_foreign() {
        let mut live = object(json!([
            owner_reference(&owner("a")),
            owner_reference(&owner("b")),
            owner_reference(&owner("c"))
        ]));
        live["metadata"]["managedFields"] = json!([
            applied_by("ferry-agent", "Apply", &["a", "b"]),
            applied_by("ferry-agent", "Update", &["c"]),
            applied_by("someone", "Apply", &["c"]),
        ]);
        let refs = apply_references(Some(&live), &owner("a"), "ferry-agent");
        assert_eq!(
            refs.references,
            vec![owner_reference(&owner("a")), owner_reference(&owner("b"))]
        );
        assert_eq!(refs.pin.as_deref(), Some("7"));
        let only_ours = apply_references(Some(&live), &owner("b"), "other-manager");
        assert!(only_ours.references.is_empty());
        assert_eq!(only_ours.pin, None);
    }

    #[test]
    fn an_apply_of_a_marked_object_by_its_creator_is_not_pinned() {
        let mut live = object(json!([owner_reference(&owner("a"))]));
        live["metadata"]["managedFields"] = json!([applied_by("m", "Apply", &["a"])]);
        let refs = apply_references(Some(&live), &owner("a"), "m");
        assert_eq!(refs.references, vec![owner_reference(&owner("a"))]);
        assert_eq!(refs.pin, None);
    }

    #[test]
    fn adding_references_keeps_the_manifests_own_and_does_not_repeat_a_uid() {
        let mine = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "p", "uid": "p"});
        let mut body = json!({"metadata": {"name": "x", "ownerReferences": [mine.clone()]}});
        let refs = ApplyReferences {
            references: vec![owner_reference(&owner("a")), mine.clone()],
            pin: Some("9".into()),
        };
        add_references(&mut body, &refs);
        assert_eq!(
            body["metadata"]["ownerReferences"],
            json!([mine, owner_reference(&owner("a"))])
        );
        assert_eq!(body["metadata"]["resourceVersion"], "9");
        let mut bare = json!({"kind": "ConfigMap"});
        add_references(
            &mut bare,
            &ApplyReferences {
                references: vec![],
                pin: None,
            },
        );
        assert_eq!(bare, json!({"kind": "ConfigMap", "metadata": {}}));
    }

    #[test]
    fn releasing_an_unmarked_object_without_annotations_is_a_no_op() {
        let bare = json!({"metadata": {"name": "x", "resourceVersion": "1"}});
        assert_eq!(release_patch(&bare, &owner("a")), None);
    }
}
