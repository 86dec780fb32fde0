//! A `ValidatingAdmissionPolicy` (with its binding) that the hub installs
//! next to its CRDs: checks across the manifests of a work, which the hub API
//! server runs itself, so they hold while no hub process runs.
//!
//! Why a policy and not a CRD rule: the API server refuses a CRD rule whose
//! estimated worst case is over 10,000,000 units, and a rule over pairs of
//! manifests exceeds that above about 100 manifests. A policy has no static
//! budget; each expression may spend 1,000,000 units when it runs, and its
//! `variables` compute each manifest's identity once. `distinct()` (list
//! library v3) is charged 2 units per pair: 500 manifests cost about 500,000.
//! The expressions need a hub API server of Kubernetes 1.35 or later (where
//! `distinct()` and two-variable comprehensions are available to new
//! expressions).

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
    ValidatingAdmissionPolicySpec, Validation, Variable,
};
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use std::time::Duration;

use super::approval_policy::{APPROVAL_POLICY_NAME, approval_binding, approval_policy};
use super::cluster_set_policy::{CLUSTER_SET_POLICY_NAME, cluster_set_binding, cluster_set_policy};
use super::executor_policy::{EXECUTOR_POLICY_NAME, executor_binding, executor_policy};
use super::webhook::SPEC_WRITTEN;
use ferry_api::contract::WORK_GROUP;
use ferry_api::manifest_work::{Manifest, ManifestWork, ManifestWorkSpec, ManifestsTemplate};

/// Name of the policy and of its binding; the API server quotes it in denials.
pub const POLICY_NAME: &str = "manifestworks.work.ferry.dev";

/// Field manager of the hub's writes to the policy and binding.
const FIELD_MANAGER: &str = "ferry-hub";

/// CEL: per manifest, its identity `[group, kind, namespace, name]` (the
/// version does not count: v1 and v2 of a kind are one object), or
/// `[index]` for a manifest without one (the CRD's own rules refuse it), so
/// it never equals another.
const KEYS: &str = "has(object.spec) && has(object.spec.workload) && has(object.spec.workload.manifests) ? \
    object.spec.workload.manifests.transformList(i, m, \
      has(m.apiVersion) && has(m.kind) && has(m.metadata) && has(m.metadata.name) \
      ? [string(m.apiVersion).contains('/') \
           ? string(m.apiVersion).substring(0, string(m.apiVersion).indexOf('/')) : '', \
         string(m.kind), has(m.metadata.namespace) ? string(m.metadata.namespace) : '', \
         string(m.metadata.name)] \
      : [string(i)]) \
    : []";

/// CEL: the positions of manifests whose identity appeared earlier. Only
/// the message reads it (variables are computed when first used).
const REPEATS: &str = "variables.keys.transformList(j, k, variables.keys.indexOf(k) != j, j)";

/// CEL: no identity repeats.
const UNIQUE: &str = "variables.keys.distinct().size() == variables.keys.size()";

/// CEL: the first repeat, by position and identity, and the position it
/// repeats, in the webhook's words.
const UNIQUE_MESSAGE: &str = "'manifests[' + string(variables.repeats[0]) + '] ' + \
    string(object.spec.workload.manifests[variables.repeats[0]].apiVersion) + ' ' + \
    string(object.spec.workload.manifests[variables.repeats[0]].kind) + ' ' + \
    (has(object.spec.workload.manifests[variables.repeats[0]].metadata.namespace) \
      ? string(object.spec.workload.manifests[variables.repeats[0]].metadata.namespace) + '/' : '') + \
    string(object.spec.workload.manifests[variables.repeats[0]].metadata.name) + \
    ': duplicates manifests[' + \
    string(variables.keys.indexOf(variables.keys[variables.repeats[0]])) + \
    '] (same group, kind, namespace and name); each object may appear once in a work'";

/// Used when [`UNIQUE_MESSAGE`] runs out of budget (very large works).
pub const UNIQUE_FALLBACK_MESSAGE: &str = "two manifests name the same object (same group, kind, \
    namespace and name; the version does not count): each object may appear once in a work";

