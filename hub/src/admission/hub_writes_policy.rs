//! Only the hub writes what the hub decides: a `ValidatingAdmissionPolicy`
//! that refuses, from anyone but the hub's own identity and the cluster's
//! administrators (group `system:masters`), the writes that route work:
//! PlacementDecisions (the object and its status) and the status of
//! Placements, ManifestWorkReplicaSets (gates, rollout) and
//! ManagedClusterSets. A tenant able to write these could otherwise name
//! clusters outside its bound sets or mark a gate passed. Also the
//! ClusterProfiles ferry publishes (labelled with ferry as their cluster
//! manager, before or after the write): tools that read the inventory trust
//! them, so a forged one could show a cluster healthy or invent one.
//! Profiles of other cluster managers in the same namespace are theirs.
//! Likewise the vendor-neutral PlacementDecisions ferry publishes (labelled
//! with the placement they mirror): a forged one would send a consumer's
//! work to clusters the placement did not choose. Other schedulers'
//! slices (without ferry's label, before and after) are theirs.
//! And the replica-set label on ManifestWorks (`REPLICA_SET_LABEL`): it
//! names the tenant that owns a work, which the agent keeps apart from other
//! tenants' works on the cluster, so whoever may write works in a cluster's
//! namespace must not set, change or remove it to pass as another team
//! (requests that leave it as it was are not checked). And the status of
//! ManifestWorks: the hub writes what each work's agent reports, and a
//! forged one (`Degraded`, healthy feedback) would roll another team's
//! replica set back or pass its gate; agents report over the hub's stream,
//! never to the API server.
//!
//! The hub's username is known only where it runs: the hub asks the API
//! server who it is (`SelfSubjectReview`) at start and applies the policy
//! naming itself ([`crate::admission::watchdog`] keeps it so); the
//! checked-in rendering names the chart's default ServiceAccount
//! [`DEFAULT_HUB_USERNAME`]. DELETE is not matched: the garbage collector
//! removes a deleted Placement's decisions, and the placement controller
//! writes a deleted decision back.

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, NamedRuleWithOperations, Validation,
};
use kube::Resource;

use super::policy_builder::PolicyDef;
use crate::cluster_profile::render::{CLUSTER_MANAGER, CLUSTER_MANAGER_LABEL, ClusterProfile};
use crate::inventory_decisions::render::InventoryPlacementDecision;
use ferry_api::contract::{CLUSTER_GROUP, PLACEMENT_LABEL, REPLICA_SET_LABEL, WORK_GROUP};

/// Name of the policy and of its binding; the API server quotes it in denials.
pub const HUB_WRITES_POLICY_NAME: &str = "hub-owned-writes.cluster.ferry.dev";

/// The hub's username in the checked-in rendering: the chart's
/// ServiceAccount `ferry-hub` in namespace `ferry`.
pub const DEFAULT_HUB_USERNAME: &str = "system:serviceaccount:ferry:ferry-hub";

/// The group besides the hub allowed these writes: the cluster's
/// administrators, who could remove the policy anyway.
pub const ADMIN_GROUP: &str = "system:masters";

/// Most usernames the policy names (the hub's identities); more are
/// ignored.
pub const MAX_WRITERS: usize = 8;

/// A CEL string literal of `s` (single-quoted, escaped).
fn cel_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// CEL: the requester is one of `writers` or in [`ADMIN_GROUP`].
fn rule(writers: &[String]) -> String {
    let names: Vec<String> = writers
        .iter()
        .take(MAX_WRITERS)
        .map(|w| cel_string(w))
        .collect();
    format!(
        "request.userInfo.username in [{}] || \
         (has(request.userInfo.groups) && '{ADMIN_GROUP}' in request.userInfo.groups)",
        names.join(", ")
    )
}

