//! Turns a ManifestWork into the `ferry.v1` message an agent receives.

use ferry_proto::v1;
use kube::ResourceExt;

use ferry_api::manifest_work::{
    ConditionRuleType, DeleteOption, FeedbackType, IgnoreCondition, ManifestConfigOption,
    ManifestWork, PropagationPolicy, UpdateStrategyType, WhenDeleted,
};
use ferry_api::manifest_work::{ExecutorSubjectType, ManifestWorkExecutor};
use ferry_api::work_owner::work_owner;

/// The upsert message for `work` at its current generation.
///
/// Fails if a manifest cannot be serialised, which cannot happen for values
/// that were deserialised from the API server.
pub fn work_upsert(work: &ManifestWork) -> Result<v1::WorkUpsert, serde_json::Error> {
    let manifests_json = work
        .spec
        .workload
        .manifests
        .iter()
        .map(|m| serde_json::to_vec(&m.0))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(v1::WorkUpsert {
        work: Some(work_ref(work)),
        generation: work.metadata.generation.unwrap_or_default(),
        spec: Some(v1::WorkSpec {
            manifests_json,
            delete_option: work.spec.delete_option.as_ref().map(delete_option),
            manifest_configs: work
                .spec
                .manifest_configs
                .iter()
                .map(manifest_config)
                .collect(),
            executor: work.spec.executor.as_ref().map(executor),
            depends_on: work
                .spec
                .depends_on
                .iter()
                .map(|d| v1::Dependency {
                    name: d.name.clone(),
                    condition: d.condition_type().to_string(),
                    cel_expression: d.cel_expression.clone().unwrap_or_default(),
                })
                .collect(),
        }),
        labels: work
            .labels()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        // Set by the session that sends it, when traces are exported.
        trace_context: Default::default(),
        owner: work_owner(&work.namespace().unwrap_or_default(), work.labels()),
    })
}

fn executor(executor: &ManifestWorkExecutor) -> v1::Executor {
    let subject = &executor.subject;
    let account = subject.service_account.clone().unwrap_or_default();
    v1::Executor {
        subject_type: match subject.type_ {
            ExecutorSubjectType::ServiceAccount => "ServiceAccount",
        }
        .into(),
        service_account_namespace: account.namespace,
        service_account_name: account.name,
    }
}

/// The identity of `work` on the wire.
pub fn work_ref(work: &ManifestWork) -> v1::WorkRef {
    v1::WorkRef {
        uid: work.uid().unwrap_or_default(),
        namespace: work.namespace().unwrap_or_default(),
        name: work.name_any(),
    }
}

/// The wire form of a work's deleteOption.
pub fn delete_option(option: &DeleteOption) -> v1::DeleteOption {
    let propagation_policy = match option.propagation_policy {
        PropagationPolicy::Foreground => "Foreground",
        PropagationPolicy::Orphan => "Orphan",
        PropagationPolicy::SelectivelyOrphan => "SelectivelyOrphan",
    };
    v1::DeleteOption {
        propagation_policy: propagation_policy.into(),
        orphaning_rules: option
            .selectively_orphans
            .iter()
            .flat_map(|s| &s.orphaning_rules)
            .map(|r| v1::OrphaningRule {
                group: r.group.clone(),
                resource: r.resource.clone(),
                name: r.name.clone(),
                namespace: r.namespace.clone(),
            })
            .collect(),
    }
}

