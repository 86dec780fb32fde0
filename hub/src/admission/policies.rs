//! Every admission policy the hub installs, in one list: the list is what
//! `deploy/crds/` renders and what the hub applies at start.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::{Api, Patch, PatchParams};

use super::approval_policy::approval_policy;
use super::cluster_set_policy::cluster_set_policy;
use super::duplicates_policy::duplicates_policy;
use super::executor_policy::executor_policy;
use super::policy_builder::PolicyDef;

/// Field manager of the hub's writes to the policies and bindings.
const FIELD_MANAGER: &str = "ferry-hub";

/// Every policy ferry installs, in install and render order: duplicate
/// manifests, executors, cluster-set binds, rollout approvals.
pub fn all_policies() -> [PolicyDef; 4] {
    [
        duplicates_policy(),
        executor_policy(),
        cluster_set_policy(),
        approval_policy(),
    ]
}

/// Server-side applies each policy of [`all_policies`] and then its binding.
/// Fails with the first refusal and the name of the policy refused (RBAC:
/// the hub needs `patch` on `validatingadmissionpolicies` and
/// `validatingadmissionpolicybindings`, and `create` when an apply creates
/// one; or an API server older than 1.35 that cannot compile the
/// expressions).
pub async fn install_policies(client: &kube::Client) -> Result<(), (&'static str, kube::Error)> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    for def in all_policies() {
        policies
            .patch(def.name, &params, &Patch::Apply(&def.policy()))
            .await
            .map_err(|e| (def.name, e))?;
        bindings
            .patch(def.name, &params, &Patch::Apply(&def.binding()))
            .await
            .map_err(|e| (def.name, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_policy_has_its_own_name() {
        let names: BTreeSet<_> = all_policies().iter().map(|p| p.name).collect();
        assert_eq!(names.len(), all_policies().len());
    }
}