/// CEL: a request outside the inventory group (`multicluster.x-k8s.io`),
/// or one for an inventory object that is ferry's (as written, or as it
/// was): a ClusterProfile labelled with ferry as its manager, a
/// PlacementDecision labelled with the placement it mirrors.
fn ferrys_inventory_only() -> String {
    let labelled = |object: &str| {
        format!(
            "({object} != null && has({object}.metadata.labels) && \
             ((request.resource.resource == '{profiles}' && \
             '{CLUSTER_MANAGER_LABEL}' in {object}.metadata.labels && \
             {object}.metadata.labels['{CLUSTER_MANAGER_LABEL}'] == '{CLUSTER_MANAGER}') || \
             (request.resource.resource == '{decisions}' && \
             '{PLACEMENT_LABEL}' in {object}.metadata.labels)))",
            profiles = ClusterProfile::plural(&()),
            decisions = InventoryPlacementDecision::plural(&()),
        )
    };
    format!(
        "request.resource.group != '{}' || {} || {}",
        ClusterProfile::group(&()),
        labelled("object"),
        labelled("oldObject")
    )
}

/// CEL: a request that is not for a ManifestWork, one for its status, or
/// one that sets, changes or removes its [`REPLICA_SET_LABEL`] (the owner
/// the agent is told).
fn owner_label_changes_only() -> String {
    let value = |object: &str| {
        format!(
            "({object} != null && has({object}.metadata.labels) && \
             '{REPLICA_SET_LABEL}' in {object}.metadata.labels ? \
             {object}.metadata.labels['{REPLICA_SET_LABEL}'] : '')"
        )
    };
    format!(
        "request.resource.resource != 'manifestworks' || \
         (has(request.subResource) && request.subResource == 'status') || {} != {}",
        value("object"),
        value("oldObject")
    )
}

