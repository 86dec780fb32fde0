//! Drift reports: where an object on the spoke differs from what ferry would
//! apply to it, field by field, with the spoke's value and the field manager
//! that last wrote it. The agent builds one per manifest on every pass (the
//! pass is woken by its watch of the object, never by polling), and keeps
//! them stable between passes so an unchanged drift set sends nothing.
//!
//! Only fields the hub's manifest sets are compared, with the same rules as
//! [`crate::compare::is_subset`] (server defaults, `status` and other
//! managers' extra fields never count; keyed list items match by key).
//! Ignored fields never count: the expected body is the one the strategy
//! would send, in which an ignored field is absent or holds the spoke's value.

use std::cmp::Reverse;

use ferry_proto::v1;
use serde_json::Value;

use super::contract::AGENT_FIELD_MANAGER;
use super::equality::values_equal;
use super::hash::strip_ferry_annotations;
use super::ignore::{IgnoreCondition, SsaInput, plan_server_side_apply};
use super::list_items::{ListSchema, find_item, list_keys};
use super::managed_fields::exact_owners;
use super::paths::{Pointer, Segment};
use super::strategy::Strategy;

/// Most drifted fields listed per manifest; more are counted in `omitted`.
pub const MAX_DRIFT_FIELDS: usize = 8;
/// Most drifted fields listed per work, over all its manifests (a work may
/// hold hundreds of manifests, and the hub's API server stores the status);
/// fields past it are counted in their manifest's `omitted`.
pub const MAX_WORK_DRIFT_FIELDS: usize = 64;
/// Longest value (compact JSON) shown, in bytes; longer ones are cut and end
/// in [`CUT_MARK`] and the number of bytes left out.
pub const MAX_DRIFT_VALUE_BYTES: usize = 256;
/// What ends a value cut to [`MAX_DRIFT_VALUE_BYTES`].
pub const CUT_MARK: &str = "…";

/// One field that differs. `location` is where the spoke holds it (list
/// items at their live index), for finding its manager.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// RFC 6901 pointer into the spoke object; ends in `/-` for a list item
    /// the spoke lacks.
    pub pointer: String,
    /// The spoke location of the field (or, for a missing list item, of its
    /// list).
    pub location: Pointer,
    /// What ferry would apply.
    pub hub: Value,
    /// What the spoke holds; None when the field is absent there.
    pub spoke: Option<Value>,
}

/// The differences between `body` and `live`: the first `limit` in document
/// order, and how many there are in all. Never fails.
pub fn differences(
    body: &Value,
    live: &Value,
    schema: &dyn ListSchema,
    limit: usize,
) -> (Vec<Difference>, usize) {
    let mut walk = Walk {
        schema,
        limit,
        listed: Vec::new(),
        total: 0,
        schema_path: Vec::new(),
        location: Vec::new(),
    };
    walk.visit(body, live);
    (walk.listed, walk.total)
}

struct Walk<'a> {
    schema: &'a dyn ListSchema,
    limit: usize,
    listed: Vec<Difference>,
    total: usize,
    /// Object keys with list positions as `"[]"`: what the schema answers.
    schema_path: Vec<String>,
    location: Pointer,
}

