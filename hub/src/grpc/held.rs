//! What one agent holds, as far as its session knows: each work's
//! generation and the labels last sent with it. The session sends a work
//! again when either moved on; labels alone only to agents that read them
//! (protocol 2 or later), since older ones would make a pass for nothing.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};

use ferry_proto::v1;

/// The first protocol version whose agents copy a work's labels.
pub const LABELS_PROTOCOL: u32 = 2;

/// A digest of a work's labels, to notice a change without keeping them.
pub fn labels_digest(labels: &BTreeMap<String, String>) -> u64 {
    let mut hasher = DefaultHasher::new();
    labels.hash(&mut hasher);
    hasher.finish()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Version {
    generation: i64,
    /// None for works the agent named in its Hello: their labels are taken
    /// as current (a label change made while the agent was away waits for
    /// the work's next change).
    labels: Option<u64>,
}

/// Works one session's agent holds, by UID.
#[derive(Debug, Default)]
pub struct HeldWorks {
    works: HashMap<String, Version>,
    /// Whether the agent copies labels, so a label change alone is sent.
    sends_labels: bool,
}

impl HeldWorks {
    /// What an agent of `protocol` said it holds in its Hello.
    pub fn from_hello(known: &[v1::WorkVersion], protocol: u32) -> Self {
        Self {
            works: known
                .iter()
                .map(|w| {
                    let version = Version {
                        generation: w.generation,
                        labels: None,
                    };
                    (w.uid.clone(), version)
                })
                .collect(),
            sends_labels: protocol >= LABELS_PROTOCOL,
        }
    }

    /// Whether work `uid` at `generation` with labels `digest` must be sent:
    /// it is new to the agent, at another generation, or (for agents that
    /// copy labels) its labels changed. Never fails.
    pub fn is_due(&mut self, uid: &str, generation: i64, digest: u64) -> bool {
        let Some(held) = self.works.get_mut(uid) else {
            return true;
        };
        if held.generation != generation {
            return true;
        }
        match held.labels {
            None => {
                held.labels = Some(digest);
                false
            }
            Some(sent) => self.sends_labels && sent != digest,
        }
    }

    /// Records that work `uid` was sent at `generation` with labels `digest`.
    pub fn sent(&mut self, uid: String, generation: i64, digest: u64) {
        let version = Version {
            generation,
            labels: Some(digest),
        };
        self.works.insert(uid, version);
    }

    /// Whether the agent holds work `uid`.
    pub fn contains(&self, uid: &str) -> bool {
        self.works.contains_key(uid)
    }

    /// Forgets work `uid`.
    pub fn remove(&mut self, uid: &str) {
        self.works.remove(uid);
    }

    /// The UIDs of held works not in `present`.
    pub fn missing_from(&self, present: &std::collections::HashSet<String>) -> Vec<String> {
        self.works
            .keys()
            .filter(|uid| !present.contains(*uid))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> u64 {
        labels_digest(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    fn hello(protocol: u32) -> HeldWorks {
        let known = [v1::WorkVersion {
            uid: "u".into(),
            generation: 3,
        }];
        HeldWorks::from_hello(&known, protocol)
    }

    #[test]
    fn a_work_named_in_the_hello_at_its_generation_is_not_sent_again() {
        let mut held = hello(LABELS_PROTOCOL);
        assert!(!held.is_due("u", 3, labels(&[("app", "web")])));
        assert!(
            held.is_due("u", 4, labels(&[("app", "web")])),
            "new generation"
        );
        assert!(held.is_due("other", 1, labels(&[])), "new work");
    }

    #[test]
    fn a_label_change_alone_is_sent_only_to_agents_that_copy_labels() {
        let before = labels(&[("app", "web")]);
        let after = labels(&[("app", "web"), ("team", "a")]);
        for (protocol, due) in [(LABELS_PROTOCOL, true), (LABELS_PROTOCOL - 1, false)] {
            let mut held = hello(protocol);
            held.sent("u".into(), 3, before);
            assert!(!held.is_due("u", 3, before));
            assert_eq!(held.is_due("u", 3, after), due, "protocol {protocol}");
        }
    }

    #[test]
    fn works_gone_from_the_index_are_named() {
        let mut held = hello(LABELS_PROTOCOL);
        held.sent("kept".into(), 1, 0);
        let present = ["kept".to_string()].into_iter().collect();
        assert_eq!(held.missing_from(&present), vec!["u".to_string()]);
        held.remove("u");
        assert!(held.missing_from(&present).is_empty());
        assert!(held.contains("kept"));
    }
}
