//! Deleting one of ferry's CRDs is a fleet-wide deletion in one step: the
//! API server deletes every object of the CRD (every ManifestWork, or every
//! replica set and so every generated work), the hub tells each agent its
//! works are gone, and the agents delete what they applied. An uninstall or
//! a `kubectl delete -f` of an old release's CRD file does it by accident.
//! This `ValidatingAdmissionPolicy` refuses the DELETE of a CRD of ferry's
//! API groups unless the CRD carries [`CONFIRM_DELETION_ANNOTATION`]`=true`,
//! a second, deliberate step (only whoever may write CRDs, the platform
//! team, can set it). It is the API server's check, so it holds while no
//! hub runs; when the objects go anyway (the policy removed first), each
//! agent's deletion brake holds past its budget.

use k8s_openapi::api::admissionregistration::v1::{MatchCondition, Validation};

use super::policy_builder::PolicyDef;
use ferry_api::contract::{CLUSTER_GROUP, CONFIRM_DELETION_ANNOTATION, WORK_GROUP};

/// Name of the policy and of its binding; the API server quotes it in denials.
pub const CRD_DELETION_POLICY_NAME: &str = "crd-deletions-confirmed.work.ferry.dev";

/// The policy: DELETE of `customresourcedefinitions` whose group is one of
/// ferry's, refused unless confirmed. Never fails.
pub fn crd_deletion_policy() -> PolicyDef {
    PolicyDef {
        name: CRD_DELETION_POLICY_NAME,
        group: "apiextensions.k8s.io",
        version: "v1",
        scope: "Cluster",
        resources: &["customresourcedefinitions"],
        operations: &["DELETE"],
        extra_rules: Vec::new(),
        match_conditions: vec![MatchCondition {
            name: "ferrys-crds-only".into(),
            expression: format!(
                "oldObject != null && oldObject.spec.group in ['{WORK_GROUP}', '{CLUSTER_GROUP}']"
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
                "deleting one of ferry's CRDs deletes every object of it, and what the agents \
                 applied for them on every cluster; annotate it {CONFIRM_DELETION_ANNOTATION}=true \
                 first (policy {CRD_DELETION_POLICY_NAME})"
            )),
            message_expression: Some(format!(
                "'deleting CRD ' + oldObject.metadata.name + ' deletes every object of it, and what \
                 the agents applied for them on every cluster; annotate it \
                 {CONFIRM_DELETION_ANNOTATION}=true first (policy {CRD_DELETION_POLICY_NAME})'"
            )),
            reason: Some("Forbidden".into()),
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_deletions_of_ferrys_crds_are_matched_and_they_need_the_annotation() {
        let spec = crd_deletion_policy().policy().spec.expect("spec");
        let rule = &spec
            .match_constraints
            .and_then(|m| m.resource_rules)
            .expect("rules")[0];
        assert_eq!(rule.api_versions.as_deref(), Some(&["v1".to_string()][..]));
        assert_eq!(rule.scope.as_deref(), Some("Cluster"));
        assert_eq!(
            rule.operations.as_deref(),
            Some(&["DELETE".to_string()][..])
        );
        let condition = &spec.match_conditions.expect("conditions")[0].expression;
        assert!(
            condition.contains("['work.ferry.dev', 'cluster.ferry.dev']"),
            "{condition}"
        );
        let validation = &spec.validations.expect("validations")[0].expression;
        assert!(
            validation.contains("['work.ferry.dev/confirm-deletion'] == 'true'"),
            "{validation}"
        );
    }
}
