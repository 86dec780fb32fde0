//! Deleting a cluster's namespace on the hub deletes every work in it, and
//! each work's finalizer then tells the cluster's agent to delete what it
//! applied: a whole cluster emptied in one step, by a `kubectl delete ns`
//! meant for another namespace or a cleanup script. The join labels each
//! cluster namespace [`CLUSTER_NAMESPACE_LABEL`]; this
//! `ValidatingAdmissionPolicy` refuses the DELETE of a namespace so
//! labelled unless it carries [`CONFIRM_DELETION_ANNOTATION`]`=true`, a
//! second, deliberate step. It is the API server's check, so it holds while
//! no hub runs; when the namespace goes anyway (the policy or the label
//! removed first), the agent's deletion brake holds past its budget.

use k8s_openapi::api::admissionregistration::v1::{MatchCondition, Validation};

use super::policy_builder::PolicyDef;
use ferry_api::contract::{CLUSTER_NAMESPACE_LABEL, CONFIRM_DELETION_ANNOTATION};

/// Name of the policy and of its binding; the API server quotes it in denials.
pub const CLUSTER_NAMESPACE_POLICY_NAME: &str =
    "cluster-namespace-deletions-confirmed.work.ferry.dev";

/// The policy: DELETE of a `namespaces` labelled as a cluster's, refused
/// unless confirmed. Never fails.
pub fn cluster_namespace_policy() -> PolicyDef {
    PolicyDef {
        name: CLUSTER_NAMESPACE_POLICY_NAME,
        group: "",
        version: "v1",
        scope: "Cluster",
        resources: &["namespaces"],
        operations: &["DELETE"],
        extra_rules: Vec::new(),
        match_conditions: vec![MatchCondition {
            name: "cluster-namespaces-only".into(),
            expression: format!(
                "oldObject != null && has(oldObject.metadata.labels) && \
                 '{CLUSTER_NAMESPACE_LABEL}' in oldObject.metadata.labels"
            ),
        }],
        variables: Vec::new(),
        validations: vec![Validation {
            expression: format!(
                "has(oldObject.metadata.annotations) && \
                 '{CONFIRM_DELETION_ANNOTATION}' in oldObject.metadata.annotations && \
                 oldObject.metadata.annotations['{CONFIRM_DELETION_ANNOTATION}'] == 'true'"
            ),
            message: Some(format!(
                "deleting a cluster's namespace on the hub deletes every work in it, and what the \
                 cluster's agent applied for them; annotate it {CONFIRM_DELETION_ANNOTATION}=true \
                 first (policy {CLUSTER_NAMESPACE_POLICY_NAME})"
            )),
            message_expression: Some(format!(
                "'namespace ' + oldObject.metadata.name + ' is the namespace of cluster ' + \
                 oldObject.metadata.labels['{CLUSTER_NAMESPACE_LABEL}'] + ' on the hub: deleting \
                 it deletes every work in it, and what the agent applied for them; annotate it \
                 {CONFIRM_DELETION_ANNOTATION}=true first (policy {CLUSTER_NAMESPACE_POLICY_NAME})'"
            )),
            reason: Some("Forbidden".into()),
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_deletions_of_labelled_namespaces_are_matched_and_they_need_the_annotation() {
        let spec = cluster_namespace_policy().policy().spec.expect("spec");
        let rule = &spec
            .match_constraints
            .and_then(|m| m.resource_rules)
            .expect("rules")[0];
        assert_eq!(rule.api_groups.as_deref(), Some(&[String::new()][..]));
        assert_eq!(
            rule.resources.as_deref(),
            Some(&["namespaces".to_string()][..])
        );
        assert_eq!(
            rule.operations.as_deref(),
            Some(&["DELETE".to_string()][..])
        );
        let condition = &spec.match_conditions.expect("conditions")[0].expression;
        assert!(
            condition.contains("'work.ferry.dev/cluster-namespace' in oldObject.metadata.labels"),
            "{condition}"
        );
        let validation = &spec.validations.expect("validations")[0].expression;
        assert!(
            validation.contains("['work.ferry.dev/confirm-deletion'] == 'true'"),
            "{validation}"
        );
    }
}
