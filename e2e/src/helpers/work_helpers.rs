//! Building ManifestWorks and reading their status in tests and examples.

use ferry_api::manifest_work::{
    Condition, ConditionRule, ConditionRuleType, FieldValue, IgnoreCondition, IgnoreField,
    Manifest, ManifestCondition, ManifestConfigOption, ManifestWork, ManifestWorkSpec,
    ManifestsTemplate, ResourceIdentifier, ServerSideApplyConfig, UpdateStrategy,
    UpdateStrategyType,
};
use std::time::Duration;

use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::Value;

use crate::helpers::wait::{WaitError, wait_until};

/// How long end-to-end tests wait for a work to be applied.
pub const APPLY_TIMEOUT: Duration = Duration::from_secs(90);

/// A work named `name` for cluster `cluster` holding `manifests`.
pub fn manifest_work(cluster: &str, name: &str, manifests: Vec<Value>) -> ManifestWork {
    let mut work = ManifestWork::new(
        name,
        ManifestWorkSpec {
            workload: ManifestsTemplate {
                manifests: manifests.into_iter().map(Manifest).collect(),
            },
            ..Default::default()
        },
    );
    work.metadata.namespace = Some(cluster.to_string());
    work
}

/// The work-level condition of `type_`, if reported.
pub fn work_condition<'a>(work: &'a ManifestWork, type_: &str) -> Option<&'a Condition> {
    work.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// The reported status of the manifest at `ordinal`.
pub fn manifest_status(work: &ManifestWork, ordinal: i32) -> Option<&ManifestCondition> {
    work.status
        .as_ref()?
        .resource_status
        .as_ref()?
        .manifests
        .iter()
        .find(|m| m.resource_meta.ordinal == ordinal)
}

/// The condition of `type_` of the manifest at `ordinal`, if reported.
pub fn manifest_condition<'a>(
    work: &'a ManifestWork,
    ordinal: i32,
    type_: &str,
) -> Option<&'a Condition> {
    manifest_status(work, ordinal)?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// The feedback value `name` of the manifest at `ordinal`, if reported.
pub fn feedback_value<'a>(
    work: &'a ManifestWork,
    ordinal: i32,
    name: &str,
) -> Option<&'a FieldValue> {
    manifest_status(work, ordinal)?
        .status_feedback
        .as_ref()?
        .values
        .iter()
        .find(|v| v.name == name)
        .map(|v| &v.field_value)
}

/// Whether the work reports `Applied=True` for its current generation.
pub fn is_applied_at_current_generation(work: &ManifestWork) -> bool {
    work_condition(work, "Applied").is_some_and(|c| {
        c.status == "True" && Some(c.observed_generation) == work.metadata.generation
    })
}

/// A namespaced CRD of `group` serving `kind` (plural `plural`) at v1 with
/// a schema that keeps any field. Two of them naming the same kind under
/// different plurals let a test hold the agent in its wait for a CRD that
/// never becomes Established (the second one's names conflict).
pub fn schemaless_crd(group: &str, plural: &str, kind: &str) -> Value {
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural.trim_end_matches('s'), "kind": kind,
                "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    })
}

/// A ConfigMap manifest.
pub fn config_map(namespace: &str, name: &str, data: Value) -> Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    })
}

/// Waits until work `name` reports `Applied=True` for its current generation.
pub async fn wait_applied(api: &Api<ManifestWork>, name: &str) -> Result<ManifestWork, WaitError> {
    let what = format!("work {name} applied at its current generation");
    wait_until(
        api,
        name,
        &what,
        APPLY_TIMEOUT,
        is_applied_at_current_generation,
    )
    .await
}

/// A manifest config selecting `group`/`resource` `namespace`/`name` with
/// server-side apply and the given ignore rules (`(condition, paths)`).
pub fn ssa_config(
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
    force: bool,
    ignore: &[(IgnoreCondition, &[&str])],
) -> ManifestConfigOption {
    let mut config = strategy_config(
        group,
        resource,
        namespace,
        name,
        UpdateStrategyType::ServerSideApply,
    );
    config.update_strategy = Some(UpdateStrategy {
        type_: UpdateStrategyType::ServerSideApply,
        server_side_apply: Some(ServerSideApplyConfig {
            force,
            field_manager: String::new(),
            ignore_fields: ignore
                .iter()
                .map(|(condition, paths)| IgnoreField {
                    condition: *condition,
                    json_paths: paths.iter().map(|p| p.to_string()).collect(),
                    ..Default::default()
                })
                .collect(),
        }),
    });
    config
}

