//! Replica-set `dependsOn` (issue 33) as the hub sees it: which chosen
//! clusters a replica set does not start yet (write its first work to)
//! because a replica set it depends on is not ready there, which replica
//! sets of a namespace wait for each other in a cycle, and the status
//! condition naming them. Pure; the rollout plan holds the clusters like
//! those outside their maintenance window, and the agent keeps the order
//! on each cluster for every later revision (the works carry `dependsOn`).

use k8s_openapi::jiff::Timestamp;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use petgraph::algo::tarjan_scc;
use petgraph::graphmap::DiGraphMap;

use crate::conditions::condition_since;
use ferry_api::manifest_work::{Condition, ManifestWork};
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_semantics::contract::{
    DEPENDENCIES_READY, REASON_DEPENDENCIES_READY, REASON_DEPENDENCY_CYCLE,
    REASON_DEPENDENCY_MISSING, REASON_WAITING_FOR_DEPENDENCY,
};
use ferry_semantics::text::first_few;

/// What a replica set's dependencies are judged from: the replica sets of
/// its namespace and the works of those it depends on, as the hub's caches
/// hold them.
#[derive(Debug, Clone, Default)]
pub struct DependencyInputs {
    /// Every replica set of the namespace, by name.
    pub replica_sets: BTreeMap<String, Arc<ManifestWorkReplicaSet>>,
    /// The works each dependency generated: by dependency, then cluster.
    pub works: BTreeMap<String, BTreeMap<String, Arc<ManifestWork>>>,
    /// The clusters each dependency's placements choose, by dependency.
    pub placed: BTreeMap<String, BTreeSet<String>>,
}

/// Why a cluster does not get its first work yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// The replica set is in a cycle of `dependsOn`: it starts nowhere.
    Cycle,
    /// No replica set of that name exists in the namespace.
    Missing(String),
    /// That replica set's placements do not choose this cluster, so its
    /// work will not come here unless they do.
    NotPlaced(String),
    /// That replica set chooses the cluster but its work is not there yet.
    NoWork(String),
    /// Its work is there without the condition True (yet).
    NotReady {
        /// The dependency replica set.
        dependency: String,
        /// The condition its work must have True.
        condition: String,
    },
}

impl Hold {
    /// One waiting cluster for a message. Never fails.
    fn describe(&self, cluster: &str) -> String {
        match self {
            Hold::Cycle => format!("{cluster} (dependency cycle)"),
            Hold::Missing(d) => format!("{cluster} (replica set {d} does not exist)"),
            Hold::NotPlaced(d) => format!("{cluster} (replica set {d} does not place on it)"),
            Hold::NoWork(d) => format!("{cluster} (replica set {d} has no work there yet)"),
            Hold::NotReady {
                dependency,
                condition,
            } => format!("{cluster} ({dependency}'s work is not {condition} there)"),
        }
    }
}

/// The replica sets of `replica_sets` (one namespace, by name) in a cycle
/// of `dependsOn` with `name`, sorted, or None when it is in none. Linear
/// in the replica sets and their (bounded) dependencies. Never fails.
pub fn cycle_through(
    name: &str,
    replica_sets: &BTreeMap<String, Arc<ManifestWorkReplicaSet>>,
) -> Option<Vec<String>> {
    let mut graph: DiGraphMap<&str, ()> = DiGraphMap::new();
    for (from, rs) in replica_sets {
        graph.add_node(from.as_str());
        for dependency in &rs.spec.depends_on {
            graph.add_edge(from.as_str(), dependency.name.as_str(), ());
        }
    }
    // A strongly connected component of more than one replica set is a
    // cycle (the CRD refuses a replica set naming itself).
    tarjan_scc(&graph)
        .into_iter()
        .find(|component| component.len() > 1 && component.contains(&name))
        .map(|component| {
            let mut names: Vec<String> = component.into_iter().map(str::to_string).collect();
            names.sort();
            names
        })
}

/// Why `cluster` may not get the first work of `rs` yet, judged from
/// `inputs`: the first dependency (in `dependsOn` order) that does not
/// exist, does not place on the cluster, has no work there or whose work
/// lacks its condition True; None when every one is ready there. A work
/// being deleted is not ready. Never fails.
pub fn hold(rs: &ManifestWorkReplicaSet, cluster: &str, inputs: &DependencyInputs) -> Option<Hold> {
    rs.spec.depends_on.iter().find_map(|dependency| {
        let name = &dependency.name;
        if !inputs.replica_sets.contains_key(name) {
            return Some(Hold::Missing(name.clone()));
        }
        let work = inputs.works.get(name).and_then(|w| w.get(cluster));
        let Some(work) = work.filter(|w| w.metadata.deletion_timestamp.is_none()) else {
            let placed = inputs.placed.get(name).is_some_and(|p| p.contains(cluster));
            return Some(if placed {
                Hold::NoWork(name.clone())
            } else {
                Hold::NotPlaced(name.clone())
            });
        };
        let wanted = dependency.condition_type();
        let ready = work.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == wanted && c.status == "True")
        });
        (!ready).then(|| Hold::NotReady {
            dependency: name.clone(),
            condition: wanted.to_string(),
        })
    })
}

