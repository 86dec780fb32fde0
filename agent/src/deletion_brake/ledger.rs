//! The deletion brake's ledger: what the agent admitted for deletion in the
//! current window, what it holds, and the releases a platform admin gave.
//! Kept on the spoke (one ConfigMap, see `store.rs`), so the brake survives
//! the agent's restart and the hub cannot reset it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The brake's durable record. Times are Unix seconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ledger {
    /// The most objects the agent managed within the window: the base of
    /// the budget, so a deletion in progress does not shrink its own brake.
    #[serde(default)]
    pub high_water: u64,
    /// When `high_water` was last raised (or reset).
    #[serde(default)]
    pub high_water_at: i64,
    /// The same high-water mark per owner (at most [`MAX_OWNERS`]): the
    /// base of each owner's fair share, steady while its deletion runs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub owner_high_water: BTreeMap<String, u64>,
    /// Works whose deletion went ahead within the window.
    #[serde(default)]
    pub admitted: Vec<Admitted>,
    /// Works whose deletion waits for a release, oldest first.
    #[serde(default)]
    pub held: Vec<Held>,
    /// The latest releases, newest last (at most [`MAX_RELEASES`]).
    #[serde(default)]
    pub releases: Vec<Release>,
    /// The value of the release annotation last acted on: a release takes
    /// effect when the annotation is set to anything else.
    #[serde(default)]
    pub last_release: String,
}

/// How many owners' high-water marks the ledger keeps (one per team with
/// works on the cluster; ~100 bytes each, far below a ConfigMap's limit).
/// Owners beyond it have no fair share and delete only from what the
/// shares leave.
pub const MAX_OWNERS: usize = 4096;

/// How many releases the ledger remembers.
pub const MAX_RELEASES: usize = 10;

/// A work whose deletion the brake let through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Admitted {
    /// The work's UID on the hub.
    pub uid: String,
    /// The work's name, for people reading the ledger.
    pub work: String,
    /// The work's owner (the team the hub says it belongs to; empty when
    /// the hub did not say): its share of the budget is the owner's.
    #[serde(default)]
    pub owner: String,
    /// Objects the deletion removes.
    pub objects: u64,
    /// When it was admitted.
    pub at: i64,
    /// Admitted by a release: not counted against the budget.
    #[serde(default)]
    pub released: bool,
}

/// A work whose deletion the brake holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Held {
    /// The work's UID on the hub.
    pub uid: String,
    /// The work's name.
    pub work: String,
    /// The work's owner (see [`Admitted::owner`]).
    #[serde(default)]
    pub owner: String,
    /// Objects its deletion would remove.
    pub objects: u64,
    /// When the brake first held it.
    pub since: i64,
}

/// One release of held deletions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Release {
    /// When the agent acted on it.
    pub at: i64,
    /// The release annotation's value (who released, and why).
    pub by: String,
    /// The field manager that last wrote the annotation, as the API server
    /// recorded it.
    #[serde(default)]
    pub manager: String,
    /// Works it let go.
    pub works: u64,
    /// Objects those works held.
    pub objects: u64,
}

/// What a ledger holds, in sum: what the agent reports to the hub.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Holding {
    /// Works whose deletion is held.
    pub works: u64,
    /// Objects they would remove.
    pub objects: u64,
    /// When the oldest hold began (Unix seconds; 0 when nothing is held).
    pub since: i64,
}

impl Ledger {
    /// Objects held, over every held work.
    pub fn held_objects(&self) -> u64 {
        self.held.iter().map(|h| h.objects).sum()
    }

    /// What the ledger holds, in sum.
    pub fn holding(&self) -> Holding {
        Holding {
            works: self.held.len() as u64,
            objects: self.held_objects(),
            since: self.held.iter().map(|h| h.since).min().unwrap_or_default(),
        }
    }

    /// Whether work `uid` is held.
    pub fn holds(&self, uid: &str) -> bool {
        self.held.iter().any(|h| h.uid == uid)
    }

    /// Whether a deletion of `owner`'s is held.
    pub fn holds_for(&self, owner: &str) -> bool {
        self.held.iter().any(|h| h.owner == owner)
    }

    /// Objects admitted within the window (releases excluded), per owner.
    pub fn spent_by_owner(&self) -> BTreeMap<&str, u64> {
        let mut spent: BTreeMap<&str, u64> = BTreeMap::new();
        for admitted in self.admitted.iter().filter(|a| !a.released) {
            let sum = spent.entry(admitted.owner.as_str()).or_default();
            *sum = sum.saturating_add(admitted.objects);
        }
        spent
    }

    /// Whether work `uid` was admitted within the window.
    pub fn admits(&self, uid: &str) -> bool {
        self.admitted.iter().any(|a| a.uid == uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(uid: &str, objects: u64, since: i64) -> Held {
        Held {
            uid: uid.into(),
            work: uid.into(),
            owner: String::new(),
            objects,
            since,
        }
    }

    #[test]
    fn holding_sums_the_held_works_from_the_oldest_hold() {
        assert_eq!(Ledger::default().holding(), Holding::default());
        let ledger = Ledger {
            held: vec![held("a", 3, 200), held("b", 4, 100)],
            ..Ledger::default()
        };
        assert_eq!(
            ledger.holding(),
            Holding {
                works: 2,
                objects: 7,
                since: 100
            }
        );
    }
}
