//! Starts and steers a fleet of simulated agents in this process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

use crate::loadgen::agent::{Arrivals, Behaviour, Shared, SimCluster, run_agent};
use crate::loadgen::counters::{Counters, Snapshot};

/// The simulated fleet could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LoadgenError {
    /// The hub URL is not a URL.
    #[error("hub URL {url}: {source}")]
    BadUrl {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: tonic::transport::Error,
    },
    /// The TLS settings were refused.
    #[error("TLS for {url}: {source}")]
    Tls {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: tonic::transport::Error,
    },
    /// Not every agent was connected in time.
    #[error(
        "{connected} of {wanted} agents connected within {waited:?} (at the deadline {dialing} dialing, {awaiting_response} waiting for the hub's response, {awaiting_welcome} for its Welcome; {silent_hub} sessions given up on a silent hub)"
    )]
    NotConnected {
        /// Agents connected at the deadline.
        connected: u64,
        /// Agents dialing at the deadline.
        dialing: u64,
        /// Agents waiting for the hub's response headers at the deadline.
        awaiting_response: u64,
        /// Agents waiting for a Welcome at the deadline.
        awaiting_welcome: u64,
        /// Sessions given up on a silent hub until the deadline.
        silent_hub: u64,
        /// Agents started.
        wanted: usize,
        /// How long it waited.
        waited: Duration,
    },
}

/// Simulated agents running in this process.
pub struct SimFleet {
    shared: Arc<Shared>,
    churn: watch::Sender<bool>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    size: usize,
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
            size: 0,
        };
        fleet.add(clusters);
        fleet
    }

    /// Starts agents for more clusters.
    pub fn add(&mut self, clusters: Vec<SimCluster>) {
        for cluster in clusters {
            self.tasks
                .spawn(run_agent(cluster, self.size, self.shared.clone()));
            self.size += 1;
        }
    }

    /// How many agents were started.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The counters now.
    pub fn snapshot(&self) -> Snapshot {
        self.shared.counters.snapshot()
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

    /// Waits until every agent holds a welcomed session, printing every
    /// 30 s on stderr where the others are (dialing, waiting for the hub's
    /// response or Welcome), so a stalled storm shows where it stalls.
    /// Fails with the same figures when `timeout` passes.
    pub async fn wait_connected(&self, timeout: Duration) -> Result<Duration, LoadgenError> {
        let wanted = self.size;
        let start = Instant::now();
        let last_print = std::sync::Mutex::new(start);
        self.wait_for(timeout, |s| {
            if let Ok(mut last) = last_print.lock()
                && last.elapsed() >= Duration::from_secs(30)
            {
                *last = Instant::now();
                eprintln!(
                    "  after {:.0} s: {} of {wanted} connected, {} dialing, {} waiting for the hub's response, {} for its Welcome; {} session errors, {} sessions given up on a silent hub",
                    start.elapsed().as_secs_f64(),
                    s.connected,
                    s.dialing,
                    s.awaiting_response,
                    s.awaiting_welcome,
                    s.session_errors,
                    s.silent_hub,
                );
            }
            s.connected as usize >= wanted
        })
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
        while self.tasks.join_next().await.is_some() {}
    }
}
