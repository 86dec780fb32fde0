//! Which clusters a Placement chooses and how they are split into decision
//! groups: the pure half of the hub's placement controller. The hub evaluates
//! label and claim selectors (kube's `Selector`) and hands in one
//! [`Candidate`] per ManagedCluster; everything else (taints and
//! tolerations, `numberOfClusters` with the `Steady` and `Balance`
//! prioritizers, `clustersPerDecisionGroup`, stable group assignment) is
//! decided here, without IO, so it is unit- and property-tested.

use std::collections::{BTreeMap, BTreeSet};

/// Taint effect: the cluster is not selected unless the taint is tolerated.
pub const NO_SELECT: &str = "NoSelect";
/// Taint effect: the cluster is not newly selected unless tolerated; a
/// cluster already chosen stays.
pub const NO_SELECT_IF_NEW: &str = "NoSelectIfNew";
/// Taint effect: selection avoids the cluster only as a preference, which
/// (as in OCM's scheduler) does not filter it.
pub const PREFER_NO_SELECT: &str = "PreferNoSelect";

/// Highest score a prioritizer gives a cluster (OCM's scale is -100..=100).
pub const MAX_SCORE: i64 = 100;

/// Largest number of decisions one PlacementDecision object holds.
pub const MAX_DECISIONS_PER_OBJECT: usize = 100;

/// A taint on a ManagedCluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    /// Taint key, e.g. `cluster.ferry.dev/unreachable`.
    pub key: String,
    /// Taint value (may be empty).
    pub value: String,
    /// `NoSelect`, `NoSelectIfNew` or `PreferNoSelect`.
    pub effect: String,
    /// When the taint was added, seconds since the Unix epoch (None: unknown,
    /// which makes a `tolerationSeconds` run out at once).
    pub added_at: Option<i64>,
}

/// A toleration of a Placement.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Toleration {
    /// Key the toleration matches; empty with `Exists` matches every key.
    pub key: String,
    /// `Equal` (the default when empty) or `Exists`.
    pub operator: String,
    /// Value matched by `Equal`.
    pub value: String,
    /// Effect matched; empty matches every effect.
    pub effect: String,
    /// How long after the taint was added it is still tolerated; None:
    /// forever.
    pub toleration_seconds: Option<i64>,
}

/// Whether `toleration` matches `taint` (ignoring `tolerationSeconds`).
pub fn toleration_matches(toleration: &Toleration, taint: &Taint) -> bool {
    if !toleration.effect.is_empty() && toleration.effect != taint.effect {
        return false;
    }
    match toleration.operator.as_str() {
        "Exists" => toleration.key.is_empty() || toleration.key == taint.key,
        // Equal, or empty which means Equal.
        _ => toleration.key == taint.key && toleration.value == taint.value,
    }
}

/// What a taint means to one placement at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tolerated {
    /// A matching toleration holds without limit (or the taint does not filter).
    Always,
    /// Tolerated until this instant (seconds since the epoch).
    Until(i64),
    /// Not tolerated.
    No,
}

/// Whether `taint` is tolerated by any of `tolerations` at `now`.
pub fn tolerated(taint: &Taint, tolerations: &[Toleration], now: i64) -> Tolerated {
    let mut best = Tolerated::No;
    for toleration in tolerations.iter().filter(|t| toleration_matches(t, taint)) {
        match toleration.toleration_seconds {
            None => return Tolerated::Always,
            Some(seconds) => {
                let until = taint.added_at.unwrap_or(i64::MIN).saturating_add(seconds);
                if until > now {
                    best = match best {
                        Tolerated::Until(t) if t >= until => best,
                        _ => Tolerated::Until(until),
                    };
                }
            }
        }
    }
    best
}

/// One ManagedCluster as a placement sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Cluster name.
    pub name: String,
    /// Whether the cluster passes the placement's predicates (any of them:
    /// predicates are ORed, each one's label and claim selectors ANDed).
    pub matches_predicates: bool,
    /// The cluster's taints.
    pub taints: Vec<Taint>,
    /// Index of the first named decision group whose selector matches the
    /// cluster, if any.
    pub named_group: Option<usize>,
    /// How many decisions of other placements name this cluster (for
    /// `Balance`).
    pub other_decisions: usize,
}

