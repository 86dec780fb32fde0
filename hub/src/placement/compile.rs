//! A Placement's spec turned into what scheduling needs: kube `Selector`s
//! for its predicates and decision groups, and the semantics input. A spec
//! that cannot be used gets one clear message, shown as
//! `PlacementMisconfigured`.

use std::collections::BTreeMap;

use ferry_fleet_semantics::placement::{
    IntOrPercent, IntOrPercentError, PlacementInput, Prioritizer, parse_int_or_percent,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use kube::core::{Selector, SelectorExt};

use ferry_api::placement::{ClusterSelector, GroupStrategy, PlacementSpec, SelectorRequirement};

/// Why a Placement's spec cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A label or claim selector is invalid.
    #[error("{at}: {reason}")]
    Selector {
        /// Where in the spec, e.g. `predicates[0].requiredClusterSelector.labelSelector`.
        at: String,
        /// What is wrong.
        reason: String,
    },
    /// An int-or-percent field is unusable.
    #[error("decisionStrategy.groupStrategy.{0}")]
    IntOrPercent(#[from] IntOrPercentError),
    /// A prioritizer ferry does not serve.
    #[error("prioritizerPolicy.configurations[{index}]: {reason}")]
    Prioritizer {
        /// Position in the list.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// Any other bad field.
    #[error("{field}: {reason}")]
    Field {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// A label selector and a claim selector, both of which must match.
#[derive(Debug, Clone)]
pub struct CompiledSelector {
    labels: Selector,
    claims: Selector,
}

impl CompiledSelector {
    /// Whether a cluster with `labels` and `claims` matches.
    pub fn matches(
        &self,
        labels: &BTreeMap<String, String>,
        claims: &BTreeMap<String, String>,
    ) -> bool {
        self.labels.matches(labels) && self.claims.matches(claims)
    }
}

fn requirements(items: &[SelectorRequirement]) -> Vec<meta::LabelSelectorRequirement> {
    items
        .iter()
        .map(|r| meta::LabelSelectorRequirement {
            key: r.key.clone(),
            operator: r.operator.clone(),
            values: r.values.clone(),
        })
        .collect()
}

fn selector(at: String, selector: meta::LabelSelector) -> Result<Selector, SpecError> {
    // kube's Selector accepts `In` with an empty list; the API server's own
    // validation refuses it, and so does ferry.
    for r in selector.match_expressions.iter().flatten() {
        let empty = r.values.as_ref().is_none_or(|v| v.is_empty());
        let has_values = !r.values.as_ref().is_none_or(|v| v.is_empty());
        match r.operator.as_str() {
            "In" | "NotIn" if empty => {
                return Err(SpecError::Selector {
                    at,
                    reason: format!("operator {} on key {:?} needs values", r.operator, r.key),
                });
            }
            "Exists" | "DoesNotExist" if has_values => {
                return Err(SpecError::Selector {
                    at,
                    reason: format!("operator {} on key {:?} takes no values", r.operator, r.key),
                });
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => {
                return Err(SpecError::Selector {
                    at,
                    reason: format!(
                        "unknown operator {other:?} on key {:?} (In, NotIn, Exists, DoesNotExist)",
                        r.key
                    ),
                });
            }
        }
        if r.key.is_empty() {
            return Err(SpecError::Selector {
                at,
                reason: "a requirement has an empty key".into(),
            });
        }
    }
    Selector::try_from(selector).map_err(|e| SpecError::Selector { at, reason: e.0 })
}

/// Compiles one cluster selector found at `at`.
pub fn compile_selector(at: &str, spec: &ClusterSelector) -> Result<CompiledSelector, SpecError> {
    let labels = spec.label_selector.clone().unwrap_or_default();
    let labels = selector(
        format!("{at}.labelSelector"),
        meta::LabelSelector {
            match_labels: Some(labels.match_labels),
            match_expressions: Some(requirements(&labels.match_expressions)),
        },
    )?;
    let claims = spec.claim_selector.clone().unwrap_or_default();
    let claims = selector(
        format!("{at}.claimSelector"),
        meta::LabelSelector {
            match_labels: None,
            match_expressions: Some(requirements(&claims.match_expressions)),
        },
    )?;
    Ok(CompiledSelector { labels, claims })
}

/// A placement ready to schedule.
#[derive(Debug, Clone)]
pub struct CompiledPlacement {
    /// Predicates (any one selects a cluster; none selects every cluster).
    pub predicates: Vec<CompiledSelector>,
    /// Named decision groups' selectors, in spec order.
    pub groups: Vec<CompiledSelector>,
    /// Everything else scheduling needs (`previous` and `now` are left empty).
    pub input: PlacementInput,
}

impl CompiledPlacement {
    /// Whether the predicates select a cluster with `labels` and `claims`.
    pub fn selects(
        &self,
        labels: &BTreeMap<String, String>,
        claims: &BTreeMap<String, String>,
    ) -> bool {
        self.predicates.is_empty() || self.predicates.iter().any(|p| p.matches(labels, claims))
    }

    /// The first named group whose selector matches the cluster.
    pub fn group_of(
        &self,
        labels: &BTreeMap<String, String>,
        claims: &BTreeMap<String, String>,
    ) -> Option<usize> {
        self.groups.iter().position(|g| g.matches(labels, claims))
    }
}

/// The prioritizers and their weights: the mode's defaults, each replaced
/// by a configuration of the same prioritizer. Fails on an unknown mode,
/// prioritizer or coordinate type, or a weight outside -10..=10.
fn prioritizers(spec: &PlacementSpec) -> Result<Vec<(Prioritizer, i64)>, SpecError> {
    let policy = spec.prioritizer_policy.clone().unwrap_or_default();
    let mut prioritizers: Vec<(Prioritizer, i64)> = match policy.mode.as_str() {
        "" | "Additive" => vec![(Prioritizer::Steady, 1), (Prioritizer::Balance, 1)],
        "Exact" => vec![],
        other => {
            return Err(SpecError::Field {
                field: "prioritizerPolicy.mode",
                reason: format!("{other:?} is neither Additive nor Exact"),
            });
        }
    };
    for (index, config) in policy.configurations.iter().enumerate() {
        let coordinate = &config.score_coordinate;
        if !coordinate.type_.is_empty() && coordinate.type_ != "BuiltIn" {
            return Err(SpecError::Prioritizer {
                index,
                reason: format!(
                    "scoreCoordinate.type {:?}: ferry serves only BuiltIn prioritizers",
                    coordinate.type_
                ),
            });
        }
        let prioritizer = match coordinate.built_in.as_str() {
            "Steady" => Prioritizer::Steady,
            "Balance" => Prioritizer::Balance,
            other => {
                return Err(SpecError::Prioritizer {
                    index,
                    reason: format!(
                        "built-in prioritizer {other:?} is not served (Steady, Balance)"
                    ),
                });
            }
        };
        if !(-10..=10).contains(&config.weight) {
            return Err(SpecError::Prioritizer {
                index,
                reason: format!("weight {} is outside -10..=10", config.weight),
            });
        }
        // A configuration replaces the Additive default of the same prioritizer.
        prioritizers.retain(|(p, _)| *p != prioritizer);
        prioritizers.push((prioritizer, i64::from(config.weight)));
    }
    Ok(prioritizers)
}

/// The tolerations, checked. Fails on an operator that is neither Equal
/// nor Exists, Equal without a key, or Exists with a value.
fn tolerations(
    spec: &PlacementSpec,
) -> Result<Vec<ferry_fleet_semantics::placement::Toleration>, SpecError> {
    for (i, t) in spec.tolerations.iter().enumerate() {
        match t.operator.as_str() {
            "" | "Equal" if t.key.is_empty() => {
                return Err(SpecError::Field {
                    field: "tolerations",
                    reason: format!("tolerations[{i}]: operator Equal needs a key"),
                });
            }
            "Exists" if !t.value.is_empty() => {
                return Err(SpecError::Field {
                    field: "tolerations",
                    reason: format!("tolerations[{i}]: operator Exists takes no value"),
                });
            }
            "" | "Equal" | "Exists" => {}
            other => {
                return Err(SpecError::Field {
                    field: "tolerations",
                    reason: format!(
                        "tolerations[{i}]: operator {other:?} is neither Equal nor Exists"
                    ),
                });
            }
        }
    }
    Ok(spec
        .tolerations
        .iter()
        .map(|t| ferry_fleet_semantics::placement::Toleration {
            key: t.key.clone(),
            operator: t.operator.clone(),
            value: t.value.clone(),
            effect: t.effect.clone(),
            toleration_seconds: t.toleration_seconds,
        })
        .collect())
}

/// The decision groups' names and selectors. Fails on a name unset,
/// repeated or longer than a label value, or a selector that does not
/// compile.
fn decision_groups(
    strategy: &GroupStrategy,
) -> Result<(Vec<String>, Vec<CompiledSelector>), SpecError> {
    let mut group_names: Vec<String> = Vec::new();
    let mut groups = Vec::new();
    for (i, group) in strategy.decision_groups.iter().enumerate() {
        if group.group_name.is_empty() || group_names.contains(&group.group_name) {
            return Err(SpecError::Field {
                field: "decisionStrategy.groupStrategy.decisionGroups",
                reason: format!("decisionGroups[{i}]: groupName must be set and unique"),
            });
        }
        if group.group_name.len() > 63 {
            return Err(SpecError::Field {
                field: "decisionStrategy.groupStrategy.decisionGroups",
                reason: format!("decisionGroups[{i}]: groupName is longer than a label value (63)"),
            });
        }
        group_names.push(group.group_name.clone());
        groups.push(compile_selector(
            &format!("decisionStrategy.groupStrategy.decisionGroups[{i}].groupClusterSelector"),
            &group.group_cluster_selector,
        )?);
    }
    Ok((group_names, groups))
}

/// Compiles `spec`, or says what is wrong with it.
pub fn compile(spec: &PlacementSpec) -> Result<CompiledPlacement, SpecError> {
    let predicates = spec
        .predicates
        .iter()
        .enumerate()
        .map(|(i, p)| {
            compile_selector(
                &format!("predicates[{i}].requiredClusterSelector"),
                &p.required_cluster_selector,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let number_of_clusters = match spec.number_of_clusters {
        None => None,
        Some(n) => Some(usize::try_from(n).map_err(|_| SpecError::Field {
            field: "numberOfClusters",
            reason: format!("{n} is negative"),
        })?),
    };
    let prioritizers = prioritizers(spec)?;
    let tolerations = tolerations(spec)?;
    let strategy = spec
        .decision_strategy
        .clone()
        .unwrap_or_default()
        .group_strategy;
    let (group_names, groups) = decision_groups(&strategy)?;
    let clusters_per_group = match &strategy.clusters_per_decision_group {
        None => IntOrPercent::default(),
        Some(value) => parse_int_or_percent("clustersPerDecisionGroup", value)?,
    };
    Ok(CompiledPlacement {
        predicates,
        groups,
        input: PlacementInput {
            number_of_clusters,
            tolerations,
            prioritizers,
            group_names,
            clusters_per_group,
            previous: BTreeMap::new(),
            now: 0,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(value: serde_json::Value) -> PlacementSpec {
        serde_json::from_value(value).expect("spec")
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn predicates_are_ored_and_label_and_claim_selectors_anded() {
        let compiled = compile(&spec(serde_json::json!({
            "predicates": [
                {"requiredClusterSelector": {
                    "labelSelector": {"matchLabels": {"env": "prod"}},
                    "claimSelector": {"matchExpressions": [{"key": "region", "operator": "In", "values": ["eu"]}]}
                }},
                {"requiredClusterSelector": {"labelSelector": {"matchExpressions": [{"key": "canary", "operator": "Exists"}]}}}
            ]
        })))
        .expect("compiles");
        let none = BTreeMap::new();
        assert!(compiled.selects(&labels(&[("env", "prod")]), &labels(&[("region", "eu")])));
        assert!(!compiled.selects(&labels(&[("env", "prod")]), &labels(&[("region", "us")])));
        assert!(compiled.selects(&labels(&[("canary", "")]), &none));
        assert!(!compiled.selects(&none, &none));
        assert!(
            compile(&PlacementSpec::default())
                .expect("empty")
                .selects(&none, &none)
        );
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let message = |v| compile(&spec(v)).expect_err("refused").to_string();
        assert_eq!(
            message(
                serde_json::json!({"predicates": [{"requiredClusterSelector": {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}}]})
            ),
            "predicates[0].requiredClusterSelector.labelSelector: unknown operator \"Near\" on key \"a\" (In, NotIn, Exists, DoesNotExist)"
        );
        assert!(message(serde_json::json!({"predicates": [{"requiredClusterSelector": {"claimSelector": {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}}}]})).contains("needs values"));
        assert_eq!(
            message(
                serde_json::json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": "0%"}}})
            ),
            "decisionStrategy.groupStrategy.clustersPerDecisionGroup: \"0%\" is out of range (1% to 100%)"
        );
        assert!(message(serde_json::json!({"prioritizerPolicy": {"configurations": [{"scoreCoordinate": {"type": "BuiltIn", "builtIn": "ResourceAllocatableCPU"}}]}})).contains("not served"));
        assert!(message(serde_json::json!({"numberOfClusters": -1})).contains("negative"));
        assert!(
            message(serde_json::json!({"tolerations": [{"operator": "Equal", "value": "x"}]}))
                .contains("needs a key")
        );
    }

    #[test]
    fn exact_mode_uses_only_the_configured_prioritizers() {
        let compiled = compile(&spec(serde_json::json!({
            "prioritizerPolicy": {"mode": "Exact", "configurations": [{"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Balance"}, "weight": 3}]}
        })))
        .expect("compiles");
        assert_eq!(compiled.input.prioritizers, vec![(Prioritizer::Balance, 3)]);
    }
}
