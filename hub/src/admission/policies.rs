//! Every admission policy the hub installs, in one list: the list is what
//! `deploy/crds/` renders and what the hub applies at start.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::{Api, Patch, PatchParams};

use super::approval_policy::approval_policy;
use super::cluster_namespace_policy::cluster_namespace_policy;
use super::cluster_set_policy::cluster_set_policy;
use super::crd_deletion_policy::crd_deletion_policy;
use super::duplicates_policy::duplicates_policy;
use super::executor_policy::executor_policy;
use super::executor_required_policy::executor_required_policy;
use super::hub_writes_policy::{DEFAULT_HUB_USERNAME, hub_writes_policy};
use super::policy_builder::PolicyDef;
use super::release_policy::release_policy;
use super::sealed_secrets_policy::sealed_secrets_policy;

/// Field manager of the hub's writes to the policies and bindings.
const FIELD_MANAGER: &str = "ferry-hub";

/// Every policy ferry installs as rendered into `deploy/crds/`: those of
/// [`all_policies_for`] with the hub running as the chart's default
/// ServiceAccount ([`DEFAULT_HUB_USERNAME`]).
pub fn all_policies() -> [PolicyDef; 10] {
    all_policies_for(&[DEFAULT_HUB_USERNAME.to_string()])
}

/// Every policy ferry installs, in install and render order: duplicate
/// manifests, executors, cluster-set binds, rollout approvals, the writes
/// only the hub (running as `hub_writers`) makes, executors required in
/// labelled namespaces, confirmed deletions of ferry's CRDs, releases of
/// held deletions by the platform role, confirmed deletions of cluster
/// namespaces, and no plain Secrets in labelled namespaces.
pub fn all_policies_for(hub_writers: &[String]) -> [PolicyDef; 10] {
    [
        duplicates_policy(),
        executor_policy(),
        cluster_set_policy(),
        approval_policy(),
        hub_writes_policy(hub_writers),
        executor_required_policy(),
        crd_deletion_policy(),
        release_policy(),
        cluster_namespace_policy(),
        sealed_secrets_policy(),
    ]
}

/// Who the hub is, asked of the API server (`SelfSubjectReview`, allowed
/// to every authenticated user): its username. Fails when the API server
/// cannot be reached or answers no username.
pub async fn own_username(client: &kube::Client) -> Result<String, kube::Error> {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let review = api
        .create(&Default::default(), &SelfSubjectReview::default())
        .await?;
    review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| kube::Error::Service("the SelfSubjectReview answered no username".into()))
}

/// Server-side applies each policy of [`all_policies`] and then its binding.
/// Fails with the first refusal and the name of the policy refused (RBAC:
/// the hub needs `patch` on `validatingadmissionpolicies` and
/// `validatingadmissionpolicybindings`, and `create` when an apply creates
/// one; or an API server older than 1.35 that cannot compile the
/// expressions).
/// `hub_writers` are the usernames the hub runs as ([`all_policies_for`]).
pub async fn install_policies(
    client: &kube::Client,
    hub_writers: &[String],
) -> Result<(), (&'static str, kube::Error)> {
    for def in all_policies_for(hub_writers) {
        install_policy(client, &def).await?;
    }
    Ok(())
}

/// Server-side applies one policy and then its binding; fails as
/// [`install_policies`] does.
pub async fn install_policy(
    client: &kube::Client,
    def: &PolicyDef,
) -> Result<(), (&'static str, kube::Error)> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    policies
        .patch(def.name, &params, &Patch::Apply(&def.policy()))
        .await
        .map_err(|e| (def.name, e))?;
    bindings
        .patch(def.name, &params, &Patch::Apply(&def.binding()))
        .await
        .map_err(|e| (def.name, e))?;
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