/// A built-in prioritizer with its weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prioritizer {
    /// Clusters already chosen score highest, so decisions do not move.
    Steady,
    /// Clusters chosen by fewer other placements score higher.
    Balance,
}

/// The scheduling input besides the clusters.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PlacementInput {
    /// `numberOfClusters`; None selects every feasible cluster.
    pub number_of_clusters: Option<usize>,
    /// The placement's tolerations.
    pub tolerations: Vec<Toleration>,
    /// Prioritizers with weights (OCM's Additive default: Steady and
    /// Balance, weight 1 each).
    pub prioritizers: Vec<(Prioritizer, i64)>,
    /// Names of the named decision groups, in spec order.
    pub group_names: Vec<String>,
    /// `clustersPerDecisionGroup`, parsed (see [`parse_int_or_percent`]).
    pub clusters_per_group: IntOrPercent,
    /// The previous decisions: cluster name to (group name, group index).
    pub previous: BTreeMap<String, (String, usize)>,
    /// Now, seconds since the epoch.
    pub now: i64,
}

/// One decision group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionGroup {
    /// Position among all groups, from 0.
    pub index: usize,
    /// Name of the named group the clusters come from; empty for the rest.
    pub name: String,
    /// Clusters, sorted by name.
    pub clusters: Vec<String>,
}

/// The outcome of scheduling a placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Decision groups in index order.
    pub groups: Vec<DecisionGroup>,
    /// How many clusters were chosen.
    pub selected: usize,
    /// How many clusters were feasible (matched and tolerated).
    pub feasible: usize,
    /// The soonest instant a toleration with `tolerationSeconds` runs out
    /// for a chosen cluster: schedule again then.
    pub reschedule_at: Option<i64>,
}

/// An integer or a percentage, as Kubernetes' IntOrString holds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOrPercent {
    /// An absolute count.
    Int(usize),
    /// A percentage of a total, 1..=100.
    Percent(u32),
}

impl Default for IntOrPercent {
    /// OCM's default `clustersPerDecisionGroup`: every cluster in one group.
    fn default() -> Self {
        Self::Percent(100)
    }
}

impl IntOrPercent {
    /// The count this stands for out of `total`: percentages round up, and
    /// the result is at least 1.
    pub fn of(self, total: usize) -> usize {
        match self {
            Self::Int(n) => n.max(1),
            Self::Percent(p) => (total * p as usize).div_ceil(100).max(1),
        }
    }
}

/// An int-or-percent field is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntOrPercentError {
    /// The text is neither an integer nor `N%`.
    #[error("{field}: {text:?} is neither an integer nor a percentage like \"25%\"")]
    Unreadable {
        /// The field's name.
        field: &'static str,
        /// What was given.
        text: String,
    },
    /// The value is outside what the field allows.
    #[error("{field}: {text:?} is out of range ({allowed})")]
    OutOfRange {
        /// The field's name.
        field: &'static str,
        /// What was given.
        text: String,
        /// What the field allows.
        allowed: &'static str,
    },
}

/// Parses an IntOrString given as JSON (a number or a string like `"25%"` or
/// `"3"`) for `field`, which must be at least 1 (or 1%..=100%).
pub fn parse_int_or_percent(
    field: &'static str,
    value: &serde_json::Value,
) -> Result<IntOrPercent, IntOrPercentError> {
    let text = match value {
        serde_json::Value::String(s) => s.trim().to_string(),
        other => other.to_string(),
    };
    let out_of_range = |allowed| IntOrPercentError::OutOfRange {
        field,
        text: text.clone(),
        allowed,
    };
    if let Some(number) = text.strip_suffix('%') {
        let percent: i64 = number
            .trim()
            .parse()
            .map_err(|_| IntOrPercentError::Unreadable {
                field,
                text: text.clone(),
            })?;
        return match u32::try_from(percent) {
            Ok(p @ 1..=100) => Ok(IntOrPercent::Percent(p)),
            _ => Err(out_of_range("1% to 100%")),
        };
    }
    let count: i64 = text.parse().map_err(|_| IntOrPercentError::Unreadable {
        field,
        text: text.clone(),
    })?;
    match usize::try_from(count) {
        Ok(n) if n >= 1 => Ok(IntOrPercent::Int(n)),
        _ => Err(out_of_range("at least 1")),
    }
}

