//! What makes a ManifestWork acceptable, checked before any agent sees it.
//!
//! Pure: no IO. Parsing goes through the agent's own parsers
//! (`ferry-semantics`) on the very message an agent would receive
//! ([`work_upsert`]), so the hub accepts exactly what an agent can apply. On
//! top of that come checks of combinations the agent would silently ignore
//! (server-side apply settings under another strategy, a `JSONPaths` rule
//! without paths, orphaning rules without `SelectivelyOrphan`).

use std::collections::HashMap;
use std::fmt;

use ferry_proto::v1;
use ferry_semantics::strategy::strategy_of;
use ferry_semantics::{identify, static_problems};

use crate::manifest_work::{
    FeedbackType, ManifestConfigOption, ManifestWork, PropagationPolicy, UpdateStrategyType,
};
use crate::to_wire::work_upsert;

/// One reason a work is refused: what it is about and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What the problem is about, e.g. `manifests[2] apps/v1 Deployment
    /// default/web`, `manifestConfigs[0] deployments.apps default/web`,
    /// `deleteOption` or `work`.
    pub subject: String,
    /// What is wrong, in words that say how to fix it.
    pub message: String,
}

impl Problem {
    fn new(subject: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.subject, self.message)
    }
}

/// Every problem of `work`'s spec, in spec order: manifests, then manifest
/// configs, then the delete option. Empty means the work is valid. Never
/// fails: whatever is wrong is a [`Problem`].
pub fn validate_work(work: &ManifestWork) -> Vec<Problem> {
    let mut problems = Vec::new();
    // The agent receives this message; checking it rather than the CRD types
    // keeps one parser for both sides.
    let spec = match work_upsert(work) {
        Ok(upsert) => upsert.spec.unwrap_or_default(),
        Err(e) => {
            problems.push(Problem::new(
                "spec",
                format!("cannot be encoded for the agents: {e}"),
            ));
            return problems;
        }
    };
    check_manifests(&spec.manifests_json, &mut problems);
    for (index, (config, wire)) in work
        .spec
        .manifest_configs
        .iter()
        .zip(&spec.manifest_configs)
        .enumerate()
    {
        check_config(index, config, wire, &mut problems);
    }
    check_delete_option(work, &mut problems);
    problems
}

/// A problem when a work of `bytes` bytes of JSON is over `max_bytes`.
pub fn check_size(bytes: usize, max_bytes: usize) -> Option<Problem> {
    (bytes > max_bytes).then(|| {
        Problem::new(
            "work",
            format!(
                "is {bytes} bytes of JSON, over this hub's limit of {max_bytes} bytes \
                 (--max-work-bytes); split its manifests into several works"
            ),
        )
    })
}

/// Each manifest must have apiVersion, kind and metadata.name, and no two may
/// name the same object: the agent would apply both to one object and report
/// whichever was written last.
fn check_manifests(manifests: &[Vec<u8>], problems: &mut Vec<Problem>) {
    let mut seen: HashMap<(String, String, String, String), usize> = HashMap::new();
    for (index, raw) in manifests.iter().enumerate() {
        let identity = match identify(raw) {
            Ok((_, identity)) => identity,
            Err(e) => {
                problems.push(Problem::new(format!("manifests[{index}]"), e.to_string()));
                continue;
            }
        };
        // The version is left out: v1 and v2 of a kind are one object.
        let key = (
            identity.group.clone(),
            identity.kind.clone(),
            identity.namespace.clone().unwrap_or_default(),
            identity.name.clone(),
        );
        match seen.get(&key) {
            Some(first) => problems.push(Problem::new(
                format!("manifests[{index}] {}", identity.describe()),
                format!(
                    "duplicates manifests[{first}] (same group, kind, namespace and name); \
                     each object may appear once in a work"
                ),
            )),
            None => {
                seen.insert(key, index);
            }
        }
    }
}

