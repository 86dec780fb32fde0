//! Cluster sets, purely: which sets a cluster belongs to, and which clusters
//! a Placement may choose from given the sets bound to its namespace (OCM's
//! ManagedClusterSet and ManagedClusterSetBinding rules). The caller brings
//! each set's rule already compiled (a label matcher), so this module knows
//! no Kubernetes types.

use std::collections::{BTreeMap, BTreeSet};

/// Cluster labels.
pub type Labels = BTreeMap<String, String>;

/// How one set chooses its clusters.
pub enum SetRule<'a> {
    /// The clusters whose exclusive set label (its key is the caller's)
    /// equals the set's name.
    ExclusiveLabel,
    /// The clusters whose labels the matcher accepts.
    Selector(&'a dyn Fn(&Labels) -> bool),
    /// A set whose selector cannot be used: it holds no cluster.
    Invalid,
}

/// One ManagedClusterSet.
pub struct ClusterSet<'a> {
    /// The set's name.
    pub name: &'a str,
    /// How it chooses clusters.
    pub rule: SetRule<'a>,
}

/// Whether the cluster with `labels` belongs to `set`; `set_label` is the key
/// of the exclusive set label.
pub fn belongs(set: &ClusterSet<'_>, set_label: &str, labels: &Labels) -> bool {
    match &set.rule {
        SetRule::ExclusiveLabel => labels.get(set_label).map(String::as_str) == Some(set.name),
        SetRule::Selector(matches) => matches(labels),
        SetRule::Invalid => false,
    }
}

/// The names of the sets the cluster with `labels` belongs to.
pub fn sets_of<'a>(
    sets: &'a [ClusterSet<'a>],
    set_label: &str,
    labels: &Labels,
) -> BTreeSet<&'a str> {
    sets.iter()
        .filter(|s| belongs(s, set_label, labels))
        .map(|s| s.name)
        .collect()
}

/// Which clusters a placement may choose from, or why it may choose none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Eligible {
    /// These clusters (non-empty).
    Clusters(BTreeSet<String>),
    /// No existing set is bound to the namespace, or none of the bound ones
    /// is among the placement's `clusterSets` (OCM's
    /// `NoManagedClusterSetBindings`).
    NoBindings,
    /// Sets are bound (and named) but all are empty (OCM's
    /// `AllManagedClusterSetsEmpty`); the names are the sets considered.
    AllSetsEmpty(BTreeSet<String>),
}

impl Eligible {
    /// Whether the cluster `name` may be chosen.
    pub fn allows(&self, name: &str) -> bool {
        matches!(self, Eligible::Clusters(c) if c.contains(name))
    }
}

