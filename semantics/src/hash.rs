//! Hashes that record what the hub applied: one for the whole manifest
//! (minus OnSpokePresent fields) and one per OnSpokeChange path.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::paths::{IgnorePath, remove_all};

/// Annotation holding [`object_hash`] of the applied manifest.
pub const OBJECT_HASH_ANNOTATION: &str = "work.ferry.dev/object-hash";
/// Annotation holding a JSON object: normalized OnSpokeChange path → [`field_hash`].
pub const FIELD_HASHES_ANNOTATION: &str = "work.ferry.dev/field-hashes";
/// Annotation holding the manifest last applied with the `Update` strategy.
pub const LAST_APPLIED_ANNOTATION: &str = "work.ferry.dev/last-applied-configuration";

/// Longest field manager name kept readable in a bookkeeping annotation key:
/// a key's name part holds at most 63 characters, of which
/// `field-hashes.` takes 13.
const MAX_READABLE_MANAGER: usize = 50;

/// The annotation keys (object hash, field hashes) that record what field
/// manager `manager` applied. ferry's own manager keeps the historical keys
/// ([`OBJECT_HASH_ANNOTATION`], [`FIELD_HASHES_ANNOTATION`]), so objects
/// written before per-manager keys existed are read as before; any other
/// manager gets keys of its own (`work.ferry.dev/object-hash.<manager>`, or
/// a digest of the name where the name cannot be part of a key), so two
/// works applying one object under different managers never set the same
/// annotation to different values and never conflict over it. Never fails.
pub fn bookkeeping_keys(manager: &str) -> (String, String) {
    if manager == crate::contract::AGENT_FIELD_MANAGER {
        return (
            OBJECT_HASH_ANNOTATION.to_string(),
            FIELD_HASHES_ANNOTATION.to_string(),
        );
    }
    let readable = !manager.is_empty()
        && manager.len() <= MAX_READABLE_MANAGER
        && manager.starts_with(|c: char| c.is_ascii_alphanumeric())
        && manager.ends_with(|c: char| c.is_ascii_alphanumeric())
        && manager
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let suffix = if readable {
        manager.to_string()
    } else {
        sha256_hex(manager)[..16].to_string()
    };
    (
        format!("{OBJECT_HASH_ANNOTATION}.{suffix}"),
        format!("{FIELD_HASHES_ANNOTATION}.{suffix}"),
    )
}

/// Whether annotation `key` is ferry's own bookkeeping, for any field
/// manager (see [`bookkeeping_keys`]).
pub fn is_ferry_annotation(key: &str) -> bool {
    key == LAST_APPLIED_ANNOTATION
        || [OBJECT_HASH_ANNOTATION, FIELD_HASHES_ANNOTATION]
            .iter()
            .any(|base| {
                key == *base
                    || key
                        .strip_prefix(base)
                        .is_some_and(|rest| rest.len() > 1 && rest.starts_with('.'))
            })
}

/// Canonical JSON: object keys sorted (recursively), no whitespace. Sorts
/// explicitly so the result never depends on the map's key order (serde_json
/// may be built with `preserve_order`). Never fails.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        Value::String(s) => write_string(s, out),
        // Scalars other than strings already print canonically.
        other => out.push_str(&other.to_string()),
    }
}

fn write_string(s: &str, out: &mut String) {
    out.push_str(&Value::String(s.to_string()).to_string());
}

fn sha256_hex(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in digest {
        // Writing to a String cannot fail.
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// sha256 (lowercase hex) of the canonical JSON of `manifest` after removing
/// every OnSpokePresent path and ferry's own annotations, so the hash never
/// depends on itself. `metadata.annotations` is dropped when that empties it.
/// Never fails.
pub fn object_hash(manifest: &Value, on_spoke_present: &[IgnorePath]) -> String {
    let mut stripped = manifest.clone();
    remove_all(&mut stripped, on_spoke_present);
    strip_ferry_annotations(&mut stripped);
    sha256_hex(&canonical_json(&stripped))
}

/// Removes ferry's own annotations, and the annotations map if that empties it.
/// Does nothing to a value that is not an object with metadata.
pub fn strip_ferry_annotations(manifest: &mut Value) {
    let Some(metadata) = manifest.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(annotations) = metadata
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    annotations.retain(|key, _| !is_ferry_annotation(key));
    if annotations.is_empty() {
        metadata.remove("annotations");
    }
}

/// The map at `metadata.<field>` of `manifest`, created (or replacing a
/// non-object there, as does `metadata`) as needed. None when `manifest` is
/// not an object.
pub(crate) fn metadata_map_mut<'a>(
    manifest: &'a mut Value,
    field: &str,
) -> Option<&'a mut Map<String, Value>> {
    let object = manifest.as_object_mut()?;
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    let map = metadata
        .as_object_mut()?
        .entry(field)
        .or_insert_with(|| Value::Object(Map::new()));
    if !map.is_object() {
        *map = Value::Object(Map::new());
    }
    map.as_object_mut()
}

