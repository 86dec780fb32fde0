//! `kubectl ferry release-deletions CLUSTER`: reads the cluster's hold from
//! the hub, writes the release on the spoke as the caller (the only place a
//! release is taken: whoever controls the hub cannot release what the
//! agent holds), and waits for the hub to show it taken.

use std::path::Path;
use std::time::Duration;

use ferry_api::contract::{DELETION_BRAKE_LEDGER, RELEASE_DELETIONS_ANNOTATION};
use ferry_api::managed_cluster::ManagedCluster;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use serde_json::json;

use super::plan::{Plan, ReleaseError, plan, release_value, released, spoke_context};
use crate::cli::GlobalArgs;
use crate::client::{connect, connect_with, read_kubeconfig};
use crate::error::CliError;
use crate::hub_api::fleet::get_cluster;
use crate::hub_api::identity::whoami;

/// How long the hub is watched for the agent's report of the release (it
/// reports in its heartbeats, and looks for a release every few seconds
/// while it holds deletions).
pub const RELEASE_WAIT: Duration = Duration::from_secs(60);

/// The field manager the release is written with (the ledger records it).
pub const FIELD_MANAGER: &str = "kubectl-ferry";

/// What the caller asked.
pub struct ReleaseRequest<'a> {
    /// The ManagedCluster's name.
    pub cluster: &'a str,
    /// Why the held deletions are wanted.
    pub reason: &'a str,
    /// The spoke's kubeconfig (None: the hub's).
    pub spoke_kubeconfig: Option<&'a Path>,
    /// The spoke's context (None: the one named after the cluster).
    pub spoke_context: Option<&'a str>,
}

/// Releases what `request.cluster`'s agent holds and says what was let go.
/// Fails when the cluster is not on the hub, the spoke cannot be reached
/// or refuses the write (RBAC: the release is whoever may update the
/// ledger ConfigMap), or the hub does not show the release taken within
/// [`RELEASE_WAIT`].
pub async fn release_deletions(
    global: &GlobalArgs,
    request: &ReleaseRequest<'_>,
    now: Timestamp,
) -> Result<String, CliError> {
    let cluster = request.cluster;
    let hub = connect(global).await?;
    let managed = get_cluster(&hub.client, cluster).await?;
    let brake = managed
        .status
        .as_ref()
        .and_then(|s| s.deletion_brake.as_ref());
    let hold = match plan(cluster, brake)? {
        Plan::NothingHeld => {
            return Ok(format!(
                "{cluster}: its agent's deletion brake holds nothing; nothing released\n"
            ));
        }
        Plan::Release(hold) => hold,
    };

    let path = request.spoke_kubeconfig.or(global.kubeconfig.as_deref());
    let kubeconfig = read_kubeconfig(path)?;
    let contexts: Vec<String> = kubeconfig.contexts.iter().map(|c| c.name.clone()).collect();
    let context = spoke_context(
        cluster,
        request.spoke_context,
        &contexts,
        request.spoke_kubeconfig.is_some(),
    )?;
    let spoke = connect_with(kubeconfig, context).await?;
    let user = whoami(&spoke.client).await?;
    let value = release_value(&user, request.reason, now)?;
    let ledgers: Api<ConfigMap> = Api::namespaced(spoke.client.clone(), &hold.ledger_namespace);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    ledgers
        .patch(
            DELETION_BRAKE_LEDGER,
            &params,
            &Patch::Merge(
                json!({"metadata": {"annotations": {RELEASE_DELETIONS_ANNOTATION: value}}}),
            ),
        )
        .await
        .map_err(|e| {
            CliError::from_kube(
                &format!(
                    "annotate configmap {}/{DELETION_BRAKE_LEDGER} on the spoke of {cluster}",
                    hold.ledger_namespace
                ),
                "configmaps",
                e,
            )
        })?;

    let clusters: Api<ManagedCluster> = Api::all(hub.client.clone());
    let taken = await_condition(clusters, cluster, |mc: Option<&ManagedCluster>| {
        mc.is_some_and(|mc| {
            released(
                &hold,
                mc.status.as_ref().and_then(|s| s.deletion_brake.as_ref()),
            )
        })
    });
    match tokio::time::timeout(RELEASE_WAIT, taken).await {
        Ok(Ok(_)) => Ok(format!(
            "{cluster}: released {} held works ({} objects, held since {}); recorded on the spoke as \"{value}\"\n",
            hold.held_works,
            hold.held_objects,
            if hold.since.is_empty() {
                "-"
            } else {
                &hold.since
            }
        )),
        Ok(Err(error)) => Err(CliError::Print(format!(
            "the release \"{value}\" is written on the spoke, but watching {cluster} on the hub failed: {error}"
        ))),
        Err(_) => Err(ReleaseError::NotSeen {
            cluster: cluster.to_string(),
            value,
            seconds: RELEASE_WAIT.as_secs(),
        }
        .into()),
    }
}
