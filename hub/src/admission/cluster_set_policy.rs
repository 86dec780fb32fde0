//! Who may bind a cluster set into a namespace: a `ValidatingAdmissionPolicy`
//! the hub installs with its CRDs. Creating a ManagedClusterSetBinding (or
//! changing the set it names) needs `create` on the virtual subresource
//! `managedclustersets/bind` of group `cluster.ferry.dev`, for the set's
//! name, as OCM's webhook requires. The API server asks its own authorizer
//! about the requester (CEL's `authorizer`), so the rule holds while no hub
//! process runs. Status writes (the `status` subresource) are not matched.

use k8s_openapi::api::admissionregistration::v1::Validation;

use super::policy_builder::PolicyDef;
use ferry_api::contract::{BIND_SUBRESOURCE, CLUSTER_GROUP};

/// Name of the policy and of its binding; the API server quotes it in denials.
pub const CLUSTER_SET_POLICY_NAME: &str = "managedclustersetbindings.cluster.ferry.dev";

/// CEL: the set is unchanged by an update, or the requester may bind it.
fn rule() -> String {
    format!(
        "(request.operation == 'UPDATE' && oldObject.spec.clusterSet == object.spec.clusterSet) || \
         authorizer.group('{CLUSTER_GROUP}').resource('managedclustersets')\
         .subresource('{BIND_SUBRESOURCE}').name(object.spec.clusterSet).check('create').allowed()"
    )
}

/// CEL: the denial, naming the requester, the set and the missing right.
fn message() -> String {
    format!(
        "request.userInfo.username + ' may not bind ManagedClusterSet ' + object.spec.clusterSet + \
         ' to namespace ' + object.metadata.namespace + \
         ': it needs create on {CLUSTER_GROUP}/managedclustersets/{BIND_SUBRESOURCE} named ' + \
         object.spec.clusterSet"
    )
}

/// The policy: CREATE and UPDATE of `managedclustersetbindings`, refused
/// when the requester may not bind the set named.
pub fn cluster_set_policy() -> PolicyDef {
    PolicyDef {
        name: CLUSTER_SET_POLICY_NAME,
        group: CLUSTER_GROUP,
        version: "v1alpha1",
        scope: "Namespaced",
        resources: &["managedclustersetbindings"],
        operations: &["CREATE", "UPDATE"],
        extra_rules: Vec::new(),
        match_conditions: Vec::new(),
        variables: Vec::new(),
        validations: vec![Validation {
            expression: rule(),
            message: Some(format!(
                "binding this ManagedClusterSet needs create on \
                 {CLUSTER_GROUP}/managedclustersets/{BIND_SUBRESOURCE} for the set"
            )),
            message_expression: Some(message()),
            reason: Some("Forbidden".into()),
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_asks_the_authorizer_for_create_on_managedclustersets_bind() {
        let spec = cluster_set_policy().policy().spec.expect("spec");
        assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
        let rules = spec
            .match_constraints
            .and_then(|m| m.resource_rules)
            .expect("rules");
        assert_eq!(
            rules[0].resources.as_deref(),
            Some(&["managedclustersetbindings".to_string()][..])
        );
        assert_eq!(
            rules[0].api_groups.as_deref(),
            Some(&[CLUSTER_GROUP.to_string()][..])
        );
        let validation = &spec.validations.expect("validations")[0];
        assert!(validation.expression.contains(
            ".resource('managedclustersets').subresource('bind').name(object.spec.clusterSet).check('create').allowed()"
        ));
        let binding = cluster_set_policy().binding().spec.expect("binding");
        assert_eq!(
            binding.policy_name.as_deref(),
            Some(CLUSTER_SET_POLICY_NAME)
        );
    }
}
