//! Per-cluster rendering of a ManifestWorkReplicaSet's template (a ferry
//! addition to OCM): the overrides whose cluster selector matched apply
//! their RFC 6902 JSON patches to the manifest their resource identifier
//! names, then `${CLUSTER_NAME}` and `${CLUSTER_LABEL:key}` are substituted
//! in every string value. Pure, so the hub's controller and `ferry-hub
//! render` give the same result, and a bad override is an error naming it,
//! never a panic.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// Which manifest of the template an override patches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceIdentifier {
    /// API group (`""` for the core group), compared with the manifest's
    /// `apiVersion`.
    pub group: String,
    /// Lowercase plural resource (`deployments`); empty when `kind` names it.
    pub resource: String,
    /// Kind (`Deployment`); empty when `resource` names it.
    pub kind: String,
    /// Namespace (`""` for a cluster-scoped manifest or one without a
    /// namespace).
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// One override chosen for the cluster being rendered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Override {
    /// The override's name, quoted in errors.
    pub name: String,
    /// The manifest it patches.
    pub resource_identifier: ResourceIdentifier,
    /// RFC 6902 operations, as written by the user.
    pub json_patch: Vec<Value>,
}

/// Why a cluster's work cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The template has no `workload.manifests` list.
    #[error("the template has no workload.manifests list")]
    NoManifests,
    /// No manifest matches the override's resource identifier.
    #[error("override {name:?}: no manifest in the template is {identifier}")]
    NoMatch {
        /// The override.
        name: String,
        /// The identifier, as `group/kind-or-resource namespace/name`.
        identifier: String,
    },
    /// An operation is not a valid RFC 6902 operation.
    #[error("override {name:?}: jsonPatch[{index}] is not a valid JSON patch operation: {reason}")]
    BadOperation {
        /// The override.
        name: String,
        /// Position of the operation.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// An operation could not be applied to the manifest.
    #[error("override {name:?}: jsonPatch[{index}] ({op} {path}) failed: {reason}")]
    PatchFailed {
        /// The override.
        name: String,
        /// Position of the failing operation.
        index: usize,
        /// Its `op`.
        op: String,
        /// Its `path`.
        path: String,
        /// Why it failed.
        reason: String,
    },
    /// `${CLUSTER_LABEL:key}` names a label the cluster does not have.
    #[error("${{CLUSTER_LABEL:{key}}} at {at}: the cluster has no label {key:?}")]
    UnknownLabel {
        /// The label key.
        key: String,
        /// JSON pointer of the string holding it.
        at: String,
    },
}

/// The conventional lowercase plural of a kind (what `resource` is
/// compared against: the hub cannot ask a spoke's discovery).
fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        return format!("{stem}ies");
    }
    if lower.ends_with('s')
        || lower.ends_with('x')
        || lower.ends_with("ch")
        || lower.ends_with("sh")
    {
        return format!("{lower}es");
    }
    format!("{lower}s")
}

fn str_at<'a>(manifest: &'a Value, pointer: &str) -> &'a str {
    manifest
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Whether `manifest` is the one `id` names.
pub fn identifies(id: &ResourceIdentifier, manifest: &Value) -> bool {
    let api_version = str_at(manifest, "/apiVersion");
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let kind = str_at(manifest, "/kind");
    group == id.group
        && (id.kind.is_empty() || id.kind == kind)
        && (id.resource.is_empty() || id.resource == plural(kind))
        && (!id.kind.is_empty() || !id.resource.is_empty())
        && str_at(manifest, "/metadata/namespace") == id.namespace
        && str_at(manifest, "/metadata/name") == id.name
}

fn describe(id: &ResourceIdentifier) -> String {
    let what = if id.kind.is_empty() {
        &id.resource
    } else {
        &id.kind
    };
    let group = if id.group.is_empty() {
        String::new()
    } else {
        format!("{}/", id.group)
    };
    if id.namespace.is_empty() {
        format!("{group}{what} {}", id.name)
    } else {
        format!("{group}{what} {}/{}", id.namespace, id.name)
    }
}

