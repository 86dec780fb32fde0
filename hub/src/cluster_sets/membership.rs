//! ManagedClusterSets compiled for [`ferry_fleet_semantics::cluster_sets`]: each
//! set's rule turned into a label matcher, and the clusters a Placement may
//! choose from given the bindings of its namespace.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ferry_fleet_semantics::cluster_sets::{
    ClusterSet, Eligible, Labels, SetRule, eligible_clusters,
};
use kube::{Resource, ResourceExt};

use crate::placement::compile::{CompiledSelector, compile_selector};
use ferry_api::cluster_set::{ManagedClusterSet, ManagedClusterSetBinding, SelectorType};
use ferry_api::contract::CLUSTER_SET_LABEL;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::placement::ClusterSelector;

/// How one set chooses clusters, compiled.
enum Rule {
    Exclusive,
    Selector(CompiledSelector),
    /// The selector cannot be used (the message says why): the set is empty.
    Invalid(String),
}

/// One set, compiled.
pub struct CompiledSet {
    name: String,
    rule: Rule,
}

impl CompiledSet {
    /// The set's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Why the set's selector cannot be used, if it cannot.
    pub fn problem(&self) -> Option<&str> {
        match &self.rule {
            Rule::Invalid(reason) => Some(reason),
            _ => None,
        }
    }
}

/// Compiles one set. A `LabelSelector` set without a selector, or with an
/// invalid one, holds no cluster (its problem says why).
pub fn compile_set(set: &ManagedClusterSet) -> CompiledSet {
    let selector = &set.spec.cluster_selector;
    let rule = match selector.selector_type {
        SelectorType::ExclusiveClusterSetLabel => Rule::Exclusive,
        SelectorType::LabelSelector => match &selector.label_selector {
            None => Rule::Invalid("selectorType LabelSelector needs a labelSelector".into()),
            Some(labels) => match compile_selector(
                "spec.clusterSelector",
                &ClusterSelector {
                    label_selector: Some(labels.clone()),
                    claim_selector: None,
                },
            ) {
                Ok(compiled) => Rule::Selector(compiled),
                Err(e) => Rule::Invalid(e.to_string()),
            },
        },
    };
    CompiledSet {
        name: set.name_any(),
        rule,
    }
}

/// Compiles every set that is not being deleted.
pub fn compile_sets(sets: &[Arc<ManagedClusterSet>]) -> Vec<CompiledSet> {
    sets.iter()
        .filter(|s| s.meta().deletion_timestamp.is_none())
        .map(|s| compile_set(s))
        .collect()
}

/// A set's label matcher, borrowing its compiled selector.
type Matcher<'a> = Box<dyn Fn(&Labels) -> bool + 'a>;

/// Runs `f` with `sets` in the form the semantics take.
fn with_sets<T>(sets: &[CompiledSet], f: impl FnOnce(&[ClusterSet<'_>]) -> T) -> T {
    let empty = BTreeMap::new();
    let matchers: Vec<Matcher<'_>> = sets
        .iter()
        .map(|s| -> Matcher<'_> {
            match &s.rule {
                Rule::Selector(selector) => Box::new(|labels| selector.matches(labels, &empty)),
                _ => Box::new(|_| false),
            }
        })
        .collect();
    let semantic: Vec<ClusterSet<'_>> = sets
        .iter()
        .zip(&matchers)
        .map(|(s, m)| ClusterSet {
            name: &s.name,
            rule: match &s.rule {
                Rule::Exclusive => SetRule::ExclusiveLabel,
                Rule::Selector(_) => SetRule::Selector(m.as_ref()),
                Rule::Invalid(_) => SetRule::Invalid,
            },
        })
        .collect();
    f(&semantic)
}

/// How many live clusters belong to `set`; reads each cluster's metadata
/// alone, so a store of `PartialObjectMeta` serves as well as whole ones.
pub fn count_members<K: Resource>(set: &CompiledSet, clusters: &[Arc<K>]) -> usize {
    with_sets(std::slice::from_ref(set), |sets| {
        clusters
            .iter()
            .filter(|c| c.meta().deletion_timestamp.is_none())
            .filter(|c| {
                ferry_fleet_semantics::cluster_sets::belongs(
                    &sets[0],
                    CLUSTER_SET_LABEL,
                    c.labels(),
                )
            })
            .count()
    })
}

/// The sets bound to `namespace`: those its live bindings name.
pub fn bound_sets(bindings: &[Arc<ManagedClusterSetBinding>], namespace: &str) -> BTreeSet<String> {
    bindings
        .iter()
        .filter(|b| b.namespace().as_deref() == Some(namespace))
        .filter(|b| b.meta().deletion_timestamp.is_none())
        .map(|b| b.spec.cluster_set.clone())
        .collect()
}

/// The clusters a placement in `namespace` with `spec.clusterSets` =
/// `wanted` may choose from.
pub fn eligible(
    sets: &[CompiledSet],
    bindings: &[Arc<ManagedClusterSetBinding>],
    namespace: &str,
    wanted: &[String],
    clusters: &[Arc<ManagedCluster>],
) -> Eligible {
    let bound = bound_sets(bindings, namespace);
    with_sets(sets, |sets| {
        eligible_clusters(
            sets,
            CLUSTER_SET_LABEL,
            &bound,
            wanted,
            clusters
                .iter()
                .filter(|c| c.meta().deletion_timestamp.is_none())
                .map(|c| (c.metadata.name.as_deref().unwrap_or_default(), c.labels())),
        )
    })
}