/// The holds of the `clusters` of `rs`: every one when `rs` is in a
/// `cycle`, else those whose dependencies are not ready ([`hold`]). Never
/// fails.
pub fn holds<'a>(
    rs: &ManifestWorkReplicaSet,
    clusters: impl IntoIterator<Item = &'a String>,
    cycle: bool,
    inputs: &DependencyInputs,
) -> BTreeMap<String, Hold> {
    if rs.spec.depends_on.is_empty() {
        return BTreeMap::new();
    }
    clusters
        .into_iter()
        .filter_map(|cluster| {
            let why = if cycle {
                Some(Hold::Cycle)
            } else {
                hold(rs, cluster, inputs)
            };
            Some((cluster.clone(), why?))
        })
        .collect()
}

/// The `DependenciesReady` condition of a replica set with `dependsOn`:
/// False with `DependencyCycle` naming the `cycle`, else False with
/// `DependencyMissing` or `WaitingForDependency` naming the count and the
/// first few `waiting` clusters (those the rollout holds now) and what
/// each waits for, else True. None without `dependsOn` (the condition is
/// absent then). Bounded whatever the fleet's size; never fails.
pub fn dependencies_condition(
    rs: &ManifestWorkReplicaSet,
    cycle: Option<&[String]>,
    waiting: &[(String, Hold)],
    generation: i64,
    previous: &[Condition],
    now: Timestamp,
) -> Option<Condition> {
    if rs.spec.depends_on.is_empty() {
        return None;
    }
    let (status, reason, message) = if let Some(cycle) = cycle {
        (
            false,
            REASON_DEPENDENCY_CYCLE,
            format!(
                "replica sets {} depend on each other in a cycle: no cluster gets a first work until it is broken",
                first_few(cycle, ", ")
            ),
        )
    } else if waiting.is_empty() {
        (
            true,
            REASON_DEPENDENCIES_READY,
            "every cluster the rollout starts has its dependencies ready".to_string(),
        )
    } else {
        let missing = waiting.iter().any(|(_, h)| matches!(h, Hold::Missing(_)));
        let entries: Vec<String> = waiting.iter().map(|(c, h)| h.describe(c)).collect();
        (
            false,
            if missing {
                REASON_DEPENDENCY_MISSING
            } else {
                REASON_WAITING_FOR_DEPENDENCY
            },
            format!(
                "{} clusters wait for the replica sets this one depends on before their first work: {}",
                waiting.len(),
                first_few(&entries, ", ")
            ),
        )
    };
    Some(condition_since(
        DEPENDENCIES_READY,
        status,
        reason,
        message,
        generation,
        previous,
        now,
    ))
}

