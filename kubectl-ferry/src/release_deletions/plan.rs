//! What `kubectl ferry release-deletions CLUSTER` does, decided from what
//! the hub shows of the cluster's brake: pure, no IO.

use ferry_api::managed_cluster::DeletionBrakeStatus;
use k8s_openapi::jiff::Timestamp;

/// The longest reason accepted: the release is an annotation, read by
/// people in the ledger's record of the last releases.
pub const MAX_REASON_LEN: usize = 1024;

/// What the agent's brake holds, as its ManagedCluster shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// Works whose deletion is held.
    pub held_works: u64,
    /// Objects those works would remove.
    pub held_objects: u64,
    /// When the oldest hold began (RFC 3339; may be empty).
    pub since: String,
    /// The namespace of the agent's ledger on the spoke.
    pub ledger_namespace: String,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// The brake holds nothing: nothing is written.
    NothingHeld,
    /// Release what is held.
    Release(Hold),
}

/// Why the release cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseError {
    /// `--reason` is empty.
    #[error(
        "--reason is empty: say why the held deletions are wanted (it is recorded with your name)"
    )]
    EmptyReason,
    /// `--reason` is too long.
    #[error("--reason is {0} bytes, over the {MAX_REASON_LEN}-byte limit")]
    ReasonTooLong(usize),
    /// The hub does not say where the agent keeps its ledger.
    #[error(
        "the hub does not say where {cluster}'s agent keeps its ledger (an older hub, or an agent that named no valid namespace): release on the spoke as status.deletionBrake.release says"
    )]
    NoLedgerNamespace {
        /// The cluster.
        cluster: String,
    },
    /// No kubeconfig context for the spoke was given or found.
    #[error(
        "no kubeconfig context named {cluster} for the spoke: pass --spoke-context NAME, or --spoke-kubeconfig FILE (its current context is used)"
    )]
    NoSpokeContext {
        /// The cluster.
        cluster: String,
    },
    /// The release was written but the hub did not show it taken.
    #[error(
        "the release \"{value}\" is written on the spoke, but {cluster}'s agent had not reported it to the hub within {seconds} s: it takes effect when the agent next reads its ledger (is it running?)"
    )]
    NotSeen {
        /// The cluster.
        cluster: String,
        /// The release written.
        value: String,
        /// How long the hub was watched.
        seconds: u64,
    },
}

/// What to do for `cluster`, whose ManagedCluster shows `brake`. Fails
/// when something is held but the hub does not say where the ledger is.
pub fn plan(cluster: &str, brake: Option<&DeletionBrakeStatus>) -> Result<Plan, ReleaseError> {
    let Some(brake) = brake.filter(|b| b.held_works > 0) else {
        return Ok(Plan::NothingHeld);
    };
    if brake.ledger_namespace.is_empty() {
        return Err(ReleaseError::NoLedgerNamespace {
            cluster: cluster.to_string(),
        });
    }
    Ok(Plan::Release(Hold {
        held_works: brake.held_works,
        held_objects: brake.held_objects,
        since: brake.since.clone(),
        ledger_namespace: brake.ledger_namespace.clone(),
    }))
}

/// The release annotation's value: who (as the spoke's API server knows
/// them), why, and when, so each release is a new value (the agent acts on
/// a value once). Fails when the reason is empty or too long.
pub fn release_value(user: &str, reason: &str, now: Timestamp) -> Result<String, ReleaseError> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(ReleaseError::EmptyReason);
    }
    if reason.len() > MAX_REASON_LEN {
        return Err(ReleaseError::ReasonTooLong(reason.len()));
    }
    Ok(format!(
        "{user}: {reason} ({})",
        now.strftime("%Y-%m-%dT%H:%M:%SZ")
    ))
}