/// Sets `annotations` on `manifest`, creating `metadata.annotations` (or
/// replacing a non-object there) as needed. Does nothing to a value that is
/// not an object.
pub fn set_annotations(manifest: &mut Value, annotations: &[(&str, String)]) {
    if let Some(map) = metadata_map_mut(manifest, "annotations") {
        for (key, value) in annotations {
            map.insert(key.to_string(), Value::String(value.clone()));
        }
    }
}

/// Hash of the hub's value(s) at one path: sha256 of the canonical JSON of
/// the array of matched values in document order. Nothing matched hashes the
/// empty array, so "absent" is distinct and stable. Never fails.
pub fn field_hash(manifest: &Value, path: &IgnorePath) -> String {
    let matched: Vec<Value> = super::paths::locate(manifest, path)
        .iter()
        .filter_map(|ptr| super::paths::get(manifest, ptr).cloned())
        .collect();
    sha256_hex(&canonical_json(&Value::Array(matched)))
}

/// Parses the field-hashes annotation. A missing or malformed value is an
/// empty map ("no record"), never an error: the worst outcome is applying
/// the hub's value once more.
pub fn parse_field_hashes(annotation: Option<&str>) -> BTreeMap<String, String> {
    annotation
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// Renders field hashes as the annotation value (keys in sorted order).
pub fn render_field_hashes(hashes: &BTreeMap<String, String>) -> String {
    let map: serde_json::Map<String, Value> = hashes
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    canonical_json(&Value::Object(map))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn ferry_agent_keeps_the_historical_keys_and_other_managers_get_their_own() {
        assert_eq!(
            bookkeeping_keys(crate::contract::AGENT_FIELD_MANAGER),
            (
                OBJECT_HASH_ANNOTATION.to_string(),
                FIELD_HASHES_ANNOTATION.to_string()
            )
        );
        let (object_key, field_key) = bookkeeping_keys("work-agent");
        assert_eq!(object_key, "work.ferry.dev/object-hash.work-agent");
        assert_eq!(field_key, "work.ferry.dev/field-hashes.work-agent");
        // A name that cannot be part of a key is replaced by a digest, still
        // one key per manager.
        let (odd, _) = bookkeeping_keys("kubectl client-side apply/ü");
        let (other, _) = bookkeeping_keys("kubectl client-side apply/ä");
        assert_ne!(odd, other);
        for key in [&object_key, &field_key, &odd] {
            let name = key.split_once('/').expect("prefixed").1;
            assert!(name.len() <= 63, "{key}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')),
                "{key}"
            );
            assert!(is_ferry_annotation(key), "{key}");
        }
        let long = "m".repeat(128);
        assert!(bookkeeping_keys(&long).0.len() <= "work.ferry.dev/".len() + 63);
        assert!(!is_ferry_annotation("work.ferry.dev/object-hashes"));
        assert!(!is_ferry_annotation("work.ferry.dev/object-hash."));
        assert!(!is_ferry_annotation("example.com/object-hash"));
    }

    #[test]
    fn every_managers_bookkeeping_is_left_out_of_the_object_hash() {
        let plain = json!({"metadata": {"name": "a"}, "data": {"x": "1"}});
        let mut marked = plain.clone();
        marked["metadata"]["annotations"] =
            json!({"work.ferry.dev/object-hash.work-agent": "h", OBJECT_HASH_ANNOTATION: "h"});
        assert_eq!(object_hash(&marked, &[]), object_hash(&plain, &[]));
    }
    use proptest::prelude::*;
    use serde_json::json;

    fn path(raw: &str) -> IgnorePath {
        IgnorePath::parse(raw).expect("valid path")
    }

    #[test]
    fn canonical_json_sorts_keys_and_drops_whitespace() {
        let v: Value = serde_json::from_str(r#"{ "b": [1, {"d": 1, "c": "x\"y"}], "a": null }"#)
            .expect("json");
        assert_eq!(
            canonical_json(&v),
            r#"{"a":null,"b":[1,{"c":"x\"y","d":1}]}"#
        );
    }

    #[test]
    fn object_hash_is_lowercase_sha256_hex() {
        let h = object_hash(&json!({"a": 1}), &[]);
        assert_eq!(h.len(), 64);
        assert!(
            h.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        );
        // sha256 of `{"a":1}`
        assert_eq!(
            h,
            "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862"
        );
    }

    #[test]
    fn object_hash_does_not_depend_on_ferrys_own_annotations() {
        let plain = json!({"metadata": {"name": "x"}});
        let annotated = json!({"metadata": {"name": "x", "annotations": {
            OBJECT_HASH_ANNOTATION: "abc",
            FIELD_HASHES_ANNOTATION: "{}",
            LAST_APPLIED_ANNOTATION: "{}",
        }}});
        assert_eq!(object_hash(&plain, &[]), object_hash(&annotated, &[]));
        let other = json!({"metadata": {"name": "x", "annotations": {"team": "a"}}});
        assert_ne!(object_hash(&plain, &[]), object_hash(&other, &[]));
    }

    #[test]
    fn field_hash_of_an_absent_field_differs_from_any_value() {
        let p = path("$.spec.replicas");
        let absent = field_hash(&json!({"spec": {}}), &p);
        assert_eq!(absent, field_hash(&json!({}), &p));
        assert_ne!(absent, field_hash(&json!({"spec": {"replicas": null}}), &p));
        assert_ne!(absent, field_hash(&json!({"spec": {"replicas": 1}}), &p));
    }

    #[test]
    fn field_hash_covers_every_match() {
        let p = path("$.spec.containers[*].image");
        let a = json!({"spec": {"containers": [{"image": "a"}, {"image": "b"}]}});
        let b = json!({"spec": {"containers": [{"image": "a"}, {"image": "c"}]}});
        assert_ne!(field_hash(&a, &p), field_hash(&b, &p));
    }

    #[test]
    fn malformed_field_hashes_mean_no_record() {
        assert!(parse_field_hashes(None).is_empty());
        assert!(parse_field_hashes(Some("not json")).is_empty());
        assert!(parse_field_hashes(Some(r#"{"$.a": 1}"#)).is_empty());
        let mut hashes = BTreeMap::new();
        hashes.insert("$.data".to_string(), "abc".to_string());
        assert_eq!(
            parse_field_hashes(Some(&render_field_hashes(&hashes))),
            hashes
        );
    }

    /// Arbitrary JSON without deep nesting, so cases stay fast.
    pub(crate) fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-z0-9 '\"./]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{1,3}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// The same object with every map's entries inserted in reverse order.
    fn reversed(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.reverse();
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.clone(), reversed(v)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(reversed).collect()),
            other => other.clone(),
        }
    }

    proptest! {
        #[test]
        fn key_order_never_changes_the_hash(v in arb_json()) {
            prop_assert_eq!(canonical_json(&v), canonical_json(&reversed(&v)));
            prop_assert_eq!(object_hash(&v, &[]), object_hash(&reversed(&v), &[]));
        }

        #[test]
        fn different_values_hash_differently(a in arb_json(), b in arb_json()) {
            prop_assume!(a != b);
            prop_assert_ne!(object_hash(&a, &[]), object_hash(&b, &[]));
        }

        #[test]
        fn object_hash_ignores_values_at_on_spoke_present_paths(
            base in arb_json(), x in arb_json(), y in arb_json(),
        ) {
            let present = [path("$.spec.replicas")];
            let mut a = json!({"spec": {"replicas": x}, "rest": base});
            let b = {
                let mut b = a.clone();
                b["spec"]["replicas"] = y;
                b
            };
            prop_assert_eq!(object_hash(&a, &present), object_hash(&b, &present));
            if let Some(spec) = a["spec"].as_object_mut() {
                spec.remove("replicas");
            }
            prop_assert_eq!(object_hash(&a, &present), object_hash(&b, &present));
        }
    }
}
