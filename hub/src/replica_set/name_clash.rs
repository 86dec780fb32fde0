//! Two teams' replica sets of the same name (in two namespaces) would write
//! works of the same name in every cluster namespace they share. Whoever
//! wrote first used to keep the name on that cluster, so a team could
//! squat another's name on clusters that join later. The name now belongs,
//! on every cluster, to the older replica set (by creation time, then
//! namespace): the newer one writes no new works (those it already holds
//! stay its own, never rewritten by the other), and both say so in a
//! `NameConflict` condition, without naming the other team's namespace
//! (the hub's log names both).

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::conditions::condition_since;
use ferry_api::manifest_work::Condition;
use ferry_api::replica_set::ManifestWorkReplicaSet;

/// The condition type saying a replica set shares its name with another
/// namespace's.
pub const NAME_CONFLICT: &str = "NameConflict";
/// Reason on the newer replica set: it writes no new works.
pub const YIELDS_TO_OLDER: &str = "NameHeldByOlderReplicaSet";
/// Reason on the older one: the newer ones write no new works.
pub const HOLDS_AGAINST_NEWER: &str = "NewerReplicaSetRefused";

/// Another namespace's replica set of the same name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rival {
    /// Its namespace.
    pub namespace: String,
    /// When it was created.
    pub created: Option<Timestamp>,
}

/// Where a replica set stands among those of its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// No other namespace has a replica set of its name.
    Alone,
    /// It is the oldest: `newer` others of its name write no new works.
    Holds {
        /// How many newer replica sets share its name.
        newer: usize,
    },
    /// An older one holds the name: it writes no new works.
    Yields,
}

/// The replica sets among `all` (the hub's cache) named as `rs` in other
/// namespaces.
pub fn rivals(rs: &ManifestWorkReplicaSet, all: &[Arc<ManifestWorkReplicaSet>]) -> Vec<Rival> {
    let (name, namespace) = (rs.name_any(), rs.namespace());
    all.iter()
        .filter(|other| other.name_any() == name && other.namespace() != namespace)
        .map(|other| Rival {
            namespace: other.namespace().unwrap_or_default(),
            created: other.creation_timestamp().map(|t| t.0),
        })
        .collect()
}

/// The order the name goes by: the earlier creation, then the namespace
/// (a replica set not created yet, as in a dry run, comes last).
fn key(created: Option<Timestamp>, namespace: &str) -> (bool, Option<Timestamp>, &str) {
    (created.is_none(), created, namespace)
}

/// Where `rs` stands among its `rivals`. Pure: every replica set of one
/// name, given the same set of them, agrees on which one holds the name.
pub fn standing(rs: &ManifestWorkReplicaSet, rivals: &[Rival]) -> Standing {
    if rivals.is_empty() {
        return Standing::Alone;
    }
    let namespace = rs.namespace().unwrap_or_default();
    let own = key(rs.creation_timestamp().map(|t| t.0), &namespace);
    if rivals.iter().any(|r| key(r.created, &r.namespace) < own) {
        Standing::Yields
    } else {
        Standing::Holds {
            newer: rivals.len(),
        }
    }
}

/// The `NameConflict` condition for `standing` (None when alone), its
/// transition time carried from `previous`.
pub fn conflict_condition(
    rs: &ManifestWorkReplicaSet,
    standing: Standing,
    generation: i64,
    previous: &[Condition],
    now: Timestamp,
) -> Option<Condition> {
    let name = rs.name_any();
    let (reason, message) = match standing {
        Standing::Alone => return None,
        Standing::Holds { newer } => (
            HOLDS_AGAINST_NEWER,
            format!(
                "{newer} replica set(s) named {name} in other namespaces are newer: they get no new works under this name, on any cluster; works they already hold stay theirs"
            ),
        ),
        Standing::Yields => (
            YIELDS_TO_OLDER,
            format!(
                "an older replica set named {name} in another namespace holds the name: this one gets no new works, on any cluster (those it holds stay); rename it to place it"
            ),
        ),
    };
    Some(condition_since(
        NAME_CONFLICT,
        true,
        reason,
        message,
        generation,
        previous,
        now,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn rs(namespace: &str, created: &str) -> Arc<ManifestWorkReplicaSet> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
                "metadata": {"name": "app", "namespace": namespace, "creationTimestamp": created},
                "spec": {"manifestWorkTemplate": {}, "placementRefs": [{"name": "p"}]},
            }))
            .expect("replica set"),
        )
    }

    #[test]
    fn the_older_holds_the_name_and_the_newer_yields() {
        let all = vec![
            rs("team-a", "2026-12-01T00:00:00Z"),
            rs("team-b", "2026-12-02T00:00:00Z"),
        ];
        assert_eq!(
            standing(&all[0], &rivals(&all[0], &all)),
            Standing::Holds { newer: 1 }
        );
        assert_eq!(standing(&all[1], &rivals(&all[1], &all)), Standing::Yields);
        let alone = vec![all[0].clone()];
        assert_eq!(standing(&all[0], &rivals(&all[0], &alone)), Standing::Alone);
        assert!(
            conflict_condition(&all[0], Standing::Alone, 1, &[], Timestamp::UNIX_EPOCH).is_none()
        );
        let told = conflict_condition(&all[1], Standing::Yields, 1, &[], Timestamp::UNIX_EPOCH)
            .expect("told");
        assert_eq!(
            (told.reason.as_str(), told.status.as_str()),
            (YIELDS_TO_OLDER, "True")
        );
        assert!(!told.message.contains("team-a"), "{}", told.message);
    }

    proptest! {
        /// Whatever the creation times and the order the cache lists them
        /// in, exactly one replica set of a name holds it.
        #[test]
        fn exactly_one_holds_the_name(
            days in proptest::collection::vec(1u8..5, 2..6),
            rotate in 0usize..6,
        ) {
            let mut all: Vec<Arc<ManifestWorkReplicaSet>> = days
                .iter()
                .enumerate()
                .map(|(i, d)| rs(&format!("team-{i}"), &format!("2026-12-0{d}T00:00:00Z")))
                .collect();
            let by = rotate % all.len();
            all.rotate_left(by);
            let holders = all
                .iter()
                .filter(|r| matches!(standing(r, &rivals(r, &all)), Standing::Holds { .. }))
                .count();
            prop_assert_eq!(holders, 1);
        }
    }
}
