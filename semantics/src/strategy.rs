//! The update strategy a manifest is applied with, read from its manifest
//! config and checked: invalid ignore paths and unknown strategy names are
//! errors the user sees on the manifest's `Applied` condition.

use ferry_proto::v1;

use super::contract::AGENT_FIELD_MANAGER;
use super::ignore::{IgnoreCondition, IgnoreRule};
use super::jq::JqError;
use super::paths::{IgnorePath, PathError, PointerError};

/// How one manifest is written to the spoke.
#[derive(Debug, Clone, PartialEq)]
pub enum Strategy {
    /// kubectl-style three-way merge with a last-applied annotation.
    Update,
    /// Create when absent; never update.
    CreateOnly,
    /// Server-side apply with optional ignored fields.
    ServerSideApply {
        /// Take ownership of conflicting fields.
        force: bool,
        /// Field manager name.
        manager: String,
        /// Fields left to the spoke.
        rules: Vec<IgnoreRule>,
    },
    /// Never write; only observe.
    ReadOnly,
    /// Never write; observe, and report where the object differs from what
    /// `ServerSideApply` with the same settings would apply. The ignore
    /// rules name fields never reported (both conditions mean "left to the
    /// spoke", since nothing is ever applied).
    ReportOnly {
        /// Fields never reported as drift.
        rules: Vec<IgnoreRule>,
    },
}

/// Whether a manifest deleted on the spoke is recreated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenDeleted {
    /// Recreate it with the current spec (default).
    Recreate,
    /// Leave it deleted.
    Leave,
}

/// A manifest config cannot be used as written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StrategyError {
    /// An ignore path does not parse.
    #[error("ignoreFields: {0}")]
    InvalidIgnorePath(#[from] PathError),
    /// A JSON pointer of `ignoreFields[].jsonPointers` does not parse.
    #[error("ignoreFields: {0}")]
    InvalidJsonPointer(#[from] PointerError),
    /// A jq expression of `ignoreFields[].jqPathExpressions` cannot be used.
    #[error("ignoreFields: {0}")]
    InvalidJqPath(#[from] JqError),
    /// An ignoreFields entry names no field at all.
    #[error("ignoreFields[{0}] names no field; give jsonPaths, jsonPointers or jqPathExpressions")]
    EmptyIgnoreField(usize),
    /// The strategy type is not one ferry knows.
    #[error(
        "unknown updateStrategy type {0:?}; use Update, CreateOnly, ServerSideApply, ReadOnly or ReportOnly"
    )]
    UnknownStrategy(String),
    /// The ignore condition is not one ferry knows.
    #[error("unknown ignoreFields condition {0:?}; use OnSpokePresent or OnSpokeChange")]
    UnknownCondition(String),
    /// whenDeleted is not one ferry knows.
    #[error("unknown whenDeleted {0:?}; use Recreate or Leave")]
    UnknownWhenDeleted(String),
}

impl StrategyError {
    /// The condition reason for this error.
    pub fn reason(&self) -> &'static str {
        match self {
            StrategyError::InvalidIgnorePath(_) => "InvalidIgnorePath",
            StrategyError::InvalidJsonPointer(_) => "InvalidJsonPointer",
            StrategyError::InvalidJqPath(_) => "InvalidJqPathExpression",
            StrategyError::EmptyIgnoreField(_)
            | StrategyError::UnknownStrategy(_)
            | StrategyError::UnknownCondition(_)
            | StrategyError::UnknownWhenDeleted(_) => "InvalidManifestConfig",
        }
    }
}

