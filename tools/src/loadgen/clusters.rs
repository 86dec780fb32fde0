//! Creates the simulated clusters on the hub control plane, as `ferry-hub
//! join` would (namespace, agent ServiceAccount, accepted ManagedCluster,
//! token), many at once but a bounded number in flight.

use futures::{StreamExt, TryStreamExt};
use kube::Client;

use ferry_hub::join::hub_side::{JoinError, join_cluster};

use crate::loadgen::agent::SimCluster;

/// The name of simulated cluster `index` (`sim-00042`).
pub fn cluster_name(index: usize) -> String {
    format!("sim-{index:05}")
}

/// Joins clusters `sim-<from>` .. `sim-<to - 1>` through `admin`, at most
/// `concurrency` at a time, each with a token valid `token_seconds`. Fails
/// with the first join the API server refuses.
pub async fn join_clusters(
    admin: &Client,
    from: usize,
    to: usize,
    concurrency: usize,
    token_seconds: i64,
) -> Result<Vec<SimCluster>, JoinError> {
    futures::stream::iter(from..to)
        .map(|index| async move {
            let name = cluster_name(index);
            let token = join_cluster(admin, &name, token_seconds).await?;
            Ok::<_, JoinError>(SimCluster { name, token })
        })
        .buffered(concurrency.max(1))
        .try_collect()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_sort_in_index_order_and_are_dns_labels() {
        assert_eq!(cluster_name(42), "sim-00042");
        assert!(cluster_name(9) < cluster_name(10));
        assert!(ferry_api::cluster_name::validate_cluster_name(&cluster_name(9999)).is_ok());
    }
}