/// The clusters a placement may choose from: the union of the clusters of
/// the sets bound to its namespace (`bound`: the sets named by the
/// namespace's bindings) that exist in `sets`, narrowed to `wanted` (the
/// placement's `spec.clusterSets`) when that is non-empty. `clusters` are
/// every cluster's name and labels.
pub fn eligible_clusters<'c>(
    sets: &[ClusterSet<'_>],
    set_label: &str,
    bound: &BTreeSet<String>,
    wanted: &[String],
    clusters: impl IntoIterator<Item = (&'c str, &'c Labels)>,
) -> Eligible {
    let considered: Vec<&ClusterSet<'_>> = sets
        .iter()
        .filter(|s| bound.contains(s.name))
        .filter(|s| wanted.is_empty() || wanted.iter().any(|w| w == s.name))
        .collect();
    if considered.is_empty() {
        return Eligible::NoBindings;
    }
    let chosen: BTreeSet<String> = clusters
        .into_iter()
        .filter(|(_, labels)| considered.iter().any(|s| belongs(s, set_label, labels)))
        .map(|(name, _)| name.to_string())
        .collect();
    if chosen.is_empty() {
        Eligible::AllSetsEmpty(considered.iter().map(|s| s.name.to_string()).collect())
    } else {
        Eligible::Clusters(chosen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KEY: &str = "cluster.ferry.dev/clusterset";

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn bound(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn names(e: &Eligible) -> Vec<&str> {
        match e {
            Eligible::Clusters(c) => c.iter().map(String::as_str).collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn a_cluster_belongs_to_its_exclusive_set_and_to_every_selector_that_matches() {
        let all = |_: &Labels| true;
        let prod = |l: &Labels| l.get("env").map(String::as_str) == Some("prod");
        let sets = [
            ClusterSet {
                name: "global",
                rule: SetRule::Selector(&all),
            },
            ClusterSet {
                name: "default",
                rule: SetRule::ExclusiveLabel,
            },
            ClusterSet {
                name: "team-a",
                rule: SetRule::ExclusiveLabel,
            },
            ClusterSet {
                name: "prod",
                rule: SetRule::Selector(&prod),
            },
            ClusterSet {
                name: "broken",
                rule: SetRule::Invalid,
            },
        ];
        let of = sets_of(&sets, KEY, &labels(&[(KEY, "team-a"), ("env", "prod")]));
        assert_eq!(
            of.into_iter().collect::<Vec<_>>(),
            ["global", "prod", "team-a"]
        );
        let of = sets_of(&sets, KEY, &labels(&[]));
        assert_eq!(of.into_iter().collect::<Vec<_>>(), ["global"]);
    }

    #[test]
    fn a_namespace_without_bindings_may_choose_no_cluster() {
        let all = |_: &Labels| true;
        let sets = [ClusterSet {
            name: "global",
            rule: SetRule::Selector(&all),
        }];
        let l = labels(&[]);
        let e = eligible_clusters(&sets, KEY, &bound(&[]), &[], [("a", &l)]);
        assert_eq!(e, Eligible::NoBindings);
        // A binding to a set that does not exist binds nothing.
        let e = eligible_clusters(&sets, KEY, &bound(&["missing"]), &[], [("a", &l)]);
        assert_eq!(e, Eligible::NoBindings);
    }

    #[test]
    fn bound_sets_are_united_and_cluster_sets_narrow_them() {
        let sets = [
            ClusterSet {
                name: "x",
                rule: SetRule::ExclusiveLabel,
            },
            ClusterSet {
                name: "y",
                rule: SetRule::ExclusiveLabel,
            },
            ClusterSet {
                name: "z",
                rule: SetRule::ExclusiveLabel,
            },
        ];
        let a = labels(&[(KEY, "x")]);
        let b = labels(&[(KEY, "y")]);
        let c = labels(&[(KEY, "z")]);
        let clusters = [("a", &a), ("b", &b), ("c", &c)];
        let e = eligible_clusters(&sets, KEY, &bound(&["x", "y"]), &[], clusters);
        assert_eq!(names(&e), ["a", "b"]);
        let e = eligible_clusters(&sets, KEY, &bound(&["x", "y"]), &["y".into()], clusters);
        assert_eq!(names(&e), ["b"]);
        // Naming a set that is not bound reaches nothing.
        let e = eligible_clusters(&sets, KEY, &bound(&["x"]), &["z".into()], clusters);
        assert_eq!(e, Eligible::NoBindings);
    }

    #[test]
    fn bound_sets_without_clusters_say_so() {
        let sets = [ClusterSet {
            name: "x",
            rule: SetRule::ExclusiveLabel,
        }];
        let a = labels(&[(KEY, "y")]);
        let e = eligible_clusters(&sets, KEY, &bound(&["x"]), &[], [("a", &a)]);
        assert_eq!(e, Eligible::AllSetsEmpty(bound(&["x"])));
        assert!(!e.allows("a"));
    }

    proptest! {
        // Eligible clusters are exactly those in some bound, wanted set;
        // narrowing never adds a cluster.
        #[test]
        fn eligible_is_the_union_of_bound_wanted_sets(
            cluster_sets in proptest::collection::vec(0u8..4, 0..12),
            bound_mask in 0u8..16,
            wanted_mask in 0u8..16,
        ) {
            let set_names = ["s0", "s1", "s2", "s3"];
            let sets: Vec<ClusterSet<'_>> = set_names
                .iter()
                .map(|n| ClusterSet { name: n, rule: SetRule::ExclusiveLabel })
                .collect();
            let pick = |mask: u8| -> Vec<String> {
                (0..4).filter(|i| mask & (1 << i) != 0).map(|i| set_names[i].to_string()).collect()
            };
            let bound_sets: BTreeSet<String> = pick(bound_mask).into_iter().collect();
            let wanted = pick(wanted_mask);
            let cluster_labels: Vec<(String, Labels)> = cluster_sets
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("c{i}"), labels(&[(KEY, set_names[*s as usize])])))
                .collect();
            let input = || cluster_labels.iter().map(|(n, l)| (n.as_str(), l));
            let narrowed = eligible_clusters(&sets, KEY, &bound_sets, &wanted, input());
            let unnarrowed = eligible_clusters(&sets, KEY, &bound_sets, &[], input());
            for (name, l) in &cluster_labels {
                let set = &l[KEY];
                let expected = bound_sets.contains(set) && (wanted.is_empty() || wanted.contains(set));
                prop_assert_eq!(narrowed.allows(name), expected);
                prop_assert!(!narrowed.allows(name) || unnarrowed.allows(name));
            }
            if bound_sets.is_empty() {
                prop_assert_eq!(narrowed, Eligible::NoBindings);
            }
        }
    }
}
