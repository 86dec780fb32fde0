//! The key Secret's contents and what a session's start does to them,
//! decided without IO: which keys the agent holds, which is current, and
//! the Secret to write when a key must be made (first start, rotation
//! asked for, the current key removed).
//!
//! The Secret (`ferry-agent-sealing-keys` in the agent's namespace) holds
//! one data entry per key, named by its key id, valued its age secret key
//! (`AGE-SECRET-KEY-1…`); the annotation [`CURRENT_ANNOTATION`] names the
//! current key, every other one is retiring. A platform admin asks for a
//! new key by setting [`ROTATE_ANNOTATION`] to any new value, and retires a
//! key for good by deleting its data entry.

use std::collections::BTreeMap;

use age::secrecy::ExposeSecret as _;
use ferry_semantics::sealing::{MAX_CLUSTER_KEYS, key_id};

/// Name of the Secret holding the cluster's sealing keys.
pub const KEYS_SECRET: &str = "ferry-agent-sealing-keys";
/// Annotation naming the current key's id.
pub const CURRENT_ANNOTATION: &str = "sealing.ferry.dev/current";
/// Annotation a platform admin sets to a new value to ask for a new key.
pub const ROTATE_ANNOTATION: &str = "sealing.ferry.dev/rotate";
/// Annotation recording the last [`ROTATE_ANNOTATION`] value acted on.
pub const ROTATED_ANNOTATION: &str = "sealing.ferry.dev/rotated";

/// One key the agent holds.
#[derive(Clone)]
pub struct HeldKey {
    /// Its id.
    pub id: String,
    /// The private half.
    pub identity: age::x25519::Identity,
    /// The public half, `age1…`.
    pub public_key: String,
    /// Kept only to open entries still sealed to it.
    pub retiring: bool,
}

impl std::fmt::Debug for HeldKey {
    // The private half never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldKey")
            .field("id", &self.id)
            .field("retiring", &self.retiring)
            .finish_non_exhaustive()
    }
}

/// What the key Secret says, as read: its data entries (decoded) and annotations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoredKeys {
    /// Data entries: key id → age secret key text.
    pub entries: BTreeMap<String, String>,
    /// `sealing.ferry.dev/*` annotations.
    pub annotations: BTreeMap<String, String>,
}

/// What a session's start does with the keys.
pub struct KeyPlan {
    /// The keys to hold, the current one first.
    pub held: Vec<HeldKey>,
    /// The Secret's new contents, when they must be written (a new key).
    pub write: Option<StoredKeys>,
    /// Entries that are not age keys, by name (left in place, unused).
    pub unreadable: Vec<String>,
}