/// The policy: CREATE and UPDATE of `manifestworks` that write a spec (the
/// same `matchConditions` as the webhook, so metadata-only updates of a work
/// stored under older rules pass), refused when two manifests name the same
/// object. Fails closed: an expression that errors refuses the write.
pub fn policy() -> ValidatingAdmissionPolicy {
    ValidatingAdmissionPolicy {
        metadata: ObjectMeta {
            name: Some(POLICY_NAME.into()),
            ..Default::default()
        },
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some("Fail".into()),
            match_constraints: Some(writes_of(&["manifestworks"])),
            match_conditions: Some(vec![MatchCondition {
                name: "spec-written".into(),
                expression: SPEC_WRITTEN.into(),
            }]),
            variables: Some(vec![
                Variable {
                    name: "keys".into(),
                    expression: KEYS.into(),
                },
                Variable {
                    name: "repeats".into(),
                    expression: REPEATS.into(),
                },
            ]),
            validations: Some(vec![Validation {
                expression: UNIQUE.into(),
                message: Some(UNIQUE_FALLBACK_MESSAGE.into()),
                message_expression: Some(UNIQUE_MESSAGE.into()),
                reason: Some("Invalid".into()),
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// CREATE and UPDATE of the namespaced `resources` of ferry's work group:
/// what ferry's admission policies check.
pub fn writes_of(resources: &[&str]) -> MatchResources {
    MatchResources {
        resource_rules: Some(vec![NamedRuleWithOperations {
            api_groups: Some(vec![WORK_GROUP.into()]),
            api_versions: Some(vec!["v1alpha1".into()]),
            operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
            resources: Some(resources.iter().map(|r| r.to_string()).collect()),
            scope: Some("Namespaced".into()),
            ..Default::default()
        }]),
        ..Default::default()
    }
}

/// The binding that puts [`policy`] in force for every namespace, denying.
pub fn binding() -> ValidatingAdmissionPolicyBinding {
    deny_binding(POLICY_NAME)
}

/// A binding of the same name that puts policy `name` in force for every
/// namespace, denying what it refuses.
pub fn deny_binding(name: &str) -> ValidatingAdmissionPolicyBinding {
    ValidatingAdmissionPolicyBinding {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(ValidatingAdmissionPolicyBindingSpec {
            policy_name: Some(name.into()),
            validation_actions: Some(vec!["Deny".into()]),
            ..Default::default()
        }),
    }
}

/// Server-side applies [`policy`] and [`binding`], then the executor policy
/// and its binding ([`super::executor_policy`]), then the cluster-set bind
/// policy and its binding ([`super::cluster_set_policy`]), then the approval
/// policy and its binding ([`super::approval_policy`]). Fails when the API
/// server refuses either (RBAC: the hub needs `patch` on
/// `validatingadmissionpolicies` and `validatingadmissionpolicybindings`,
/// and `create` when an apply creates one;
/// or an API server older than 1.35 that cannot compile the expressions).
pub async fn install_policy(client: &kube::Client) -> Result<(), kube::Error> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    policies
        .patch(POLICY_NAME, &params, &Patch::Apply(&policy()))
        .await?;
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    bindings
        .patch(POLICY_NAME, &params, &Patch::Apply(&binding()))
        .await?;
    policies
        .patch(
            EXECUTOR_POLICY_NAME,
            &params,
            &Patch::Apply(&executor_policy()),
        )
        .await?;
    bindings
        .patch(
            EXECUTOR_POLICY_NAME,
            &params,
            &Patch::Apply(&executor_binding()),
        )
        .await?;
    policies
        .patch(
            CLUSTER_SET_POLICY_NAME,
            &params,
            &Patch::Apply(&cluster_set_policy()),
        )
        .await?;
    bindings
        .patch(
            CLUSTER_SET_POLICY_NAME,
            &params,
            &Patch::Apply(&cluster_set_binding()),
        )
        .await?;
    policies
        .patch(
            APPROVAL_POLICY_NAME,
            &params,
            &Patch::Apply(&approval_policy()),
        )
        .await?;
    bindings
        .patch(
            APPROVAL_POLICY_NAME,
            &params,
            &Patch::Apply(&approval_binding()),
        )
        .await?;
    Ok(())
}

/// Waits until the API server enforces the policy: it learns of a new
/// policy asynchronously. Probes with a dry-run create, in `namespace`, of a
/// work listing one ConfigMap twice (nothing is stored). Returns false when
/// the policy is not enforced within `timeout`.
pub async fn wait_until_policy_enforced(
    client: &kube::Client,
    namespace: &str,
    timeout: Duration,
) -> bool {
    let api: Api<ManifestWork> = Api::namespaced(client.clone(), namespace);
    let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "probe", "namespace": namespace}});
    let mut probe = ManifestWork::new(
        "ferry-policy-probe",
        ManifestWorkSpec {
            workload: ManifestsTemplate {
                manifests: vec![Manifest(cm.clone()), Manifest(cm)],
            },
            ..Default::default()
        },
    );
    probe.metadata.namespace = Some(namespace.into());
    super::webhook::refused_by(&api, &probe, POLICY_NAME, timeout).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_checks_spec_writes_of_works_and_is_bound_to_deny() {
        let policy = policy();
        let spec = policy.spec.expect("spec");
        assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
        let rules = spec
            .match_constraints
            .and_then(|m| m.resource_rules)
            .expect("rules");
        assert_eq!(
            rules[0].resources.as_deref(),
            Some(&["manifestworks".to_string()][..])
        );
        let conditions = spec.match_conditions.expect("conditions");
        assert_eq!(conditions[0].expression, SPEC_WRITTEN);
        let binding = binding().spec.expect("binding spec");
        assert_eq!(binding.policy_name.as_deref(), Some(POLICY_NAME));
        assert_eq!(
            binding.validation_actions.as_deref(),
            Some(&["Deny".to_string()][..])
        );
    }
}
