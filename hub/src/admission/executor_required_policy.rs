//! Tenant works name an executor: a `ValidatingAdmissionPolicy` the hub
//! installs with its CRDs. In a namespace labelled
//! [`REQUIRE_EXECUTOR_LABEL`]`=true` (a tenant's namespace, or a cluster
//! namespace tenants may write), a ManifestWork, or a
//! ManifestWorkReplicaSet's template, without a ServiceAccount executor is
//! refused: without one, the agent would apply it with its own rights,
//! which in the default agent mode are every kind, and read any object for
//! its feedback. The label is the setting, per namespace, so it holds while
//! no hub process runs and only whoever may label namespaces (the platform
//! team) turns it off. Nobody is exempt, the hub included: a replica set
//! admitted before its namespace was labelled gets its works refused in a
//! labelled cluster namespace, which its rollout reports.
//!
//! An UPDATE that leaves the spec as it was (finalizers, labels, the
//! deletion) is not checked, so a work admitted before the label still
//! goes away cleanly.

use k8s_openapi::api::admissionregistration::v1::Validation;

use super::cel_terms::{METADATA_ONLY_UPDATE, namespace_labelled_true};
use super::policy_builder::PolicyDef;
use ferry_api::contract::{REQUIRE_EXECUTOR_LABEL, WORK_GROUP};

/// Name of the policy and of its binding; the API server quotes it in denials.
pub const EXECUTOR_REQUIRED_POLICY_NAME: &str = "manifestwork-executor-required.work.ferry.dev";

/// CEL: `spec` (an expression for a work spec or template) names a
/// ServiceAccount executor with a namespace and a name.
fn names_executor(spec: &str) -> String {
    format!(
        "has({spec}.executor) && has({spec}.executor.subject.serviceAccount) && \
         {spec}.executor.subject.serviceAccount.namespace != '' && \
         {spec}.executor.subject.serviceAccount.name != ''"
    )
}

/// The policy: CREATE and UPDATE of works and replica sets in labelled
/// namespaces, refused when they name no executor. Never fails.
pub fn executor_required_policy() -> PolicyDef {
    let work = format!(
        "request.resource.resource != 'manifestworks' || !({}) || {METADATA_ONLY_UPDATE} || ({})",
        namespace_labelled_true(REQUIRE_EXECUTOR_LABEL),
        names_executor("object.spec")
    );
    let replica_set = format!(
        "request.resource.resource != 'manifestworkreplicasets' || !({}) || \
         {METADATA_ONLY_UPDATE} || \
         (has(object.spec.manifestWorkTemplate) && ({}))",
        namespace_labelled_true(REQUIRE_EXECUTOR_LABEL),
        names_executor("object.spec.manifestWorkTemplate")
    );
    let validation = |expression: String, what: &str| Validation {
        expression,
        message: Some(format!(
            "{what} in a namespace labelled {REQUIRE_EXECUTOR_LABEL}=true must name an executor \
             (spec.executor.subject.serviceAccount); without one the agent would act with its own \
             rights (policy {EXECUTOR_REQUIRED_POLICY_NAME})"
        )),
        message_expression: Some(format!(
            "request.userInfo.username + ' may not write ' + request.resource.resource + ' ' + \
             object.metadata.name + ' without an executor: namespace ' + object.metadata.namespace + \
             ' is labelled {REQUIRE_EXECUTOR_LABEL}=true, so every work there names the \
             ServiceAccount it runs as (policy {EXECUTOR_REQUIRED_POLICY_NAME})'"
        )),
        reason: Some("Forbidden".into()),
    };
    PolicyDef {
        name: EXECUTOR_REQUIRED_POLICY_NAME,
        group: WORK_GROUP,
        version: "v1alpha1",
        scope: "Namespaced",
        resources: &["manifestworks", "manifestworkreplicasets"],
        operations: &["CREATE", "UPDATE"],
        extra_rules: Vec::new(),
        match_conditions: Vec::new(),
        variables: Vec::new(),
        validations: vec![
            validation(work, "a ManifestWork"),
            validation(replica_set, "a ManifestWorkReplicaSet's template"),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn works_and_templates_in_labelled_namespaces_need_an_executor() {
        let spec = executor_required_policy().policy().spec.expect("spec");
        assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
        let resources = spec
            .match_constraints
            .and_then(|m| m.resource_rules)
            .and_then(|r| r[0].resources.clone())
            .expect("resources");
        assert_eq!(resources, ["manifestworks", "manifestworkreplicasets"]);
        let validations = spec.validations.expect("validations");
        assert_eq!(validations.len(), 2);
        for (v, spec) in validations
            .iter()
            .zip(["object.spec", "object.spec.manifestWorkTemplate"])
        {
            assert!(
                v.expression.contains(&format!(
                    "namespaceObject.metadata.labels['{REQUIRE_EXECUTOR_LABEL}'] == 'true'"
                )),
                "{}",
                v.expression
            );
            assert!(
                v.expression
                    .contains(&format!("has({spec}.executor.subject.serviceAccount)")),
                "{}",
                v.expression
            );
            assert!(v.expression.contains(METADATA_ONLY_UPDATE));
        }
    }
}