impl Walk<'_> {
    fn found(&mut self, pointer: String, hub: &Value, spoke: Option<&Value>) {
        self.total += 1;
        if self.listed.len() < self.limit {
            self.listed.push(Difference {
                pointer,
                location: self.location.clone(),
                hub: hub.clone(),
                spoke: spoke.cloned(),
            });
        }
    }

    fn visit(&mut self, body: &Value, live: &Value) {
        match (body, live) {
            (Value::Object(b), Value::Object(l)) => {
                for (key, bv) in b {
                    self.location.push(Segment::Key(key.clone()));
                    match l.get(key) {
                        // A null in the body means "absent".
                        None if bv.is_null() => {}
                        None => self.found(rfc6901(&self.location), bv, None),
                        Some(lv) => {
                            self.schema_path.push(key.clone());
                            self.visit(bv, lv);
                            self.schema_path.pop();
                        }
                    }
                    self.location.pop();
                }
            }
            (Value::Array(b), Value::Array(l)) => {
                let keys = list_keys(self.schema, &self.schema_path, &[b, l]);
                self.schema_path.push("[]".to_string());
                match keys {
                    Some(keys) => {
                        let mut used = vec![false; l.len()];
                        for item in b {
                            match find_item(item, l, &used, &keys) {
                                Some(i) => {
                                    used[i] = true;
                                    self.location.push(Segment::Index(i));
                                    self.visit(item, &l[i]);
                                    self.location.pop();
                                }
                                None => {
                                    let pointer = format!("{}/-", rfc6901(&self.location));
                                    self.found(pointer, item, None);
                                }
                            }
                        }
                    }
                    None if b.len() == l.len() => {
                        for (i, (bi, li)) in b.iter().zip(l).enumerate() {
                            self.location.push(Segment::Index(i));
                            self.visit(bi, li);
                            self.location.pop();
                        }
                    }
                    None => self.found(rfc6901(&self.location), body, Some(live)),
                }
                self.schema_path.pop();
            }
            _ if values_equal(body, live) => {}
            _ => self.found(rfc6901(&self.location), body, Some(live)),
        }
    }
}

/// Renders a location as an RFC 6901 JSON pointer (`~` as `~0`, `/` as `~1`);
/// the root is the empty string.
pub fn rfc6901(location: &[Segment]) -> String {
    let mut out = String::new();
    for segment in location {
        out.push('/');
        match segment {
            Segment::Index(i) => out.push_str(&i.to_string()),
            Segment::Key(k) => out.push_str(&k.replace('~', "~0").replace('/', "~1")),
        }
    }
    out
}

/// What `strategy` would make the object look like, given the live object:
/// the body compared for drift, without ferry's bookkeeping annotations.
/// None for strategies that never write an existing object (CreateOnly,
/// ReadOnly): for them no difference is drift.
pub fn expected_body(strategy: &Strategy, desired: &Value, live: &Value) -> Option<Value> {
    let mut body = match strategy {
        Strategy::Update => desired.clone(),
        Strategy::ServerSideApply { manager, rules, .. } => {
            plan_server_side_apply(&SsaInput {
                desired,
                live: Some(live),
                rules,
                manager,
            })
            .body
        }
        Strategy::ReportOnly { rules } => {
            // Nothing is ever applied, so no hub change is ever "applied
            // once": every ignored field stays the spoke's.
            let rules: Vec<_> = rules
                .iter()
                .map(|rule| {
                    let mut rule = rule.clone();
                    rule.condition = IgnoreCondition::OnSpokePresent;
                    rule
                })
                .collect();
            plan_server_side_apply(&SsaInput {
                desired,
                live: Some(live),
                rules: &rules,
                manager: AGENT_FIELD_MANAGER,
            })
            .body
        }
        Strategy::CreateOnly | Strategy::ReadOnly => return None,
    };
    strip_ferry_annotations(&mut body);
    Some(body)
}