/// The spoke's kubeconfig context: `explicit`, else the one named after
/// the cluster, else (a kubeconfig given for the spoke) its current one
/// (None). Fails when none of those applies.
pub fn spoke_context(
    cluster: &str,
    explicit: Option<&str>,
    contexts: &[String],
    spoke_kubeconfig_given: bool,
) -> Result<Option<String>, ReleaseError> {
    if let Some(explicit) = explicit {
        return Ok(Some(explicit.to_string()));
    }
    if contexts.iter().any(|c| c == cluster) {
        return Ok(Some(cluster.to_string()));
    }
    if spoke_kubeconfig_given {
        return Ok(None);
    }
    Err(ReleaseError::NoSpokeContext {
        cluster: cluster.to_string(),
    })
}

/// Whether the hub shows the hold `before` released: nothing held now, or
/// a hold that began later (new deletions held after the release).
pub fn released(before: &Hold, now: Option<&DeletionBrakeStatus>) -> bool {
    match now {
        None => true,
        Some(now) => now.held_works == 0 || now.since != before.since,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brake(held: u64, namespace: &str) -> DeletionBrakeStatus {
        DeletionBrakeStatus {
            held_works: held,
            held_objects: held * 2,
            since: "2026-12-04T08:00:00Z".into(),
            release: String::new(),
            ledger_namespace: namespace.into(),
        }
    }

    #[test]
    fn a_cluster_that_holds_nothing_is_left_alone() {
        assert_eq!(plan("c1", None), Ok(Plan::NothingHeld));
        assert_eq!(
            plan("c1", Some(&brake(0, "ferry-agent"))),
            Ok(Plan::NothingHeld)
        );
    }

    #[test]
    fn a_hold_is_released_in_the_ledgers_namespace_the_hub_names() {
        let Ok(Plan::Release(hold)) = plan("c1", Some(&brake(6, "ferry-agent"))) else {
            panic!("a release");
        };
        assert_eq!((hold.held_works, hold.held_objects), (6, 12));
        assert_eq!(hold.ledger_namespace, "ferry-agent");
        assert!(matches!(
            plan("c1", Some(&brake(6, ""))),
            Err(ReleaseError::NoLedgerNamespace { .. })
        ));
    }

    #[test]
    fn the_value_says_who_why_and_when() {
        let now: Timestamp = "2026-12-04T08:40:05Z".parse().expect("time");
        assert_eq!(
            release_value("alice", "  CRD reinstalled ", now),
            Ok("alice: CRD reinstalled (2026-12-04T08:40:05Z)".to_string())
        );
        assert_eq!(
            release_value("alice", " ", now),
            Err(ReleaseError::EmptyReason)
        );
        assert_eq!(
            release_value("alice", &"x".repeat(MAX_REASON_LEN + 1), now),
            Err(ReleaseError::ReasonTooLong(MAX_REASON_LEN + 1))
        );
    }

    #[test]
    fn the_spoke_context_is_the_one_given_else_the_clusters_else_the_spoke_kubeconfigs() {
        let contexts = vec!["hub".to_string(), "c1".to_string()];
        assert_eq!(
            spoke_context("c1", Some("other"), &contexts, false),
            Ok(Some("other".into()))
        );
        assert_eq!(
            spoke_context("c1", None, &contexts, false),
            Ok(Some("c1".into()))
        );
        assert_eq!(spoke_context("c2", None, &contexts, true), Ok(None));
        assert!(matches!(
            spoke_context("c2", None, &contexts, false),
            Err(ReleaseError::NoSpokeContext { .. })
        ));
    }

    #[test]
    fn a_release_shows_as_nothing_held_or_a_later_hold() {
        let Ok(Plan::Release(hold)) = plan("c1", Some(&brake(6, "ns"))) else {
            panic!("a release");
        };
        assert!(!released(&hold, Some(&brake(6, "ns"))));
        assert!(released(&hold, None));
        assert!(released(&hold, Some(&brake(0, "ns"))));
        let later = DeletionBrakeStatus {
            since: "2026-12-04T09:00:00Z".into(),
            ..brake(2, "ns")
        };
        assert!(released(&hold, Some(&later)));
    }
}
