//! The one matcher of manifest configs: which options govern an object
//! (update strategy, `whenDeleted`, feedback and condition rules), matched
//! as OCM matches them. A `*` anywhere in a `resourceIdentifier` name or
//! namespace matches any run of characters (`deploy*`, `*-web`, `*`), and
//! each option comes from the first config that selects the object and sets
//! that option, so one config may give the feedback rules and another the
//! update strategy.

use ferry_proto::v1;
use regex::Regex;

/// Whether `value` matches `pattern`, where each `*` in `pattern` matches any
/// run of characters (none included) and everything else matches itself.
/// Never fails: a pattern is always a valid expression once quoted.
pub fn wildcard_match(value: &str, pattern: &str) -> bool {
    if value == pattern || pattern == "*" {
        return true;
    }
    if !pattern.contains('*') {
        return false;
    }
    let quoted: Vec<String> = pattern.split('*').map(regex::escape).collect();
    let expression = format!("^{}$", quoted.join(".*"));
    // Quoted literals joined by `.*` always compile; a pattern too large
    // for the regex engine's limits matches nothing rather than everything.
    Regex::new(&expression).is_ok_and(|re| re.is_match(value))
}

/// Whether `config` selects the object `group`/`resource` `namespace`/`name`.
pub fn selects(
    config: &v1::ManifestConfig,
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> bool {
    config.resource_identifier.as_ref().is_some_and(|id| {
        id.group == group
            && id.resource == resource
            && wildcard_match(namespace, &id.namespace)
            && wildcard_match(name, &id.name)
    })
}

/// Every option that governs the object `group`/`resource`
/// `namespace`/`name`, gathered option by option: each from the first config
/// that selects the object and sets it. None when no config selects the
/// object (the defaults then apply). Never fails; whether the options are
/// valid is for `strategy_of` to say.
pub fn options_for(
    configs: &[v1::ManifestConfig],
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> Option<v1::ManifestConfig> {
    let mut selecting = configs
        .iter()
        .filter(|c| selects(c, group, resource, namespace, name))
        .peekable();
    let first = selecting.peek().copied()?;
    let mut options = v1::ManifestConfig {
        resource_identifier: first.resource_identifier.clone(),
        ..Default::default()
    };
    for config in selecting {
        if options.update_strategy.is_none() {
            options.update_strategy.clone_from(&config.update_strategy);
        }
        if options.when_deleted.is_empty() {
            options.when_deleted.clone_from(&config.when_deleted);
        }
        if options.feedback_rules.is_empty() {
            options.feedback_rules.clone_from(&config.feedback_rules);
        }
        if options.condition_rules.is_empty() {
            options.condition_rules.clone_from(&config.condition_rules);
        }
    }
    Some(options)
}

/// The feedback rules of an object: those of the first config that selects
/// it and has any (OCM's `FindManifestConfiguration`). Empty when none does.
pub fn feedback_rules_for<'a>(
    configs: &'a [v1::ManifestConfig],
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> &'a [v1::FeedbackRule] {
    configs
        .iter()
        .filter(|c| selects(c, group, resource, namespace, name))
        .map(|c| c.feedback_rules.as_slice())
        .find(|rules| !rules.is_empty())
        .unwrap_or_default()
}

/// The condition rules of an object: those of the first config that selects
/// it and has any (OCM's `FindManifestConfiguration`). Empty when none does.
pub fn condition_rules_for<'a>(
    configs: &'a [v1::ManifestConfig],
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> &'a [v1::ConditionRule] {
    configs
        .iter()
        .filter(|c| selects(c, group, resource, namespace, name))
        .map(|c| c.condition_rules.as_slice())
        .find(|rules| !rules.is_empty())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_star_matches_any_run_of_characters_anywhere() {
        assert!(wildcard_match("deploy-web", "deploy*"));
        assert!(wildcard_match("deploy", "deploy*"));
        assert!(wildcard_match("a-web", "*-web"));
        assert!(wildcard_match("ab-x-cd", "ab*cd"));
        assert!(wildcard_match("anything", "*"));
        assert!(wildcard_match("", "*"));
        assert!(!wildcard_match("web-deploy", "deploy*"));
        assert!(!wildcard_match("deploy", "deploy-*"));
        assert!(!wildcard_match("other", "deploy"));
    }

    #[test]
    fn other_characters_match_only_themselves() {
        assert!(!wildcard_match("axb", "a.b"));
        assert!(wildcard_match("a.b", "a.b"));
        assert!(!wildcard_match("aab", "a+b"));
        assert!(wildcard_match("x(1)", "x(*)"));
    }

    fn config(name: &str, rule: &str) -> v1::ManifestConfig {
        v1::ManifestConfig {
            resource_identifier: Some(v1::ResourceIdentifier {
                group: "apps".into(),
                resource: "deployments".into(),
                name: name.into(),
                namespace: "*".into(),
            }),
            feedback_rules: if rule.is_empty() {
                vec![]
            } else {
                vec![v1::FeedbackRule {
                    r#type: rule.into(),
                    json_paths: vec![],
                }]
            },
            ..Default::default()
        }
    }

    #[test]
    fn feedback_rules_come_from_the_first_matching_config_that_has_any() {
        let configs = vec![
            config("deploy-web", ""),
            config("other*", "JSONPaths"),
            config("deploy*", "WellKnownStatus"),
        ];
        let rules = feedback_rules_for(&configs, "apps", "deployments", "ns", "deploy-web");
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].r#type, "WellKnownStatus");
        assert!(feedback_rules_for(&configs, "apps", "deployments", "ns", "web").is_empty());
        assert!(feedback_rules_for(&configs, "", "deployments", "ns", "deploy-web").is_empty());
    }

    #[test]
    fn condition_rules_come_from_the_first_matching_config_that_has_any() {
        let mut with_rules = config("deploy*", "");
        with_rules.condition_rules = vec![v1::ConditionRule {
            condition: "Complete".into(),
            r#type: "WellKnownConditions".into(),
            ..Default::default()
        }];
        let configs = vec![config("deploy-web", "WellKnownStatus"), with_rules];
        let rules = condition_rules_for(&configs, "apps", "deployments", "ns", "deploy-web");
        assert_eq!(rules.len(), 1);
        assert!(condition_rules_for(&configs, "apps", "deployments", "ns", "web").is_empty());
    }

    fn strategy(name: &str, kind: &str) -> v1::ManifestConfig {
        v1::ManifestConfig {
            update_strategy: Some(v1::UpdateStrategy {
                r#type: kind.into(),
                ..Default::default()
            }),
            ..config(name, "")
        }
    }

    #[test]
    fn a_star_inside_a_name_selects_the_update_strategy_too() {
        let configs = vec![strategy("web-*", "ServerSideApply")];
        let options =
            options_for(&configs, "apps", "deployments", "ns", "web-1").expect("selected");
        let kind = options.update_strategy.map(|s| s.r#type);
        assert_eq!(kind.as_deref(), Some("ServerSideApply"));
        assert!(options_for(&configs, "apps", "deployments", "ns", "api-1").is_none());
        assert!(options_for(&configs, "", "deployments", "ns", "web-1").is_none());
    }

    #[test]
    fn a_first_config_with_only_feedback_rules_does_not_hide_a_later_strategy() {
        let mut leave = strategy("*", "CreateOnly");
        leave.when_deleted = "Leave".into();
        let configs = vec![
            config("web", "WellKnownStatus"),
            leave,
            strategy("web", "ReadOnly"),
        ];
        let options = options_for(&configs, "apps", "deployments", "ns", "web").expect("selected");
        let kind = options.update_strategy.map(|s| s.r#type);
        assert_eq!(
            kind.as_deref(),
            Some("CreateOnly"),
            "the first that sets it"
        );
        assert_eq!(options.when_deleted, "Leave");
        assert_eq!(options.feedback_rules[0].r#type, "WellKnownStatus");
    }

    proptest! {
        #[test]
        fn each_option_comes_from_the_first_selecting_config_that_sets_it(
            sets in proptest::collection::vec((any::<bool>(), any::<bool>(), 0u8..3), 1..6),
        ) {
            // Configs that select "web" (or not), set a strategy (or not) and
            // a feedback rule (or not); the answer is the first of each.
            let configs: Vec<v1::ManifestConfig> = sets
                .iter()
                .enumerate()
                .map(|(i, (selects, feedback, kind))| {
                    let name = if *selects { "w*" } else { "other" };
                    let rule = if *feedback { format!("rule-{i}") } else { String::new() };
                    let mut c = config(name, &rule);
                    if *kind > 0 {
                        c.update_strategy = Some(v1::UpdateStrategy {
                            r#type: format!("kind-{i}"),
                            ..Default::default()
                        });
                    }
                    c
                })
                .collect();
            let options = options_for(&configs, "apps", "deployments", "ns", "web");
            let first_strategy = sets.iter().position(|(s, _, k)| *s && *k > 0);
            let first_feedback = sets.iter().position(|(s, f, _)| *s && *f);
            match options {
                None => prop_assert!(sets.iter().all(|(s, _, _)| !*s)),
                Some(options) => {
                    prop_assert_eq!(
                        options.update_strategy.map(|s| s.r#type),
                        first_strategy.map(|i| format!("kind-{i}"))
                    );
                    prop_assert_eq!(
                        options.feedback_rules.first().map(|r| r.r#type.clone()),
                        first_feedback.map(|i| format!("rule-{i}"))
                    );
                    prop_assert_eq!(
                        feedback_rules_for(&configs, "apps", "deployments", "ns", "web"),
                        options.feedback_rules.as_slice()
                    );
                }
            }
        }

        #[test]
        fn a_pattern_without_stars_matches_only_itself(value in "[a-z.+()-]{0,8}", pattern in "[a-z.+()-]{0,8}") {
            prop_assert_eq!(wildcard_match(&value, &pattern), value == pattern);
        }

        #[test]
        fn a_prefix_pattern_matches_exactly_the_values_with_that_prefix(value in "[a-z.-]{0,8}", prefix in "[a-z.-]{0,4}") {
            let pattern = format!("{prefix}*");
            prop_assert_eq!(wildcard_match(&value, &pattern), value.starts_with(&prefix));
        }
    }
}