/// The drift of one manifest as the agent reports it: the fields of `live`
/// (the object before this pass wrote anything) that differ from what
/// `strategy` would apply, at most [`MAX_DRIFT_FIELDS`] listed, each first
/// seen `now` and, when `corrected` (this pass wrote the object back),
/// corrected `now`. None when nothing differs, the object is absent, or the
/// strategy never corrects (CreateOnly, ReadOnly). Never fails.
pub fn manifest_drift(
    strategy: &Strategy,
    desired: &Value,
    live: Option<&Value>,
    corrected: bool,
    schema: &dyn ListSchema,
    now: i64,
) -> Option<v1::ManifestDrift> {
    let live = live?;
    let body = expected_body(strategy, desired, live)?;
    let (listed, total) = differences(&body, live, schema, MAX_DRIFT_FIELDS);
    if total == 0 {
        return None;
    }
    let fields = listed
        .iter()
        .map(|d| v1::DriftedField {
            pointer: d.pointer.clone(),
            hub_json: bounded_json(&d.hub),
            spoke_json: d.spoke.as_ref().map(bounded_json),
            manager: match d.spoke {
                Some(_) => last_writer(live, &d.location).unwrap_or_default(),
                None => String::new(),
            },
            first_seen_unix_seconds: now,
            corrected_unix_seconds: if corrected { now } else { 0 },
        })
        .collect();
    Some(v1::ManifestDrift {
        fields,
        omitted: u32::try_from(total - listed.len()).unwrap_or(u32::MAX),
    })
}

/// Compact JSON of `value`, cut at a char boundary to
/// [`MAX_DRIFT_VALUE_BYTES`] with [`CUT_MARK`] and the bytes left out.
pub fn bounded_json(value: &Value) -> String {
    let text = value.to_string();
    if text.len() <= MAX_DRIFT_VALUE_BYTES {
        return text;
    }
    // Room for the mark and "(123456 more bytes)".
    let end = crate::text::prefix_within(&text, MAX_DRIFT_VALUE_BYTES - 32).len();
    format!(
        "{}{CUT_MARK}({} more bytes)",
        &text[..end],
        text.len() - end
    )
}

/// The manager that last wrote the field at `location` of `live`: of the
/// managers whose managedFields name it (or, when none does, own an
/// ancestor whole, as with an atomic list), the one whose entry is the most
/// recent (RFC 3339 times in UTC order as strings). None without owners.
pub fn last_writer(live: &Value, location: &[Segment]) -> Option<String> {
    let mut owners = exact_owners(live, location);
    if owners.is_empty() {
        owners = super::managed_fields::owners(live, location);
    }
    let entries = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)?;
    entries
        .iter()
        .filter_map(|entry| {
            let manager = entry.get("manager")?.as_str()?;
            let time = entry.get("time").and_then(Value::as_str).unwrap_or("");
            owners.contains(manager).then_some((time, manager))
        })
        .max()
        .map(|(_, manager)| manager.to_string())
}

/// Drops what a pass wrote that was not a drift correction: a pass that
/// applied a new generation, or applied a work for the first time, changed
/// the object because the hub asked, not because the spoke drifted.
pub fn drop_corrections(status: &mut v1::WorkStatus) {
    for manifest in &mut status.manifests {
        if manifest
            .drift
            .as_ref()
            .is_some_and(|d| d.fields.iter().any(|f| f.corrected_unix_seconds != 0))
        {
            manifest.drift = None;
        }
    }
}