/// Balance's score for a cluster named by `count` other decisions when the
/// busiest feasible cluster is named by `max`: 100 for an idle cluster down
/// to -100 for the busiest.
fn balance_score(count: usize, max: usize) -> i64 {
    if count == 0 || max == 0 {
        return MAX_SCORE;
    }
    let usage = count as f64 / max as f64;
    (2.0 * MAX_SCORE as f64 * (0.5 - usage)) as i64
}

/// Chooses the clusters of a placement and splits them into decision groups.
///
/// A cluster is feasible when it matches the predicates and every taint that
/// filters (`NoSelect`, and `NoSelectIfNew` for a cluster not chosen
/// before) is tolerated. With `numberOfClusters`, feasible clusters are
/// ranked by the weighted prioritizer scores, ties broken by name. Chosen
/// clusters go to the first named group whose selector matches them, the
/// rest to unnamed groups; each is split into groups of
/// `clustersPerDecisionGroup`. A cluster keeps its group while that group
/// has room, so unrelated changes move no decisions.
pub fn schedule(input: &PlacementInput, candidates: &[Candidate]) -> Schedule {
    let mut reschedule_at: Option<i64> = None;
    let mut feasible: Vec<&Candidate> = Vec::new();
    'clusters: for candidate in candidates.iter().filter(|c| c.matches_predicates) {
        let chosen_before = input.previous.contains_key(&candidate.name);
        let mut expires: Option<i64> = None;
        for taint in &candidate.taints {
            let filters =
                taint.effect == NO_SELECT || (taint.effect == NO_SELECT_IF_NEW && !chosen_before);
            if !filters {
                continue;
            }
            match tolerated(taint, &input.tolerations, input.now) {
                Tolerated::Always => {}
                Tolerated::Until(t) => expires = Some(expires.map_or(t, |e| e.min(t))),
                Tolerated::No => continue 'clusters,
            }
        }
        if let Some(t) = expires {
            reschedule_at = Some(reschedule_at.map_or(t, |r| r.min(t)));
        }
        feasible.push(candidate);
    }
    let feasible_count = feasible.len();
    let chosen: Vec<&Candidate> = match input.number_of_clusters {
        Some(n) if n < feasible.len() => {
            let max_other = feasible
                .iter()
                .map(|c| c.other_decisions)
                .max()
                .unwrap_or(0);
            let score = |c: &Candidate| -> i64 {
                input
                    .prioritizers
                    .iter()
                    .map(|(prioritizer, weight)| {
                        let raw = match prioritizer {
                            Prioritizer::Steady if input.previous.contains_key(&c.name) => {
                                MAX_SCORE
                            }
                            Prioritizer::Steady => 0,
                            Prioritizer::Balance => balance_score(c.other_decisions, max_other),
                        };
                        raw * weight
                    })
                    .sum()
            };
            let mut ranked: Vec<(i64, &Candidate)> =
                feasible.iter().map(|c| (score(c), *c)).collect();
            ranked.sort_by(|(sa, a), (sb, b)| sb.cmp(sa).then_with(|| a.name.cmp(&b.name)));
            ranked.into_iter().take(n).map(|(_, c)| c).collect()
        }
        _ => feasible,
    };
    let selected = chosen.len();
    let per_group = input.clusters_per_group.of(selected);
    let mut groups = Vec::new();
    let mut by_group: BTreeMap<Option<usize>, Vec<&str>> = BTreeMap::new();
    for candidate in &chosen {
        let group = candidate
            .named_group
            .filter(|g| *g < input.group_names.len());
        by_group.entry(group).or_default().push(&candidate.name);
    }
    // Named groups in spec order, then the clusters of none of them.
    let order = (0..input.group_names.len())
        .map(Some)
        .chain(std::iter::once(None));
    for group in order {
        let Some(members) = by_group.get(&group) else {
            continue;
        };
        let name = group.map_or("", |g| input.group_names[g].as_str());
        for clusters in split_stably(name, members, per_group, &input.previous) {
            groups.push(DecisionGroup {
                index: groups.len(),
                name: name.to_string(),
                clusters,
            });
        }
    }
    Schedule {
        groups,
        selected,
        feasible: feasible_count,
        reschedule_at,
    }
}

