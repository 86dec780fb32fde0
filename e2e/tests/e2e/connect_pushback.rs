//! An agent refused by a busy hub waits as long as the hub asked before it
//! dials again (the pushback a replica gives in a connect storm), instead of
//! redialling on its own backoff, which starts at 0.2 s: in a storm those
//! redials' TLS handshakes take the CPU the hub needs to admit anyone.

use std::pin::Pin;
use std::time::Duration;

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::stand_in_hub::{apply_one, back_to_the_real_hub, route_to_stand_in};
use ferry_proto::RETRY_PUSHBACK_METADATA;
use ferry_proto::v1::work_distributor_server::WorkDistributor;
use ferry_proto::v1::{AgentMessage, HubMessage};
use futures::Stream;
use tokio::sync::watch;
use tokio::time::Instant;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status, Streaming};

const PUSHBACK: Duration = Duration::from_secs(4);

/// A gRPC server that refuses every `Sync` stream as busy, asking the agent
/// to come back after [`PUSHBACK`], and notes when each stream came.
struct BusyHub {
    streams: watch::Sender<Vec<Instant>>,
}

#[tonic::async_trait]
impl WorkDistributor for BusyHub {
    type SyncStream = Pin<Box<dyn Stream<Item = Result<HubMessage, Status>> + Send>>;

    async fn sync(
        &self,
        _request: Request<Streaming<AgentMessage>>,
    ) -> Result<Response<Self::SyncStream>, Status> {
        self.streams.send_modify(|s| s.push(Instant::now()));
        let mut busy = Status::unavailable("busy reviewing other agents' tokens");
        let millis = u64::try_from(PUSHBACK.as_millis()).expect("small");
        busy.metadata_mut()
            .insert(RETRY_PUSHBACK_METADATA, MetadataValue::from(millis));
        Err(busy)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_agent_waits_the_hubs_pushback_before_it_dials_again() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.tls = false;
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    apply_one(&fleet, "cluster-a", "before").await;

    // The agent's route now leads to a hub that refuses it as busy.
    let (streams, mut seen) = watch::channel(Vec::new());
    let busy = route_to_stand_in(&mut fleet, "cluster-a", BusyHub { streams }).await;

    let seen_three = tokio::time::timeout(Duration::from_secs(60), seen.wait_for(|s| s.len() >= 3))
        .await
        .expect("the agent kept dialling the busy hub")
        .expect("the busy hub runs")
        .clone();
    let gaps: Vec<Duration> = seen_three.windows(2).map(|w| w[1] - w[0]).collect();
    println!("the agent dialled the busy hub again after {gaps:?}");
    // Its own backoff alone would have redialled after 0.2-0.8 s.
    for gap in &gaps[..2] {
        assert!(
            *gap >= PUSHBACK,
            "the agent redialled {gap:?} after a refusal asking for {PUSHBACK:?}"
        );
    }

    back_to_the_real_hub(&mut fleet, "cluster-a", "after").await;
    busy.abort();
    fleet.stop().await;
}