/// Makes this pass's drift report continue the last one published:
/// - a field still differing keeps the time it was first seen (matched by
///   pointer, so a spoke value that keeps changing is one drift);
/// - corrections made earlier at the same generation stay listed (most
///   recent first, within [`MAX_DRIFT_FIELDS`]) until the same field is
///   corrected again or the generation changes;
/// - the work lists at most [`MAX_WORK_DRIFT_FIELDS`] fields, later
///   manifests' extra fields counted in their `omitted`.
///
/// So a pass that finds what the last one found yields an identical report,
/// and the agent sends nothing. Never fails.
pub fn settle_drift(previous: Option<&v1::WorkStatus>, current: &mut v1::WorkStatus) {
    let generation = current.generation;
    for manifest in &mut current.manifests {
        let earlier = previous
            .filter(|p| p.generation == generation)
            .and_then(|p| {
                p.manifests
                    .iter()
                    .find(|m| m.resource_meta == manifest.resource_meta)
            })
            .and_then(|m| m.drift.as_ref());
        let Some(earlier) = earlier else {
            continue;
        };
        let drift = manifest.drift.get_or_insert_with(Default::default);
        for field in &mut drift.fields {
            if let Some(old) = earlier
                .fields
                .iter()
                .find(|old| old.pointer == field.pointer && old.corrected_unix_seconds == 0)
                && field.corrected_unix_seconds == 0
            {
                field.first_seen_unix_seconds = old.first_seen_unix_seconds;
            }
        }
        let mut carried: Vec<v1::DriftedField> = earlier
            .fields
            .iter()
            .filter(|old| old.corrected_unix_seconds != 0)
            .filter(|old| !drift.fields.iter().any(|f| f.pointer == old.pointer))
            .cloned()
            .collect();
        carried.sort_by_key(|f| Reverse(f.corrected_unix_seconds));
        let room = MAX_DRIFT_FIELDS.saturating_sub(drift.fields.len());
        drift.fields.extend(carried.into_iter().take(room));
        if drift.fields.is_empty() && drift.omitted == 0 {
            manifest.drift = None;
        }
    }
    let mut left = MAX_WORK_DRIFT_FIELDS;
    for drift in current
        .manifests
        .iter_mut()
        .filter_map(|m| m.drift.as_mut())
    {
        let cut = drift.fields.len().saturating_sub(left);
        if cut > 0 {
            drift.fields.truncate(left);
            drift.omitted = drift
                .omitted
                .saturating_add(u32::try_from(cut).unwrap_or(u32::MAX));
        }
        left -= drift.fields.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ignore::IgnoreRule;
    use crate::list_items::{ListKind, NoSchema};
    use crate::paths::IgnorePath;
    use crate::{compare::is_subset, contract::AGENT_FIELD_MANAGER};
    use proptest::prelude::{
        Just, Strategy as ValueStrategy, any, prop, prop_assert_eq, prop_oneof, proptest,
    };
    use serde_json::json;

    fn pointers(body: &Value, live: &Value) -> Vec<String> {
        differences(body, live, &NoSchema, usize::MAX)
            .0
            .into_iter()
            .map(|d| d.pointer)
            .collect()
    }

    #[test]
    fn a_changed_field_is_reported_with_both_values() {
        let body = json!({"spec": {"replicas": 2, "paused": false}});
        let live = json!({"spec": {"replicas": 5, "paused": false}, "status": {}});
        let (found, total) = differences(&body, &live, &NoSchema, 10);
        assert_eq!(total, 1);
        assert_eq!(found[0].pointer, "/spec/replicas");
        assert_eq!(found[0].hub, json!(2));
        assert_eq!(found[0].spoke, Some(json!(5)));
    }

    #[test]
    fn a_missing_field_has_no_spoke_value_and_a_null_means_absent() {
        let body = json!({"data": {"a": "1", "gone": null}});
        let live = json!({"data": {}});
        let (found, _) = differences(&body, &live, &NoSchema, 10);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].pointer, "/data/a");
        assert_eq!(found[0].spoke, None);
    }

    #[test]
    fn keyed_items_are_matched_by_key_and_a_missing_one_ends_in_dash() {
        let body = json!({"containers": [
            {"name": "app", "image": "v1"},
            {"name": "log", "image": "l1"}
        ]});
        let live = json!({"containers": [
            {"name": "sidecar", "image": "proxy"},
            {"name": "app", "image": "v2"}
        ]});
        assert_eq!(
            pointers(&body, &live),
            ["/containers/1/image", "/containers/-"]
        );
    }

    #[test]
    fn an_atomic_list_of_another_length_is_one_difference() {
        let atomic = |_: &[String]| ListKind::Atomic;
        let body = json!({"args": ["a", "b"]});
        let live = json!({"args": ["a"]});
        let (found, total) = differences(&body, &live, &atomic, 10);
        assert_eq!(total, 1);
        assert_eq!(found[0].pointer, "/args");
        assert_eq!(found[0].spoke, Some(json!(["a"])));
        assert_eq!(
            pointers(&json!({"args": ["a", "b"]}), &json!({"args": ["a", "c"]})),
            ["/args/1"]
        );
    }

    #[test]
    fn pointers_escape_tilde_and_slash() {
        let body = json!({"metadata": {"annotations": {"a.io/x~y": "1"}}});
        let live = json!({"metadata": {"annotations": {"a.io/x~y": "2"}}});
        assert_eq!(pointers(&body, &live), ["/metadata/annotations/a.io~1x~0y"]);
    }

    #[test]
    fn the_list_is_bounded_and_the_rest_counted() {
        let body = json!({"data": {"a": "1", "b": "1", "c": "1"}});
        let live = json!({"data": {"a": "2", "b": "2", "c": "2"}});
        let (found, total) = differences(&body, &live, &NoSchema, 2);
        assert_eq!((found.len(), total), (2, 3));
    }

    #[test]
    fn long_values_are_cut_with_a_mark() {
        let long = json!("x".repeat(1000));
        let shown = bounded_json(&long);
        assert!(shown.len() <= MAX_DRIFT_VALUE_BYTES, "{}", shown.len());
        assert!(shown.contains(CUT_MARK), "{shown}");
        assert!(shown.ends_with("more bytes)"), "{shown}");
        assert_eq!(bounded_json(&json!({"a": 1})), r#"{"a":1}"#);
        // Multi-byte characters are never split.
        let wide = json!("é".repeat(300));
        assert!(bounded_json(&wide).contains(CUT_MARK));
    }

    fn live_with_managers() -> Value {
        json!({
            "metadata": {"name": "web", "managedFields": [
                {"manager": "ferry-agent", "operation": "Apply", "time": "2026-11-23T10:00:00Z",
                 "fieldsV1": {"f:data": {"f:a": {}, "f:b": {}}}},
                {"manager": "kubectl-edit", "operation": "Update", "time": "2026-11-23T11:00:00Z",
                 "fieldsV1": {"f:data": {"f:b": {}}}}
            ]},
            "data": {"a": "1", "b": "edited"}
        })
    }

    #[test]
    fn the_manager_is_the_most_recent_owner_of_the_field() {
        let live = live_with_managers();
        let at = |k: &str| vec![Segment::Key("data".into()), Segment::Key(k.into())];
        assert_eq!(
            last_writer(&live, &at("b")).as_deref(),
            Some("kubectl-edit")
        );
        assert_eq!(last_writer(&live, &at("a")).as_deref(), Some("ferry-agent"));
        assert_eq!(last_writer(&live, &at("zzz")), None);
        assert_eq!(last_writer(&json!({}), &at("a")), None);
    }

    #[test]
    fn a_manager_that_only_created_the_parent_map_did_not_write_the_field() {
        // What the API server leaves after kubectl-edit's Update takes
        // `data.a` from the creator, both within the same second.
        let live = json!({
            "metadata": {"managedFields": [
                {"manager": "unknown", "operation": "Update", "time": "2026-11-23T10:00:00Z",
                 "fieldsV1": {"f:data": {}}},
                {"manager": "kubectl-edit", "operation": "Update", "time": "2026-11-23T10:00:00Z",
                 "fieldsV1": {"f:data": {"f:a": {}}}}
            ]},
            "data": {"a": "edited"}
        });
        let at = vec![Segment::Key("data".into()), Segment::Key("a".into())];
        assert_eq!(last_writer(&live, &at).as_deref(), Some("kubectl-edit"));
        // An atomic list is owned whole: its items' writer is the list's.
        let list = json!({
            "metadata": {"managedFields": [
                {"manager": "tool", "operation": "Apply", "time": "2026-11-23T10:00:00Z",
                 "fieldsV1": {"f:args": {}}}
            ]},
            "args": ["a"]
        });
        let item = vec![Segment::Key("args".into()), Segment::Index(0)];
        assert_eq!(last_writer(&list, &item).as_deref(), Some("tool"));
    }

    #[test]
    fn report_only_names_the_manager_and_times_the_first_sighting() {
        let desired = json!({"metadata": {"name": "web"}, "data": {"a": "1", "b": "hub"}});
        let strategy = Strategy::ReportOnly { rules: vec![] };
        let drift = manifest_drift(
            &strategy,
            &desired,
            Some(&live_with_managers()),
            false,
            &NoSchema,
            77,
        )
        .expect("drift");
        assert_eq!(drift.omitted, 0);
        let field = &drift.fields[0];
        assert_eq!(field.pointer, "/data/b");
        assert_eq!(field.hub_json, r#""hub""#);
        assert_eq!(field.spoke_json.as_deref(), Some(r#""edited""#));
        assert_eq!(field.manager, "kubectl-edit");
        assert_eq!(
            (field.first_seen_unix_seconds, field.corrected_unix_seconds),
            (77, 0)
        );
    }

    #[test]
    fn ignored_fields_are_never_drift() {
        let desired = json!({"metadata": {"name": "web"}, "data": {"a": "1", "b": "hub"}});
        for condition in [
            IgnoreCondition::OnSpokePresent,
            IgnoreCondition::OnSpokeChange,
        ] {
            let rules = vec![IgnoreRule {
                condition,
                paths: vec![IgnorePath::parse(".data.b").expect("path")],
            }];
            for strategy in [
                Strategy::ReportOnly {
                    rules: rules.clone(),
                },
                Strategy::ServerSideApply {
                    force: false,
                    manager: AGENT_FIELD_MANAGER.into(),
                    rules: rules.clone(),
                },
            ] {
                // OnSpokeChange under ServerSideApply applies an unrecorded hub
                // value once: that is not drift of an ignored field but the
                // first apply of it, so only check the recorded case there.
                if condition == IgnoreCondition::OnSpokeChange
                    && matches!(strategy, Strategy::ServerSideApply { .. })
                {
                    continue;
                }
                let drift = manifest_drift(
                    &strategy,
                    &desired,
                    Some(&live_with_managers()),
                    false,
                    &NoSchema,
                    1,
                );
                assert_eq!(drift, None, "{strategy:?}");
            }
        }
    }

    #[test]
    fn create_only_and_read_only_report_nothing() {
        let desired = json!({"data": {"b": "hub"}});
        for strategy in [Strategy::CreateOnly, Strategy::ReadOnly] {
            let drift = manifest_drift(
                &strategy,
                &desired,
                Some(&live_with_managers()),
                false,
                &NoSchema,
                1,
            );
            assert_eq!(drift, None);
        }
    }

    #[test]
    fn ferry_annotations_are_not_drift() {
        let desired = json!({"metadata": {"name": "web"}, "data": {"a": "1"}});
        let live = json!({"metadata": {"name": "web"}, "data": {"a": "1"}});
        let ssa = Strategy::ServerSideApply {
            force: false,
            manager: AGENT_FIELD_MANAGER.into(),
            rules: vec![],
        };
        for strategy in [Strategy::Update, ssa] {
            assert_eq!(
                manifest_drift(&strategy, &desired, Some(&live), true, &NoSchema, 1),
                None
            );
        }
    }

    fn status(generation: i64, drift: Option<v1::ManifestDrift>) -> v1::WorkStatus {
        v1::WorkStatus {
            generation,
            manifests: vec![v1::ManifestStatus {
                resource_meta: Some(v1::ResourceMeta {
                    name: "web".into(),
                    ..Default::default()
                }),
                drift,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn field(pointer: &str, seen: i64, corrected: i64) -> v1::DriftedField {
        v1::DriftedField {
            pointer: pointer.into(),
            hub_json: "1".into(),
            spoke_json: Some("2".into()),
            manager: "kubectl-edit".into(),
            first_seen_unix_seconds: seen,
            corrected_unix_seconds: corrected,
        }
    }

    fn drift(fields: Vec<v1::DriftedField>) -> Option<v1::ManifestDrift> {
        Some(v1::ManifestDrift { fields, omitted: 0 })
    }

    #[test]
    fn an_unchanged_drift_set_yields_an_identical_report() {
        let previous = status(3, drift(vec![field("/data/a", 10, 0)]));
        let mut current = status(3, drift(vec![field("/data/a", 50, 0)]));
        settle_drift(Some(&previous), &mut current);
        assert_eq!(current, previous);
    }

    #[test]
    fn a_field_that_matches_again_leaves_the_report() {
        let previous = status(3, drift(vec![field("/data/a", 10, 0)]));
        let mut current = status(3, None);
        settle_drift(Some(&previous), &mut current);
        assert_eq!(current.manifests[0].drift, None);
    }

    #[test]
    fn corrections_stay_listed_until_the_generation_changes() {
        let previous = status(3, drift(vec![field("/data/a", 10, 10)]));
        let mut quiet = status(3, None);
        settle_drift(Some(&previous), &mut quiet);
        assert_eq!(quiet, previous);
        let mut again = status(3, drift(vec![field("/data/a", 90, 90)]));
        settle_drift(Some(&previous), &mut again);
        assert_eq!(
            again.manifests[0].drift,
            drift(vec![field("/data/a", 90, 90)])
        );
        let mut next = status(4, None);
        settle_drift(Some(&previous), &mut next);
        assert_eq!(next.manifests[0].drift, None);
    }

    #[test]
    fn a_new_pass_drops_what_the_hub_asked_for() {
        let mut applied = status(4, drift(vec![field("/data/a", 10, 10)]));
        drop_corrections(&mut applied);
        assert_eq!(applied.manifests[0].drift, None);
        let mut open = status(4, drift(vec![field("/data/a", 10, 0)]));
        drop_corrections(&mut open);
        assert!(open.manifests[0].drift.is_some());
    }

    #[test]
    fn the_work_lists_a_bounded_number_of_fields() {
        let many: Vec<v1::DriftedField> = (0..MAX_DRIFT_FIELDS)
            .map(|i| field(&format!("/data/k{i}"), 1, 0))
            .collect();
        let mut work = v1::WorkStatus::default();
        let manifests = MAX_WORK_DRIFT_FIELDS / MAX_DRIFT_FIELDS + 2;
        for _ in 0..manifests {
            work.manifests.push(v1::ManifestStatus {
                drift: drift(many.clone()),
                ..Default::default()
            });
        }
        settle_drift(None, &mut work);
        let listed: usize = work
            .manifests
            .iter()
            .filter_map(|m| m.drift.as_ref())
            .map(|d| d.fields.len())
            .sum();
        let omitted: u32 = work
            .manifests
            .iter()
            .filter_map(|m| m.drift.as_ref())
            .map(|d| d.omitted)
            .sum();
        assert_eq!(listed, MAX_WORK_DRIFT_FIELDS);
        assert_eq!(
            listed + omitted as usize,
            manifests * MAX_DRIFT_FIELDS,
            "every field is listed or counted"
        );
    }

    fn json_value() -> impl ValueStrategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (0i64..4).prop_map(Value::from),
            "[ab]{0,2}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-c]", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// The report and the "would a write change anything" check agree:
        /// drift is reported exactly when a correcting strategy would write.
        #[test]
        fn no_differences_exactly_when_the_body_is_a_subset(
            body in json_value(),
            live in json_value(),
        ) {
            let (_, total) = differences(&body, &live, &NoSchema, 0);
            prop_assert_eq!(total == 0, is_subset(&body, &live, &NoSchema));
        }

        /// A body always matches itself.
        #[test]
        fn an_object_never_drifts_from_itself(body in json_value()) {
            prop_assert_eq!(differences(&body, &body, &NoSchema, 0).1, 0);
        }
    }
}