fn manifest_config(config: &ManifestConfigOption) -> v1::ManifestConfig {
    let id = &config.resource_identifier;
    v1::ManifestConfig {
        resource_identifier: Some(v1::ResourceIdentifier {
            group: id.group.clone(),
            resource: id.resource.clone(),
            name: id.name.clone(),
            namespace: id.namespace.clone(),
        }),
        feedback_rules: config
            .feedback_rules
            .iter()
            .map(|rule| v1::FeedbackRule {
                r#type: match rule.type_ {
                    FeedbackType::WellKnownStatus => "WellKnownStatus",
                    FeedbackType::JsonPaths => "JSONPaths",
                }
                .into(),
                json_paths: rule
                    .json_paths
                    .iter()
                    .map(|p| v1::NamedJsonPath {
                        name: p.name.clone(),
                        path: p.path.clone(),
                    })
                    .collect(),
            })
            .collect(),
        update_strategy: config.update_strategy.as_ref().map(|s| v1::UpdateStrategy {
            r#type: match s.type_ {
                UpdateStrategyType::Update => "Update",
                UpdateStrategyType::CreateOnly => "CreateOnly",
                UpdateStrategyType::ServerSideApply => "ServerSideApply",
                UpdateStrategyType::ReadOnly => "ReadOnly",
                UpdateStrategyType::ReportOnly => "ReportOnly",
            }
            .into(),
            server_side_apply: s
                .server_side_apply
                .as_ref()
                .map(|ssa| v1::ServerSideApplyConfig {
                    force: ssa.force,
                    field_manager: ssa.field_manager.clone(),
                    ignore_fields: ssa
                        .ignore_fields
                        .iter()
                        .map(|f| v1::IgnoreField {
                            condition: match f.condition {
                                IgnoreCondition::OnSpokePresent => "OnSpokePresent",
                                IgnoreCondition::OnSpokeChange => "OnSpokeChange",
                            }
                            .into(),
                            json_paths: f.json_paths.clone(),
                            json_pointers: f.json_pointers.clone(),
                            jq_path_expressions: f.jq_path_expressions.clone(),
                        })
                        .collect(),
                }),
        }),
        when_deleted: match config.when_deleted {
            None => String::new(),
            Some(WhenDeleted::Recreate) => "Recreate".into(),
            Some(WhenDeleted::Leave) => "Leave".into(),
        },
        condition_rules: config
            .condition_rules
            .iter()
            .map(|rule| v1::ConditionRule {
                condition: rule.condition.clone(),
                r#type: match rule.type_ {
                    ConditionRuleType::WellKnownConditions => "WellKnownConditions",
                    ConditionRuleType::Cel => "CEL",
                }
                .into(),
                cel_expressions: rule.cel_expressions.clone(),
                message: rule.message.clone(),
                message_expression: rule.message_expression.clone(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::manifest_work::{
        IgnoreField, Manifest, ManifestWorkSpec, ManifestsTemplate, ResourceIdentifier,
        ServerSideApplyConfig, UpdateStrategy,
    };
    use ferry_api::manifest_work::{
        ManifestWorkExecutorSubject, ManifestWorkSubjectServiceAccount, WorkDependency,
    };

    #[test]
    fn an_upsert_carries_generation_manifests_and_ignore_rules() {
        let mut work = ManifestWork::new(
            "w",
            ManifestWorkSpec {
                workload: ManifestsTemplate {
                    manifests: vec![Manifest(serde_json::json!({
                        "apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "cm", "namespace": "default"}
                    }))],
                },
                delete_option: None,
                manifest_configs: vec![ManifestConfigOption {
                    resource_identifier: ResourceIdentifier {
                        group: "apps".into(),
                        resource: "deployments".into(),
                        name: "web".into(),
                        namespace: "*".into(),
                    },
                    update_strategy: Some(UpdateStrategy {
                        type_: UpdateStrategyType::ServerSideApply,
                        server_side_apply: Some(ServerSideApplyConfig {
                            force: true,
                            field_manager: String::new(),
                            ignore_fields: vec![IgnoreField {
                                condition: IgnoreCondition::OnSpokePresent,
                                json_paths: vec![".spec.replicas".into()],
                                ..Default::default()
                            }],
                        }),
                    }),
                    ..Default::default()
                }],
                executor: Some(ManifestWorkExecutor {
                    subject: ManifestWorkExecutorSubject {
                        type_: ExecutorSubjectType::ServiceAccount,
                        service_account: Some(ManifestWorkSubjectServiceAccount {
                            namespace: "team".into(),
                            name: "deployer".into(),
                        }),
                    },
                }),
                depends_on: vec![
                    WorkDependency {
                        name: "crds".into(),
                        condition: None,
                        cel_expression: None,
                    },
                    WorkDependency {
                        name: "job".into(),
                        condition: Some("Complete".into()),
                        cel_expression: None,
                    },
                    WorkDependency {
                        name: "db".into(),
                        condition: None,
                        cel_expression: Some("work.status.conditions.size() > 0".into()),
                    },
                ],
            },
        );
        work.metadata.namespace = Some("cluster-a".into());
        work.metadata.uid = Some("u1".into());
        work.metadata.generation = Some(3);

        let upsert = work_upsert(&work).expect("serialise");
        assert_eq!(upsert.generation, 3);
        let executor = upsert
            .spec
            .as_ref()
            .and_then(|s| s.executor.clone())
            .expect("executor");
        assert_eq!(
            (
                executor.subject_type.as_str(),
                executor.service_account_namespace.as_str(),
                executor.service_account_name.as_str()
            ),
            ("ServiceAccount", "team", "deployer")
        );
        let depends_on: Vec<(&str, &str, &str)> = upsert
            .spec
            .as_ref()
            .map(|s| {
                s.depends_on
                    .iter()
                    .map(|d| {
                        (
                            d.name.as_str(),
                            d.condition.as_str(),
                            d.cel_expression.as_str(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        // The default readiness rule travels spelled out, so an agent that
        // predates CEL rules waits for Available.
        assert_eq!(
            depends_on,
            [
                ("crds", "Available", ""),
                ("job", "Complete", ""),
                ("db", "Available", "work.status.conditions.size() > 0")
            ]
        );
        let r = upsert.work.expect("ref");
        assert_eq!((r.uid.as_str(), r.namespace.as_str()), ("u1", "cluster-a"));
        let spec = upsert.spec.expect("spec");
        let manifest: serde_json::Value =
            serde_json::from_slice(&spec.manifests_json[0]).expect("json");
        assert_eq!(manifest["metadata"]["name"], "cm");
        let strategy = spec.manifest_configs[0]
            .update_strategy
            .as_ref()
            .expect("strategy");
        assert_eq!(strategy.r#type, "ServerSideApply");
        let ssa = strategy.server_side_apply.as_ref().expect("ssa");
        assert!(ssa.force);
        assert_eq!(ssa.ignore_fields[0].condition, "OnSpokePresent");
        assert_eq!(ssa.ignore_fields[0].json_paths, vec![".spec.replicas"]);
    }
}