/// A manifest config selecting one object with `strategy` and no options.
pub fn strategy_config(
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
    strategy: UpdateStrategyType,
) -> ManifestConfigOption {
    ManifestConfigOption {
        resource_identifier: ResourceIdentifier {
            group: group.into(),
            resource: resource.into(),
            name: name.into(),
            namespace: namespace.into(),
        },
        update_strategy: Some(UpdateStrategy {
            type_: strategy,
            server_side_apply: None,
        }),
        ..Default::default()
    }
}

/// Rewrites work `name` with `edit` applied to its manifests, waits until the
/// new generation is applied, and returns the work as then reported.
pub async fn edit_and_wait(
    api: &Api<ManifestWork>,
    name: &str,
    edit: impl FnOnce(&mut Vec<Value>),
) -> Result<ManifestWork, WaitError> {
    edit_manifests(api, name, edit).await?;
    wait_applied(api, name).await
}

/// Rewrites work `name` with `edit` applied to its manifests, without waiting.
pub async fn edit_manifests(
    api: &Api<ManifestWork>,
    name: &str,
    edit: impl FnOnce(&mut Vec<Value>),
) -> Result<(), WaitError> {
    let api_error = |what: &str| {
        let what = format!("{what} work {name}");
        move |source| WaitError::Api { what, source }
    };
    let work = api.get(name).await.map_err(api_error("reading"))?;
    let mut manifests: Vec<Value> = work
        .spec
        .workload
        .manifests
        .iter()
        .map(|m| m.0.clone())
        .collect();
    edit(&mut manifests);
    // A merge patch of the spec, like `kubectl patch`: the hub writes status
    // concurrently, so a read-modify-replace would race it.
    let patch = serde_json::json!({"spec": {"workload": {"manifests": manifests}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(api_error("editing"))?;
    Ok(())
}

/// Sets `value` at the JSON pointer `pointer` (e.g. `/spec/replicas`) in `target`.
///
/// Panics when the pointer's parent does not exist: tests build the manifests
/// they edit, so that is a bug in the test.
pub fn set_at(target: &mut Value, pointer: &str, value: Value) {
    let (parent, key) = pointer.rsplit_once('/').unwrap_or(("", pointer));
    let slot = target
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("no {parent} in manifest"));
    match slot {
        Value::Object(map) => {
            map.insert(key.to_string(), value);
        }
        Value::Array(items) => {
            let index: usize = key
                .parse()
                .unwrap_or_else(|_| panic!("{key} is not an index"));
            items[index] = value;
        }
        _ => panic!("{parent} is not a container"),
    }
}

/// (status, reason, message) of the work's `DependenciesReady` condition,
/// if reported.
pub fn dependencies_ready(work: &ManifestWork) -> Option<(String, String, String)> {
    work_condition(work, "DependenciesReady")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Whether the work reports `DependenciesReady=False` with `reason` and a
/// message containing `naming`.
pub fn waits_for_dependencies_with(work: &ManifestWork, reason: &str, naming: &str) -> bool {
    dependencies_ready(work).is_some_and(|(status, r, message)| {
        status == "False" && r == reason && message.contains(naming)
    })
}

/// A CEL condition rule `condition`, true when every one of `expressions` is.
pub fn cel_rule(condition: &str, expressions: &[&str]) -> ConditionRule {
    ConditionRule {
        condition: condition.into(),
        type_: ConditionRuleType::Cel,
        cel_expressions: expressions.iter().map(|e| e.to_string()).collect(),
        ..Default::default()
    }
}

/// A work for `cluster` of one ConfigMap `default/name` holding `data`,
/// applied with the Update strategy and judged by `rules`.
pub fn config_map_work_with_rules(
    cluster: &str,
    name: &str,
    data: Value,
    rules: Vec<ConditionRule>,
) -> ManifestWork {
    let mut work = manifest_work(cluster, name, vec![config_map("default", name, data)]);
    let mut config = strategy_config(
        "",
        "configmaps",
        "default",
        name,
        UpdateStrategyType::Update,
    );
    config.condition_rules = rules;
    work.spec.manifest_configs = vec![config];
    work
}
