//! The accept gate, from the operator's side: sets a ManagedCluster's
//! `spec.hubAcceptsClient` (OCM's `clusteradm accept`). The hub refuses the
//! agent of a cluster it does not accept, and ends its live session at the
//! next review of its token.

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::join::hub_side::{Applied, Change};
use ferry_api::managed_cluster::ManagedCluster;

/// Accepting or denying failed.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// No ManagedCluster has that name.
    #[error(
        "cluster {0} has not joined this hub (no ManagedCluster {0}): run `ferry-hub join --cluster {0}` first"
    )]
    NotJoined(String),
    /// The API server refused the read or the write.
    #[error("{action} ManagedCluster {cluster}: {source}")]
    Api {
        /// What was being done.
        action: &'static str,
        /// The cluster.
        cluster: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// Sets whether the hub accepts cluster `name`'s agent and says whether that
/// changed anything. Fails when the cluster has no ManagedCluster or the API
/// server refuses.
pub async fn set_accepted(
    client: &Client,
    name: &str,
    accept: bool,
) -> Result<Applied, AcceptError> {
    let clusters: Api<ManagedCluster> = Api::all(client.clone());
    let failed = |action: &'static str| {
        let cluster = name.to_string();
        move |source| AcceptError::Api {
            action,
            cluster,
            source,
        }
    };
    let current = clusters
        .get_opt(name)
        .await
        .map_err(failed("reading"))?
        .ok_or_else(|| AcceptError::NotJoined(name.to_string()))?;
    let verb = if accept { "accepted" } else { "denied" };
    let change = if current.spec.hub_accepts_client == accept {
        Change::Unchanged
    } else {
        clusters
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "hubAcceptsClient": accept } })),
            )
            .await
            .map_err(failed("updating"))?;
        Change::Configured
    };
    Ok(Applied {
        side: "hub",
        object: format!("managedcluster/{name} ({verb})"),
        change,
    })
}