/// The policy for a hub running as `writers` (its usernames; at most
/// [`MAX_WRITERS`] are named): CREATE and UPDATE of `placementdecisions`
/// and `placementdecisions/status`, `placements/status`,
/// `managedclustersets/status` (group `cluster.ferry.dev`),
/// `manifestworkreplicasets/status` (group `work.ferry.dev`) and of the
/// ClusterProfiles labelled with ferry as their manager (and their status)
/// and of the `multicluster.x-k8s.io` PlacementDecisions labelled with a
/// placement, refused for anyone else. Never fails; with no writers only
/// administrators may write.
pub fn hub_writes_policy(writers: &[String]) -> PolicyDef {
    let rule_for = |group: &str, resources: &[&str], scope: &str| NamedRuleWithOperations {
        api_groups: Some(vec![group.into()]),
        api_versions: Some(vec!["v1alpha1".into()]),
        operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        scope: Some(scope.into()),
        ..Default::default()
    };
    PolicyDef {
        name: HUB_WRITES_POLICY_NAME,
        group: CLUSTER_GROUP,
        version: "v1alpha1",
        scope: "Namespaced",
        resources: &[
            "placementdecisions",
            "placementdecisions/status",
            "placements/status",
        ],
        operations: &["CREATE", "UPDATE"],
        extra_rules: vec![
            rule_for(
                WORK_GROUP,
                &["manifestworkreplicasets/status"],
                "Namespaced",
            ),
            rule_for(CLUSTER_GROUP, &["managedclustersets/status"], "Cluster"),
            rule_for(
                &ClusterProfile::group(&()),
                &[
                    "clusterprofiles",
                    "clusterprofiles/status",
                    "placementdecisions",
                ],
                "Namespaced",
            ),
            rule_for(
                WORK_GROUP,
                &["manifestworks", "manifestworks/status"],
                "Namespaced",
            ),
        ],
        match_conditions: vec![
            MatchCondition {
                name: "ferrys-inventory-objects-only".into(),
                expression: ferrys_inventory_only(),
            },
            MatchCondition {
                name: "work-owner-label-changes-only".into(),
                expression: owner_label_changes_only(),
            },
        ],
        variables: Vec::new(),
        validations: vec![Validation {
            expression: rule(writers),
            message: Some(format!(
                "only the ferry hub writes placement decisions, the status of placements, \
                 replica sets, cluster sets and ManifestWorks, ferry's cluster profiles and inventory \
                 placement decisions, and the replica-set label of ManifestWorks (policy {HUB_WRITES_POLICY_NAME})"
            )),
            message_expression: Some(format!(
                "request.userInfo.username + ' may not write ' + request.resource.resource + \
                 (has(request.subResource) && request.subResource != '' ? '/' + request.subResource : '') + \
                 ': only the ferry hub writes what the hub decides (policy {HUB_WRITES_POLICY_NAME})'"
            )),
            reason: Some("Forbidden".into()),
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_hub_and_administrators_may_write_decisions_and_hub_status() {
        let spec = hub_writes_policy(&["system:serviceaccount:x:hub".into()])
            .policy()
            .spec
            .expect("spec");
        let rules = spec
            .match_constraints
            .and_then(|m| m.resource_rules)
            .expect("rules");
        let all: Vec<String> = rules
            .iter()
            .flat_map(|r| r.resources.clone().unwrap_or_default())
            .collect();
        for r in [
            "placementdecisions",
            "placementdecisions/status",
            "placements/status",
            "manifestworkreplicasets/status",
            "managedclustersets/status",
            "clusterprofiles",
            "clusterprofiles/status",
        ] {
            assert!(all.iter().any(|a| a == r), "{r} matched");
        }
        assert_eq!(rules[2].scope.as_deref(), Some("Cluster"));
        assert_eq!(
            rules[3].api_groups.as_deref(),
            Some(&["multicluster.x-k8s.io".to_string()][..])
        );
        // Profiles are checked only when ferry's label is on the object
        // written or on the object as it was; every other request is.
        let condition = &spec.match_conditions.clone().expect("conditions")[0].expression;
        assert!(condition.starts_with("request.resource.group != 'multicluster.x-k8s.io' || "));
        for object in ["object", "oldObject"] {
            assert!(
                condition.contains(&format!(
                    "{object}.metadata.labels['x-k8s.io/cluster-manager'] == 'ferry'"
                )),
                "{condition}"
            );
            assert!(
                condition.contains(&format!(
                    "'cluster.ferry.dev/placement' in {object}.metadata.labels"
                )),
                "{condition}"
            );
        }
        assert!(
            rules[3]
                .resources
                .as_ref()
                .is_some_and(|r| r.iter().any(|r| r == "placementdecisions")),
            "the inventory's PlacementDecisions are matched"
        );
        // Works are checked only when their replica-set label changes;
        // their status always.
        assert_eq!(
            rules[4].resources.as_deref(),
            Some(
                &[
                    "manifestworks".to_string(),
                    "manifestworks/status".to_string()
                ][..]
            )
        );
        let conditions = spec.match_conditions.clone().expect("conditions");
        let owner = &conditions[1].expression;
        assert!(
            owner.starts_with(
                "request.resource.resource != 'manifestworks' || \
                 (has(request.subResource) && request.subResource == 'status') || "
            ),
            "{owner}"
        );
        for object in ["object", "oldObject"] {
            assert!(
                owner.contains(&format!(
                    "{object}.metadata.labels['work.ferry.dev/manifestworkreplicaset']"
                )),
                "{owner}"
            );
        }
        let expression = &spec.validations.expect("validations")[0].expression;
        assert!(expression.contains("['system:serviceaccount:x:hub']"));
        assert!(expression.contains("'system:masters' in request.userInfo.groups"));
    }

    #[test]
    fn a_username_cannot_break_out_of_its_literal() {
        assert_eq!(cel_string("a'b\\c\n"), "'a\\'b\\\\c'");
        let many: Vec<String> = (0..20).map(|i| format!("u{i}")).collect();
        assert_eq!(rule(&many).matches("'u").count(), MAX_WRITERS);
    }
}
