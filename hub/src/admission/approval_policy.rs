//! Who an approval says approved: a `ValidatingAdmissionPolicy` the hub
//! installs with its CRDs. Creating a `RolloutApproval` is refused unless
//! its `spec.approvedBy` is the creator's own user name, so the record of
//! who let a rollout through cannot be forged; the CRD's own rule keeps
//! the spec from changing afterwards. Held by the API server itself, with
//! no hub process running.

use k8s_openapi::api::admissionregistration::v1::Validation;

use super::policy_builder::PolicyDef;
use ferry_api::contract::WORK_GROUP;

/// Name of the policy and of its binding; the API server quotes it in denials.
pub const APPROVAL_POLICY_NAME: &str = "rolloutapprovals.work.ferry.dev";

/// CEL: the approver named is the requester.
const RULE: &str = "object.spec.approvedBy == request.userInfo.username";

/// CEL: the denial, naming both.
const MESSAGE: &str = "'approvedBy must be your own user name: ' + request.userInfo.username + \
     ' may not create an approval recorded as approved by ' + object.spec.approvedBy";

/// The policy: CREATE of `rolloutapprovals`, refused when `approvedBy` is
/// not the creator.
pub fn approval_policy() -> PolicyDef {
    PolicyDef {
        name: APPROVAL_POLICY_NAME,
        group: WORK_GROUP,
        version: "v1alpha1",
        scope: "Namespaced",
        resources: &["rolloutapprovals"],
        operations: &["CREATE"],
        extra_rules: Vec::new(),
        match_conditions: Vec::new(),
        variables: Vec::new(),
        validations: vec![Validation {
            expression: RULE.into(),
            message: Some("approvedBy must be the creator's own user name".into()),
            message_expression: Some(MESSAGE.into()),
            reason: Some("Forbidden".into()),
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_makes_approved_by_the_creator_on_create() {
        let spec = approval_policy().policy().spec.expect("spec");
        assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
        let rules = spec
            .match_constraints
            .and_then(|m| m.resource_rules)
            .expect("rules");
        assert_eq!(
            rules[0].resources.as_deref(),
            Some(&["rolloutapprovals".to_string()][..])
        );
        assert_eq!(
            rules[0].operations.as_deref(),
            Some(&["CREATE".to_string()][..])
        );
        let validation = &spec.validations.expect("validations")[0];
        assert_eq!(
            validation.expression,
            "object.spec.approvedBy == request.userInfo.username"
        );
        let binding = approval_policy().binding().spec.expect("binding");
        assert_eq!(binding.policy_name.as_deref(), Some(APPROVAL_POLICY_NAME));
    }
}
