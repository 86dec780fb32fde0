//! What the webhook checks of a ManifestWork: only what CEL in the API
//! server cannot (see `ferry_api::cel_rules` and [`super::policy`] for the rest,
//! which hold even with no hub running): the JSONPath grammar of ignore and
//! feedback paths, feedback entry names, what the agent's CEL (condition
//! rules, dependency rules) may allocate and the steps it may take, the
//! shape and size of sealed Secret entries, and the size in bytes.
//!
//! Pure: no IO. Parsing goes through the agent's own parsers
//! (`ferry-semantics`) on the very message an agent would receive
//! ([`work_upsert`]), so the hub accepts exactly what an agent can apply.

use std::fmt;

use ferry_proto::v1;
use ferry_semantics::cel_bounds::refusal;
use ferry_semantics::condition_rules::MAX_CEL_EXPRESSION_LENGTH;
use ferry_semantics::sealing::{SEALED_API_VERSION, SEALED_KIND, SealedEnvelope, is_sealed};
use ferry_semantics::static_problems;
use ferry_semantics::strategy::strategy_of;

use crate::wire::to_wire::work_upsert;
use ferry_api::manifest_work::{ManifestConfigOption, ManifestWork, ManifestWorkSpec};
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_fleet_semantics::rollout_gates::{HealthError, compile_health};

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

/// Every problem of `work`'s spec the API server's own rules cannot find,
/// in manifest config order. Empty means nothing more is wrong. Never
/// fails: whatever is wrong is a [`Problem`].
pub fn validate_work(work: &ManifestWork) -> Vec<Problem> {
    // Checked on the CRD types: a malformed sealed entry is still encoded
    // for the agents, so its own message, not an encoding error, says why.
    let mut problems = sealed_problems(&work.spec, "");
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
    for (index, (config, wire)) in work
        .spec
        .manifest_configs
        .iter()
        .zip(&spec.manifest_configs)
        .enumerate()
    {
        check_config(index, config, wire, &mut problems);
    }
    problems.extend(agent_cel_problems(&work.spec, ""));
    problems
}

/// Every sealed entry among `spec`'s manifests that does not read as one
/// (`SealedEnvelope::parse`: name, namespace, 1 to `MAX_RECIPIENTS`
/// recipients, an armoured age ciphertext within `MAX_CIPHERTEXT_BYTES`),
/// named by position; subjects start with `prefix`. Refused here rather than
/// at the agent so a sealer's mistake shows when it is written, not as a
/// failed manifest on every cluster.
fn sealed_problems(spec: &ManifestWorkSpec, prefix: &str) -> Vec<Problem> {
    spec.workload
        .manifests
        .iter()
        .enumerate()
        .filter(|(_, manifest)| is_sealed(&manifest.0))
        .filter_map(|(index, manifest)| {
            SealedEnvelope::parse(&manifest.0).err().map(|e| {
                Problem::new(
                    format!("{prefix}manifests[{index}] {SEALED_API_VERSION} {SEALED_KIND}"),
                    e.to_string(),
                )
            })
        })
        .collect()
}

/// What the agent would refuse to run, of `spec`'s CEL (condition rules and
/// their messages, dependency readiness rules), for what it may allocate or
/// the steps it may take whatever the data it reads
/// (`ferry_semantics::cel_bounds`); subjects
/// start with `prefix`. An expression that does not compile is left to the
/// agent's report, as before.
fn agent_cel_problems(spec: &ManifestWorkSpec, prefix: &str) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (index, config) in spec.manifest_configs.iter().enumerate() {
        let id = &config.resource_identifier;
        for (rule_index, rule) in config.condition_rules.iter().enumerate() {
            let expressions = rule
                .cel_expressions
                .iter()
                .chain(std::iter::once(&rule.message_expression));
            for message in expressions.filter_map(|e| bounds_problem(e)) {
                problems.push(Problem::new(
                    format!(
                        "{prefix}manifestConfigs[{index}] {} {} conditionRules[{rule_index}] ({})",
                        id.resource, id.name, rule.condition
                    ),
                    message,
                ));
            }
        }
    }
    for (index, dependency) in spec.depends_on.iter().enumerate() {
        let expression = dependency.cel_expression.as_deref().unwrap_or_default();
        if let Some(message) = bounds_problem(expression) {
            problems.push(Problem::new(
                format!(
                    "{prefix}dependsOn[{index}] {} celExpression",
                    dependency.name
                ),
                message,
            ));
        }
    }
    problems
}

