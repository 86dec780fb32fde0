//! Which clusters of a ManifestWorkReplicaSet get the current template next:
//! the rollout state machine (OCM's `All`, `Progressive`,
//! `ProgressivePerGroup`), pure so it is unit- and property-tested. The
//! hub reads each cluster's state from its generated work and writes the
//! template to the clusters this returns.

use std::collections::BTreeSet;

/// Where one cluster stands in a rollout of the current template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterState {
    /// Its work does not hold the current template (or it has no work).
    ToApply,
    /// Its work holds the current template and is not yet Succeeded.
    Progressing,
    /// Its work is Applied and Available at the current generation, and
    /// has been for `minSuccessTime`.
    Succeeded,
    /// Its work is Degraded, or did not succeed within `progressDeadline`.
    Failed,
}

/// One cluster of the rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutCluster {
    /// Cluster name.
    pub name: String,
    /// Index of its decision group.
    pub group_index: usize,
    /// Name of its decision group.
    pub group_name: String,
    /// Where it stands.
    pub state: ClusterState,
}

/// The rollout type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RolloutType {
    /// Every cluster at once.
    All,
    /// At most `max_concurrency` clusters progressing at a time.
    Progressive,
    /// One decision group at a time.
    ProgressivePerGroup,
}

/// A rollout strategy with its limits resolved to counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutLimits {
    /// The type.
    pub kind: RolloutType,
    /// Most clusters progressing at once (Progressive).
    pub max_concurrency: usize,
    /// Most failed clusters tolerated before the rollout stops.
    pub max_failures: usize,
    /// Names of the decision groups that must all succeed before any other
    /// cluster starts.
    pub mandatory_groups: Vec<String>,
}

/// What to do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutStep {
    /// Clusters that get the current template now.
    pub start: Vec<String>,
    /// More clusters failed than `max_failures`: nothing new starts.
    pub halted: bool,
    /// The failed clusters of mandatory decision groups, which tolerate no
    /// failure (OCM): while any is listed nothing new starts, whatever
    /// `max_failures` allows.
    pub held_by: Vec<String>,
    /// Every cluster Succeeded.
    pub complete: bool,
}

/// What holds clusters back beyond the strategy: gates, the cohort, and
/// unreachable clusters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepContext {
    /// A gate not passed after this decision group index: no cluster of a
    /// higher index starts.
    pub held_after_group: Option<usize>,
    /// Clusters held by name (a gate whose group has no chosen cluster
    /// holds every cluster it cannot place before it).
    pub held: BTreeSet<String>,
    /// Clusters chosen after the rollout started (late joiners): they start
    /// only when every other cluster is Succeeded, Failed or unreachable.
    pub late: BTreeSet<String>,
    /// Clusters whose agent is not connected: they neither hold their
    /// group, nor count as failed, nor use a `Progressive` slot; their work
    /// is still written when their turn comes. Clusters of mandatory
    /// groups are the exception: those hold the rollout until they succeed.
    pub unreachable: BTreeSet<String>,
}

/// Chooses the clusters that start now, in the order given (decision group
/// index, then name, is what the hub passes), with nothing held beyond the
/// strategy. See [`next_step_with`].
pub fn next_step(strategy: &RolloutLimits, clusters: &[RolloutCluster]) -> RolloutStep {
    next_step_with(strategy, clusters, &StepContext::default())
}