/// Splits the clusters of one group (named `name`) into chunks of at most
/// `size`: a cluster that was in chunk k of this group before stays in chunk
/// k while it has room; the others fill chunks in name order.
fn split_stably(
    name: &str,
    members: &[&str],
    size: usize,
    previous: &BTreeMap<String, (String, usize)>,
) -> Vec<Vec<String>> {
    // The previous indices of this group, in order, give each chunk's ordinal.
    let old_indices: BTreeSet<usize> = previous
        .values()
        .filter(|(group, _)| group == name)
        .map(|(_, index)| *index)
        .collect();
    let ordinal_of: BTreeMap<usize, usize> = old_indices
        .iter()
        .enumerate()
        .map(|(ordinal, index)| (*index, ordinal))
        .collect();
    let mut chunks: Vec<Vec<String>> = vec![Vec::new(); old_indices.len()];
    let mut pool: Vec<&str> = Vec::new();
    let mut sorted: Vec<&str> = members.to_vec();
    sorted.sort_unstable();
    for cluster in sorted {
        let kept = previous
            .get(cluster)
            .filter(|(group, _)| group == name)
            .and_then(|(_, index)| ordinal_of.get(index).copied());
        match kept {
            Some(ordinal) if chunks[ordinal].len() < size => {
                chunks[ordinal].push(cluster.to_string())
            }
            _ => pool.push(cluster),
        }
    }
    let mut pool = pool.into_iter();
    for chunk in chunks.iter_mut() {
        while chunk.len() < size {
            match pool.next() {
                Some(cluster) => chunk.push(cluster.to_string()),
                None => break,
            }
        }
    }
    let rest: Vec<&str> = pool.collect();
    for new_chunk in rest.chunks(size) {
        chunks.push(new_chunk.iter().map(|c| c.to_string()).collect());
    }
    chunks.retain(|c| !c.is_empty());
    for chunk in chunks.iter_mut() {
        chunk.sort_unstable();
    }
    chunks
}