/// Why the agent would refuse to run `expression` for what it may
/// allocate or the steps it may take whatever the data it reads
/// (`ferry_semantics::cel_bounds`), or None. An empty expression, or one that does not compile, is left to the
/// agent's report, as before.
fn bounds_problem(expression: &str) -> Option<String> {
    if expression.is_empty() || expression.len() > MAX_CEL_EXPRESSION_LENGTH {
        return None;
    }
    refusal(expression).map(|e| format!("{expression:?} {e}"))
}

/// Every problem of `rs`'s spec the API server's own rules cannot find:
/// its template's sealed entries and CEL for the agent, within what the agent runs (see
/// [`validate_work`]), and each rollout gate's health expression (of every strategy type given,
/// not only the one in use) must be within the length and static cost
/// limits (`ferry_fleet_semantics::cel_cost`); one that does not compile
/// is left to the gate's status. Empty means nothing more is wrong. Never fails: whatever is wrong is a [`Problem`].
pub fn validate_replica_set(rs: &ManifestWorkReplicaSet) -> Vec<Problem> {
    let template = &rs.spec.manifest_work_template;
    let mut problems = sealed_problems(template, "manifestWorkTemplate.");
    problems.extend(agent_cel_problems(template, "manifestWorkTemplate."));
    for (index, reference) in rs.spec.placement_refs.iter().enumerate() {
        let strategy = &reference.rollout_strategy;
        let configs = [
            ("all", strategy.all.as_ref()),
            (
                "progressive",
                strategy.progressive.as_ref().map(|p| &p.config),
            ),
            (
                "progressivePerGroup",
                strategy.progressive_per_group.as_ref().map(|p| &p.config),
            ),
        ];
        for (type_, config) in configs {
            let Some(config) = config else { continue };
            for (gate_index, gate) in config.gates.iter().enumerate() {
                let Some(health) = &gate.health else { continue };
                // Only the bounds are refused here: an expression that does
                // not compile is shown in the gate's status, as before.
                if let Err(error @ (HealthError::TooCostly { .. } | HealthError::TooLong)) =
                    compile_health(&health.expression)
                {
                    problems.push(Problem::new(
                        format!(
                            "placementRefs[{index}] ({}) rolloutStrategy.{type_}.gates[{gate_index}] \
                             (afterGroup {}) health.expression",
                            reference.name, gate.after_group
                        ),
                        error.to_string(),
                    ));
                }
            }
        }
    }
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

/// The manifest config at `index`: what the agent parses (strategy, ignore
/// paths, feedback rules).
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
    for feedback in static_problems(&wire.feedback_rules) {
        problem(format!("feedbackRules: {feedback}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::manifest_work::{
        DeleteOption, FeedbackRule, FeedbackType, IgnoreCondition, IgnoreField, Manifest,
        ManifestWorkSpec, ManifestsTemplate, NamedJsonPath, PropagationPolicy, ResourceIdentifier,
        ServerSideApplyConfig, UpdateStrategy, UpdateStrategyType,
    };
    use ferry_semantics::sealing::MAX_CIPHERTEXT_BYTES;
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
            ..Default::default()
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
                    ..Default::default()
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
    fn agent_cel_that_may_exhaust_the_agents_memory_is_refused_naming_it() {
        let ten = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]";
        let nested = format!(
            "size({ten}.map(a, {ten}.map(b, {ten}.map(c, {ten}.map(d, {ten}.map(e, {ten}.map(f, {ten}))))))) > 0"
        );
        let mut w = work(vec![cm("a")]);
        let mut rules = config(None, vec![]);
        rules.resource_identifier = ResourceIdentifier {
            group: String::new(),
            resource: "configmaps".into(),
            name: "a".into(),
            namespace: "default".into(),
        };
        rules.condition_rules = vec![
            serde_json::from_value(json!({
                "condition": "Ready", "type": "CEL",
                "celExpressions": ["object.data.ready == 'yes'", nested],
            }))
            .expect("rule"),
        ];
        w.spec.manifest_configs = vec![rules];
        let problem = only(validate_work(&w));
        assert!(
            problem.subject == "manifestConfigs[0] configmaps a conditionRules[0] (Ready)"
                && problem.message.contains("may allocate"),
            "{problem}"
        );
        // A dependency's readiness rule over every pair of its conditions.
        let mut w = work(vec![cm("a")]);
        w.spec.depends_on = vec![serde_json::from_value(json!({"name": "db",
            "celExpression": "work.status.conditions.map(a, work.status.conditions.map(b, a.type + b.type)).size() > 0"}))
            .expect("dependency")];
        let problem = only(validate_work(&w));
        assert!(
            problem.subject == "dependsOn[0] db celExpression"
                && problem.message.contains("without a bound"),
            "{problem}"
        );
        // The same in a replica set's template.
        let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "app", "namespace": "team"},
            "spec": {"manifestWorkTemplate": w.spec, "placementRefs": [{"name": "p"}]},
        }))
        .expect("replica set");
        let problem = only(validate_replica_set(&rs));
        assert_eq!(
            problem.subject,
            "manifestWorkTemplate.dependsOn[0] db celExpression"
        );
        // Rules that read, compare and count pass.
        w.spec.depends_on = vec![
            serde_json::from_value(json!({"name": "db",
            "celExpression": "work.status.conditions.exists(c, c.type == 'Available')"}))
            .expect("dependency"),
        ];
        assert_eq!(validate_work(&w), vec![]);
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
    fn a_json_pointer_that_does_not_parse_is_refused_and_a_valid_one_needs_no_json_paths() {
        let mut w = work(vec![cm("a")]);
        let mut strategy = ssa(UpdateStrategyType::ServerSideApply, &[]);
        let field = &mut strategy
            .server_side_apply
            .as_mut()
            .expect("ssa")
            .ignore_fields[0];
        field.json_pointers = vec!["/spec/replicas".into()];
        w.spec.manifest_configs = vec![config(Some(strategy.clone()), vec![])];
        assert_eq!(validate_work(&w), vec![]);

        strategy
            .server_side_apply
            .as_mut()
            .expect("ssa")
            .ignore_fields[0]
            .json_pointers = vec!["spec/replicas".into()];
        w.spec.manifest_configs = vec![config(Some(strategy), vec![])];
        let problem = only(validate_work(&w));
        assert!(
            problem
                .message
                .contains("invalid JSON pointer \"spec/replicas\""),
            "{problem}"
        );
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
    fn every_problem_is_listed_not_just_the_first() {
        let mut w = work(vec![cm("a")]);
        w.spec.manifest_configs = vec![
            config(
                Some(ssa(UpdateStrategyType::ServerSideApply, &["$.a["])),
                vec![],
            ),
            config(None, vec![json_paths(&[("x", "$.b["), ("", ".c")])]),
        ];
        assert_eq!(validate_work(&w).len(), 3);
    }

    // Duplicates, nameless manifests and strategy combinations are refused
    // by the API server itself (CRD rules, admission policy); repeating them
    // here would only matter while the hub runs.
    #[test]
    fn checks_the_api_server_runs_itself_are_left_to_it() {
        let mut w = work(vec![
            cm("a"),
            cm("a"),
            json!({"apiVersion": "v1", "kind": "X"}),
        ]);
        w.spec.manifest_configs = vec![config(
            Some(ssa(UpdateStrategyType::Update, &[".spec"])),
            vec![json_paths(&[])],
        )];
        w.spec.delete_option = Some(DeleteOption {
            propagation_policy: PropagationPolicy::SelectivelyOrphan,
            selectively_orphans: None,
            ..Default::default()
        });
        assert_eq!(validate_work(&w), vec![]);
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
    /// A sealed entry in the shape `kubectl ferry seal` writes; the
    /// ciphertext is only looked at for its armour here.
    fn sealed(name: &str, recipients: Value, ciphertext: &str) -> Value {
        json!({"apiVersion": SEALED_API_VERSION, "kind": SEALED_KIND,
               "metadata": {"name": name, "namespace": "app"},
               "spec": {"recipients": recipients, "ciphertext": ciphertext}})
    }

    const ARMOURED: &str =
        "-----BEGIN AGE ENCRYPTED FILE-----\nYWdl\n-----END AGE ENCRYPTED FILE-----\n";

    fn to_spoke_a() -> Value {
        json!([{"cluster": "spoke-a", "keyId": "k-3f9a1c2b8d7e6f50"}])
    }

    #[test]
    fn a_malformed_sealed_entry_is_refused_naming_its_position_and_what_is_wrong() {
        let good = sealed("db", to_spoke_a(), ARMOURED);
        assert_eq!(validate_work(&work(vec![cm("a"), good.clone()])), vec![]);

        let no_recipients = sealed("db", json!([]), ARMOURED);
        let problem = only(validate_work(&work(vec![cm("a"), no_recipients.clone()])));
        assert_eq!(
            problem.subject,
            format!("manifests[1] {SEALED_API_VERSION} {SEALED_KIND}")
        );
        let expected = SealedEnvelope::parse(&no_recipients).expect_err("no recipients");
        assert_eq!(problem.message, expected.to_string());
        assert!(problem.message.contains("spec.recipients"), "{problem}");

        let plain_text = sealed("db", to_spoke_a(), "password");
        let problem = only(validate_work(&work(vec![plain_text])));
        assert!(problem.message.contains("kubectl ferry seal"), "{problem}");

        let huge = format!("{ARMOURED}{}", "a".repeat(MAX_CIPHERTEXT_BYTES));
        let problem = only(validate_work(&work(vec![sealed(
            "db",
            to_spoke_a(),
            &huge,
        )])));
        assert!(
            problem.message.contains(&MAX_CIPHERTEXT_BYTES.to_string()),
            "{problem}"
        );

        // Every malformed entry is listed, each under its own position.
        let problems = validate_work(&work(vec![
            sealed("a", json!([]), ARMOURED),
            good,
            sealed("c", to_spoke_a(), ""),
        ]));
        let subjects: Vec<_> = problems.iter().map(|p| p.subject.as_str()).collect();
        assert_eq!(
            subjects,
            [
                format!("manifests[0] {SEALED_API_VERSION} {SEALED_KIND}"),
                format!("manifests[2] {SEALED_API_VERSION} {SEALED_KIND}"),
            ]
        );
    }

    #[test]
    fn a_replica_set_template_with_a_malformed_sealed_entry_is_refused() {
        let rs = |entry: Value| -> ManifestWorkReplicaSet {
            serde_json::from_value(json!({
                "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
                "metadata": {"name": "rs", "namespace": "team"},
                "spec": {"manifestWorkTemplate": {"workload": {"manifests": [entry]}},
                         "placementRefs": [{"name": "all"}]},
            }))
            .expect("a replica set")
        };
        assert_eq!(
            validate_replica_set(&rs(sealed("db", to_spoke_a(), ARMOURED))),
            vec![]
        );
        let problem = only(validate_replica_set(&rs(sealed(
            "db",
            json!([{"cluster": "spoke-a"}]),
            ARMOURED,
        ))));
        assert_eq!(
            problem.subject,
            format!("manifestWorkTemplate.manifests[0] {SEALED_API_VERSION} {SEALED_KIND}")
        );
        assert!(problem.message.contains("spec.recipients"), "{problem}");
    }
}
