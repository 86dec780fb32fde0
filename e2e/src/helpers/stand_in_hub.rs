//! A stand-in for the hub on one spoke's route (a gRPC service the test
//! writes: a hub that never answers, one that refuses as busy), with the
//! checks around it: a work applied through the real hub before, and one
//! applied again once the agent's route leads back to the real hub.

use ferry_api::manifest_work::ManifestWork;
use ferry_proto::v1::work_distributor_server::{WorkDistributor, WorkDistributorServer};
use kube::api::Api;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;

use crate::harness::fleet::Fleet;
use crate::helpers::work_helpers::{config_map, manifest_work, wait_applied};

/// Creates a work named `name` on `cluster` (one ConfigMap) and waits until
/// it is Applied. Panics when it is not: the test cannot go on without it.
pub async fn apply_one(fleet: &Fleet, cluster: &str, name: &str) -> Api<ManifestWork> {
    let works = fleet
        .create_work(&manifest_work(
            cluster,
            name,
            vec![config_map("default", name, json!({"k": "v"}))],
        ))
        .await
        .expect("create work");
    wait_applied(&works, name)
        .await
        .unwrap_or_else(|e| panic!("work {name} applied on {cluster}: {e}"));
    works
}

/// Serves `service` on a port of its own, routes `cluster`'s agent to it
/// and stops the real hub, which ends the agent's session: its next dials
/// reach the stand-in. The returned task serves until aborted.
pub async fn route_to_stand_in<S: WorkDistributor>(
    fleet: &mut Fleet,
    cluster: &str,
    service: S,
) -> JoinHandle<Result<(), tonic::transport::Error>> {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let serving = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(WorkDistributorServer::new(service))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    fleet.spoke(cluster).link.retarget(address);
    fleet.stop_hub().await;
    serving
}

/// Routes `cluster`'s agent back to the real hub, starts it, and waits for a
/// new work named `name` to be Applied: the agent is not stuck on the
/// stand-in.
pub async fn back_to_the_real_hub(fleet: &mut Fleet, cluster: &str, name: &str) {
    fleet
        .spoke(cluster)
        .link
        .retarget(fleet.hub_replica_addr(0));
    fleet.start_hub().await.expect("hub starts again");
    apply_one(fleet, cluster, name).await;
}
