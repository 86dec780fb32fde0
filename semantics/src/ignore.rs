//! The server-side-apply body for a manifest with ignored fields
//! (DESIGN.md "Apply semantics"): which fields keep the spoke's value,
//! which are left out, and what ferry records to tell hub changes from
//! spoke changes next time.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::hash::{
    FIELD_HASHES_ANNOTATION, bookkeeping_keys, field_hash, object_hash, parse_field_hashes,
    render_field_hashes, set_annotations,
};
use super::list_items::conventional_merge_key;
use super::managed_fields::{has_managed_fields, item_key_fields, owners};
use super::paths::{IgnorePath, Pointer, Segment, get, locate, normalized, remove_pointers, set};

/// When an ignored field keeps the spoke's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IgnoreCondition {
    /// Once the object exists, never write the field again.
    OnSpokePresent,
    /// Keep the spoke's value until the hub changes that field.
    OnSpokeChange,
}

/// One `ignoreFields` entry of a manifest config.
#[derive(Debug, Clone, PartialEq)]
pub struct IgnoreRule {
    /// When the paths are ignored.
    pub condition: IgnoreCondition,
    /// The fields ignored.
    pub paths: Vec<IgnorePath>,
}

/// Everything the planner needs; no IO.
#[derive(Debug, Clone, Copy)]
pub struct SsaInput<'a> {
    /// The hub manifest.
    pub desired: &'a Value,
    /// The object on the spoke (with `metadata.managedFields`), None when absent.
    pub live: Option<&'a Value>,
    /// The manifest's ignore rules.
    pub rules: &'a [IgnoreRule],
    /// Our field manager.
    pub manager: &'a str,
}

/// Something worth reporting that is not an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathNote {
    /// The path matches nothing in the manifest nor in the live object.
    #[error(
        "ignored path {path:?} matches nothing in the manifest or on the spoke; check its spelling"
    )]
    NoMatch {
        /// The normalized path.
        path: String,
    },
}

/// What to send and what was decided.
#[derive(Debug, Clone, PartialEq)]
pub struct SsaPlan {
    /// The apply patch body, ferry's annotations included.
    pub body: Value,
    /// [`object_hash`] of the manifest with the OnSpokePresent paths.
    pub object_hash: String,
    /// Hub hash of every OnSpokeChange path (normalized path → hash).
    pub field_hashes: BTreeMap<String, String>,
    /// Paths worth reporting.
    pub notes: Vec<PathNote>,
    /// Normalized locations (RFC 9535 Normalized Paths, e.g.
    /// `$['spec']['replicas']`) where the body carries the spoke's value.
    pub kept_spoke_values: Vec<String>,
}

