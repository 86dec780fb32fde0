//! The decisions of `seal` and `sealed`, without IO.

use std::collections::{BTreeMap, BTreeSet};

use ferry_api::managed_cluster::SealingKey;
use ferry_semantics::sealing::{SealTo, SealedEnvelope, is_sealed};
use serde_json::Value;

/// Why a cluster cannot be sealed to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealPlanError {
    /// The command named no cluster (or its placements chose none).
    #[error(
        "no cluster to seal to: name --cluster, --placement, --cluster-set or --replica-set (whose placements chose none)"
    )]
    NoClusters,
    /// A cluster publishes no current key.
    #[error(
        "cluster {0} publishes no current sealing key (status.sealingKeys): its agent has not \
         connected yet, runs without sealing, or predates sealed Secrets"
    )]
    NoKey(String),
}

/// The key to seal to for each of `clusters` (name → its published keys):
/// its first key not retiring. Fails naming the first cluster without one,
/// or when there is no cluster.
pub fn seal_targets(
    clusters: &BTreeMap<String, Vec<SealingKey>>,
) -> Result<Vec<SealTo>, SealPlanError> {
    if clusters.is_empty() {
        return Err(SealPlanError::NoClusters);
    }
    clusters
        .iter()
        .map(|(cluster, keys)| {
            keys.iter()
                .find(|k| !k.retiring)
                .map(|k| SealTo {
                    cluster: cluster.clone(),
                    public_key: k.public_key.clone(),
                })
                .ok_or_else(|| SealPlanError::NoKey(cluster.clone()))
        })
        .collect()
}

/// What putting an entry into a template did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// It replaced the entry (sealed or plain) for the same Secret.
    Replaced,
    /// There was none: it was added last.
    Added,
}

/// The namespace and name of the Secret a manifest is (a plain `v1`
/// Secret or a sealed entry), if it is one.
fn secret_named(manifest: &Value) -> Option<(String, String)> {
    let text = |p: &str| {
        manifest
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let plain = text("/apiVersion") == "v1" && text("/kind") == "Secret";
    (plain || is_sealed(manifest)).then(|| (text("/metadata/namespace"), text("/metadata/name")))
}

/// Puts sealed `entry` into `manifests` in place of the entry for the same
/// Secret, else last. Never fails.
pub fn place_entry(manifests: &mut Vec<Value>, entry: Value) -> Placed {
    let target = secret_named(&entry);
    match manifests
        .iter()
        .position(|m| target.is_some() && secret_named(m) == target)
    {
        Some(at) => {
            manifests[at] = entry;
            Placed::Replaced
        }
        None => {
            manifests.push(entry);
            Placed::Added
        }
    }
}

/// How one sealed entry of a work stands against its cluster's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryState {
    /// Sealed to the cluster's current key.
    Current,
    /// Sealed only to keys the cluster marks retiring: reseal it.
    Retiring,
    /// Sealed to none of the cluster's keys.
    NotARecipient,
    /// The cluster publishes no key.
    NoKeys,
}

impl EntryState {
    /// The word shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Current => "current",
            Self::Retiring => "retiring",
            Self::NotARecipient => "not-a-recipient",
            Self::NoKeys => "no-keys",
        }
    }
}

/// The state of an entry sealed to `key_ids` on a cluster publishing `keys`.
pub fn entry_state(key_ids: &BTreeSet<String>, keys: &[SealingKey]) -> EntryState {
    if keys.is_empty() {
        return EntryState::NoKeys;
    }
    if keys
        .iter()
        .any(|k| !k.retiring && key_ids.contains(&k.key_id))
    {
        EntryState::Current
    } else if keys.iter().any(|k| key_ids.contains(&k.key_id)) {
        EntryState::Retiring
    } else {
        EntryState::NotARecipient
    }
}

/// One sealed entry of one work, as `sealed` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SealedRow {
    /// The work's namespace: its cluster.
    pub cluster: String,
    /// The work's name.
    pub work: String,
    /// The Secret's `namespace/name`.
    pub secret: String,
    /// The key ids it is sealed to.
    pub key_ids: Vec<String>,
    /// How it stands.
    pub state: String,
}

