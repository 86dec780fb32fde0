//! One owner per object between works: which of several works that list the
//! same spoke object owns it, and which fields two works disagree on. Pure:
//! the agent keeps the index and asks these functions.
//!
//! The rule: the work whose record (AppliedManifestWork) on the cluster is
//! older owns the object; equal ages fall back to the work's
//! `namespace/name`, then its UID, so every agent and every pass picks the
//! same owner. Works that agree on every field they both set share the
//! object; a younger work that disagrees with an older one writes nothing.

use serde_json::Value;

/// Where a work stands when works compete for one object: lower is older
/// and wins. Ordered by creation time, then name, then UID.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct WorkRank {
    /// When the work's record was created on the cluster (Unix seconds).
    pub created: i64,
    /// The work's `namespace/name` on the hub.
    pub name: String,
    /// The work's UID on the hub.
    pub uid: String,
}

/// Top-level fields that identify the object rather than set its state.
const IDENTITY_FIELDS: [&str; 2] = ["apiVersion", "kind"];

/// The fields both manifests set to different values, as dotted paths
/// (`data.owner`, `spec.replicas`). Objects are compared key by key; a list
/// or scalar is one field. A field only one manifest sets is no conflict:
/// works may share an object by setting different fields of it.
pub fn conflicting_fields(mine: &Value, theirs: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let (Value::Object(a), Value::Object(b)) = (mine, theirs) {
        for (key, value) in a {
            if IDENTITY_FIELDS.contains(&key.as_str()) {
                continue;
            }
            if let Some(other) = b.get(key) {
                walk(value, other, key, &mut out);
            }
        }
    }
    out
}

fn walk(mine: &Value, theirs: &Value, path: &str, out: &mut Vec<String>) {
    match (mine, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                if let Some(other) = b.get(key) {
                    walk(value, other, &format!("{path}.{key}"), out);
                }
            }
        }
        _ if mine != theirs => out.push(path.to_string()),
        _ => {}
    }
}

/// The outcome of a work's claim on an object against the other works that
/// list it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// This work may write the object: it is the oldest, or it agrees with
    /// every older work.
    Write,
    /// An older work wants other values: the owner and the contested fields.
    Yield {
        /// The owning work's `namespace/name`.
        owner: String,
        /// The fields the two works disagree on.
        fields: Vec<String>,
    },
}

/// Decides whether the work ranked `mine` with manifest `desired` may write
/// an object that `others` (rank, manifest) also list. The oldest other work
/// it disagrees with owns the object.
pub fn verdict<'a>(
    mine: &WorkRank,
    desired: &Value,
    others: impl IntoIterator<Item = (&'a WorkRank, &'a Value)>,
) -> Verdict {
    let mut older: Vec<(&WorkRank, &Value)> = others
        .into_iter()
        .filter(|(rank, _)| *rank < mine)
        .collect();
    older.sort_by(|a, b| a.0.cmp(b.0));
    for (rank, theirs) in older {
        let fields = conflicting_fields(desired, theirs);
        if !fields.is_empty() {
            return Verdict::Yield {
                owner: rank.name.clone(),
                fields,
            };
        }
    }
    Verdict::Write
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rank(created: i64, name: &str) -> WorkRank {
        WorkRank {
            created,
            name: name.into(),
            uid: format!("uid-{name}"),
        }
    }

    fn cm(owner: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "contested", "namespace": "default"},
               "data": {"owner": owner, "shared": "x"}})
    }

    #[test]
    fn different_values_of_one_field_conflict_on_that_field_only() {
        assert_eq!(
            conflicting_fields(&cm("one"), &cm("two")),
            vec!["data.owner"]
        );
    }

    #[test]
    fn fields_only_one_side_sets_do_not_conflict() {
        let mine = json!({"data": {"a": "1"}, "metadata": {"labels": {"x": "1"}}});
        let theirs = json!({"data": {"b": "2"}, "metadata": {"labels": {"y": "2"}}});
        assert!(conflicting_fields(&mine, &theirs).is_empty());
    }

    #[test]
    fn lists_compare_as_one_field_and_api_version_is_identity() {
        let mine = json!({"apiVersion": "apps/v1", "spec": {"ports": [1, 2]}});
        let theirs = json!({"apiVersion": "apps/v1beta1", "spec": {"ports": [1]}});
        assert_eq!(conflicting_fields(&mine, &theirs), vec!["spec.ports"]);
    }

    #[test]
    fn the_younger_work_yields_to_the_older_that_disagrees() {
        let (one, two) = (rank(10, "default/one"), rank(20, "default/two"));
        let (a, b) = (cm("one"), cm("two"));
        assert_eq!(verdict(&one, &a, [(&two, &b)]), Verdict::Write);
        assert_eq!(
            verdict(&two, &b, [(&one, &a)]),
            Verdict::Yield {
                owner: "default/one".into(),
                fields: vec!["data.owner".into()]
            }
        );
    }

    #[test]
    fn equal_ages_are_broken_by_name_the_same_way_from_both_sides() {
        let (a, b) = (rank(10, "default/a"), rank(10, "default/b"));
        let (va, vb) = (cm("a"), cm("b"));
        assert_eq!(verdict(&a, &va, [(&b, &vb)]), Verdict::Write);
        assert!(matches!(
            verdict(&b, &vb, [(&a, &va)]),
            Verdict::Yield { .. }
        ));
    }

    #[test]
    fn works_that_agree_share_the_object() {
        let (one, two) = (rank(10, "default/one"), rank(20, "default/two"));
        let same = cm("same");
        assert_eq!(verdict(&two, &same, [(&one, &same)]), Verdict::Write);
    }

    #[test]
    fn the_oldest_disagreeing_work_is_named_owner() {
        let (a, b, c) = (rank(1, "ns/a"), rank(2, "ns/b"), rank(3, "ns/c"));
        let (va, vb, vc) = (cm("a"), cm("c"), cm("c"));
        match verdict(&c, &vc, [(&b, &vb), (&a, &va)]) {
            Verdict::Yield { owner, .. } => assert_eq!(owner, "ns/a"),
            Verdict::Write => panic!("c disagrees with the older a"),
        }
    }
}
