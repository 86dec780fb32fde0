//! Who may name an executor: a `ValidatingAdmissionPolicy` the hub installs
//! with its CRDs. Writing a ManifestWork (or a ManifestWorkReplicaSet whose
//! template) names an executor needs `execute-as` on `manifestworks`, in the
//! work's namespace, for the resource name
//! `system:serviceaccount:<namespace>:<name>` of that executor. The API
//! server asks its own authorizer about the requester (CEL's `authorizer`),
//! so the rule holds while no hub process runs and follows RBAC as it
//! changes. As in OCM, an update that leaves the executor as it was is not
//! checked again.

use k8s_openapi::api::admissionregistration::v1::Validation;

use super::policy_builder::PolicyDef;
use ferry_api::contract::{EXECUTE_AS_VERB, WORK_GROUP};

/// Name of the policy and of its binding; the API server quotes it in denials.
pub const EXECUTOR_POLICY_NAME: &str = "manifestwork-executors.work.ferry.dev";

/// CEL: whether the requester may name the executor `e` (an expression for
/// the executor object) in the object's namespace.
fn may_execute_as(executor: &str) -> String {
    format!(
        "authorizer.group('{WORK_GROUP}').resource('manifestworks')\
         .namespace(object.metadata.namespace)\
         .name('system:serviceaccount:' + {executor}.subject.serviceAccount.namespace + ':' + \
               {executor}.subject.serviceAccount.name)\
         .check('{EXECUTE_AS_VERB}').allowed()"
    )
}

/// CEL for a ManifestWork: no executor, an unchanged one, or one the
/// requester may act as.
fn work_rule() -> String {
    format!(
        "request.resource.resource != 'manifestworks' || \
         !has(object.spec.executor) || !has(object.spec.executor.subject.serviceAccount) || \
         (request.operation == 'UPDATE' && has(oldObject.spec.executor) && \
          oldObject.spec.executor == object.spec.executor) || \
         {}",
        may_execute_as("object.spec.executor")
    )
}

/// CEL for a ManifestWorkReplicaSet: the same, for its template's executor.
fn replica_set_rule() -> String {
    format!(
        "request.resource.resource != 'manifestworkreplicasets' || \
         !has(object.spec.manifestWorkTemplate) || \
         !has(object.spec.manifestWorkTemplate.executor) || \
         !has(object.spec.manifestWorkTemplate.executor.subject.serviceAccount) || \
         (request.operation == 'UPDATE' && has(oldObject.spec.manifestWorkTemplate) && \
          has(oldObject.spec.manifestWorkTemplate.executor) && \
          oldObject.spec.manifestWorkTemplate.executor == object.spec.manifestWorkTemplate.executor) || \
         {}",
        may_execute_as("object.spec.manifestWorkTemplate.executor")
    )
}

/// CEL: the denial, naming the requester, the executor and the right.
fn message(executor: &str) -> String {
    format!(
        "request.userInfo.username + ' may not name the executor ' + \
         {executor}.subject.serviceAccount.namespace + '/' + {executor}.subject.serviceAccount.name + \
         ' in namespace ' + object.metadata.namespace + \
         ': it needs {EXECUTE_AS_VERB} on {WORK_GROUP}/manifestworks named system:serviceaccount:' + \
         {executor}.subject.serviceAccount.namespace + ':' + {executor}.subject.serviceAccount.name"
    )
}

/// The policy: CREATE and UPDATE of works and replica sets, refused when
/// they name an executor the requester may not act as.
pub fn executor_policy() -> PolicyDef {
    let validation = |expression: String, executor: &str| Validation {
        expression,
        message: Some(format!(
            "naming this executor needs {EXECUTE_AS_VERB} on {WORK_GROUP}/manifestworks"
        )),
        message_expression: Some(message(executor)),
        reason: Some("Forbidden".into()),
    };
    PolicyDef {
        name: EXECUTOR_POLICY_NAME,
        group: WORK_GROUP,
        resources: &["manifestworks", "manifestworkreplicasets"],
        operations: &["CREATE", "UPDATE"],
        extra_rules: Vec::new(),
        match_conditions: Vec::new(),
        variables: Vec::new(),
        validations: vec![
            validation(work_rule(), "object.spec.executor"),
            validation(
                replica_set_rule(),
                "object.spec.manifestWorkTemplate.executor",
            ),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_asks_the_authorizer_for_execute_as_on_works_and_replica_sets() {
        let spec = executor_policy().policy().spec.expect("spec");
        assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
        let resources = spec
            .match_constraints
            .and_then(|m| m.resource_rules)
            .and_then(|r| r[0].resources.clone())
            .expect("resources");
        assert_eq!(resources, ["manifestworks", "manifestworkreplicasets"]);
        let validations = spec.validations.expect("validations");
        for v in &validations {
            assert!(v.expression.contains(".check('execute-as').allowed()"));
            assert!(
                v.expression.contains("oldObject"),
                "an unchanged executor passes"
            );
        }
        let binding = executor_policy().binding().spec.expect("binding");
        assert_eq!(binding.policy_name.as_deref(), Some(EXECUTOR_POLICY_NAME));
    }
}
