//! An agent does not wait forever on a hub that takes its stream and never
//! answers (a hub stuck in its handler, a proxy that speaks HTTP/2 and
//! forwards nothing): HTTP/2 pings still pass there, so only the agent's own
//! bound ends the wait. After three heartbeat intervals without the hub's
//! response it dials again, and so reaches a working hub once there is one.

use std::pin::Pin;
use std::time::Duration;

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::stand_in_hub::{apply_one, back_to_the_real_hub, route_to_stand_in};
use ferry_proto::v1::work_distributor_server::WorkDistributor;
use ferry_proto::v1::{AgentMessage, HubMessage};
use futures::Stream;
use tokio::sync::watch;
use tonic::{Request, Response, Status, Streaming};

/// A gRPC server that accepts every `Sync` stream and never answers it.
struct MuteHub {
    /// How many streams it accepted.
    streams: watch::Sender<usize>,
}

#[tonic::async_trait]
impl WorkDistributor for MuteHub {
    type SyncStream = Pin<Box<dyn Stream<Item = Result<HubMessage, Status>> + Send>>;

    async fn sync(
        &self,
        _request: Request<Streaming<AgentMessage>>,
    ) -> Result<Response<Self::SyncStream>, Status> {
        self.streams.send_modify(|n| *n += 1);
        std::future::pending().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_gives_up_on_a_hub_that_never_answers_its_stream_and_dials_again() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.tls = false;
    options.heartbeat = Duration::from_secs(1);
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    apply_one(&fleet, "cluster-a", "before").await;

    // The agent's route now leads to a hub that never answers.
    let (streams, mut seen) = watch::channel(0usize);
    let mute = route_to_stand_in(&mut fleet, "cluster-a", MuteHub { streams }).await;

    // Without a bound the agent would wait on its first stream forever.
    tokio::time::timeout(Duration::from_secs(90), seen.wait_for(|n| *n >= 2))
        .await
        .expect("the agent gave up on the unanswered stream and opened another")
        .expect("the mute hub runs");
    println!("the mute hub saw {} streams from one agent", *seen.borrow());

    back_to_the_real_hub(&mut fleet, "cluster-a", "after").await;
    mute.abort();
    fleet.stop().await;
}
