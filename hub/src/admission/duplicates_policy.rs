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

use k8s_openapi::api::admissionregistration::v1::{MatchCondition, Validation, Variable};
use kube::api::Api;
use std::time::Duration;

use super::policy_builder::PolicyDef;
use super::spec_written::SPEC_WRITTEN;
use ferry_api::contract::WORK_GROUP;
use ferry_api::manifest_work::{Manifest, ManifestWork, ManifestWorkSpec, ManifestsTemplate};

/// Name of the policy and of its binding; the API server quotes it in denials.
pub const POLICY_NAME: &str = "manifestworks.work.ferry.dev";

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
/// object.
pub fn duplicates_policy() -> PolicyDef {
    PolicyDef {
        name: POLICY_NAME,
        group: WORK_GROUP,
        version: "v1alpha1",
        scope: "Namespaced",
        resources: &["manifestworks"],
        operations: &["CREATE", "UPDATE"],
        extra_rules: Vec::new(),
        match_conditions: vec![MatchCondition {
            name: "spec-written".into(),
            expression: SPEC_WRITTEN.into(),
        }],
        variables: vec![
            Variable {
                name: "keys".into(),
                expression: KEYS.into(),
            },
            Variable {
                name: "repeats".into(),
                expression: REPEATS.into(),
            },
        ],
        validations: vec![Validation {
            expression: UNIQUE.into(),
            message: Some(UNIQUE_FALLBACK_MESSAGE.into()),
            message_expression: Some(UNIQUE_MESSAGE.into()),
            reason: Some("Invalid".into()),
        }],
    }
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
    super::enforced::refused_by(&api, &probe, POLICY_NAME, timeout).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_checks_spec_writes_of_works_and_is_bound_to_deny() {
        let policy = duplicates_policy().policy();
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
        let binding = duplicates_policy().binding().spec.expect("binding spec");
        assert_eq!(binding.policy_name.as_deref(), Some(POLICY_NAME));
        assert_eq!(
            binding.validation_actions.as_deref(),
            Some(&["Deny".to_string()][..])
        );
    }
}
