//! What `kubectl ferry rollout` decides, purely: the replica set a user
//! names, the gate an approval is for (a `RolloutApproval` recorded as
//! approved by the caller) and the approval's name. The reads and writes
//! are `crate::hub_api::replica_sets`.

use ferry_api::replica_set::{ManifestWorkReplicaSet, PlacementRollout};
use kube::ResourceExt;

use crate::error::CliError;
use crate::rollout_view::{current_revision, current_revision_digest};

/// A replica set named by the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaSetRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// Parses `NS/NAME`, or `NAME` in `namespace` (the `-n` flag, else the
/// context's `default_namespace`).
pub fn parse_replica_set_ref(
    arg: &str,
    namespace: Option<&str>,
    default_namespace: &str,
) -> Result<ReplicaSetRef, CliError> {
    let bad = || CliError::BadReplicaSet(arg.to_string());
    let (ns, name) = match arg.split_once('/') {
        Some((ns, name)) => {
            if namespace.is_some_and(|n| n != ns) {
                return Err(bad());
            }
            (ns.to_string(), name.to_string())
        }
        None => (
            namespace.unwrap_or(default_namespace).to_string(),
            arg.to_string(),
        ),
    };
    let valid = |s: &str| {
        !s.is_empty()
            && s.len() <= 253
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    };
    if !valid(&ns) || !valid(&name) {
        return Err(bad());
    }
    Ok(ReplicaSetRef {
        namespace: ns,
        name,
    })
}

/// The gate an approval is for: placement, group and revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateChoice {
    /// The placement.
    pub placement: String,
    /// The group the gate follows.
    pub after_group: String,
    /// The whole revision digest the approval names.
    pub revision: String,
}

