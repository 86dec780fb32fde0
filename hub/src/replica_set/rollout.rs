//! A replica set's rollout strategy turned into the semantics' limits, and
//! each cluster's rollout state read from its generated work.

use ferry_fleet_semantics::placement::{IntOrPercent, parse_int_or_percent};
use ferry_fleet_semantics::rollout::{ClusterState, RolloutLimits, RolloutType};
use ferry_semantics::contract::{APPLIED, AVAILABLE, DEGRADED, PROGRESSING};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Resource;

use ferry_api::contract::TEMPLATE_APPLIED_AT_ANNOTATION;
use ferry_api::manifest_work::{ManifestWork, ManifestWorkSpec};
use ferry_api::replica_set::{RolloutConfig, RolloutStrategy};

/// A rollout strategy that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RolloutError {
    /// Unknown rollout type.
    #[error("rolloutStrategy.type {0:?} is not All, Progressive or ProgressivePerGroup")]
    Type(String),
    /// An unusable duration.
    #[error("{field}: {text:?} is not a duration like \"30s\" or \"5m\"")]
    Duration {
        /// The field.
        field: &'static str,
        /// What was given.
        text: String,
    },
    /// An unusable count or percentage.
    #[error("{0}")]
    Count(#[from] ferry_fleet_semantics::placement::IntOrPercentError),
}

/// A strategy ready to use.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedStrategy {
    /// The limits, for `total` clusters.
    pub limits: RolloutLimits,
    /// Soak time before Succeeded.
    pub min_success_time: SignedDuration,
    /// Time before a progressing cluster counts as Failed.
    pub progress_deadline: Option<SignedDuration>,
}

fn duration(field: &'static str, text: &str) -> Result<Option<SignedDuration>, RolloutError> {
    let text = text.trim();
    if text.is_empty() || text == "None" {
        return Ok(None);
    }
    text.parse::<SignedDuration>()
        .map(Some)
        .map_err(|_| RolloutError::Duration {
            field,
            text: text.to_string(),
        })
}

fn count(
    field: &'static str,
    value: Option<&serde_json::Value>,
    total: usize,
    default: usize,
) -> Result<usize, RolloutError> {
    match value {
        None => Ok(default),
        // maxFailures may be 0, which the placement parser refuses.
        Some(v)
            if v.as_i64() == Some(0)
                || v.as_str()
                    .is_some_and(|s| s.trim() == "0" || s.trim() == "0%") =>
        {
            Ok(0)
        }
        Some(v) => Ok(match parse_int_or_percent(field, v)? {
            IntOrPercent::Int(n) => n,
            IntOrPercent::Percent(p) => (total * p as usize).div_ceil(100),
        }),
    }
}

/// Resolves `strategy` for `total` clusters.
pub fn resolve(strategy: &RolloutStrategy, total: usize) -> Result<ResolvedStrategy, RolloutError> {
    let (kind, config, mandatory, concurrency): (
        RolloutType,
        RolloutConfig,
        Vec<String>,
        Option<&serde_json::Value>,
    ) = match strategy.type_.as_str() {
        "" | "All" => (
            RolloutType::All,
            strategy.all.clone().unwrap_or_default(),
            vec![],
            None,
        ),
        "Progressive" => {
            let p = strategy.progressive.clone().unwrap_or_default();
            let groups = p
                .mandatory_decision_groups
                .iter()
                .map(|g| g.group_name.clone())
                .collect();
            (
                RolloutType::Progressive,
                p.config,
                groups,
                strategy
                    .progressive
                    .as_ref()
                    .and_then(|p| p.max_concurrency.as_ref()),
            )
        }
        "ProgressivePerGroup" => {
            let p = strategy.progressive_per_group.clone().unwrap_or_default();
            let groups = p
                .mandatory_decision_groups
                .iter()
                .map(|g| g.group_name.clone())
                .collect();
            (RolloutType::ProgressivePerGroup, p.config, groups, None)
        }
        other => return Err(RolloutError::Type(other.to_string())),
    };
    Ok(ResolvedStrategy {
        limits: RolloutLimits {
            kind,
            max_concurrency: count("maxConcurrency", concurrency, total, total.max(1))?.max(1),
            max_failures: count("maxFailures", config.max_failures.as_ref(), total, 0)?,
            mandatory_groups: mandatory,
        },
        min_success_time: duration("minSuccessTime", &config.min_success_time)?
            .unwrap_or(SignedDuration::ZERO),
        progress_deadline: duration("progressDeadline", &config.progress_deadline)?,
    })
}

fn true_at(work: &ManifestWork, type_: &str, generation: i64) -> Option<Timestamp> {
    status_at(work, type_, "True", generation)
}