/// The replica sets of `replica_sets` in `namespace` that depend on the
/// replica set `name`: a change of its works concerns them. Never fails.
pub fn dependents<'a>(
    replica_sets: &'a [Arc<ManifestWorkReplicaSet>],
    namespace: &'a str,
    name: &'a str,
) -> impl Iterator<Item = &'a Arc<ManifestWorkReplicaSet>> + 'a {
    replica_sets.iter().filter(move |rs| {
        rs.metadata.namespace.as_deref() == Some(namespace)
            && rs.spec.depends_on.iter().any(|d| d.name == name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs(name: &str, depends_on: &[&str]) -> Arc<ManifestWorkReplicaSet> {
        let depends_on: Vec<_> = depends_on.iter().map(|d| json!({"name": d})).collect();
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"manifestWorkTemplate": {}, "placementRefs": [{"name": "p"}],
                    "dependsOn": depends_on},
            }))
            .expect("replica set"),
        )
    }

    fn work(available: Option<&str>) -> Arc<ManifestWork> {
        let conditions: Vec<_> = available
            .map(|status| {
                json!({"type": "Available", "status": status, "reason": "x",
                    "lastTransitionTime": "2026-11-28T10:00:00Z"})
            })
            .into_iter()
            .collect();
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "work.ferry.dev/v1", "kind": "ManifestWork",
                "metadata": {"name": "db", "namespace": "c"},
                "spec": {}, "status": {"conditions": conditions},
            }))
            .expect("work"),
        )
    }

    fn sets(all: &[Arc<ManifestWorkReplicaSet>]) -> BTreeMap<String, Arc<ManifestWorkReplicaSet>> {
        all.iter()
            .map(|rs| (rs.metadata.name.clone().expect("named"), rs.clone()))
            .collect()
    }

    #[test]
    fn each_way_of_not_being_ready_holds_the_cluster_and_says_why() {
        let app = rs("app", &["db"]);
        let mut inputs = DependencyInputs {
            replica_sets: sets(std::slice::from_ref(&app)),
            ..DependencyInputs::default()
        };
        assert_eq!(hold(&app, "c", &inputs), Some(Hold::Missing("db".into())));
        inputs.replica_sets = sets(&[app.clone(), rs("db", &[])]);
        assert_eq!(hold(&app, "c", &inputs), Some(Hold::NotPlaced("db".into())));
        inputs
            .placed
            .insert("db".into(), BTreeSet::from(["c".to_string()]));
        assert_eq!(hold(&app, "c", &inputs), Some(Hold::NoWork("db".into())));
        let not_ready = Some(Hold::NotReady {
            dependency: "db".into(),
            condition: "Available".into(),
        });
        for status in [None, Some("False")] {
            inputs.works.insert(
                "db".into(),
                BTreeMap::from([("c".to_string(), work(status))]),
            );
            assert_eq!(hold(&app, "c", &inputs), not_ready);
        }
        inputs.works.insert(
            "db".into(),
            BTreeMap::from([("c".to_string(), work(Some("True")))]),
        );
        assert_eq!(hold(&app, "c", &inputs), None);
        // Another cluster is judged on its own work.
        assert_eq!(hold(&app, "d", &inputs), Some(Hold::NotPlaced("db".into())));
    }

    #[test]
    fn a_cycle_names_its_members_and_only_them() {
        let all = sets(&[
            rs("a", &["b"]),
            rs("b", &["c"]),
            rs("c", &["a"]),
            rs("d", &["a"]),
            rs("e", &[]),
        ]);
        let members = Some(vec!["a".to_string(), "b".into(), "c".into()]);
        assert_eq!(cycle_through("b", &all), members);
        assert_eq!(cycle_through("d", &all), None);
        assert_eq!(cycle_through("e", &all), None);
        // A dependency that does not exist is no cycle.
        assert_eq!(cycle_through("x", &sets(&[rs("x", &["y"])])), None);
    }

    #[test]
    fn a_cycle_holds_every_cluster_and_the_condition_says_so() {
        let a = rs("a", &["b"]);
        let clusters = ["c1".to_string(), "c2".to_string()];
        let held = holds(&a, &clusters, true, &DependencyInputs::default());
        assert_eq!(held.len(), 2);
        let waiting: Vec<_> = held.into_iter().collect();
        let cycle = ["a".to_string(), "b".to_string()];
        let c = dependencies_condition(&a, Some(&cycle), &waiting, 1, &[], Timestamp::UNIX_EPOCH)
            .expect("condition");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", REASON_DEPENDENCY_CYCLE)
        );
        assert!(c.message.contains("replica sets a, b"), "{}", c.message);
    }

    #[test]
    fn the_condition_is_bounded_and_absent_without_dependencies() {
        let app = rs("app", &["db"]);
        let waiting: Vec<(String, Hold)> = (0..10_000)
            .map(|i| (format!("cluster-{i:05}"), Hold::NoWork("db".into())))
            .collect();
        let c = dependencies_condition(&app, None, &waiting, 1, &[], Timestamp::UNIX_EPOCH)
            .expect("condition");
        assert_eq!(c.reason, REASON_WAITING_FOR_DEPENDENCY);
        assert!(
            c.message.starts_with("10000 clusters wait"),
            "{}",
            c.message
        );
        assert!(
            c.message
                .contains("cluster-00000 (replica set db has no work there yet)"),
            "{}",
            c.message
        );
        assert!(c.message.len() < 1024, "{}", c.message.len());
        let ready = dependencies_condition(&app, None, &[], 1, &[], Timestamp::UNIX_EPOCH)
            .expect("condition");
        assert_eq!(ready.status, "True");
        assert_eq!(
            dependencies_condition(
                &rs("db", &[]),
                None,
                &waiting,
                1,
                &[],
                Timestamp::UNIX_EPOCH
            ),
            None
        );
        assert!(
            holds(
                &rs("db", &[]),
                &["c".to_string()],
                false,
                &DependencyInputs::default()
            )
            .is_empty()
        );
    }

    #[test]
    fn the_dependents_of_a_replica_set_are_those_of_its_namespace_naming_it() {
        let all = vec![rs("app", &["db"]), rs("web", &["cache"]), rs("db", &[])];
        let names: Vec<_> = dependents(&all, "ns", "db")
            .map(|rs| rs.metadata.name.clone().expect("named"))
            .collect();
        assert_eq!(names, ["app"]);
        assert_eq!(dependents(&all, "other", "db").count(), 0);
    }
}
