//! Nothing in plain text on the hub: a `ValidatingAdmissionPolicy` the hub
//! installs with its CRDs. In a namespace labelled
//! [`REQUIRE_SEALED_SECRETS_LABEL`]`=true`, a ManifestWork, or a
//! ManifestWorkReplicaSet's template, carrying a plain `v1` Secret among
//! its manifests is refused: its data would sit in the hub's etcd, readable
//! by whoever reads works there, and be copied into every generated work.
//! A sealed entry (`sealing.ferry.dev/v1alpha1` `SealedSecret`, made by
//! `kubectl ferry seal`) passes; only the target clusters' agents can open
//! it. The label is the setting, per namespace, so the rule holds while no
//! hub process runs and only whoever may label namespaces turns it off.
//! Nobody is exempt, the hub included: a replica set in an unlabelled
//! namespace gets its works refused in a labelled cluster namespace, which
//! its rollout reports, rather than its plain Secret stored there.
//!
//! An UPDATE that leaves the spec as it was (finalizers, labels, the
//! deletion) is not checked, so a work admitted before the label still
//! goes away cleanly.
//!
//! Cost: the manifests are embedded objects the API server cannot bound in
//! advance, so the check is one pass over them ([`PLAIN_SECRETS`]), two
//! string comparisons each, computed once as a variable; a policy is
//! charged when it runs, and a pass over the largest work the hub admits
//! stays far below the per-expression budget.

use k8s_openapi::api::admissionregistration::v1::{Validation, Variable};

use super::cel_terms::{METADATA_ONLY_UPDATE, namespace_labelled_true};
use super::policy_builder::PolicyDef;
use ferry_api::contract::{REQUIRE_SEALED_SECRETS_LABEL, WORK_GROUP};

/// Name of the policy and of its binding; the API server quotes it in denials.
pub const SEALED_SECRETS_POLICY_NAME: &str = "manifestwork-sealed-secrets-required.work.ferry.dev";

/// CEL: the manifests written, a work's or a replica set's template's
/// (empty when there are none).
const MANIFESTS: &str = "!has(object.spec) ? [] : \
    request.resource.resource == 'manifestworks' \
    ? (has(object.spec.workload) && has(object.spec.workload.manifests) \
       ? object.spec.workload.manifests : []) \
    : (has(object.spec.manifestWorkTemplate) && has(object.spec.manifestWorkTemplate.workload) && \
       has(object.spec.manifestWorkTemplate.workload.manifests) \
       ? object.spec.manifestWorkTemplate.workload.manifests : [])";

/// CEL: the positions of the plain `v1` Secrets among the manifests.
/// Exactly what the agent would apply as a Secret from the entry as
/// written: a sealed entry has another apiVersion and kind.
pub const PLAIN_SECRETS: &str = "variables.manifests.transformList(i, m, \
    has(m.apiVersion) && has(m.kind) && string(m.apiVersion) == 'v1' && \
    string(m.kind) == 'Secret', i)";

/// CEL: the field path of the manifests, for the message.
const MANIFESTS_PATH: &str = "(request.resource.resource == 'manifestworks' \
    ? 'spec.workload.manifests' : 'spec.manifestWorkTemplate.workload.manifests')";

/// CEL: `namespace/name` of the first plain Secret, as far as it has them.
const FIRST_SECRET: &str = "(has(variables.manifests[variables.plain[0]].metadata) \
    ? (has(variables.manifests[variables.plain[0]].metadata.namespace) \
       ? string(variables.manifests[variables.plain[0]].metadata.namespace) + '/' : '') + \
      (has(variables.manifests[variables.plain[0]].metadata.name) \
       ? string(variables.manifests[variables.plain[0]].metadata.name) : '') \
    : '')";

/// The policy: CREATE and UPDATE of works and replica sets in labelled
/// namespaces, refused when a manifest is a plain Secret. Never fails.
pub fn sealed_secrets_policy() -> PolicyDef {
    let expression = format!(
        "!({}) || {METADATA_ONLY_UPDATE} || variables.plain.size() == 0",
        namespace_labelled_true(REQUIRE_SEALED_SECRETS_LABEL)
    );
    PolicyDef {
        name: SEALED_SECRETS_POLICY_NAME,
        group: WORK_GROUP,
        version: "v1alpha1",
        scope: "Namespaced",
        resources: &["manifestworks", "manifestworkreplicasets"],
        operations: &["CREATE", "UPDATE"],
        extra_rules: Vec::new(),
        match_conditions: Vec::new(),
        variables: vec![
            Variable {
                name: "manifests".into(),
                expression: MANIFESTS.into(),
            },
            Variable {
                name: "plain".into(),
                expression: PLAIN_SECRETS.into(),
            },
        ],
        validations: vec![Validation {
            expression,
            message: Some(format!(
                "a ManifestWork or ManifestWorkReplicaSet template in a namespace labelled \
                 {REQUIRE_SEALED_SECRETS_LABEL}=true may not carry a plain v1 Secret, its data \
                 would be stored on the hub: seal it to the target clusters with `kubectl ferry \
                 seal` (policy {SEALED_SECRETS_POLICY_NAME})"
            )),
            message_expression: Some(format!(
                "request.userInfo.username + ' may not write ' + request.resource.resource + ' ' + \
                 object.metadata.name + ' with a plain Secret: ' + {MANIFESTS_PATH} + '[' + \
                 string(variables.plain[0]) + '] is v1 Secret ' + {FIRST_SECRET} + \
                 ' and namespace ' + object.metadata.namespace + ' is labelled \
                 {REQUIRE_SEALED_SECRETS_LABEL}=true, so Secrets travel sealed and only the \
                 target clusters can open them: seal it with `kubectl ferry seal` \
                 (policy {SEALED_SECRETS_POLICY_NAME})'"
            )),
            reason: Some("Forbidden".into()),
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_secrets_in_works_and_templates_of_labelled_namespaces_are_refused() {
        let spec = sealed_secrets_policy().policy().spec.expect("spec");
        assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
        let resources = spec
            .match_constraints
            .and_then(|m| m.resource_rules)
            .and_then(|r| r[0].resources.clone())
            .expect("resources");
        assert_eq!(resources, ["manifestworks", "manifestworkreplicasets"]);
        let variables = spec.variables.expect("variables");
        let manifests = &variables[0].expression;
        for path in [
            "object.spec.workload.manifests",
            "object.spec.manifestWorkTemplate.workload.manifests",
        ] {
            assert!(manifests.contains(path), "{manifests}");
        }
        assert!(
            variables[1]
                .expression
                .contains("string(m.apiVersion) == 'v1' && string(m.kind) == 'Secret'")
        );
        let validations = spec.validations.expect("validations");
        let [v] = &validations[..] else {
            panic!("one validation: {validations:?}")
        };
        assert!(
            v.expression.contains(&format!(
                "namespaceObject.metadata.labels['{REQUIRE_SEALED_SECRETS_LABEL}'] == 'true'"
            )),
            "{}",
            v.expression
        );
        assert!(v.expression.contains(METADATA_ONLY_UPDATE));
        let message = v.message.as_deref().expect("message");
        for needed in [
            SEALED_SECRETS_POLICY_NAME,
            REQUIRE_SEALED_SECRETS_LABEL,
            "kubectl ferry seal",
        ] {
            assert!(message.contains(needed), "{message}");
            assert!(
                v.message_expression
                    .as_deref()
                    .is_some_and(|m| m.contains(needed)),
                "{:?}",
                v.message_expression
            );
        }
    }
}