/// Splits a group's clusters into the contents of PlacementDecision objects
/// of at most [`MAX_DECISIONS_PER_OBJECT`] each (one empty object for an
/// empty group).
pub fn decision_objects(clusters: &[String]) -> Vec<&[String]> {
    if clusters.is_empty() {
        return vec![&[]];
    }
    clusters.chunks(MAX_DECISIONS_PER_OBJECT).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cluster(name: &str) -> Candidate {
        Candidate {
            name: name.into(),
            matches_predicates: true,
            taints: vec![],
            named_group: None,
            other_decisions: 0,
        }
    }

    fn unreachable(added_at: i64) -> Taint {
        Taint {
            key: "cluster.ferry.dev/unreachable".into(),
            value: String::new(),
            effect: NO_SELECT.into(),
            added_at: Some(added_at),
        }
    }

    fn names(schedule: &Schedule) -> Vec<Vec<String>> {
        schedule.groups.iter().map(|g| g.clusters.clone()).collect()
    }

    fn default_input() -> PlacementInput {
        PlacementInput {
            prioritizers: vec![(Prioritizer::Steady, 1), (Prioritizer::Balance, 1)],
            ..PlacementInput::default()
        }
    }

    #[test]
    fn every_matching_cluster_is_chosen_without_number_of_clusters() {
        let mut b = cluster("b");
        b.matches_predicates = false;
        let out = schedule(&default_input(), &[cluster("c"), b, cluster("a")]);
        assert_eq!(names(&out), vec![vec!["a".to_string(), "c".into()]]);
        assert_eq!(out.selected, 2);
    }

    #[test]
    fn an_untolerated_no_select_taint_filters_and_a_toleration_lets_it_in() {
        let mut a = cluster("a");
        a.taints.push(unreachable(0));
        let input = default_input();
        assert_eq!(schedule(&input, &[a.clone(), cluster("b")]).selected, 1);
        let input = PlacementInput {
            tolerations: vec![Toleration {
                key: "cluster.ferry.dev/unreachable".into(),
                operator: "Exists".into(),
                ..Toleration::default()
            }],
            ..default_input()
        };
        assert_eq!(schedule(&input, &[a, cluster("b")]).selected, 2);
    }

    #[test]
    fn toleration_seconds_run_out_and_say_when_to_schedule_again() {
        let mut a = cluster("a");
        a.taints.push(unreachable(1000));
        let mut input = PlacementInput {
            tolerations: vec![Toleration {
                key: "cluster.ferry.dev/unreachable".into(),
                operator: "Exists".into(),
                toleration_seconds: Some(60),
                ..Toleration::default()
            }],
            now: 1030,
            ..default_input()
        };
        let out = schedule(&input, std::slice::from_ref(&a));
        assert_eq!(out.selected, 1);
        assert_eq!(out.reschedule_at, Some(1060));
        input.now = 1060;
        assert_eq!(schedule(&input, &[a]).selected, 0);
    }

    #[test]
    fn no_select_if_new_keeps_a_chosen_cluster_but_admits_no_new_one() {
        let taint = Taint {
            effect: NO_SELECT_IF_NEW.into(),
            ..unreachable(0)
        };
        let mut a = cluster("a");
        a.taints.push(taint.clone());
        let mut b = cluster("b");
        b.taints.push(taint);
        let mut input = default_input();
        input.previous.insert("a".into(), (String::new(), 0));
        assert_eq!(
            names(&schedule(&input, &[a, b])),
            vec![vec!["a".to_string()]]
        );
    }

    #[test]
    fn steady_keeps_the_chosen_clusters_when_a_new_one_joins() {
        let mut input = PlacementInput {
            number_of_clusters: Some(2),
            ..default_input()
        };
        input.previous.insert("c".into(), (String::new(), 0));
        input.previous.insert("d".into(), (String::new(), 0));
        let out = schedule(
            &input,
            &[cluster("a"), cluster("b"), cluster("c"), cluster("d")],
        );
        assert_eq!(names(&out), vec![vec!["c".to_string(), "d".into()]]);
    }

    #[test]
    fn balance_prefers_clusters_other_placements_chose_less() {
        let mut a = cluster("a");
        a.other_decisions = 3;
        let input = PlacementInput {
            number_of_clusters: Some(1),
            prioritizers: vec![(Prioritizer::Balance, 1)],
            ..PlacementInput::default()
        };
        let out = schedule(&input, &[a, cluster("b")]);
        assert_eq!(names(&out), vec![vec!["b".to_string()]]);
    }

    #[test]
    fn named_groups_come_first_and_the_rest_is_split_by_clusters_per_group() {
        let mut p1 = cluster("p1");
        p1.named_group = Some(0);
        let input = PlacementInput {
            group_names: vec!["canary".into()],
            clusters_per_group: IntOrPercent::Int(2),
            ..default_input()
        };
        let out = schedule(&input, &[cluster("a"), cluster("b"), cluster("c"), p1]);
        let groups: Vec<(usize, &str, Vec<String>)> = out
            .groups
            .iter()
            .map(|g| (g.index, g.name.as_str(), g.clusters.clone()))
            .collect();
        assert_eq!(
            groups,
            vec![
                (0, "canary", vec!["p1".to_string()]),
                (1, "", vec!["a".into(), "b".into()]),
                (2, "", vec!["c".into()]),
            ]
        );
    }

    #[test]
    fn a_new_cluster_does_not_move_others_between_groups() {
        let input = PlacementInput {
            clusters_per_group: IntOrPercent::Int(2),
            ..default_input()
        };
        let before = schedule(&input, &[cluster("b"), cluster("c"), cluster("d")]);
        let mut input = input;
        for group in &before.groups {
            for c in &group.clusters {
                input
                    .previous
                    .insert(c.clone(), (group.name.clone(), group.index));
            }
        }
        let after = schedule(
            &input,
            &[cluster("a"), cluster("b"), cluster("c"), cluster("d")],
        );
        assert_eq!(
            names(&before),
            vec![vec!["b".to_string(), "c".into()], vec!["d".into()]]
        );
        assert_eq!(
            names(&after),
            vec![
                vec!["b".to_string(), "c".into()],
                vec!["a".into(), "d".into()]
            ]
        );
    }

    #[test]
    fn int_or_percent_reads_counts_and_percentages_and_refuses_the_rest() {
        let parse = |v| parse_int_or_percent("clustersPerDecisionGroup", &v);
        assert_eq!(parse(serde_json::json!(3)), Ok(IntOrPercent::Int(3)));
        assert_eq!(
            parse(serde_json::json!("25%")),
            Ok(IntOrPercent::Percent(25))
        );
        assert_eq!(parse(serde_json::json!("4")), Ok(IntOrPercent::Int(4)));
        assert!(matches!(
            parse(serde_json::json!(0)),
            Err(IntOrPercentError::OutOfRange { .. })
        ));
        assert!(matches!(
            parse(serde_json::json!("150%")),
            Err(IntOrPercentError::OutOfRange { .. })
        ));
        assert!(matches!(
            parse(serde_json::json!("lots")),
            Err(IntOrPercentError::Unreadable { .. })
        ));
        assert_eq!(IntOrPercent::Percent(25).of(10), 3);
        assert_eq!(IntOrPercent::Percent(1).of(0), 1);
    }

    #[test]
    fn decision_objects_hold_at_most_one_hundred_and_an_empty_group_one_empty() {
        let clusters: Vec<String> = (0..250).map(|i| format!("c{i:03}")).collect();
        let objects = decision_objects(&clusters);
        assert_eq!(
            objects.iter().map(|o| o.len()).collect::<Vec<_>>(),
            vec![100, 100, 50]
        );
        assert_eq!(decision_objects(&[]), vec![&[] as &[String]]);
    }

    fn candidates() -> impl Strategy<Value = Vec<Candidate>> {
        prop::collection::btree_map(
            "[a-z]{1,3}",
            (any::<bool>(), 0usize..4, prop::option::of(0usize..3)),
            0..30,
        )
        .prop_map(|m| {
            m.into_iter()
                .map(|(name, (matches, other, group))| Candidate {
                    name,
                    matches_predicates: matches,
                    taints: vec![],
                    named_group: group,
                    other_decisions: other,
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn every_chosen_cluster_matches_is_in_one_group_and_groups_respect_their_size(
            clusters in candidates(),
            number in prop::option::of(0usize..10),
            per_group in 1usize..5,
        ) {
            let input = PlacementInput {
                number_of_clusters: number,
                group_names: vec!["g0".into(), "g1".into()],
                clusters_per_group: IntOrPercent::Int(per_group),
                ..default_input()
            };
            let out = schedule(&input, &clusters);
            let matching = clusters.iter().filter(|c| c.matches_predicates).count();
            prop_assert_eq!(out.selected, number.map_or(matching, |n| n.min(matching)));
            let mut seen = BTreeSet::new();
            for (i, group) in out.groups.iter().enumerate() {
                prop_assert_eq!(group.index, i);
                prop_assert!(!group.clusters.is_empty() && group.clusters.len() <= per_group);
                for c in &group.clusters {
                    prop_assert!(seen.insert(c.clone()), "{} in two groups", c);
                    let candidate = clusters.iter().find(|x| &x.name == c).expect("a chosen cluster is a candidate");
                    prop_assert!(candidate.matches_predicates);
                }
            }
            prop_assert_eq!(seen.len(), out.selected);
        }

        #[test]
        fn scheduling_again_with_its_own_decisions_changes_nothing_under_steady(
            clusters in candidates(),
            number in prop::option::of(0usize..10),
            per_group in 1usize..5,
        ) {
            // Balance may move decisions towards idle clusters (as in OCM);
            // Steady alone never does.
            let mut input = PlacementInput {
                number_of_clusters: number,
                group_names: vec!["g0".into(), "g1".into()],
                clusters_per_group: IntOrPercent::Int(per_group),
                prioritizers: vec![(Prioritizer::Steady, 1)],
                ..PlacementInput::default()
            };
            let first = schedule(&input, &clusters);
            for group in &first.groups {
                for c in &group.clusters {
                    input.previous.insert(c.clone(), (group.name.clone(), group.index));
                }
            }
            prop_assert_eq!(schedule(&input, &clusters), first);
        }

        #[test]
        fn an_unrelated_cluster_changes_no_decision(
            clusters in candidates(),
            per_group in 1usize..5,
        ) {
            let mut input = PlacementInput {
                clusters_per_group: IntOrPercent::Int(per_group),
                ..default_input()
            };
            let first = schedule(&input, &clusters);
            for group in &first.groups {
                for c in &group.clusters {
                    input.previous.insert(c.clone(), (group.name.clone(), group.index));
                }
            }
            let mut more = clusters.clone();
            more.push(Candidate { matches_predicates: false, ..cluster("zzzz") });
            prop_assert_eq!(schedule(&input, &more), first);
        }
    }
}