/// Plans a server-side apply of `input.desired`.
///
/// - Object absent: the whole manifest, ignored fields included.
/// - Object present: every OnSpokePresent path, and every OnSpokeChange path
///   whose hub value is unchanged since the hash recorded on the live object,
///   keeps the spoke's state. At each live location: a field owned only by
///   us (omitting it would make the server delete it) goes in with its live
///   value; a field some other manager owns, or nobody owns, is left out.
///   Where we and others share an object, this is decided member by member.
///   Manifest locations with no live counterpart are left out. An
///   OnSpokeChange path whose hub value changed (or has no record) is
///   applied with the hub's value, once.
/// - Always: the object-hash and field-hashes annotations.
///
/// Never fails: a non-object manifest comes back unchanged with no notes.
pub fn plan_server_side_apply(input: &SsaInput) -> SsaPlan {
    let desired = input.desired;
    let paths_of = |condition| {
        input
            .rules
            .iter()
            .filter(move |r| r.condition == condition)
            .flat_map(|r| r.paths.iter())
    };
    let present: Vec<IgnorePath> = paths_of(IgnoreCondition::OnSpokePresent).cloned().collect();
    let change: Vec<&IgnorePath> = paths_of(IgnoreCondition::OnSpokeChange).collect();

    let object_hash = object_hash(desired, &present);
    let field_hashes: BTreeMap<String, String> = change
        .iter()
        .map(|p| (p.as_str().to_string(), field_hash(desired, p)))
        .collect();
    let mut plan = SsaPlan {
        body: desired.clone(),
        object_hash,
        field_hashes,
        notes: Vec::new(),
        kept_spoke_values: Vec::new(),
    };
    if !desired.is_object() {
        return plan;
    }

    for p in present.iter().chain(change.iter().copied()) {
        let note = PathNote::NoMatch {
            path: p.as_str().to_string(),
        };
        let unmatched = locate(desired, p).is_empty()
            && input.live.is_none_or(|live| locate(live, p).is_empty());
        if unmatched && !plan.notes.contains(&note) {
            plan.notes.push(note);
        }
    }

    if let Some(live) = input.live {
        // This manager's own key; objects written before keys were per
        // manager carry only the historical one.
        let (_, field_hashes_key) = bookkeeping_keys(input.manager);
        let annotations = live.pointer("/metadata/annotations");
        let recorded = parse_field_hashes(
            annotations
                .and_then(|a| a.get(&field_hashes_key))
                .or_else(|| annotations.and_then(|a| a.get(FIELD_HASHES_ANNOTATION)))
                .and_then(Value::as_str),
        );
        let unchanged_by_hub = change
            .iter()
            .copied()
            .filter(|p| recorded.get(p.as_str()) == plan.field_hashes.get(p.as_str()));
        let ignored: Vec<&IgnorePath> = present.iter().chain(unchanged_by_hub).collect();
        let mut keeper = Keeper {
            desired,
            live,
            manager: input.manager,
            known_owners: has_managed_fields(live),
            sets: Vec::new(),
            removals: Vec::new(),
        };
        for p in ignored {
            keeper.plan_path(p);
        }
        let mut kept: Vec<Pointer> = keeper
            .sets
            .into_iter()
            .filter_map(|(ptr, value)| set(&mut plan.body, &ptr, value).then_some(ptr))
            .collect();
        let mut removals = keeper.removals;
        remove_pointers(&mut plan.body, &mut removals);
        kept.retain(|ptr| !removals.iter().any(|r| ptr.starts_with(r)));
        kept.sort();
        kept.dedup();
        plan.kept_spoke_values = kept.iter().map(|ptr| normalized(ptr)).collect();
    }

    restore_identity(&mut plan.body, desired);
    write_annotations(&mut plan, input.manager);
    plan
}

/// Puts back the fields that say which object this is, should an ignore
/// path have taken them out: without them the apply cannot be sent at all.
fn restore_identity(body: &mut Value, desired: &Value) {
    for ptr in [
        vec![Segment::Key("apiVersion".into())],
        vec![Segment::Key("kind".into())],
        vec![Segment::Key("metadata".into()), Segment::Key("name".into())],
        vec![
            Segment::Key("metadata".into()),
            Segment::Key("namespace".into()),
        ],
    ] {
        if let Some(value) = get(desired, &ptr)
            && get(body, &ptr) != Some(value)
        {
            set(body, &ptr, value.clone());
        }
    }
}

/// Decides, location by location, what the body carries for ignored paths.
struct Keeper<'a> {
    desired: &'a Value,
    live: &'a Value,
    manager: &'a str,
    /// False when the live object has no managedFields: then nobody can be
    /// shown to own anything, and we keep live values rather than risk
    /// deleting by omission.
    known_owners: bool,
    sets: Vec<(Pointer, Value)>,
    removals: Vec<Pointer>,
}

