//! One shape for every `ValidatingAdmissionPolicy` the hub installs: each
//! policy file describes its checks as a [`PolicyDef`] (what it matches, its
//! variables and validations) and this file turns that data into the policy
//! and the binding that puts it in force. Every ferry policy fails closed
//! (`failurePolicy: Fail`) and is bound to deny, in every namespace.

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
    ValidatingAdmissionPolicySpec, Validation, Variable,
};
use kube::api::ObjectMeta;

/// What one admission policy checks, as data: the policy and its binding are
/// built from it by [`PolicyDef::policy`] and [`PolicyDef::binding`].
#[derive(Clone, Debug)]
pub struct PolicyDef {
    /// Name of the policy and of its binding; the API server quotes it in
    /// denials.
    pub name: &'static str,
    /// API group of the resources matched.
    pub group: &'static str,
    /// The API version of `resources` the policy matches.
    pub version: &'static str,
    /// `Namespaced` or `Cluster`: the scope of `resources`.
    pub scope: &'static str,
    /// Namespaced resources of `group` matched (version `v1alpha1`).
    pub resources: &'static [&'static str],
    /// Operations matched (`CREATE`, `UPDATE`).
    pub operations: &'static [&'static str],
    /// Further rules matched besides `resources` of `group` (other groups,
    /// or cluster-scoped resources), as they are.
    pub extra_rules: Vec<NamedRuleWithOperations>,
    /// `matchConditions`: requests for which any is false are not checked.
    pub match_conditions: Vec<MatchCondition>,
    /// `variables`, computed once per request when first used.
    pub variables: Vec<Variable>,
    /// The checks; a request failing any is denied.
    pub validations: Vec<Validation>,
}

impl PolicyDef {
    /// The policy: `failurePolicy: Fail`, so an expression that errors (or
    /// runs out of budget) refuses the write rather than letting it through.
    pub fn policy(&self) -> ValidatingAdmissionPolicy {
        ValidatingAdmissionPolicy {
            metadata: ObjectMeta {
                name: Some(self.name.into()),
                ..Default::default()
            },
            spec: Some(ValidatingAdmissionPolicySpec {
                failure_policy: Some("Fail".into()),
                match_constraints: Some(MatchResources {
                    resource_rules: Some(
                        std::iter::once(NamedRuleWithOperations {
                            api_groups: Some(vec![self.group.into()]),
                            api_versions: Some(vec![self.version.into()]),
                            operations: Some(
                                self.operations.iter().map(|o| o.to_string()).collect(),
                            ),
                            resources: Some(self.resources.iter().map(|r| r.to_string()).collect()),
                            scope: Some(self.scope.into()),
                            ..Default::default()
                        })
                        .chain(self.extra_rules.iter().cloned())
                        .collect(),
                    ),
                    ..Default::default()
                }),
                match_conditions: (!self.match_conditions.is_empty())
                    .then(|| self.match_conditions.clone()),
                variables: (!self.variables.is_empty()).then(|| self.variables.clone()),
                validations: Some(self.validations.clone()),
                ..Default::default()
            }),
            status: None,
        }
    }

    /// The binding of the same name that puts the policy in force for every
    /// namespace, denying what it refuses.
    pub fn binding(&self) -> ValidatingAdmissionPolicyBinding {
        ValidatingAdmissionPolicyBinding {
            metadata: ObjectMeta {
                name: Some(self.name.into()),
                ..Default::default()
            },
            spec: Some(ValidatingAdmissionPolicyBindingSpec {
                policy_name: Some(self.name.into()),
                validation_actions: Some(vec!["Deny".into()]),
                ..Default::default()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_fails_closed_and_its_binding_denies_under_the_same_name() {
        let def = PolicyDef {
            name: "things.example.dev",
            group: "example.dev",
            version: "v1alpha1",
            scope: "Namespaced",
            resources: &["things"],
            operations: &["CREATE"],
            extra_rules: Vec::new(),
            match_conditions: Vec::new(),
            variables: Vec::new(),
            validations: vec![Validation {
                expression: "true".into(),
                ..Default::default()
            }],
        };
        let spec = def.policy().spec.expect("spec");
        assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
        assert!(spec.match_conditions.is_none() && spec.variables.is_none());
        let rule = &spec
            .match_constraints
            .and_then(|m| m.resource_rules)
            .expect("rules")[0];
        assert_eq!(
            rule.api_groups.as_deref(),
            Some(&["example.dev".to_string()][..])
        );
        assert_eq!(
            rule.operations.as_deref(),
            Some(&["CREATE".to_string()][..])
        );
        let binding = def.binding();
        assert_eq!(binding.metadata.name.as_deref(), Some("things.example.dev"));
        let binding = binding.spec.expect("binding spec");
        assert_eq!(binding.policy_name.as_deref(), Some("things.example.dev"));
        assert_eq!(
            binding.validation_actions.as_deref(),
            Some(&["Deny".to_string()][..])
        );
    }
}
