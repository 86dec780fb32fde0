//! What an agent's Hello tells the hub of its cluster, bounded before it
//! is written to the ManagedCluster: the agent's and the spoke's versions,
//! and the public keys Secrets are sealed to. An agent is one cluster's
//! identity, not the platform team's, so what it says is checked: each key
//! must be an age X25519 key whose id is the one derived from it, at most
//! [`MAX_CLUSTER_KEYS`] of them; versions are cut to a bounded length.

use ferry_api::managed_cluster::SealingKey;
use ferry_proto::v1;
use ferry_semantics::sealing::{MAX_CLUSTER_KEYS, key_id, parse_recipient};

/// Longest version text written.
const MAX_VERSION: usize = 64;

/// What the hub records of a connected agent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentReport {
    /// The agent's version.
    pub agent_version: String,
    /// The spoke's Kubernetes version; empty when the agent sent none.
    pub kubernetes_version: String,
    /// The cluster's sealing keys, current first.
    pub sealing_keys: Vec<SealingKey>,
}

impl AgentReport {
    /// The report of `hello`, and what of it was dropped and why (for the
    /// log). Never fails.
    pub fn from_hello(hello: &v1::Hello) -> (Self, Vec<String>) {
        let mut dropped = Vec::new();
        let mut sealing_keys = Vec::new();
        for key in &hello.sealing_keys {
            if sealing_keys.len() == MAX_CLUSTER_KEYS {
                dropped.push(format!(
                    "{} more sealing keys than the {MAX_CLUSTER_KEYS} kept",
                    hello.sealing_keys.len() - MAX_CLUSTER_KEYS
                ));
                break;
            }
            if let Err(error) = parse_recipient(&key.public_key) {
                dropped.push(error.to_string());
                continue;
            }
            let derived = key_id(&key.public_key);
            if derived != key.key_id {
                dropped.push(format!(
                    "a sealing key named {:?} is {derived}",
                    bounded(&key.key_id)
                ));
                continue;
            }
            sealing_keys.push(SealingKey {
                key_id: derived,
                public_key: key.public_key.clone(),
                retiring: key.retiring,
            });
        }
        let report = Self {
            agent_version: bounded(&hello.agent_version),
            kubernetes_version: bounded(&hello.kubernetes_version),
            sealing_keys,
        };
        (report, dropped)
    }
}

fn bounded(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control())
        .take(MAX_VERSION)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> v1::SealingKey {
        let public_key = age::x25519::Identity::generate().to_public().to_string();
        v1::SealingKey {
            key_id: key_id(&public_key),
            public_key,
            retiring: false,
        }
    }

    #[test]
    fn good_keys_are_kept_and_forged_ones_dropped() {
        let good = key();
        let mut forged = key();
        forged.key_id = good.key_id.clone();
        let not_a_key = v1::SealingKey {
            key_id: "k-1".into(),
            public_key: "age1nope".into(),
            retiring: false,
        };
        let hello = v1::Hello {
            agent_version: "0.1.0".into(),
            kubernetes_version: "v1.33.1\n".repeat(20),
            sealing_keys: vec![good.clone(), forged, not_a_key],
            ..Default::default()
        };
        let (report, dropped) = AgentReport::from_hello(&hello);
        assert_eq!(report.sealing_keys.len(), 1);
        assert_eq!(report.sealing_keys[0].public_key, good.public_key);
        assert_eq!(dropped.len(), 2);
        assert!(report.kubernetes_version.len() <= MAX_VERSION);
        assert!(!report.kubernetes_version.contains('\n'));
    }

    #[test]
    fn no_more_than_the_bound_of_keys_is_kept() {
        let hello = v1::Hello {
            sealing_keys: (0..MAX_CLUSTER_KEYS + 2).map(|_| key()).collect(),
            ..Default::default()
        };
        let (report, dropped) = AgentReport::from_hello(&hello);
        assert_eq!(report.sealing_keys.len(), MAX_CLUSTER_KEYS);
        assert_eq!(dropped.len(), 1);
    }
}