/// Chooses the clusters that start now, in the order given, under the
/// gates, cohort and reachability of `context`.
///
/// Failed clusters count against `max_failures`; past it nothing starts
/// (clusters already progressing go on). Mandatory groups go first, each
/// fully succeeded before any other cluster starts; they tolerate no
/// failure (OCM): one failed mandatory cluster holds the rollout. `All` then starts every
/// cluster; `Progressive` keeps at most `max_concurrency` progressing (a
/// failed cluster within `max_failures` frees its slot); `ProgressivePerGroup`
/// starts a group only when every earlier group has no cluster to apply or
/// progressing. Clusters held by a gate or as late joiners neither start
/// nor keep their group open; unreachable ones never hold anything.
pub fn next_step_with(
    strategy: &RolloutLimits,
    clusters: &[RolloutCluster],
    context: &StepContext,
) -> RolloutStep {
    let mandatory = |c: &RolloutCluster| strategy.mandatory_groups.contains(&c.group_name);
    // A mandatory group must prove the revision: its unreachable clusters
    // hold the rollout like any other of its clusters.
    let unreachable = |c: &RolloutCluster| context.unreachable.contains(&c.name) && !mandatory(c);
    let failed = clusters
        .iter()
        .filter(|c| c.state == ClusterState::Failed && !unreachable(c))
        .count();
    let complete = clusters.iter().all(|c| {
        c.state == ClusterState::Succeeded || (unreachable(c) && c.state != ClusterState::ToApply)
    });
    let halted = failed > strategy.max_failures;
    let held_by: Vec<String> = clusters
        .iter()
        .filter(|c| mandatory(c) && c.state == ClusterState::Failed && !unreachable(c))
        .map(|c| c.name.clone())
        .collect();
    if halted || complete || !held_by.is_empty() {
        return RolloutStep {
            start: Vec::new(),
            halted,
            held_by,
            complete,
        };
    }
    // The cohort is done when each of its clusters is settled one way or
    // the other: only then do late joiners start.
    let cohort_done = clusters
        .iter()
        .filter(|c| !context.late.contains(&c.name))
        .all(|c| {
            matches!(c.state, ClusterState::Succeeded | ClusterState::Failed) || unreachable(c)
        });
    let held = |c: &RolloutCluster| {
        context
            .held_after_group
            .is_some_and(|group| c.group_index > group)
            || context.held.contains(&c.name)
            || (context.late.contains(&c.name) && !cohort_done)
    };
    let open = |c: &&RolloutCluster| match c.state {
        ClusterState::ToApply => !held(c),
        ClusterState::Progressing => !unreachable(c),
        _ => false,
    };
    // Mandatory groups first, as a stage of their own.
    let stage: Vec<&RolloutCluster> = if clusters.iter().filter(|c| mandatory(c)).any(|c| open(&c))
    {
        clusters.iter().filter(|c| mandatory(c)).collect()
    } else {
        clusters.iter().filter(|c| !mandatory(c)).collect()
    };
    let to_apply = stage
        .iter()
        .filter(|c| c.state == ClusterState::ToApply && !held(c));
    let start: Vec<String> = match strategy.kind {
        RolloutType::All => to_apply.map(|c| c.name.clone()).collect(),
        RolloutType::Progressive => {
            let progressing = stage
                .iter()
                .filter(|c| c.state == ClusterState::Progressing && !unreachable(c))
                .count();
            let mut room = strategy.max_concurrency.max(1).saturating_sub(progressing);
            // An unreachable cluster takes no slot: its work waits on the
            // hub until its agent returns.
            to_apply
                .filter(|c| {
                    if unreachable(c) {
                        true
                    } else if room > 0 {
                        room -= 1;
                        true
                    } else {
                        false
                    }
                })
                .map(|c| c.name.clone())
                .collect()
        }
        RolloutType::ProgressivePerGroup => {
            // The first group with open clusters is the only one that moves.
            match stage.iter().find(|c| open(c)).map(|c| c.group_index) {
                Some(group) => to_apply
                    .filter(|c| c.group_index == group)
                    .map(|c| c.name.clone())
                    .collect(),
                None => Vec::new(),
            }
        }
    };
    RolloutStep {
        start,
        halted,
        held_by,
        complete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cluster(name: &str, group: usize, state: ClusterState) -> RolloutCluster {
        RolloutCluster {
            name: name.into(),
            group_index: group,
            group_name: if group == 0 {
                "canary".into()
            } else {
                String::new()
            },
            state,
        }
    }

    fn progressive(max_concurrency: usize, max_failures: usize) -> RolloutLimits {
        RolloutLimits {
            kind: RolloutType::Progressive,
            max_concurrency,
            max_failures,
            mandatory_groups: vec![],
        }
    }

    use ClusterState::*;

    #[test]
    fn all_starts_every_cluster_to_apply() {
        let strategy = RolloutLimits {
            kind: RolloutType::All,
            ..progressive(1, 0)
        };
        let step = next_step(
            &strategy,
            &[
                cluster("a", 1, ToApply),
                cluster("b", 1, Progressing),
                cluster("c", 2, ToApply),
            ],
        );
        assert_eq!(step.start, vec!["a".to_string(), "c".into()]);
    }

    #[test]
    fn progressive_keeps_at_most_max_concurrency_progressing() {
        let clusters = [
            cluster("a", 1, Succeeded),
            cluster("b", 1, Progressing),
            cluster("c", 1, ToApply),
            cluster("d", 1, ToApply),
        ];
        assert_eq!(
            next_step(&progressive(2, 0), &clusters).start,
            vec!["c".to_string()]
        );
        assert!(next_step(&progressive(1, 0), &clusters).start.is_empty());
    }

    #[test]
    fn failures_past_max_failures_halt_the_rollout() {
        let clusters = [
            cluster("a", 1, Failed),
            cluster("b", 1, ToApply),
            cluster("c", 1, ToApply),
        ];
        let step = next_step(&progressive(1, 0), &clusters);
        assert!(step.halted && step.start.is_empty());
        // Within maxFailures, a failed cluster frees its slot.
        assert_eq!(
            next_step(&progressive(1, 1), &clusters).start,
            vec!["b".to_string()]
        );
    }

    #[test]
    fn mandatory_groups_succeed_before_any_other_cluster_starts() {
        let strategy = RolloutLimits {
            mandatory_groups: vec!["canary".into()],
            ..progressive(5, 0)
        };
        let clusters = [cluster("p", 0, Progressing), cluster("a", 1, ToApply)];
        assert!(next_step(&strategy, &clusters).start.is_empty());
        let clusters = [cluster("p", 0, Succeeded), cluster("a", 1, ToApply)];
        assert_eq!(next_step(&strategy, &clusters).start, vec!["a".to_string()]);
    }

    #[test]
    fn a_failed_mandatory_cluster_holds_the_rollout_whatever_max_failures_allows() {
        let strategy = RolloutLimits {
            mandatory_groups: vec!["canary".into()],
            ..progressive(5, 100)
        };
        let clusters = [
            cluster("p", 0, Failed),
            cluster("q", 0, Succeeded),
            cluster("a", 1, ToApply),
        ];
        let step = next_step(&strategy, &clusters);
        assert!(step.start.is_empty(), "{:?}", step.start);
        assert!(!step.halted && !step.complete);
        assert_eq!(step.held_by, vec!["p".to_string()]);
        // A failure outside the mandatory groups is tolerated as before.
        let clusters = [
            cluster("p", 0, Succeeded),
            cluster("a", 1, Failed),
            cluster("b", 1, ToApply),
        ];
        let step = next_step(&strategy, &clusters);
        assert_eq!(step.start, vec!["b".to_string()]);
        assert!(step.held_by.is_empty());
    }

    #[test]
    fn progressive_per_group_moves_one_group_at_a_time() {
        let strategy = RolloutLimits {
            kind: RolloutType::ProgressivePerGroup,
            ..progressive(1, 0)
        };
        let clusters = [
            cluster("a", 1, Progressing),
            cluster("b", 1, ToApply),
            cluster("c", 2, ToApply),
        ];
        assert_eq!(next_step(&strategy, &clusters).start, vec!["b".to_string()]);
        let clusters = [
            cluster("a", 1, Succeeded),
            cluster("b", 1, Succeeded),
            cluster("c", 2, ToApply),
            cluster("d", 2, ToApply),
        ];
        assert_eq!(
            next_step(&strategy, &clusters).start,
            vec!["c".to_string(), "d".into()]
        );
    }

    fn context(
        held_after_group: Option<usize>,
        late: &[&str],
        unreachable: &[&str],
    ) -> StepContext {
        StepContext {
            held_after_group,
            held: BTreeSet::new(),
            late: late.iter().map(|s| s.to_string()).collect(),
            unreachable: unreachable.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_gate_holds_every_later_group_in_every_rollout_type() {
        let clusters = [
            cluster("a", 1, Succeeded),
            cluster("b", 2, ToApply),
            cluster("c", 3, ToApply),
        ];
        for kind in [
            RolloutType::All,
            RolloutType::Progressive,
            RolloutType::ProgressivePerGroup,
        ] {
            let strategy = RolloutLimits {
                kind,
                ..progressive(5, 0)
            };
            let held = next_step_with(&strategy, &clusters, &context(Some(1), &[], &[]));
            assert!(held.start.is_empty(), "{kind:?}: {:?}", held.start);
            assert!(!held.complete);
            let open = next_step_with(&strategy, &clusters, &context(Some(2), &[], &[]));
            assert_eq!(open.start, vec!["b".to_string()], "{kind:?}");
        }
    }

    #[test]
    fn late_joiners_start_after_the_cohort_settled() {
        let strategy = RolloutLimits {
            kind: RolloutType::ProgressivePerGroup,
            ..progressive(5, 1)
        };
        // A late joiner in the first group neither starts nor holds the
        // cohort's next group.
        let clusters = [
            cluster("a", 1, Succeeded),
            cluster("late", 1, ToApply),
            cluster("b", 2, ToApply),
        ];
        let step = next_step_with(&strategy, &clusters, &context(None, &["late"], &[]));
        assert_eq!(step.start, vec!["b".to_string()]);
        let clusters = [
            cluster("a", 1, Succeeded),
            cluster("late", 1, ToApply),
            cluster("b", 2, Failed),
        ];
        let step = next_step_with(&strategy, &clusters, &context(None, &["late"], &[]));
        assert_eq!(step.start, vec!["late".to_string()]);
    }

    #[test]
    fn an_unreachable_cluster_neither_holds_nor_fails_nor_takes_a_slot() {
        let strategy = RolloutLimits {
            kind: RolloutType::ProgressivePerGroup,
            ..progressive(1, 0)
        };
        let clusters = [
            cluster("gone", 1, Progressing),
            cluster("a", 1, Succeeded),
            cluster("b", 2, ToApply),
        ];
        let step = next_step_with(&strategy, &clusters, &context(None, &[], &["gone"]));
        assert_eq!(step.start, vec!["b".to_string()]);
        let clusters = [cluster("gone", 1, Failed), cluster("b", 2, ToApply)];
        let step = next_step_with(&strategy, &clusters, &context(None, &[], &["gone"]));
        assert!(!step.halted);
        assert_eq!(step.start, vec!["b".to_string()]);
        // Progressive: the unreachable cluster is written without a slot.
        let clusters = [
            cluster("gone", 1, ToApply),
            cluster("a", 1, ToApply),
            cluster("b", 1, ToApply),
        ];
        let step = next_step_with(
            &progressive(1, 0),
            &clusters,
            &context(None, &[], &["gone"]),
        );
        assert_eq!(step.start, vec!["gone".to_string(), "a".into()]);
        // In a mandatory group an unreachable cluster holds the rollout.
        let strategy = RolloutLimits {
            mandatory_groups: vec!["canary".into()],
            ..progressive(5, 0)
        };
        let clusters = [cluster("gone", 0, Progressing), cluster("b", 1, ToApply)];
        let step = next_step_with(&strategy, &clusters, &context(None, &[], &["gone"]));
        assert!(step.start.is_empty(), "{:?}", step.start);
        // Complete once the others succeeded and its work is written.
        let clusters = [cluster("gone", 1, Progressing), cluster("a", 1, Succeeded)];
        assert!(
            next_step_with(
                &progressive(1, 0),
                &clusters,
                &context(None, &[], &["gone"])
            )
            .complete
        );
    }

    fn state() -> impl Strategy<Value = ClusterState> {
        prop_oneof![
            Just(ToApply),
            Just(Progressing),
            Just(Succeeded),
            Just(Failed)
        ]
    }

    proptest! {
        #[test]
        fn progressive_never_has_more_than_max_concurrency_progressing(
            states in prop::collection::vec(state(), 0..20),
            max_concurrency in 1usize..5,
            max_failures in 0usize..3,
        ) {
            let clusters: Vec<RolloutCluster> = states
                .iter()
                .enumerate()
                .map(|(i, s)| cluster(&format!("c{i:02}"), 1, *s))
                .collect();
            let step = next_step(&progressive(max_concurrency, max_failures), &clusters);
            let progressing = clusters.iter().filter(|c| c.state == Progressing).count();
            prop_assert!(step.start.is_empty() || progressing + step.start.len() <= max_concurrency);
            for name in &step.start {
                let c = clusters.iter().find(|c| &c.name == name).expect("started cluster exists");
                prop_assert_eq!(c.state, ToApply);
            }
            let failed = clusters.iter().filter(|c| c.state == Failed).count();
            prop_assert_eq!(step.halted, failed > max_failures);
        }

        #[test]
        fn held_clusters_never_start_and_unreachable_ones_never_halt(
            states in prop::collection::vec((state(), 0usize..4, any::<bool>(), any::<bool>()), 0..16),
            held_after in prop::option::of(0usize..4),
            kind in prop_oneof![
                Just(RolloutType::All),
                Just(RolloutType::Progressive),
                Just(RolloutType::ProgressivePerGroup)
            ],
        ) {
            let clusters: Vec<RolloutCluster> = states
                .iter()
                .enumerate()
                .map(|(i, (s, group, _, _))| cluster(&format!("c{i:02}"), *group, *s))
                .collect();
            let pick = |flag: fn(&(ClusterState, usize, bool, bool)) -> bool| {
                states
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| flag(s))
                    .map(|(i, _)| format!("c{i:02}"))
                    .collect::<BTreeSet<String>>()
            };
            let context = StepContext {
                held_after_group: held_after,
                held: pick(|s| s.1 == 3 && s.2 == s.3),
                late: pick(|s| s.2),
                unreachable: pick(|s| s.3),
            };
            let strategy = RolloutLimits { kind, ..progressive(2, 0) };
            let step = next_step_with(&strategy, &clusters, &context);
            let settled = clusters
                .iter()
                .filter(|c| !context.late.contains(&c.name))
                .all(|c| matches!(c.state, Succeeded | Failed) || context.unreachable.contains(&c.name));
            for name in &step.start {
                let c = clusters.iter().find(|c| &c.name == name).expect("exists");
                prop_assert!(held_after.is_none_or(|g| c.group_index <= g), "{name} passed a gate");
                prop_assert!(!context.held.contains(name), "{name} was held by name");
                prop_assert!(!context.late.contains(name) || settled, "{name} joined late and started early");
            }
            let reachable_failed = clusters
                .iter()
                .filter(|c| c.state == Failed && !context.unreachable.contains(&c.name))
                .count();
            prop_assert_eq!(step.halted, reachable_failed > 0);
        }
    }
}
