//! Starts and steers a fleet of simulated agents in this process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

use crate::loadgen::agent::{Arrivals, Behaviour, Shared, SimCluster, run_agent};
use crate::loadgen::counters::{Counters, Snapshot};
use crate::loadgen::error::LoadgenError;
use crate::loadgen::shares::RemoteShare;

/// Simulated agents running in this process, and any shares of the same
/// fleet run by child processes (see [`crate::loadgen::shares`]).
pub struct SimFleet {
    shared: Arc<Shared>,
    churn: watch::Sender<bool>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    /// The fleet-wide index of this process's first agent.
    first: usize,
    size: usize,
    remote: Vec<RemoteShare>,
}

/// The endpoint every simulated agent dials: `hub_url` trusting `ca_pem`
/// (None: plaintext), with the real agent's connection settings.
pub fn hub_endpoint(hub_url: &str, ca_pem: Option<&str>) -> Result<Endpoint, LoadgenError> {
    let endpoint =
        Endpoint::from_shared(hub_url.to_string()).map_err(|source| LoadgenError::BadUrl {
            url: hub_url.into(),
            source,
        })?;
    let endpoint = match ca_pem {
        Some(ca) => endpoint
            .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)))
            .map_err(|source| LoadgenError::Tls {
                url: hub_url.into(),
                source,
            })?,
        None => endpoint,
    };
    Ok(endpoint
        .connect_timeout(Duration::from_secs(10))
        .http2_keep_alive_interval(Duration::from_secs(20))
        .keep_alive_while_idle(true))
}

impl SimFleet {
    /// Starts one agent per cluster of `clusters`, all dialling `endpoint`.
    pub fn start(clusters: Vec<SimCluster>, endpoint: Endpoint, behaviour: Behaviour) -> Self {
        Self::spread(clusters, vec![endpoint], behaviour)
    }

    /// Starts one agent per cluster of `clusters`, the `i`th dialling hub
    /// replica `endpoints[i % len]`. With no endpoint, agents stop at once.
    pub fn spread(
        clusters: Vec<SimCluster>,
        endpoints: Vec<Endpoint>,
        behaviour: Behaviour,
    ) -> Self {
        Self::spread_from(0, clusters, endpoints, behaviour)
    }

    /// Like [`SimFleet::spread`] for a share of a larger fleet whose first
    /// agent has fleet-wide index `first`: agent `first + i` dials replica
    /// `(first + i) % len`, as it would in one process.
    pub fn spread_from(
        first: usize,
        clusters: Vec<SimCluster>,
        endpoints: Vec<Endpoint>,
        behaviour: Behaviour,
    ) -> Self {
        let (churn, churn_rx) = watch::channel(false);
        let (stop, stop_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            endpoints,
            counters: Counters::default(),
            arrivals: Arrivals::default(),
            behaviour,
            churn: churn_rx,
            stop: stop_rx,
        });
        let mut fleet = Self {
            shared,
            churn,
            stop,
            tasks: JoinSet::new(),
            first,
            size: 0,
            remote: Vec::new(),
        };
        fleet.add(clusters);
        fleet
    }

    /// Starts agents for more clusters.
    pub fn add(&mut self, clusters: Vec<SimCluster>) {
        for cluster in clusters {
            self.tasks.spawn(run_agent(
                cluster,
                self.first + self.size,
                self.shared.clone(),
            ));
            self.size += 1;
        }
    }

    /// Counts a share run by a child process as part of this fleet.
    pub fn add_remote(&mut self, share: RemoteShare) {
        self.remote.push(share);
    }

    /// Whether every agent runs in this process (churn and arrivals, which
    /// P2, P6 and P9 need, are only known for those).
    pub fn all_local(&self) -> bool {
        self.remote.is_empty()
    }

    /// How many agents were started, here and in child processes.
    pub fn size(&self) -> usize {
        self.size + self.remote.iter().map(RemoteShare::size).sum::<usize>()
    }

    /// The counters now, of this process's agents and the children's as
    /// they last reported (every 250 ms).
    pub fn snapshot(&self) -> Snapshot {
        self.remote
            .iter()
            .fold(self.shared.counters.snapshot(), |all, share| {
                all.plus(&share.snapshot())
            })
    }

    /// When works reached their agents.
    pub fn arrivals(&self) -> &Arrivals {
        &self.shared.arrivals
    }

    /// Turns status churn (P9) on or off.
    pub fn churn(&self, on: bool) {
        self.churn.send_replace(on);
    }

    /// Waits until `done` holds for the counters, checking every 50 ms;
    /// returns how long it took, or the last snapshot when `timeout` passed.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        done: impl Fn(&Snapshot) -> bool,
    ) -> Result<Duration, Snapshot> {
        let start = Instant::now();
        loop {
            let now = self.snapshot();
            if done(&now) {
                return Ok(start.elapsed());
            }
            if start.elapsed() > timeout {
                return Err(now);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// [`Self::wait_for`], printing `report` of the fleet and the time
    /// waited on stderr every `every` meanwhile, so a long wait shows where
    /// it stands (and where it stalls).
    pub async fn wait_for_reporting(
        &self,
        timeout: Duration,
        every: Duration,
        report: impl Fn(&Snapshot, Duration) -> String,
        done: impl Fn(&Snapshot) -> bool,
    ) -> Result<Duration, Snapshot> {
        let start = Instant::now();
        let last_print = std::sync::Mutex::new(start);
        self.wait_for(timeout, |s| {
            if let Ok(mut last) = last_print.lock()
                && last.elapsed() >= every
            {
                *last = Instant::now();
                eprintln!("{}", report(s, start.elapsed()));
            }
            done(s)
        })
        .await
    }

    /// Waits until every agent holds a welcomed session, printing every
    /// 30 s on stderr where the others are (dialing, waiting for the hub's
    /// response or Welcome), so a stalled storm shows where it stalls.
    /// Fails with the same figures when `timeout` passes.
    pub async fn wait_connected(&self, timeout: Duration) -> Result<Duration, LoadgenError> {
        let wanted = self.size();
        self.wait_for_reporting(
            timeout,
            Duration::from_secs(30),
            |s, elapsed| {
                format!(
                    "  after {:.0} s: {} of {wanted} connected, {} dialing, {} waiting for the hub's response, {} for its Welcome; {} session errors ({} told when to come back), {} sessions given up on a silent hub",
                    elapsed.as_secs_f64(),
                    s.connected,
                    s.dialing,
                    s.awaiting_response,
                    s.awaiting_welcome,
                    s.session_errors,
                    s.pushed_back,
                    s.silent_hub,
                )
            },
            |s| s.connected as usize >= wanted,
        )
        .await
            .map_err(|last| LoadgenError::NotConnected {
                connected: last.connected,
                dialing: last.dialing,
                awaiting_response: last.awaiting_response,
                awaiting_welcome: last.awaiting_welcome,
                silent_hub: last.silent_hub,
                wanted,
                waited: timeout,
            })
    }

    /// Stops every agent and waits for them.
    pub async fn stop(mut self) {
        self.stop.send_replace(true);
        for share in std::mem::take(&mut self.remote) {
            share.stop().await;
        }
        while self.tasks.join_next().await.is_some() {}
    }
}
