//! Who may release held deletions: a replica set's deletion budget holds
//! removals nobody asked for (a relabel, a lost set, a deleted
//! ManagedCluster) until a release, and the release is the platform team's
//! decision, not the team that owns the replica set (who may edit it) nor
//! whoever broke the labels. This `ValidatingAdmissionPolicy` refuses
//! setting or changing [`RELEASE_DELETIONS_ANNOTATION`] on a replica set
//! unless the requester may `update` the virtual subresource
//! `manifestworkreplicasets/release-deletions` there (the API server's
//! authorizer answers, so RBAC says who the platform role is), and unless
//! the value starts with the requester's own user name and a colon, so the
//! record of who released cannot be forged. Held by the API server, with
//! no hub running; removing the annotation is not matched.

use k8s_openapi::api::admissionregistration::v1::{MatchCondition, Validation};

use super::policy_builder::PolicyDef;
use ferry_api::contract::{RELEASE_DELETIONS_ANNOTATION, WORK_GROUP};

/// Name of the policy and of its binding; the API server quotes it in denials.
pub const RELEASE_POLICY_NAME: &str = "deletion-releases.work.ferry.dev";

/// The virtual subresource whose `update` is the platform role's right to
/// release (`manifestworkreplicasets/release-deletions` in RBAC rules).
pub const RELEASE_SUBRESOURCE: &str = "release-deletions";

/// The policy: CREATE and UPDATE of `manifestworkreplicasets` that set or
/// change the release annotation. Never fails.
pub fn release_policy() -> PolicyDef {
    let key = RELEASE_DELETIONS_ANNOTATION;
    let value = format!("object.metadata.annotations['{key}']");
    PolicyDef {
        name: RELEASE_POLICY_NAME,
        group: WORK_GROUP,
        version: "v1alpha1",
        scope: "Namespaced",
        resources: &["manifestworkreplicasets"],
        operations: &["CREATE", "UPDATE"],
        extra_rules: Vec::new(),
        match_conditions: vec![MatchCondition {
            name: "sets-or-changes-a-release".into(),
            expression: format!(
                "has(object.metadata.annotations) && '{key}' in object.metadata.annotations && \
                 (oldObject == null || !has(oldObject.metadata.annotations) || \
                 !('{key}' in oldObject.metadata.annotations) || \
                 oldObject.metadata.annotations['{key}'] != {value})"
            ),
        }],
        variables: Vec::new(),
        validations: vec![
            Validation {
                expression: format!(
                    "authorizer.group('{WORK_GROUP}').resource('manifestworkreplicasets')\
                     .subresource('{RELEASE_SUBRESOURCE}').namespace(object.metadata.namespace)\
                     .name(object.metadata.name).check('update').allowed()"
                ),
                message: Some(format!(
                    "releasing held deletions is the platform role's: it needs update on \
                     manifestworkreplicasets/{RELEASE_SUBRESOURCE} (policy {RELEASE_POLICY_NAME})"
                )),
                message_expression: Some(format!(
                    "request.userInfo.username + ' may not release the held deletions of ' + \
                     object.metadata.namespace + '/' + object.metadata.name + ': it needs update \
                     on manifestworkreplicasets/{RELEASE_SUBRESOURCE} there, the platform role \
                     (policy {RELEASE_POLICY_NAME})'"
                )),
                reason: Some("Forbidden".into()),
            },
            Validation {
                expression: format!("{value}.startsWith(request.userInfo.username + ':')"),
                message: Some(format!(
                    "a release names who releases: its value must start with your user name and \
                     a colon (policy {RELEASE_POLICY_NAME})"
                )),
                message_expression: Some(format!(
                    "'a release names who releases: the value of {key} must start with \"' + \
                     request.userInfo.username + ':\" (policy {RELEASE_POLICY_NAME})'"
                )),
                reason: Some("Invalid".into()),
            },
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_needs_the_platform_role_and_names_its_author() {
        let spec = release_policy().policy().spec.expect("spec");
        let rule = &spec
            .match_constraints
            .and_then(|m| m.resource_rules)
            .expect("rules")[0];
        assert_eq!(
            rule.resources.as_deref(),
            Some(&["manifestworkreplicasets".to_string()][..]),
            "status writes are not matched"
        );
        let condition = &spec.match_conditions.expect("conditions")[0].expression;
        assert!(condition.contains("oldObject == null"), "{condition}");
        let validations = spec.validations.expect("validations");
        assert!(
            validations[0]
                .expression
                .contains(".subresource('release-deletions')")
                && validations[0]
                    .expression
                    .ends_with(".check('update').allowed()"),
            "{}",
            validations[0].expression
        );
        assert!(
            validations[1]
                .expression
                .contains("startsWith(request.userInfo.username + ':')")
        );
    }
}
