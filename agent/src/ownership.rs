//! The agent's index of which works list which spoke objects, so that two
//! works on this cluster never fight over one object: a younger work that
//! wants other values than an older one yields (see
//! `ferry_semantics::ownership` for the rule). The index lives in memory and
//! is rebuilt as works are applied; it holds one entry per manifest of the
//! works this agent applies, so it is bounded by those works.

use std::collections::HashMap;

use serde_json::Value;
use tokio::sync::Mutex;

use ferry_semantics::ownership::{Verdict, WorkRank, verdict};

/// Which object a manifest names: group, kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    group: String,
    kind: String,
    namespace: String,
    name: String,
}

impl ObjectKey {
    /// The key of object `name` of `kind` in `group`, in `namespace` as
    /// resolved (a namespaced manifest without one is in `default`; empty
    /// for cluster-scoped kinds).
    pub fn new(group: &str, kind: &str, namespace: &str, name: &str) -> Self {
        Self {
            group: group.to_string(),
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

/// One work's wish for one object.
#[derive(Debug, Clone)]
struct Claim {
    rank: WorkRank,
    desired: Value,
}

/// Objects → the works (by UID) that list them, with what they want.
#[derive(Debug, Default)]
pub struct OwnerIndex {
    claims: Mutex<HashMap<ObjectKey, HashMap<String, Claim>>>,
}

impl OwnerIndex {
    /// Records that the work ranked `rank` wants `desired` for `key`, and
    /// says whether it may write it or must yield to an older work that
    /// disagrees.
    pub async fn claim(&self, rank: &WorkRank, key: ObjectKey, desired: &Value) -> Verdict {
        let mut claims = self.claims.lock().await;
        let works = claims.entry(key).or_default();
        works.insert(
            rank.uid.clone(),
            Claim {
                rank: rank.clone(),
                desired: desired.clone(),
            },
        );
        verdict(
            rank,
            desired,
            works
                .iter()
                .filter(|(uid, _)| **uid != rank.uid)
                .map(|(_, c)| (&c.rank, &c.desired)),
        )
    }

    /// Keeps only the claims of work `uid` on `keep` (its manifests now):
    /// objects a work no longer lists are no longer its.
    pub async fn retain(&self, uid: &str, keep: &[ObjectKey]) {
        let mut claims = self.claims.lock().await;
        claims.retain(|key, works| {
            if !keep.contains(key) {
                works.remove(uid);
            }
            !works.is_empty()
        });
    }

    /// Drops every claim of work `uid` (it was deleted or evicted).
    pub async fn forget(&self, uid: &str) {
        self.retain(uid, &[]).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rank(created: i64, name: &str) -> WorkRank {
        WorkRank {
            created,
            name: name.into(),
            uid: name.into(),
        }
    }

    fn key() -> ObjectKey {
        ObjectKey {
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: "default".into(),
            name: "contested".into(),
        }
    }

    #[tokio::test]
    async fn a_forgotten_owner_lets_the_younger_work_write() {
        let index = OwnerIndex::default();
        let (one, two) = (rank(1, "one"), rank(2, "two"));
        let a = json!({"data": {"owner": "one"}});
        let b = json!({"data": {"owner": "two"}});
        assert_eq!(index.claim(&one, key(), &a).await, Verdict::Write);
        assert!(matches!(
            index.claim(&two, key(), &b).await,
            Verdict::Yield { .. }
        ));
        index.forget("one").await;
        assert_eq!(index.claim(&two, key(), &b).await, Verdict::Write);
    }

    #[tokio::test]
    async fn an_object_dropped_from_the_older_work_is_free() {
        let index = OwnerIndex::default();
        let (one, two) = (rank(1, "one"), rank(2, "two"));
        index
            .claim(&one, key(), &json!({"data": {"owner": "one"}}))
            .await;
        index.retain("one", &[]).await;
        assert_eq!(
            index
                .claim(&two, key(), &json!({"data": {"owner": "two"}}))
                .await,
            Verdict::Write
        );
    }
}