/// The strategy and deletion behaviour a manifest config asks for; no
/// config means `Update` and `Recreate`.
pub fn strategy_of(
    config: Option<&v1::ManifestConfig>,
) -> Result<(Strategy, WhenDeleted), StrategyError> {
    let when_deleted = match config.map(|c| c.when_deleted.as_str()).unwrap_or_default() {
        "" | "Recreate" => WhenDeleted::Recreate,
        "Leave" => WhenDeleted::Leave,
        other => return Err(StrategyError::UnknownWhenDeleted(other.to_string())),
    };
    let Some(update) = config.and_then(|c| c.update_strategy.as_ref()) else {
        return Ok((Strategy::Update, when_deleted));
    };
    let strategy = match update.r#type.as_str() {
        "" | "Update" => Strategy::Update,
        "CreateOnly" => Strategy::CreateOnly,
        "ReadOnly" => Strategy::ReadOnly,
        "ServerSideApply" => {
            let ssa = update.server_side_apply.clone().unwrap_or_default();
            let rules = ssa
                .ignore_fields
                .iter()
                .enumerate()
                .map(|(index, field)| {
                    if field.json_paths.is_empty()
                        && field.json_pointers.is_empty()
                        && field.jq_path_expressions.is_empty()
                    {
                        return Err(StrategyError::EmptyIgnoreField(index));
                    }
                    let condition = match field.condition.as_str() {
                        "" | "OnSpokePresent" => IgnoreCondition::OnSpokePresent,
                        "OnSpokeChange" => IgnoreCondition::OnSpokeChange,
                        other => return Err(StrategyError::UnknownCondition(other.to_string())),
                    };
                    let paths = field
                        .json_paths
                        .iter()
                        .map(|p| IgnorePath::parse(p))
                        .collect::<Result<Vec<_>, _>>()?;
                    let mut paths = paths;
                    for pointer in &field.json_pointers {
                        paths.push(IgnorePath::from_json_pointer(pointer)?);
                    }
                    for expression in &field.jq_path_expressions {
                        paths.push(IgnorePath::from_jq(expression)?);
                    }
                    Ok(IgnoreRule { condition, paths })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let manager = if ssa.field_manager.is_empty() {
                AGENT_FIELD_MANAGER.to_string()
            } else {
                ssa.field_manager
            };
            Strategy::ServerSideApply {
                force: ssa.force,
                manager,
                rules,
            }
        }
        // Reads `serverSideApply` exactly as ServerSideApply does (same
        // checks, same errors), keeping only the fields it leaves alone.
        "ReportOnly" => {
            let mut as_applied = update.clone();
            as_applied.r#type = "ServerSideApply".to_string();
            let config = v1::ManifestConfig {
                update_strategy: Some(as_applied),
                ..Default::default()
            };
            let rules = match strategy_of(Some(&config))?.0 {
                Strategy::ServerSideApply { rules, .. } => rules,
                _ => Vec::new(),
            };
            Strategy::ReportOnly { rules }
        }
        other => return Err(StrategyError::UnknownStrategy(other.to_string())),
    };
    Ok((strategy, when_deleted))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssa_config(condition: &str, paths: &[&str]) -> v1::ManifestConfig {
        v1::ManifestConfig {
            update_strategy: Some(v1::UpdateStrategy {
                r#type: "ServerSideApply".into(),
                server_side_apply: Some(v1::ServerSideApplyConfig {
                    force: false,
                    field_manager: String::new(),
                    ignore_fields: vec![v1::IgnoreField {
                        condition: condition.into(),
                        json_paths: paths.iter().map(|p| p.to_string()).collect(),
                        ..Default::default()
                    }],
                }),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn no_config_means_update_and_recreate() {
        assert_eq!(
            strategy_of(None),
            Ok((Strategy::Update, WhenDeleted::Recreate))
        );
    }

    #[test]
    fn server_side_apply_defaults_the_field_manager_and_parses_paths() {
        let (strategy, _) =
            strategy_of(Some(&ssa_config("OnSpokeChange", &[".data"]))).expect("valid");
        let Strategy::ServerSideApply {
            manager,
            rules,
            force,
        } = strategy
        else {
            panic!("not SSA: {strategy:?}");
        };
        assert_eq!(manager, AGENT_FIELD_MANAGER);
        assert!(!force);
        assert_eq!(rules[0].condition, IgnoreCondition::OnSpokeChange);
        assert_eq!(rules[0].paths[0].as_str(), "$.data");
    }

    #[test]
    fn an_invalid_ignore_path_is_an_error_with_its_own_reason() {
        let err = strategy_of(Some(&ssa_config("OnSpokePresent", &["$.spec[?"])))
            .expect_err("invalid path");
        assert_eq!(err.reason(), "InvalidIgnorePath");
        assert!(err.to_string().contains("$.spec[?"), "{err}");
    }

    #[test]
    fn report_only_keeps_the_ignore_rules_and_their_errors() {
        let mut config = ssa_config("OnSpokeChange", &[".data"]);
        if let Some(update) = config.update_strategy.as_mut() {
            update.r#type = "ReportOnly".into();
        }
        let (strategy, _) = strategy_of(Some(&config)).expect("valid");
        let Strategy::ReportOnly { rules } = strategy else {
            panic!("not ReportOnly: {strategy:?}");
        };
        assert_eq!(rules[0].paths[0].as_str(), "$.data");
        let mut bad = ssa_config("OnSpokePresent", &["$.spec[?"]);
        if let Some(update) = bad.update_strategy.as_mut() {
            update.r#type = "ReportOnly".into();
        }
        let err = strategy_of(Some(&bad)).expect_err("invalid path");
        assert_eq!(err.reason(), "InvalidIgnorePath");
        let plain = v1::ManifestConfig {
            update_strategy: Some(v1::UpdateStrategy {
                r#type: "ReportOnly".into(),
                server_side_apply: None,
            }),
            ..Default::default()
        };
        assert_eq!(
            strategy_of(Some(&plain)).map(|(s, _)| s),
            Ok(Strategy::ReportOnly { rules: vec![] })
        );
    }

    #[test]
    fn json_pointers_join_json_paths_and_errors_have_their_own_reason() {
        let mut config = ssa_config("", &[]);
        let field = &mut config
            .update_strategy
            .as_mut()
            .and_then(|u| u.server_side_apply.as_mut())
            .expect("ssa")
            .ignore_fields[0];
        field.json_pointers = vec!["/spec/replicas".into()];
        let (strategy, _) = strategy_of(Some(&config)).expect("valid");
        let Strategy::ServerSideApply { rules, .. } = strategy else {
            panic!("not SSA: {strategy:?}");
        };
        // No condition means OnSpokePresent, as in OCM.
        assert_eq!(rules[0].condition, IgnoreCondition::OnSpokePresent);
        assert_eq!(rules[0].paths[0].raw(), "/spec/replicas");

        let field = &mut config
            .update_strategy
            .as_mut()
            .and_then(|u| u.server_side_apply.as_mut())
            .expect("ssa")
            .ignore_fields[0];
        field.json_pointers = vec!["spec/replicas".into()];
        let err = strategy_of(Some(&config)).expect_err("invalid pointer");
        assert_eq!(err.reason(), "InvalidJsonPointer");
        assert!(err.to_string().contains("spec/replicas"), "{err}");
    }

    #[test]
    fn jq_paths_join_the_others_and_errors_have_their_own_reason() {
        let mut config = ssa_config("OnSpokeChange", &[".data.a"]);
        let field = &mut config
            .update_strategy
            .as_mut()
            .and_then(|u| u.server_side_apply.as_mut())
            .expect("ssa")
            .ignore_fields[0];
        field.jq_path_expressions = vec![".data.b".into()];
        let (strategy, _) = strategy_of(Some(&config)).expect("valid");
        let Strategy::ServerSideApply { rules, .. } = strategy else {
            panic!("not SSA: {strategy:?}");
        };
        assert_eq!(rules[0].paths.len(), 2);
        assert_eq!(rules[0].paths[1].raw(), ".data.b");

        let field = &mut config
            .update_strategy
            .as_mut()
            .and_then(|u| u.server_side_apply.as_mut())
            .expect("ssa")
            .ignore_fields[0];
        field.jq_path_expressions = vec!["def f: f; f".into()];
        let err = strategy_of(Some(&config)).expect_err("refused jq");
        assert_eq!(err.reason(), "InvalidJqPathExpression");
        assert!(err.to_string().contains("def f: f; f"), "{err}");
    }

    #[test]
    fn an_ignore_field_without_any_path_is_refused() {
        let err = strategy_of(Some(&ssa_config("OnSpokePresent", &[]))).expect_err("empty");
        assert_eq!(err, StrategyError::EmptyIgnoreField(0));
    }

    #[test]
    fn an_update_strategy_without_type_means_update() {
        let config = v1::ManifestConfig {
            update_strategy: Some(v1::UpdateStrategy::default()),
            ..Default::default()
        };
        assert_eq!(
            strategy_of(Some(&config)),
            Ok((Strategy::Update, WhenDeleted::Recreate))
        );
    }

    #[test]
    fn unknown_names_are_refused() {
        let mut config = ssa_config("Sometimes", &[".a"]);
        assert!(matches!(
            strategy_of(Some(&config)),
            Err(StrategyError::UnknownCondition(_))
        ));
        config.update_strategy = Some(v1::UpdateStrategy {
            r#type: "Yolo".into(),
            server_side_apply: None,
        });
        assert!(matches!(
            strategy_of(Some(&config)),
            Err(StrategyError::UnknownStrategy(_))
        ));
        config.update_strategy = None;
        config.when_deleted = "Never".into();
        assert!(matches!(
            strategy_of(Some(&config)),
            Err(StrategyError::UnknownWhenDeleted(_))
        ));
    }
}