/// Applies one override to the manifests of `spec`.
fn apply_override(spec: &mut Value, o: &Override) -> Result<(), RenderError> {
    let mut operations = Vec::with_capacity(o.json_patch.len());
    for (index, op) in o.json_patch.iter().enumerate() {
        let parsed: json_patch::PatchOperation =
            serde_json::from_value(op.clone()).map_err(|e| RenderError::BadOperation {
                name: o.name.clone(),
                index,
                reason: e.to_string(),
            })?;
        operations.push(parsed);
    }
    let manifests = spec
        .pointer_mut("/workload/manifests")
        .and_then(Value::as_array_mut)
        .ok_or(RenderError::NoManifests)?;
    let mut matched = false;
    for manifest in manifests
        .iter_mut()
        .filter(|m| identifies(&o.resource_identifier, m))
    {
        matched = true;
        json_patch::patch(manifest, &operations).map_err(|e| {
            let op = o.json_patch.get(e.operation);
            let field = |f: &str| {
                op.and_then(|op| op.get(f))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            RenderError::PatchFailed {
                name: o.name.clone(),
                index: e.operation,
                op: field("op"),
                path: field("path"),
                reason: e.kind.to_string(),
            }
        })?;
    }
    if matched {
        Ok(())
    } else {
        Err(RenderError::NoMatch {
            name: o.name.clone(),
            identifier: describe(&o.resource_identifier),
        })
    }
}

static PLACEHOLDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\$\{(?:CLUSTER_NAME|CLUSTER_LABEL:([^}]*))\}").expect("a valid pattern")
});