/// The manifest config at `index`: what the agent parses (strategy, ignore
/// paths, feedback rules) and the combinations it would silently ignore.
fn check_config(
    index: usize,
    config: &ManifestConfigOption,
    wire: &v1::ManifestConfig,
    problems: &mut Vec<Problem>,
) {
    let id = &config.resource_identifier;
    let resource = if id.group.is_empty() {
        id.resource.clone()
    } else {
        format!("{}.{}", id.resource, id.group)
    };
    let subject = if id.namespace.is_empty() {
        format!("manifestConfigs[{index}] {resource} {}", id.name)
    } else {
        format!(
            "manifestConfigs[{index}] {resource} {}/{}",
            id.namespace, id.name
        )
    };
    let mut problem = |message: String| problems.push(Problem::new(subject.clone(), message));

    if let Err(e) = strategy_of(Some(wire)) {
        problem(e.to_string());
    }
    if let Some(strategy) = &config.update_strategy
        && strategy.server_side_apply.is_some()
        && strategy.type_ != UpdateStrategyType::ServerSideApply
    {
        problem(format!(
            "updateStrategy.serverSideApply is only used with type ServerSideApply, \
             not {:?}; set the type or remove serverSideApply",
            strategy.type_
        ));
    }
    for (rule_index, rule) in config.feedback_rules.iter().enumerate() {
        match rule.type_ {
            FeedbackType::JsonPaths if rule.json_paths.is_empty() => problem(format!(
                "feedbackRules[{rule_index}]: type JSONPaths needs at least one jsonPaths entry"
            )),
            FeedbackType::WellKnownStatus if !rule.json_paths.is_empty() => problem(format!(
                "feedbackRules[{rule_index}]: jsonPaths are only read with type JSONPaths, \
                 not WellKnownStatus; use a separate JSONPaths rule"
            )),
            _ => {}
        }
    }
    for feedback in static_problems(&wire.feedback_rules) {
        problem(format!("feedbackRules: {feedback}"));
    }
}