impl Keeper<'_> {
    fn plan_path(&mut self, path: &IgnorePath) {
        let mut placed = Vec::new();
        for live_ptr in locate(self.live, path) {
            if live_ptr.is_empty() {
                continue;
            }
            let Some(body_ptr) = corresponding(self.desired, self.live, &live_ptr) else {
                // A list item we do not apply: nothing of ours to protect.
                continue;
            };
            match self.keep(&live_ptr) {
                Some(value) => self.sets.push((body_ptr.clone(), value)),
                None => self.removals.push(body_ptr.clone()),
            }
            placed.push(body_ptr);
        }
        // The manifest has the field but the spoke does not (an actor removed
        // it): leave it out.
        for ptr in locate(self.desired, path) {
            if !ptr.is_empty() && !placed.contains(&ptr) {
                self.removals.push(ptr);
            }
        }
    }

    /// What the body should carry at a live location to keep the spoke's
    /// state, or None to leave it out.
    fn keep(&self, ptr: &[Segment]) -> Option<Value> {
        let node = get(self.live, ptr)?;
        if !self.known_owners {
            return Some(node.clone());
        }
        let owners = owners(self.live, ptr);
        if !owners.contains(self.manager) {
            return None;
        }
        if owners.len() == 1 {
            return Some(node.clone());
        }
        // Shared: keep what only we own below, so the server deletes nothing
        // of ours, and leave out what others own, so we never fight them.
        let mut child = ptr.to_vec();
        match node {
            Value::Object(map) => {
                let mut kept = Map::new();
                for k in map.keys() {
                    child.push(Segment::Key(k.clone()));
                    if let Some(v) = self.keep(&child) {
                        kept.insert(k.clone(), v);
                    }
                    child.pop();
                }
                (!kept.is_empty()).then_some(Value::Object(kept))
            }
            Value::Array(items) => {
                let mut kept = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    child.push(Segment::Index(i));
                    if let Some(mut v) = self.keep(&child) {
                        // A partial item still needs its key to say which item.
                        if let (Value::Object(partial), Value::Object(full)) = (&mut v, item) {
                            for key in item_key_fields(self.live, &child) {
                                if let Some(kv) = full.get(&key) {
                                    partial.insert(key, kv.clone());
                                }
                            }
                        }
                        kept.push(v);
                    }
                    child.pop();
                }
                (!kept.is_empty()).then_some(Value::Array(kept))
            }
            _ => None,
        }
    }
}

/// The manifest location matching a live location. Object members match by
/// name; list items by a conventional merge key when the manifest's items
/// have one (the spoke may have inserted items before ours), else by
/// position. None when the manifest has no such list item.
fn corresponding(desired: &Value, live: &Value, live_ptr: &[Segment]) -> Option<Pointer> {
    let mut out = Vec::with_capacity(live_ptr.len());
    let mut d = Some(desired);
    let mut l = Some(live);
    for seg in live_ptr {
        match seg {
            Segment::Key(k) => {
                out.push(seg.clone());
                d = d.and_then(|v| v.get(k));
                l = l.and_then(|v| v.get(k));
            }
            Segment::Index(i) => {
                let items = d?.as_array()?;
                let item = l?.as_array()?.get(*i)?;
                let j = match conventional_merge_key(items) {
                    Some(key) => {
                        let id = item.get(key)?;
                        items.iter().position(|x| x.get(key) == Some(id))?
                    }
                    None => (*i < items.len()).then_some(*i)?,
                };
                out.push(Segment::Index(j));
                d = items.get(j);
                l = Some(item);
            }
        }
    }
    Some(out)
}

