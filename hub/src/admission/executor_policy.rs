//! Who may name an executor: a `ValidatingAdmissionPolicy` the hub installs
//! with its CRDs. Writing a ManifestWork (or a ManifestWorkReplicaSet whose
//! template) names an executor needs `execute-as` on `manifestworks`, in the
//! work's namespace, for the resource name
//! `system:serviceaccount:<namespace>:<name>` of that executor. The API
//! server asks its own authorizer about the requester (CEL's `authorizer`),
//! so the rule holds while no hub process runs and follows RBAC as it
//! changes. The resource's namespace is the work's, i.e. its cluster's: a
//! RoleBinding in one cluster namespace grants an executor for that cluster
//! only, a ClusterRoleBinding for every cluster.
//!
//! Unlike OCM, keeping the executor is no pass: every CREATE, and every
//! UPDATE that changes the spec (the API server has moved
//! `metadata.generation` on by the time the policy runs), is checked against
//! the grant as it is then, so a revoked grant stops the next change of a
//! work. An update of metadata only (finalizers, labels, annotations) leaves
//! what the agent does as it was and is not checked again, so a work whose
//! grant was revoked can still be finalized and deleted. What was admitted
//! keeps running until its next change or its deletion.

use k8s_openapi::api::admissionregistration::v1::Validation;

use super::cel_terms::METADATA_ONLY_UPDATE;
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

/// CEL for a ManifestWork: no executor, a metadata-only update, or an
/// executor the requester may act as now.
fn work_rule() -> String {
    format!(
        "request.resource.resource != 'manifestworks' || \
         !has(object.spec.executor) || !has(object.spec.executor.subject.serviceAccount) || \
         {METADATA_ONLY_UPDATE} || \
         {}",
        may_execute_as("object.spec.executor")
    )
}

/// CEL for a ManifestWorkReplicaSet: the same, for its template's executor
/// (checked in the replica set's namespace; the works it generates are
/// written by the hub, under the hub's own grant).
fn replica_set_rule() -> String {
    format!(
        "request.resource.resource != 'manifestworkreplicasets' || \
         !has(object.spec.manifestWorkTemplate) || \
         !has(object.spec.manifestWorkTemplate.executor) || \
         !has(object.spec.manifestWorkTemplate.executor.subject.serviceAccount) || \
         {METADATA_ONLY_UPDATE} || \
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
        version: "v1alpha1",
        scope: "Namespaced",
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
                v.expression
                    .contains(".namespace(object.metadata.namespace)"),
                "asked in the work's (cluster's) namespace"
            );
            assert!(
                !v.expression.contains("oldObject.spec"),
                "keeping the executor is no pass: {}",
                v.expression
            );
            assert!(
                v.expression
                    .contains("oldObject.metadata.generation == object.metadata.generation"),
                "only a metadata-only update passes unchecked"
            );
        }
        let binding = executor_policy().binding().spec.expect("binding");
        assert_eq!(binding.policy_name.as_deref(), Some(EXECUTOR_POLICY_NAME));
    }
}