/// Decides the keys to hold from `stored` (None: no Secret yet), making
/// `fresh` the current key when one is needed: no usable key, the current
/// one gone, or a rotation asked for and not yet acted on. Keeps at most
/// [`MAX_CLUSTER_KEYS`] (the newest; the oldest retiring ones are dropped
/// from what is held and published, never from the Secret). Never fails:
/// unreadable entries are named in the plan.
pub fn plan(stored: Option<&StoredKeys>, fresh: age::x25519::Identity) -> KeyPlan {
    let empty = StoredKeys::default();
    let stored = stored.unwrap_or(&empty);
    let mut unreadable = Vec::new();
    let mut readable: Vec<HeldKey> = Vec::new();
    for (name, text) in &stored.entries {
        match text.trim().parse::<age::x25519::Identity>() {
            Ok(identity) => {
                let public_key = identity.to_public().to_string();
                let id = key_id(&public_key);
                // An entry under another key's id is still that key: its
                // id is derived from the key, not from the entry's name.
                if readable.iter().any(|k| k.id == id) {
                    continue;
                }
                readable.push(HeldKey {
                    id,
                    identity,
                    public_key,
                    retiring: true,
                });
            }
            Err(_) => unreadable.push(name.clone()),
        }
    }
    let current = stored.annotations.get(CURRENT_ANNOTATION);
    let rotate = stored.annotations.get(ROTATE_ANNOTATION);
    let rotated = stored.annotations.get(ROTATED_ANNOTATION);
    let rotation_asked = rotate.is_some() && rotate != rotated;
    let current_held = current.and_then(|id| readable.iter().position(|k| &k.id == id));
    let mut write = None;
    let current_at = match current_held {
        Some(at) if !rotation_asked => at,
        _ => {
            let public_key = fresh.to_public().to_string();
            let id = key_id(&public_key);
            let mut next = stored.clone();
            next.entries
                .insert(id.clone(), fresh.to_string().expose_secret().to_string());
            next.annotations
                .insert(CURRENT_ANNOTATION.to_string(), id.clone());
            if let Some(rotate) = rotate {
                next.annotations
                    .insert(ROTATED_ANNOTATION.to_string(), rotate.clone());
            }
            write = Some(next);
            readable.push(HeldKey {
                id,
                identity: fresh,
                public_key,
                retiring: false,
            });
            readable.len() - 1
        }
    };
    let mut current_key = readable.remove(current_at);
    current_key.retiring = false;
    // Retiring keys newest first is unknowable from the Secret; keep them
    // in a stable order (by id) after the current one.
    readable.sort_by(|a, b| a.id.cmp(&b.id));
    let mut held = vec![current_key];
    held.extend(readable.into_iter().take(MAX_CLUSTER_KEYS - 1));
    KeyPlan {
        held,
        write,
        unreadable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(plan: &KeyPlan) -> Vec<(String, bool)> {
        plan.held
            .iter()
            .map(|k| (k.id.clone(), k.retiring))
            .collect()
    }

    #[test]
    fn the_first_start_makes_a_current_key_and_writes_it() {
        let plan = plan(None, age::x25519::Identity::generate());
        assert_eq!(plan.held.len(), 1);
        assert!(!plan.held[0].retiring);
        let write = plan.write.expect("a new Secret");
        assert_eq!(write.annotations[CURRENT_ANNOTATION], plan.held[0].id);
        assert!(write.entries[&plan.held[0].id].starts_with("AGE-SECRET-KEY-1"));
    }

    #[test]
    fn a_later_start_keeps_the_keys_and_writes_nothing() {
        let first = plan(None, age::x25519::Identity::generate());
        let stored = first.write.clone().expect("written");
        let again = plan(Some(&stored), age::x25519::Identity::generate());
        assert!(again.write.is_none());
        assert_eq!(ids(&again), ids(&first));
    }

    #[test]
    fn a_rotation_makes_a_new_current_key_and_keeps_the_old_one_retiring() {
        let first = plan(None, age::x25519::Identity::generate());
        let mut stored = first.write.clone().expect("written");
        stored
            .annotations
            .insert(ROTATE_ANNOTATION.into(), "2026-12-04".into());
        let rotated = plan(Some(&stored), age::x25519::Identity::generate());
        let write = rotated.write.clone().expect("a new key is written");
        assert_eq!(write.annotations[ROTATED_ANNOTATION], "2026-12-04");
        assert_ne!(rotated.held[0].id, first.held[0].id);
        assert_eq!(ids(&rotated)[1], (first.held[0].id.clone(), true));
        // Acted on once: the next start keeps both and writes nothing.
        let after = plan(Some(&write), age::x25519::Identity::generate());
        assert!(after.write.is_none());
        assert_eq!(ids(&after), ids(&rotated));
    }

    #[test]
    fn unreadable_entries_are_named_and_a_removed_current_key_is_replaced() {
        let mut stored = StoredKeys::default();
        stored.entries.insert("junk".into(), "not a key".into());
        stored
            .annotations
            .insert(CURRENT_ANNOTATION.into(), "k-gone".into());
        let plan = plan(Some(&stored), age::x25519::Identity::generate());
        assert_eq!(plan.unreadable, vec!["junk".to_string()]);
        assert!(plan.write.is_some());
        assert_eq!(plan.held.len(), 1);
    }

    #[test]
    fn at_most_the_bound_of_keys_is_held() {
        let mut stored = StoredKeys::default();
        for _ in 0..(MAX_CLUSTER_KEYS + 3) {
            let identity = age::x25519::Identity::generate();
            let id = key_id(&identity.to_public().to_string());
            stored
                .entries
                .insert(id, identity.to_string().expose_secret().to_string());
        }
        let plan = plan(Some(&stored), age::x25519::Identity::generate());
        assert_eq!(plan.held.len(), MAX_CLUSTER_KEYS);
    }
}