/// The rows of work `name` in namespace `cluster` with `manifests`, against
/// the cluster's `keys`: one per well-formed sealed entry.
pub fn rows_of(
    cluster: &str,
    name: &str,
    manifests: &[Value],
    keys: &[SealingKey],
) -> Vec<SealedRow> {
    manifests
        .iter()
        .filter(|m| is_sealed(m))
        .filter_map(|m| SealedEnvelope::parse(m).ok())
        .map(|envelope| {
            let ids: BTreeSet<String> = envelope.key_ids().into_iter().collect();
            SealedRow {
                cluster: cluster.to_string(),
                work: name.to_string(),
                secret: format!("{}/{}", envelope.namespace, envelope.name),
                state: entry_state(&ids, keys).as_str().to_string(),
                key_ids: ids.into_iter().collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn key(id: &str, retiring: bool) -> SealingKey {
        SealingKey {
            key_id: id.into(),
            public_key: format!("age1{id}"),
            retiring,
        }
    }

    #[test]
    fn each_cluster_is_sealed_to_its_current_key_or_named_when_it_has_none() {
        let mut clusters = BTreeMap::new();
        clusters.insert("a".to_string(), vec![key("old", true), key("new", false)]);
        let targets = seal_targets(&clusters).expect("targets");
        assert_eq!(targets[0].public_key, "age1new");
        clusters.insert("b".to_string(), vec![key("old", true)]);
        assert_eq!(
            seal_targets(&clusters),
            Err(SealPlanError::NoKey("b".into()))
        );
        assert_eq!(
            seal_targets(&BTreeMap::new()),
            Err(SealPlanError::NoClusters)
        );
    }

    #[test]
    fn an_entry_replaces_the_same_secret_plain_or_sealed_else_is_added() {
        let plain = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "app"}});
        let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "db", "namespace": "app"}});
        let entry = json!({"apiVersion": "sealing.ferry.dev/v1alpha1", "kind": "SealedSecret",
                           "metadata": {"name": "db", "namespace": "app"}});
        let mut manifests = vec![other.clone(), plain];
        assert_eq!(place_entry(&mut manifests, entry.clone()), Placed::Replaced);
        assert_eq!(manifests, vec![other.clone(), entry.clone()]);
        assert_eq!(place_entry(&mut manifests, entry.clone()), Placed::Replaced);
        let mut only_other = vec![other.clone()];
        assert_eq!(place_entry(&mut only_other, entry.clone()), Placed::Added);
        assert_eq!(only_other.len(), 2);
    }

    #[test]
    fn states_follow_the_clusters_keys() {
        let ids = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let keys = [key("new", false), key("old", true)];
        assert_eq!(entry_state(&ids(&["new"]), &keys), EntryState::Current);
        assert_eq!(entry_state(&ids(&["old"]), &keys), EntryState::Retiring);
        assert_eq!(entry_state(&ids(&["x"]), &keys), EntryState::NotARecipient);
        assert_eq!(entry_state(&ids(&["new"]), &[]), EntryState::NoKeys);
    }

    proptest! {
        #[test]
        fn placing_keeps_every_other_manifest(names in proptest::collection::vec("[a-c]", 0..6), target in "[a-c]") {
            let mut manifests: Vec<Value> = names.iter().map(|n| json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": n, "namespace": "app"}})).collect();
            let before = manifests.clone();
            let entry = json!({"apiVersion": "sealing.ferry.dev/v1alpha1", "kind": "SealedSecret",
                               "metadata": {"name": target, "namespace": "app"}});
            let placed = place_entry(&mut manifests, entry.clone());
            let others = |list: &[Value]| list.iter().filter(|m| m["metadata"]["name"] != target.as_str()).cloned().collect::<Vec<_>>();
            prop_assert_eq!(others(&manifests), others(&before));
            prop_assert_eq!(manifests.iter().filter(|m| **m == entry).count(), 1);
            prop_assert_eq!(placed == Placed::Added, !names.contains(&target));
        }
    }
}