/// Orphaning rules only mean something under `SelectivelyOrphan`, and
/// `SelectivelyOrphan` without rules orphans nothing.
fn check_delete_option(work: &ManifestWork, problems: &mut Vec<Problem>) {
    let Some(option) = &work.spec.delete_option else {
        return;
    };
    let rules = option
        .selectively_orphans
        .as_ref()
        .map_or(0, |s| s.orphaning_rules.len());
    match option.propagation_policy {
        PropagationPolicy::SelectivelyOrphan if rules == 0 => problems.push(Problem::new(
            "deleteOption",
            "propagationPolicy SelectivelyOrphan needs selectivelyOrphans.orphaningRules; \
             without rules it orphans nothing (use Foreground)",
        )),
        policy @ (PropagationPolicy::Foreground | PropagationPolicy::Orphan) if rules > 0 => {
            problems.push(Problem::new(
                "deleteOption",
                format!(
                    "selectivelyOrphans.orphaningRules are only used with propagationPolicy \
                     SelectivelyOrphan, not {policy:?}"
                ),
            ))
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest_work::{
        DeleteOption, FeedbackRule, IgnoreCondition, IgnoreField, Manifest, ManifestWorkSpec,
        ManifestsTemplate, NamedJsonPath, OrphaningRule, ResourceIdentifier, SelectivelyOrphan,
        ServerSideApplyConfig, UpdateStrategy,
    };
    use proptest::prelude::*;
    use serde::Deserialize;
    use serde_json::{Value, json};

    fn work(manifests: Vec<Value>) -> ManifestWork {
        ManifestWork::new(
            "w",
            ManifestWorkSpec {
                workload: ManifestsTemplate {
                    manifests: manifests.into_iter().map(Manifest).collect(),
                },
                ..Default::default()
            },
        )
    }

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default"}})
    }

    fn config(
        strategy: Option<UpdateStrategy>,
        feedback: Vec<FeedbackRule>,
    ) -> ManifestConfigOption {
        ManifestConfigOption {
            resource_identifier: ResourceIdentifier {
                group: "apps".into(),
                resource: "deployments".into(),
                name: "web".into(),
                namespace: "default".into(),
            },
            feedback_rules: feedback,
            update_strategy: strategy,
            when_deleted: None,
        }
    }

    fn ssa(type_: UpdateStrategyType, paths: &[&str]) -> UpdateStrategy {
        UpdateStrategy {
            type_,
            server_side_apply: Some(ServerSideApplyConfig {
                force: false,
                field_manager: String::new(),
                ignore_fields: vec![IgnoreField {
                    condition: IgnoreCondition::OnSpokePresent,
                    json_paths: paths.iter().map(|p| p.to_string()).collect(),
                }],
            }),
        }
    }

    fn json_paths(entries: &[(&str, &str)]) -> FeedbackRule {
        FeedbackRule {
            type_: FeedbackType::JsonPaths,
            json_paths: entries
                .iter()
                .map(|(name, path)| NamedJsonPath {
                    name: name.to_string(),
                    path: path.to_string(),
                    version: None,
                })
                .collect(),
        }
    }

    fn only(problems: Vec<Problem>) -> Problem {
        assert_eq!(problems.len(), 1, "{problems:?}");
        problems.into_iter().next().expect("one problem")
    }

    #[test]
    fn a_valid_work_has_no_problems() {
        let mut w = work(vec![
            cm("a"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web", "namespace": "default"}}),
        ]);
        w.spec.manifest_configs = vec![config(
            Some(ssa(
                UpdateStrategyType::ServerSideApply,
                &[".spec.replicas"],
            )),
            vec![json_paths(&[("ready", ".status.readyReplicas")])],
        )];
        assert_eq!(validate_work(&w), vec![]);
    }

    #[test]
    fn a_manifest_without_api_version_kind_or_name_is_named_by_index() {
        let w = work(vec![
            cm("fine"),
            json!({"kind": "ConfigMap", "metadata": {"name": "x"}}),
            json!({"apiVersion": "v1", "metadata": {"name": "x"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default"}}),
        ]);
        let problems = validate_work(&w);
        let rendered: Vec<String> = problems.iter().map(Problem::to_string).collect();
        assert_eq!(
            rendered,
            vec![
                "manifests[1]: manifest has no apiVersion",
                "manifests[2]: manifest has no kind",
                "manifests[3]: manifest ConfigMap has no metadata.name",
            ]
        );
    }

    #[test]
    fn a_duplicate_manifest_names_both_positions_whatever_the_version() {
        let w = work(vec![
            json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                   "metadata": {"name": "web", "namespace": "default"}}),
            cm("a"),
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                   "metadata": {"name": "web", "namespace": "default"}}),
        ]);
        let problem = only(validate_work(&w));
        assert_eq!(
            problem.subject,
            "manifests[2] autoscaling/v2 HorizontalPodAutoscaler default/web"
        );
        assert!(
            problem.message.contains("duplicates manifests[0]"),
            "{problem}"
        );
    }

    #[test]
    fn same_name_in_another_namespace_or_kind_is_not_a_duplicate() {
        let mut other_ns = cm("a");
        other_ns["metadata"]["namespace"] = json!("other");
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": "a", "namespace": "default"}});
        assert_eq!(
            validate_work(&work(vec![cm("a"), other_ns, secret])),
            vec![]
        );
    }

    #[test]
    fn an_ignore_path_that_does_not_parse_names_the_config_and_the_path() {
        let mut w = work(vec![cm("a")]);
        w.spec.manifest_configs = vec![config(
            Some(ssa(UpdateStrategyType::ServerSideApply, &["$.spec["])),
            vec![],
        )];
        let problem = only(validate_work(&w));
        assert_eq!(
            problem.subject,
            "manifestConfigs[0] deployments.apps default/web"
        );
        assert!(problem.message.contains("ignoreFields"), "{problem}");
        assert!(problem.message.contains("$.spec["), "{problem}");
    }

    #[test]
    fn ignore_paths_in_the_ocm_form_without_dollar_are_accepted() {
        let mut w = work(vec![cm("a")]);
        w.spec.manifest_configs = vec![config(
            Some(ssa(
                UpdateStrategyType::ServerSideApply,
                &[".spec.replicas", "metadata.annotations['a.b/c']"],
            )),
            vec![],
        )];
        assert_eq!(validate_work(&w), vec![]);
    }

    #[test]
    fn a_feedback_path_that_does_not_parse_names_the_value_and_the_path() {
        let mut w = work(vec![cm("a")]);
        w.spec.manifest_configs = vec![config(
            None,
            vec![json_paths(&[("ok", ".status.a"), ("broken", "$.status[?")])],
        )];
        let problem = only(validate_work(&w));
        assert!(problem.message.contains("\"broken\""), "{problem}");
        assert!(problem.message.contains("$.status[?"), "{problem}");
    }

    #[test]
    fn a_json_paths_rule_without_paths_is_refused() {
        let mut w = work(vec![cm("a")]);
        w.spec.manifest_configs = vec![config(None, vec![json_paths(&[])])];
        let problem = only(validate_work(&w));
        assert!(
            problem.message.contains("needs at least one jsonPaths"),
            "{problem}"
        );
    }

    #[test]
    fn paths_on_a_well_known_status_rule_are_refused() {
        let mut rule = json_paths(&[("a", ".status.a")]);
        rule.type_ = FeedbackType::WellKnownStatus;
        let mut w = work(vec![cm("a")]);
        w.spec.manifest_configs = vec![config(None, vec![rule])];
        let problem = only(validate_work(&w));
        assert!(problem.message.contains("not WellKnownStatus"), "{problem}");
    }

    #[test]
    fn a_feedback_name_used_twice_is_refused() {
        let mut w = work(vec![cm("a")]);
        w.spec.manifest_configs = vec![config(
            None,
            vec![json_paths(&[("a", ".status.a"), ("a", ".status.b")])],
        )];
        let problem = only(validate_work(&w));
        assert!(problem.message.contains("already reported"), "{problem}");
    }

    #[test]
    fn server_side_apply_settings_under_another_strategy_are_refused() {
        for type_ in [
            UpdateStrategyType::Update,
            UpdateStrategyType::CreateOnly,
            UpdateStrategyType::ReadOnly,
        ] {
            let mut w = work(vec![cm("a")]);
            w.spec.manifest_configs = vec![config(Some(ssa(type_, &[".spec"])), vec![])];
            let problem = only(validate_work(&w));
            assert!(
                problem
                    .message
                    .contains("only used with type ServerSideApply"),
                "{problem}"
            );
        }
    }

    #[test]
    fn selectively_orphan_without_rules_is_refused() {
        let mut w = work(vec![cm("a")]);
        w.spec.delete_option = Some(DeleteOption {
            propagation_policy: PropagationPolicy::SelectivelyOrphan,
            selectively_orphans: None,
        });
        let problem = only(validate_work(&w));
        assert_eq!(problem.subject, "deleteOption");
        assert!(problem.message.contains("orphans nothing"), "{problem}");
    }

    #[test]
    fn orphaning_rules_under_foreground_are_refused_and_fine_under_selectively_orphan() {
        let rules = Some(SelectivelyOrphan {
            orphaning_rules: vec![OrphaningRule {
                group: String::new(),
                resource: "configmaps".into(),
                name: "a".into(),
                namespace: "default".into(),
            }],
        });
        let mut w = work(vec![cm("a")]);
        w.spec.delete_option = Some(DeleteOption {
            propagation_policy: PropagationPolicy::Foreground,
            selectively_orphans: rules.clone(),
        });
        let problem = only(validate_work(&w));
        assert!(problem.message.contains("not Foreground"), "{problem}");
        w.spec.delete_option = Some(DeleteOption {
            propagation_policy: PropagationPolicy::SelectivelyOrphan,
            selectively_orphans: rules,
        });
        assert_eq!(validate_work(&w), vec![]);
    }

    #[test]
    fn every_problem_is_listed_not_just_the_first() {
        let mut w = work(vec![cm("a"), cm("a"), json!({"apiVersion": "v1"})]);
        w.spec.manifest_configs = vec![config(None, vec![json_paths(&[])])];
        assert_eq!(validate_work(&w).len(), 3);
    }

    #[test]
    fn size_is_refused_only_above_the_limit_and_the_message_gives_both_sizes() {
        assert_eq!(check_size(100, 100), None);
        let problem = check_size(101, 100).expect("over");
        assert!(problem.message.contains("101 bytes"), "{problem}");
        assert!(problem.message.contains("100 bytes"), "{problem}");
    }

    #[test]
    fn every_example_work_is_admitted() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).expect("examples/") {
            let path = entry.expect("entry").path();
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read");
            for document in serde_yaml::Deserializer::from_str(&text) {
                let work = ManifestWork::deserialize(document)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert_eq!(validate_work(&work), vec![], "{}", path.display());
                seen += 1;
            }
        }
        assert!(seen > 0, "no example works found in {}", dir.display());
    }

    proptest! {
        // Whatever the manifests hold, validation answers (never panics), and
        // a manifest it accepts is one the agent can identify.
        #[test]
        fn validation_never_panics_and_agrees_with_the_agent(
            api_version in prop::option::of("[a-z/]{0,8}"),
            kind in prop::option::of("[A-Za-z]{0,6}"),
            name in prop::option::of("[a-z]{0,4}"),
        ) {
            let mut manifest = serde_json::Map::new();
            if let Some(v) = &api_version { manifest.insert("apiVersion".into(), json!(v)); }
            if let Some(k) = &kind { manifest.insert("kind".into(), json!(k)); }
            if let Some(n) = &name { manifest.insert("metadata".into(), json!({"name": n})); }
            let manifest = Value::Object(manifest);
            let agent_ok = identify(&serde_json::to_vec(&manifest).expect("json")).is_ok();
            let problems = validate_work(&work(vec![manifest]));
            prop_assert_eq!(problems.is_empty(), agent_ok, "{:?}", problems);
        }
    }
}
