//! Lists whose items have identity: what the schema (or, without one,
//! Metacontroller's conventions) says keys a list, and how an item is found
//! by its key. Both the three-way merge and the "would a write change
//! anything" comparison match list items this way.

use serde_json::Value;

use super::equality::values_equal;

/// What kind of list lives at a schema path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// An associative list whose items are identified by these fields.
    Map(Vec<String>),
    /// A list replaced as a whole.
    Atomic,
    /// The schema says nothing: use conventions.
    Unknown,
}

/// Answers what kind of list lives at a schema path: object keys only, with
/// list positions written as `"[]"`, e.g. `["spec","template","spec","containers"]`.
/// `Send + Sync` so appliers can hold one across awaits.
pub trait ListSchema: Send + Sync {
    /// The kind of the list at `path`.
    fn list_kind(&self, path: &[String]) -> ListKind;
}

/// No schema information: every list is [`ListKind::Unknown`].
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSchema;

impl ListSchema for NoSchema {
    fn list_kind(&self, _path: &[String]) -> ListKind {
        ListKind::Unknown
    }
}

/// Any function from schema path to kind is a schema (handy in tests and
/// for schemas built from tables).
impl<F: Fn(&[String]) -> ListKind + Send + Sync> ListSchema for F {
    fn list_kind(&self, path: &[String]) -> ListKind {
        self(path)
    }
}

/// The conventional merge keys, in precedence order (Metacontroller's list:
/// `containerPort` and `port` before `name` because ports may carry names
/// that are not unique, `mountPath` before `name` because a volume can be
/// mounted twice).
pub const CONVENTIONAL_MERGE_KEYS: [&str; 7] = [
    "containerPort",
    "port",
    "mountPath",
    "name",
    "uid",
    "ip",
    "path",
];

/// Conventional merge key of a list with no schema info (seed 001): every
/// item is an object and all share one of [`CONVENTIONAL_MERGE_KEYS`] with a
/// non-null value; the first such key in precedence order. None for an
/// empty list (no evidence) or when no key is shared.
pub fn conventional_merge_key(items: &[Value]) -> Option<&'static str> {
    conventional_key(items)
}

fn conventional_key<'a>(items: impl IntoIterator<Item = &'a Value>) -> Option<&'static str> {
    let mut candidates: Vec<&'static str> = CONVENTIONAL_MERGE_KEYS.to_vec();
    let mut seen = false;
    for item in items {
        let obj = item.as_object()?;
        candidates.retain(|k| obj.get(*k).is_some_and(|v| !v.is_null()));
        seen = true;
    }
    if seen {
        candidates.first().copied()
    } else {
        None
    }
}

/// The fields identifying items of the list at `path`, looking at every
/// version of the list we have; None means "not keyed: replace or compare
/// by position".
pub(crate) fn list_keys(
    schema: &dyn ListSchema,
    path: &[String],
    lists: &[&[Value]],
) -> Option<Vec<String>> {
    match schema.list_kind(path) {
        ListKind::Map(keys) if !keys.is_empty() => Some(keys),
        ListKind::Atomic => None,
        ListKind::Map(_) | ListKind::Unknown => {
            conventional_key(lists.iter().flat_map(|l| l.iter())).map(|k| vec![k.to_string()])
        }
    }
}

/// Whether `candidate` is the item `pattern` names: every key field the
/// pattern sets has the same value in the candidate. Key fields the pattern
/// omits are wildcards, because the server defaults some (a Service port's
/// `protocol`) that manifests leave out.
pub(crate) fn names(pattern: &Value, candidate: &Value, keys: &[String]) -> bool {
    let (Some(p), Some(c)) = (pattern.as_object(), candidate.as_object()) else {
        return false;
    };
    let mut any = false;
    for k in keys {
        if let Some(v) = p.get(k).filter(|v| !v.is_null()) {
            if c.get(k).is_none_or(|cv| !values_equal(v, cv)) {
                return false;
            }
            any = true;
        }
    }
    any
}

fn same_key(a: &Value, b: &Value, keys: &[String]) -> bool {
    names(a, b, keys) && names(b, a, keys)
}

/// The first unused candidate with exactly the pattern's key, else the first
/// unused one the pattern names.
pub(crate) fn find_item(
    pattern: &Value,
    candidates: &[Value],
    used: &[bool],
    keys: &[String],
) -> Option<usize> {
    let free = |i: &usize| !used.get(*i).copied().unwrap_or(false);
    let mut free_indices = (0..candidates.len()).filter(free);
    free_indices
        .clone()
        .find(|&i| same_key(pattern, &candidates[i], keys))
        .or_else(|| free_indices.find(|&i| names(pattern, &candidates[i], keys)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conventional_keys_follow_the_fixed_order() {
        let ports = [json!({"name": "http", "containerPort": 80})];
        assert_eq!(conventional_merge_key(&ports), Some("containerPort"));
        let mounts = [
            json!({"name": "v", "mountPath": "/a"}),
            json!({"name": "v", "mountPath": "/b"}),
        ];
        assert_eq!(conventional_merge_key(&mounts), Some("mountPath"));
        assert_eq!(
            conventional_merge_key(&[json!({"name": "a"}), json!({"uid": "b"})]),
            None
        );
        assert_eq!(
            conventional_merge_key(&[json!({"name": "a"}), json!("b")]),
            None
        );
        assert_eq!(conventional_merge_key(&[json!({"name": null})]), None);
        assert_eq!(conventional_merge_key(&[]), None);
    }
}