/// Substitutes the placeholders in every string under `value`.
fn substitute(
    value: &mut Value,
    at: &mut String,
    cluster: &str,
    labels: &BTreeMap<String, String>,
) -> Result<(), RenderError> {
    match value {
        Value::String(s) if s.contains("${") => {
            let mut out = String::with_capacity(s.len());
            let mut last = 0;
            for captures in PLACEHOLDER.captures_iter(s) {
                let whole = captures.get(0).expect("group 0 is the match");
                out.push_str(&s[last..whole.start()]);
                match captures.get(1) {
                    None => out.push_str(cluster),
                    Some(key) => match labels.get(key.as_str()) {
                        Some(v) => out.push_str(v),
                        None => {
                            return Err(RenderError::UnknownLabel {
                                key: key.as_str().to_string(),
                                at: at.clone(),
                            });
                        }
                    },
                }
                last = whole.end();
            }
            out.push_str(&s[last..]);
            *s = out;
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let len = at.len();
                at.push_str(&format!("/{i}"));
                substitute(item, at, cluster, labels)?;
                at.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, item) in map.iter_mut() {
                let len = at.len();
                at.push('/');
                at.push_str(&k.replace('~', "~0").replace('/', "~1"));
                substitute(item, at, cluster, labels)?;
                at.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
}

/// The work spec `cluster` (with `labels`) gets: `template` (a
/// ManifestWorkSpec as JSON) with `overrides` (those whose selector chose
/// the cluster, in spec order) applied, then the placeholders substituted
/// (so patch values may use them too). Fails, naming the override and the
/// operation, when an operation is invalid, does not apply, or names no
/// manifest, and naming the key when a label placeholder has no label.
pub fn render(
    template: &Value,
    cluster: &str,
    labels: &BTreeMap<String, String>,
    overrides: &[Override],
) -> Result<Value, RenderError> {
    let mut spec = template.clone();
    for o in overrides {
        apply_override(&mut spec, o)?;
    }
    substitute(&mut spec, &mut String::new(), cluster, labels)?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn template() -> Value {
        json!({"workload": {"manifests": [
            {"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": "web", "namespace": "app", "labels": {"cluster": "${CLUSTER_NAME}"}},
             "spec": {"replicas": 1}},
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "cfg", "namespace": "app"},
             "data": {"region": "${CLUSTER_LABEL:region}", "plain": "$ {x} ${OTHER}"}},
        ]}})
    }

    fn deployment(ops: Value) -> Override {
        Override {
            name: "scale".into(),
            resource_identifier: ResourceIdentifier {
                group: "apps".into(),
                kind: "Deployment".into(),
                namespace: "app".into(),
                name: "web".into(),
                ..ResourceIdentifier::default()
            },
            json_patch: ops.as_array().cloned().unwrap_or_default(),
        }
    }

    fn labels() -> BTreeMap<String, String> {
        BTreeMap::from([("region".to_string(), "eu".to_string())])
    }

    #[test]
    fn placeholders_take_the_cluster_name_and_labels() {
        let out = render(&template(), "c1", &labels(), &[]).expect("renders");
        assert_eq!(
            out.pointer("/workload/manifests/0/metadata/labels/cluster"),
            Some(&json!("c1"))
        );
        assert_eq!(
            out.pointer("/workload/manifests/1/data/region"),
            Some(&json!("eu"))
        );
        assert_eq!(
            out.pointer("/workload/manifests/1/data/plain"),
            Some(&json!("$ {x} ${OTHER}"))
        );
    }

    #[test]
    fn a_patch_changes_only_the_identified_manifest() {
        let o = deployment(json!([
            {"op": "replace", "path": "/spec/replicas", "value": 3},
            {"op": "add", "path": "/metadata/annotations", "value": {"at": "${CLUSTER_NAME}"}},
        ]));
        let out = render(&template(), "c1", &labels(), &[o]).expect("renders");
        assert_eq!(
            out.pointer("/workload/manifests/0/spec/replicas"),
            Some(&json!(3))
        );
        assert_eq!(
            out.pointer("/workload/manifests/0/metadata/annotations/at"),
            Some(&json!("c1"))
        );
        assert!(out.pointer("/workload/manifests/1/data/plain").is_some());
    }

    #[test]
    fn resource_names_a_manifest_by_its_plural() {
        let mut o = deployment(json!([{"op": "replace", "path": "/spec/replicas", "value": 2}]));
        o.resource_identifier.kind.clear();
        o.resource_identifier.resource = "deployments".into();
        let out = render(&template(), "c1", &labels(), &[o]).expect("renders");
        assert_eq!(
            out.pointer("/workload/manifests/0/spec/replicas"),
            Some(&json!(2))
        );
        assert_eq!(plural("NetworkPolicy"), "networkpolicies");
        assert_eq!(plural("Ingress"), "ingresses");
        assert_eq!(plural("Gateway"), "gateways");
    }

    #[test]
    fn a_failing_operation_is_named_with_its_override() {
        let o = deployment(json!([
            {"op": "add", "path": "/spec/replicas", "value": 2},
            {"op": "remove", "path": "/spec/missing"},
        ]));
        let err = render(&template(), "c1", &labels(), &[o]).expect_err("fails");
        assert!(
            matches!(&err, RenderError::PatchFailed { name, index: 1, op, path, .. }
                if name == "scale" && op == "remove" && path == "/spec/missing"),
            "{err:?}"
        );
        assert!(err.to_string().contains("override \"scale\""), "{err}");
    }

    #[test]
    fn an_unknown_op_and_an_unmatched_manifest_are_errors() {
        let o = deployment(json!([{"op": "frobnicate", "path": "/spec"}]));
        assert!(matches!(
            render(&template(), "c1", &labels(), &[o]),
            Err(RenderError::BadOperation { index: 0, .. })
        ));
        let mut o = deployment(json!([]));
        o.resource_identifier.name = "other".into();
        let err = render(&template(), "c1", &labels(), &[o]).expect_err("fails");
        assert_eq!(
            err.to_string(),
            "override \"scale\": no manifest in the template is apps/Deployment app/other"
        );
    }

    #[test]
    fn an_unknown_label_is_an_error_naming_the_key() {
        let err = render(&template(), "c1", &BTreeMap::new(), &[]).expect_err("fails");
        assert_eq!(
            err,
            RenderError::UnknownLabel {
                key: "region".into(),
                at: "/workload/manifests/1/data/region".into()
            }
        );
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::from),
            "[a-z$/{}:~0-9_]{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z/~]{1,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_patch_renders_or_fails_without_panicking(
            ops in prop::collection::vec(
                ("(add|remove|replace|move|copy|test|bad)", "(/[a-z0-9~]{0,3}){0,3}", arb_json(), "(/[a-z0-9~]{0,3}){0,3}"),
                0..5,
            ),
            text in "[a-zA-Z${}:_ ]{0,24}",
        ) {
            let ops = ops.into_iter().map(|(op, path, value, from)| json!({"op": op, "path": path, "value": value, "from": from})).collect();
            let mut t = template();
            t["workload"]["manifests"][0]["spec"]["text"] = json!(text);
            let o = Override { json_patch: ops, ..deployment(json!([])) };
            let labels = labels();
            match render(&t, "c1", &labels, &[o]) {
                Ok(out) => prop_assert!(out.pointer("/workload/manifests").is_some()),
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
        }
    }
}