fn write_annotations(plan: &mut SsaPlan, manager: &str) {
    let (object_hash_key, field_hashes_key) = bookkeeping_keys(manager);
    let annotations = [
        (object_hash_key.as_str(), plan.object_hash.clone()),
        (
            field_hashes_key.as_str(),
            render_field_hashes(&plan.field_hashes),
        ),
    ];
    set_annotations(&mut plan.body, &annotations);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::is_subset;
    use crate::hash::OBJECT_HASH_ANNOTATION;
    use crate::list_items::NoSchema;
    use serde_json::json;

    const US: &str = "ferry-agent";

    fn rule(condition: IgnoreCondition, paths: &[&str]) -> IgnoreRule {
        IgnoreRule {
            condition,
            paths: paths
                .iter()
                .map(|p| IgnorePath::parse(p).expect("valid path"))
                .collect(),
        }
    }

    fn plan(desired: &Value, live: Option<&Value>, rules: &[IgnoreRule]) -> SsaPlan {
        plan_server_side_apply(&SsaInput {
            desired,
            live,
            rules,
            manager: US,
        })
    }

    fn deployment(replicas: i64, image: &str) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": replicas,
                "template": {"spec": {"containers": [{"name": "app", "image": image}]}}
            }
        })
    }

    fn entry(manager: &str, fields: Value) -> Value {
        json!({"manager": manager, "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": fields})
    }

    fn with_managed_fields(mut live: Value, entries: Vec<Value>) -> Value {
        live["metadata"]["managedFields"] = Value::Array(entries);
        live
    }

    fn ours_all_of_deployment() -> Value {
        json!({"f:spec": {
            "f:replicas": {},
            "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"app\"}": {".": {}, "f:name": {}, "f:image": {}}
            }}}
        }})
    }

    #[test]
    fn create_applies_the_whole_manifest_with_ignored_fields_and_annotations() {
        let desired = deployment(3, "web:1");
        let rules = [rule(IgnoreCondition::OnSpokePresent, &["$.spec.replicas"])];
        let p = plan(&desired, None, &rules);
        assert_eq!(p.body["spec"], desired["spec"]);
        let annotations = &p.body["metadata"]["annotations"];
        assert_eq!(annotations[OBJECT_HASH_ANNOTATION], json!(p.object_hash));
        assert_eq!(annotations[FIELD_HASHES_ANNOTATION], json!("{}"));
        assert_eq!(p.object_hash, object_hash(&desired, &rules[0].paths));
        assert!(p.notes.is_empty() && p.kept_spoke_values.is_empty());
    }

    #[test]
    fn another_field_manager_records_under_its_own_keys_and_reads_the_historical_ones() {
        const THEM: &str = "work-agent";
        let (object_key, field_key) = bookkeeping_keys(THEM);
        let desired = deployment(3, "web:1");
        let rules = [rule(IgnoreCondition::OnSpokeChange, &["$.spec.replicas"])];
        let created = plan_server_side_apply(&SsaInput {
            desired: &desired,
            live: None,
            rules: &rules,
            manager: THEM,
        });
        let annotations = created.body["metadata"]["annotations"]
            .as_object()
            .expect("annotations");
        assert_eq!(annotations[&object_key], json!(created.object_hash));
        assert!(annotations.contains_key(&field_key));
        assert!(
            !annotations.contains_key(OBJECT_HASH_ANNOTATION)
                && !annotations.contains_key(FIELD_HASHES_ANNOTATION),
            "never the keys ferry-agent's applies own: {annotations:?}"
        );

        // Written by an agent from before per-manager keys: the historical
        // key still tells that the hub did not change the field, so the
        // spoke's value is kept.
        let mut live = with_managed_fields(
            deployment(9, "web:1"),
            vec![entry(THEM, json!({"f:spec": {"f:replicas": {}}}))],
        );
        live["metadata"]["annotations"] = json!({
            FIELD_HASHES_ANNOTATION: render_field_hashes(&created.field_hashes)});
        let upgraded = plan_server_side_apply(&SsaInput {
            desired: &desired,
            live: Some(&live),
            rules: &rules,
            manager: THEM,
        });
        assert_eq!(upgraded.body["spec"]["replicas"], json!(9));
    }

    #[test]
    fn a_field_another_manager_owns_is_left_out_of_the_body() {
        let live = with_managed_fields(
            deployment(7, "web:1"),
            vec![
                entry(US, json!({"f:spec": {"f:template": {}}})),
                entry(
                    "kube-controller-manager",
                    json!({"f:spec": {"f:replicas": {}}}),
                ),
            ],
        );
        let rules = [rule(IgnoreCondition::OnSpokePresent, &[".spec.replicas"])];
        let p = plan(&deployment(3, "web:2"), Some(&live), &rules);
        assert_eq!(p.body["spec"].get("replicas"), None);
        assert_eq!(
            p.body["spec"]["template"]["spec"]["containers"][0]["image"],
            json!("web:2")
        );
        assert!(p.kept_spoke_values.is_empty());
    }

    #[test]
    fn a_spoke_value_only_we_own_is_sent_back_so_it_is_not_deleted() {
        let live = with_managed_fields(
            deployment(7, "web:1"),
            vec![entry(US, ours_all_of_deployment())],
        );
        let rules = [rule(IgnoreCondition::OnSpokePresent, &["$.spec.replicas"])];
        let p = plan(&deployment(3, "web:1"), Some(&live), &rules);
        assert_eq!(p.body["spec"]["replicas"], json!(7));
        assert_eq!(
            p.kept_spoke_values,
            vec!["$['spec']['replicas']".to_string()]
        );
    }

    #[test]
    fn a_spoke_value_survives_when_another_manager_shares_the_field() {
        let live = with_managed_fields(
            deployment(7, "web:1"),
            vec![
                entry(US, ours_all_of_deployment()),
                entry("hpa", json!({"f:spec": {"f:replicas": {}}})),
            ],
        );
        let rules = [rule(IgnoreCondition::OnSpokePresent, &["$.spec.replicas"])];
        let p = plan(&deployment(3, "web:1"), Some(&live), &rules);
        assert_eq!(p.body["spec"].get("replicas"), None);
    }

    #[test]
    fn a_field_removed_on_the_spoke_is_not_written_again() {
        let desired =
            json!({"metadata": {"name": "app"}, "operation": {"sync": {}}, "spec": {"a": 1}});
        let live = with_managed_fields(
            json!({"metadata": {"name": "app"}, "spec": {"a": 1}}),
            vec![entry(US, json!({"f:spec": {"f:a": {}}}))],
        );
        let rules = [rule(IgnoreCondition::OnSpokePresent, &[".operation"])];
        let p = plan(&desired, Some(&live), &rules);
        assert_eq!(p.body.get("operation"), None);
        assert!(p.notes.is_empty());
    }

    #[test]
    fn a_field_nobody_owns_is_left_out() {
        let live = with_managed_fields(
            deployment(1, "web:1"),
            vec![entry(US, json!({"f:spec": {"f:template": {}}}))],
        );
        let rules = [rule(IgnoreCondition::OnSpokePresent, &["$.spec.replicas"])];
        let p = plan(&deployment(3, "web:1"), Some(&live), &rules);
        assert_eq!(p.body["spec"].get("replicas"), None);
    }

    #[test]
    fn without_managed_fields_the_live_value_is_kept_to_be_safe() {
        let live = deployment(7, "web:1");
        let rules = [rule(IgnoreCondition::OnSpokePresent, &["$.spec.replicas"])];
        let p = plan(&deployment(3, "web:1"), Some(&live), &rules);
        assert_eq!(p.body["spec"]["replicas"], json!(7));
    }

    #[test]
    fn a_filtered_list_path_keeps_the_value_of_the_same_item_when_the_spoke_reordered() {
        let mut live = deployment(3, "web:hotfix");
        live["spec"]["template"]["spec"]["containers"] = json!([
            {"name": "sidecar", "image": "proxy:1"},
            {"name": "app", "image": "web:hotfix"}
        ]);
        let live = with_managed_fields(
            live,
            vec![
                entry(US, ours_all_of_deployment()),
                entry(
                    "injector",
                    json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
                        "k:{\"name\":\"sidecar\"}": {".": {}, "f:name": {}, "f:image": {}}
                    }}}}}),
                ),
            ],
        );
        let rules = [rule(
            IgnoreCondition::OnSpokePresent,
            &["$.spec.template.spec.containers[?@.name=='app'].image"],
        )];
        let p = plan(&deployment(3, "web:2"), Some(&live), &rules);
        assert_eq!(
            p.body["spec"]["template"]["spec"]["containers"],
            json!([{"name": "app", "image": "web:hotfix"}])
        );
        assert_eq!(
            p.kept_spoke_values,
            vec!["$['spec']['template']['spec']['containers'][0]['image']".to_string()]
        );
    }

    fn config_map(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
    }

    /// A ConfigMap ferry applied with `desired`, whose key `a` was then
    /// edited on the spoke.
    fn edited_config_map(desired: &Value, rules: &[IgnoreRule]) -> Value {
        let applied = plan(desired, None, rules).body;
        let mut live = applied.clone();
        live["data"]["a"] = json!("edited");
        with_managed_fields(
            live,
            vec![
                entry(
                    US,
                    json!({
                        "f:metadata": {"f:annotations": {
                            (format!("f:{OBJECT_HASH_ANNOTATION}")): {},
                            (format!("f:{FIELD_HASHES_ANNOTATION}")): {}
                        }},
                        "f:data": {"f:b": {}}
                    }),
                ),
                json!({"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:data": {"f:a": {}}}}),
            ],
        )
    }

    #[test]
    fn on_spoke_change_keeps_the_spoke_value_while_the_hub_field_is_unchanged() {
        let desired = config_map(json!({"a": "hub", "b": "hub"}));
        let rules = [rule(IgnoreCondition::OnSpokeChange, &[".data"])];
        let live = edited_config_map(&desired, &rules);
        let p = plan(&desired, Some(&live), &rules);
        // `a` is the editor's: left out. `b` is only ours: kept, so it is not deleted.
        assert_eq!(p.body["data"], json!({"b": "hub"}));
        assert_eq!(p.kept_spoke_values, vec!["$['data']".to_string()]);
        assert!(
            is_subset(&p.body, &live, &NoSchema),
            "steady state sends nothing"
        );
    }

    #[test]
    fn on_spoke_change_applies_the_hub_value_once_when_the_hub_changes_the_field() {
        let old = config_map(json!({"a": "hub", "b": "hub"}));
        let rules = [rule(IgnoreCondition::OnSpokeChange, &["$.data"])];
        let live = edited_config_map(&old, &rules);
        let new = config_map(json!({"a": "hub2", "b": "hub"}));
        let p = plan(&new, Some(&live), &rules);
        assert_eq!(p.body["data"], json!({"a": "hub2", "b": "hub"}));
        let recorded =
            parse_field_hashes(p.body["metadata"]["annotations"][FIELD_HASHES_ANNOTATION].as_str());
        assert_eq!(
            recorded.get("$.data"),
            Some(&field_hash(&new, &rules[0].paths[0]))
        );
        assert_eq!(recorded, p.field_hashes);
    }

    #[test]
    fn on_spoke_change_without_a_record_applies_the_hub_value() {
        let desired = config_map(json!({"a": "hub"}));
        let live = with_managed_fields(
            config_map(json!({"a": "spoke"})),
            vec![entry(US, json!({"f:data": {"f:a": {}}}))],
        );
        let rules = [rule(IgnoreCondition::OnSpokeChange, &["$.data"])];
        let p = plan(&desired, Some(&live), &rules);
        assert_eq!(p.body["data"], json!({"a": "hub"}));
    }

    #[test]
    fn the_object_hash_ignores_on_spoke_present_fields_but_not_others() {
        let rules = [rule(IgnoreCondition::OnSpokePresent, &["$.spec.replicas"])];
        let a = plan(&deployment(1, "web:1"), None, &rules).object_hash;
        assert_eq!(a, plan(&deployment(9, "web:1"), None, &rules).object_hash);
        assert_ne!(a, plan(&deployment(1, "web:2"), None, &rules).object_hash);
    }

    #[test]
    fn a_path_matching_nothing_is_noted_once() {
        let rules = [
            rule(
                IgnoreCondition::OnSpokePresent,
                &["$.spec.nothing", "$.spec.replicas"],
            ),
            rule(IgnoreCondition::OnSpokeChange, &["$.spec.nothing"]),
        ];
        let p = plan(&deployment(1, "web:1"), None, &rules);
        assert_eq!(
            p.notes,
            vec![PathNote::NoMatch {
                path: "$.spec.nothing".into()
            }]
        );
    }

    #[test]
    fn a_non_object_manifest_comes_back_unchanged() {
        let rules = [rule(IgnoreCondition::OnSpokePresent, &["$.a"])];
        for odd in [json!([1, 2]), json!("x"), json!(null)] {
            let p = plan(&odd, Some(&json!({"a": 1})), &rules);
            assert_eq!(p.body, odd);
            assert!(p.notes.is_empty());
        }
    }

    #[test]
    fn odd_live_objects_do_not_panic() {
        let rules = [rule(
            IgnoreCondition::OnSpokePresent,
            &["$.spec.replicas", "$..image"],
        )];
        let desired = deployment(1, "web:1");
        for live in [
            json!(null),
            json!([1]),
            json!({"metadata": "x", "spec": []}),
            json!({"metadata": {"annotations": {FIELD_HASHES_ANNOTATION: 5}, "managedFields": "x"}}),
        ] {
            let p = plan(&desired, Some(&live), &rules);
            assert!(p.body["metadata"]["annotations"][OBJECT_HASH_ANNOTATION].is_string());
        }
        let mut bad_meta = desired.clone();
        bad_meta["metadata"] = json!("x");
        let p = plan(&bad_meta, None, &rules);
        assert!(p.body["metadata"]["annotations"][OBJECT_HASH_ANNOTATION].is_string());
    }

    #[test]
    fn ignoring_metadata_never_drops_the_objects_identity() {
        let live = with_managed_fields(
            deployment(1, "web:1"),
            vec![entry("someone", json!({"f:metadata": {"f:labels": {}}}))],
        );
        let rules = [rule(
            IgnoreCondition::OnSpokePresent,
            &["$.metadata", "$.kind"],
        )];
        let p = plan(&deployment(1, "web:1"), Some(&live), &rules);
        assert_eq!(p.body["kind"], json!("Deployment"));
        assert_eq!(p.body["metadata"]["name"], json!("web"));
        assert_eq!(p.body["metadata"]["namespace"], json!("default"));
    }

    #[test]
    fn a_shared_list_keeps_only_our_items_with_their_keys() {
        let desired = json!({"spec": {"ports": [{"name": "http", "port": 80}]}});
        let live = with_managed_fields(
            json!({"spec": {"ports": [
                {"name": "http", "port": 8080, "extra": 1},
                {"name": "metrics", "port": 9090}
            ]}}),
            vec![
                entry(
                    US,
                    json!({"f:spec": {"f:ports": {
                        "k:{\"port\":8080}": {"f:port": {}, "f:name": {}}
                    }}}),
                ),
                entry(
                    "other",
                    json!({"f:spec": {"f:ports": {
                        "k:{\"port\":8080}": {".": {}, "f:extra": {}},
                        "k:{\"port\":9090}": {".": {}, "f:port": {}, "f:name": {}}
                    }}}),
                ),
            ],
        );
        let rules = [rule(IgnoreCondition::OnSpokePresent, &["$.spec.ports"])];
        let p = plan(&desired, Some(&live), &rules);
        assert_eq!(
            p.body["spec"]["ports"],
            json!([{"name": "http", "port": 8080}])
        );
    }
}