/// The one gate of `rs` awaiting approval that matches the filters; fails
/// when none or several do.
pub fn gate_to_approve(
    rs: &ManifestWorkReplicaSet,
    placement: Option<&str>,
    group: Option<&str>,
) -> Result<GateChoice, CliError> {
    let revision = current_revision(rs);
    let digest = current_revision_digest(rs);
    let rollout = rs
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .map(|r| r.placements.clone())
        .unwrap_or_default();
    let candidates: Vec<GateChoice> = rollout
        .iter()
        .filter(|p| placement.is_none_or(|want| p.name == want))
        .flat_map(|p| {
            p.gates
                .iter()
                .filter(|g| g.state == "AwaitingApproval")
                .filter(|g| group.is_none_or(|want| g.after_group == want))
                .map(|g| GateChoice {
                    placement: p.name.clone(),
                    after_group: g.after_group.clone(),
                    revision: placement_digest(p, &revision, &digest),
                })
        })
        .collect();
    match candidates.as_slice() {
        [one] if one.revision.is_empty() => Err(CliError::NothingToApprove(format!(
            "the gate after group {} of manifestworkreplicaset {}/{} awaits a revision whose whole digest the status does not give and the spec no longer asks for; run the command again once the hub has looked at the new spec",
            one.after_group,
            rs.namespace().unwrap_or_default(),
            rs.name_any(),
        ))),
        [one] => Ok(one.clone()),
        [] => Err(CliError::NothingToApprove(format!(
            "no gate of manifestworkreplicaset {}/{} awaits approval{}{}",
            rs.namespace().unwrap_or_default(),
            rs.name_any(),
            placement
                .map(|p| format!(" on placement {p}"))
                .unwrap_or_default(),
            group
                .map(|g| format!(" after group {g}"))
                .unwrap_or_default()
        ))),
        several => Err(CliError::NothingToApprove(format!(
            "several gates await approval ({}): choose one with --placement and --group",
            several
                .iter()
                .map(|c| format!("placement {} after group {}", c.placement, c.after_group))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The whole digest of the revision placement `p` rolls out: the one its
/// status records, else (a hub that wrote no digest) the spec's `digest`
/// when its short `revision` hash is the one the placement rolls out; empty
/// when neither is known.
pub fn placement_digest(p: &PlacementRollout, revision: &str, digest: &str) -> String {
    if !p.revision_digest.is_empty() {
        p.revision_digest.clone()
    } else if p.revision.is_empty() || p.revision == revision {
        digest.to_string()
    } else {
        String::new()
    }
}

/// The name of the approval of `choice` on replica set `name`: lower-case,
/// DNS-safe, at most 253 characters, the same for the same gate and
/// revision (so approving twice finds the first approval).
pub fn approval_name(name: &str, choice: &GateChoice) -> String {
    let raw = format!(
        "{name}-{}-{}-{}",
        choice.placement, choice.after_group, choice.revision
    );
    let mut clean: String = raw
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    clean.truncate(253);
    clean.trim_matches(|c| c == '-' || c == '.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_replica_set_is_named_ns_slash_name_or_by_namespace_flag() {
        assert_eq!(
            parse_replica_set_ref("ns/app", None, "default").expect("parses"),
            ReplicaSetRef {
                namespace: "ns".into(),
                name: "app".into()
            }
        );
        assert_eq!(
            parse_replica_set_ref("app", Some("x"), "default")
                .expect("parses")
                .namespace,
            "x"
        );
        assert!(parse_replica_set_ref("ns/app", Some("other"), "default").is_err());
        assert!(parse_replica_set_ref("ns/A", None, "default").is_err());
        assert!(parse_replica_set_ref("/app", None, "default").is_err());
    }

    fn rs(gates: serde_json::Value) -> ManifestWorkReplicaSet {
        serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "app", "namespace": "ns"},
            "spec": {"manifestWorkTemplate": {}, "placementRefs": [{"name": "p"}, {"name": "q"}]},
            "status": {"rollout": {"placements": gates}},
        }))
        .expect("replica set")
    }

    #[test]
    fn the_gate_awaiting_approval_is_chosen_or_the_choice_is_asked_for() {
        let digest = "d".repeat(64);
        let one = rs(json!([
            {"name": "p", "revision": "abc", "revisionDigest": digest, "gates": [
                {"afterGroup": "canary", "state": "Passed"},
                {"afterGroup": "wave1", "state": "AwaitingApproval"}]},
            {"name": "q", "gates": [{"afterGroup": "canary", "state": "Pending"}]},
        ]));
        assert_eq!(
            gate_to_approve(&one, None, None).expect("one"),
            GateChoice {
                placement: "p".into(),
                after_group: "wave1".into(),
                revision: digest.clone()
            }
        );
        // A status without the digest: the spec's, when it is the revision
        // rolling out; else a clear refusal instead of a wrong approval.
        let current = current_revision(&one);
        let without = rs(json!([{"name": "p", "revision": current, "gates": [
            {"afterGroup": "canary", "state": "AwaitingApproval"}]}]));
        assert_eq!(
            gate_to_approve(&without, None, None)
                .expect("from the spec")
                .revision,
            current_revision_digest(&without)
        );
        let stale = rs(json!([{"name": "p", "revision": "0123456789", "gates": [
            {"afterGroup": "canary", "state": "AwaitingApproval"}]}]));
        let refused = gate_to_approve(&stale, None, None)
            .expect_err("stale")
            .to_string();
        assert!(refused.contains("whole digest"), "{refused}");
        let none = gate_to_approve(&one, Some("q"), None)
            .expect_err("none")
            .to_string();
        assert!(
            none.contains(
                "no gate of manifestworkreplicaset ns/app awaits approval on placement q"
            ),
            "{none}"
        );
        let two = rs(json!([
            {"name": "p", "revision": "abc", "revisionDigest": digest, "gates": [{"afterGroup": "canary", "state": "AwaitingApproval"}]},
            {"name": "q", "revision": "abc", "revisionDigest": digest, "gates": [{"afterGroup": "canary", "state": "AwaitingApproval"}]},
        ]));
        let several = gate_to_approve(&two, None, Some("canary"))
            .expect_err("several")
            .to_string();
        assert!(several.contains("--placement"), "{several}");
        assert_eq!(
            gate_to_approve(&two, Some("q"), None).expect("q").placement,
            "q"
        );
    }

    #[test]
    fn approval_names_are_dns_safe_and_stable() {
        let choice = GateChoice {
            placement: "p".into(),
            after_group: "Canary_1".into(),
            revision: "abc".into(),
        };
        assert_eq!(approval_name("app", &choice), "app-p-canary-1-abc");
        assert!(approval_name(&"x".repeat(300), &choice).len() <= 253);
    }
}