/// When the work's `type_` condition took `status` at `generation`, if it has.
fn status_at(work: &ManifestWork, type_: &str, status: &str, generation: i64) -> Option<Timestamp> {
    let condition = work
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)?;
    if condition.status != status || condition.observed_generation != generation {
        return None;
    }
    // An unreadable time counts as long ago: the soak is the agent's word.
    Some(
        condition
            .last_transition_time
            .parse()
            .unwrap_or(Timestamp::UNIX_EPOCH),
    )
}

/// Where a cluster with `work` stands against `template` at `now`, and
/// when to look again (the end of its soak or of its deadline).
pub fn cluster_state(
    work: Option<&ManifestWork>,
    template: &ManifestWorkSpec,
    strategy: &ResolvedStrategy,
    now: Timestamp,
) -> (ClusterState, Option<SignedDuration>) {
    let Some(work) = work.filter(|w| &w.spec == template) else {
        return (ClusterState::ToApply, None);
    };
    let generation = work.meta().generation.unwrap_or(0);
    let degraded = work.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == DEGRADED && c.status == "True")
    });
    if degraded {
        return (ClusterState::Failed, None);
    }
    let started: Option<Timestamp> = work
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(TEMPLATE_APPLIED_AT_ANNOTATION))
        .and_then(|t| t.parse().ok());
    // Conditions that stayed True across a template change keep their old
    // transition time: the soak starts no earlier than the template did.
    // Available means the objects exist (OCM); the agent's health rules
    // (replicas ready, Job done) are in Progressing, which is False once every
    // workload has settled. An agent that reports no Progressing is judged
    // on Applied and Available alone.
    let has_progressing = work
        .status
        .as_ref()
        .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == PROGRESSING));
    let settled = if has_progressing {
        status_at(work, PROGRESSING, "False", generation)
    } else {
        Some(Timestamp::UNIX_EPOCH)
    };
    let healthy_since = match (
        true_at(work, APPLIED, generation),
        true_at(work, AVAILABLE, generation),
        settled,
    ) {
        (Some(a), Some(b), Some(c)) => {
            let since = a.max(b).max(c);
            Some(started.map_or(since, |s| since.max(s)))
        }
        _ => None,
    };
    if let Some(since) = healthy_since {
        let soaked = now.duration_since(since);
        if soaked >= strategy.min_success_time {
            return (ClusterState::Succeeded, None);
        }
        return (
            ClusterState::Progressing,
            Some(strategy.min_success_time - soaked),
        );
    }
    match (strategy.progress_deadline, started) {
        (Some(deadline), Some(started)) => {
            let spent = now.duration_since(started);
            if spent >= deadline {
                (ClusterState::Failed, None)
            } else {
                (ClusterState::Progressing, Some(deadline - spent))
            }
        }
        _ => (ClusterState::Progressing, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::manifest_work::{Condition, ManifestWorkStatus};

    fn strategy(value: serde_json::Value) -> RolloutStrategy {
        serde_json::from_value(value).expect("strategy")
    }

    #[test]
    fn progressive_settings_resolve_to_counts_and_durations() {
        let resolved = resolve(
            &strategy(serde_json::json!({"type": "Progressive", "progressive": {
                "maxConcurrency": "40%", "minSuccessTime": "30s", "progressDeadline": "5m", "maxFailures": 1,
                "mandatoryDecisionGroups": [{"groupName": "canary"}]}})),
            5,
        )
        .expect("resolves");
        assert_eq!(resolved.limits.max_concurrency, 2);
        assert_eq!(resolved.limits.max_failures, 1);
        assert_eq!(resolved.limits.mandatory_groups, vec!["canary".to_string()]);
        assert_eq!(resolved.min_success_time, SignedDuration::from_secs(30));
        assert_eq!(
            resolved.progress_deadline,
            Some(SignedDuration::from_secs(300))
        );
        let all = resolve(&RolloutStrategy::default(), 3).expect("default");
        assert_eq!(
            (all.limits.kind, all.progress_deadline),
            (RolloutType::All, None)
        );
    }

    #[test]
    fn every_duration_shape_admission_accepts_resolves() {
        // The CRD's CEL rule admits `^([0-9]+(ms|s|m|h))+$`: each such
        // shape must resolve, or an admitted replica set could not roll out.
        for (text, millis) in [
            ("30s", 30_000),
            ("5m", 300_000),
            ("1h30m", 5_400_000),
            ("250ms", 250),
            ("2h", 7_200_000),
            ("1m30s", 90_000),
        ] {
            let resolved = resolve(
                &strategy(serde_json::json!({"type": "All", "all": {"minSuccessTime": text, "progressDeadline": text}})),
                1,
            )
            .expect("resolves");
            assert_eq!(
                resolved.min_success_time,
                SignedDuration::from_millis(millis),
                "{text}"
            );
            assert_eq!(
                resolved.progress_deadline,
                Some(SignedDuration::from_millis(millis)),
                "{text}"
            );
        }
    }

    #[test]
    fn bad_strategies_say_what_is_wrong() {
        let error = |v| resolve(&strategy(v), 3).expect_err("refused").to_string();
        assert!(error(serde_json::json!({"type": "Sideways"})).contains("Sideways"));
        assert!(error(serde_json::json!({"type": "Progressive", "progressive": {"minSuccessTime": "soon"}})).contains("minSuccessTime"));
        assert!(error(serde_json::json!({"type": "Progressive", "progressive": {"maxConcurrency": "300%"}})).contains("maxConcurrency"));
    }

    #[test]
    fn a_work_succeeds_after_its_soak_and_fails_past_its_deadline() {
        let template = ManifestWorkSpec::default();
        let resolved = resolve(
            &strategy(serde_json::json!({"type": "Progressive", "progressive": {"minSuccessTime": "30s", "progressDeadline": "60s"}})),
            1,
        )
        .expect("resolves");
        let mut work = ManifestWork::new("w", template.clone());
        work.metadata.generation = Some(1);
        work.metadata.annotations = Some(
            [(
                TEMPLATE_APPLIED_AT_ANNOTATION.to_string(),
                "2026-11-23T10:00:00Z".to_string(),
            )]
            .into(),
        );
        let at = |t: &str| t.parse::<Timestamp>().expect("time");
        assert_eq!(
            cluster_state(None, &template, &resolved, at("2026-11-23T10:00:00Z")).0,
            ClusterState::ToApply
        );
        assert_eq!(
            cluster_state(
                Some(&work),
                &template,
                &resolved,
                at("2026-11-23T10:00:30Z")
            )
            .0,
            ClusterState::Progressing
        );
        assert_eq!(
            cluster_state(
                Some(&work),
                &template,
                &resolved,
                at("2026-11-23T10:01:00Z")
            )
            .0,
            ClusterState::Failed
        );
        let healthy = |type_: &str| Condition {
            type_: type_.into(),
            status: "True".into(),
            observed_generation: 1,
            last_transition_time: "2026-11-23T10:00:10Z".into(),
            ..Condition::default()
        };
        work.status = Some(ManifestWorkStatus {
            conditions: vec![healthy(APPLIED), healthy(AVAILABLE)],
            ..ManifestWorkStatus::default()
        });
        assert_eq!(
            cluster_state(
                Some(&work),
                &template,
                &resolved,
                at("2026-11-23T10:00:20Z")
            )
            .0,
            ClusterState::Progressing
        );
        assert_eq!(
            cluster_state(
                Some(&work),
                &template,
                &resolved,
                at("2026-11-23T10:00:40Z")
            )
            .0,
            ClusterState::Succeeded
        );
        // True since before this template was written: the soak counts from the write.
        for c in &mut work.status.as_mut().expect("status").conditions {
            c.last_transition_time = "2026-11-23T09:00:00Z".into();
        }
        let state = |t| cluster_state(Some(&work), &template, &resolved, at(t)).0;
        assert_eq!(state("2026-11-23T10:00:20Z"), ClusterState::Progressing);
        assert_eq!(state("2026-11-23T10:00:30Z"), ClusterState::Succeeded);
    }

    #[test]
    fn a_work_whose_workloads_still_progress_has_not_succeeded() {
        let template = ManifestWorkSpec::default();
        let resolved = resolve(
            &strategy(serde_json::json!({"type": "Progressive", "progressive": {"minSuccessTime": "30s"}})),
            1,
        )
        .expect("resolves");
        let mut work = ManifestWork::new("w", template.clone());
        work.metadata.generation = Some(1);
        let condition = |type_: &str, status: &str, at: &str| Condition {
            type_: type_.into(),
            status: status.into(),
            observed_generation: 1,
            last_transition_time: at.into(),
            ..Condition::default()
        };
        let at = |t: &str| t.parse::<Timestamp>().expect("time");
        let late = at("2026-11-23T11:00:00Z");
        // Applied and Available (the objects exist), but a Deployment is not
        // ready yet: Progressing True keeps the cluster Progressing.
        work.status = Some(ManifestWorkStatus {
            conditions: vec![
                condition(APPLIED, "True", "2026-11-23T10:00:00Z"),
                condition(AVAILABLE, "True", "2026-11-23T10:00:00Z"),
                condition(PROGRESSING, "True", "2026-11-23T10:00:00Z"),
            ],
            ..ManifestWorkStatus::default()
        });
        assert_eq!(
            cluster_state(Some(&work), &template, &resolved, late).0,
            ClusterState::Progressing
        );
        // Settled at 10:59:50: the soak counts from then.
        work.status.as_mut().expect("status").conditions[2] =
            condition(PROGRESSING, "False", "2026-11-23T10:59:50Z");
        assert_eq!(
            cluster_state(Some(&work), &template, &resolved, late).0,
            ClusterState::Progressing
        );
        assert_eq!(
            cluster_state(
                Some(&work),
                &template,
                &resolved,
                at("2026-11-23T11:00:20Z")
            )
            .0,
            ClusterState::Succeeded
        );
    }
}
