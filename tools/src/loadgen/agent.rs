//! One simulated agent: dials the hub, says Hello with the works it holds,
//! keeps every upsert in memory and reports it Applied, heartbeats, and
//! redials with backoff when the session ends, like the real agent.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use backon::BackoffBuilder;
use ferry_proto::v1::{self, agent_message, hub_message};
use ferry_proto::{MAX_MESSAGE_BYTES, PROTOCOL_VERSION};
use prost::Message;
use tokio::sync::{Mutex, mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

use crate::loadgen::counters::Counters;
use crate::loadgen::status::{HeldWork, applied_status, gone_status, held_work};
use ferry_agent::client_certificate::ClientCertificate;
use ferry_e2e::harness::agent_client::agent_client;

/// Messages an agent queues for the hub before it waits: the hub's flow
/// control, not memory, absorbs a burst.
const OUTBOUND_QUEUE: usize = 4;

/// How every simulated agent behaves.
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// Heartbeat interval until the hub's Welcome says otherwise.
    pub heartbeat: Duration,
    /// Wait this long after an upsert before reporting it (a slow agent).
    pub status_delay: Duration,
    /// Drop the stream and redial after this long (a flapping agent).
    pub flap_every: Option<Duration>,
    /// Ask a hub that issues client certificates for one and dial with it,
    /// as the real agent does, trusting each replica's serving CA (these
    /// PEMs, one per endpoint, in the same order);
    /// None dials with the token only, as an agent of an older version.
    pub certificates: Option<Vec<String>>,
}

impl Behaviour {
    /// Agents that heartbeat every `heartbeat`, report at once and never
    /// flap: the well-behaved fleet most tests want.
    pub fn steady(heartbeat: Duration) -> Self {
        Self {
            heartbeat,
            status_delay: Duration::ZERO,
            flap_every: None,
            certificates: None,
        }
    }
}

/// When each work generation reached an agent, for latency figures.
#[derive(Debug, Default)]
pub struct Arrivals {
    /// (namespace, name) → (generation, when it arrived).
    latest: Mutex<HashMap<(String, String), (i64, Instant)>>,
}

impl Arrivals {
    async fn record(&self, work: &v1::WorkRef, generation: i64) {
        self.latest.lock().await.insert(
            (work.namespace.clone(), work.name.clone()),
            (generation, Instant::now()),
        );
    }

    /// When generation `generation` (or a later one) of work `namespace/name`
    /// first reached its agent, if it has.
    pub async fn arrived(&self, namespace: &str, name: &str, generation: i64) -> Option<Instant> {
        self.latest
            .lock()
            .await
            .get(&(namespace.to_string(), name.to_string()))
            .filter(|(held, _)| *held >= generation)
            .map(|(_, at)| *at)
    }
}

/// What all simulated agents share: the hub replicas' TLS endpoints (one
/// rustls client configuration each), the counters, the arrival log and
/// the switches.
#[derive(Debug)]
pub struct Shared {
    /// The hub replicas, with TLS configured once for every agent; agent
    /// `i` dials replica `i % len` (never empty).
    pub endpoints: Vec<Endpoint>,
    /// Fleet-wide counters.
    pub counters: Counters,
    /// When works reached agents.
    pub arrivals: Arrivals,
    /// How agents behave.
    pub behaviour: Behaviour,
    /// While true, every agent sends status reports with a changing
    /// feedback value as fast as the hub takes them (P9).
    pub churn: watch::Receiver<bool>,
    /// Turns true when agents must stop.
    pub stop: watch::Receiver<bool>,
}

/// One simulated cluster: its name and its agent's bearer token.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SimCluster {
    /// Cluster name (its namespace on the hub).
    pub name: String,
    /// A token of the cluster's agent ServiceAccount.
    pub token: String,
}

/// Why one session ended.
enum Ended {
    /// The fleet is stopping.
    Stop,
    /// The flap interval passed.
    Flap,
    /// The hub ended the stream or could not be reached; how it refused
    /// the stream, if it did.
    Failed(Option<tonic::Status>),
    /// A session the hub had welcomed ended (the hub went away, or went
    /// silent): like the real agent, the backoff starts afresh.
    Lost,
}

/// Runs the agent of `cluster` until `shared.stop` turns true.
pub async fn run_agent(cluster: SimCluster, replica: usize, shared: Arc<Shared>) {
    let mut works: HashMap<String, HeldWork> = HashMap::new();
    let certificate = shared
        .behaviour
        .certificates
        .as_ref()
        .map(|_| ClientCertificate::default());
    // The real agent's backoff: in a connect storm the refused agents'
    // redials are most of the load, so a shorter one would overstate it.
    let backoff = ferry_agent::redial::backoff();
    let mut delays = backoff.build();
    loop {
        let mut stop = shared.stop.clone();
        if *stop.borrow_and_update() {
            return;
        }
        let status =
            match session(&cluster, replica, &shared, &mut works, certificate.as_ref()).await {
                Ended::Stop => return,
                Ended::Flap => {
                    delays = backoff.build();
                    continue;
                }
                // A session that got as far as Welcome starts the backoff
                // afresh, as in the real agent: carrying the steps of an
                // earlier storm into the next one would overstate it.
                Ended::Lost => {
                    delays = backoff.build();
                    None
                }
                Ended::Failed(status) => status,
            };
        Counters::add(&shared.counters.session_errors, 1);
        let backoff = delays.next().unwrap_or(ferry_agent::redial::MAX_BACKOFF);
        if status
            .as_ref()
            .and_then(ferry_agent::redial::pushback)
            .is_some()
        {
            Counters::add(&shared.counters.pushed_back, 1);
        }
        let delay = ferry_agent::redial::next_delay(backoff, status.as_ref());
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = stopped(&mut stop) => return,
        }
    }
}

/// How a session ended that broke: lost once the hub had welcomed it,
/// failed before.
fn broken(welcomed: bool) -> Ended {
    if welcomed {
        Ended::Lost
    } else {
        Ended::Failed(None)
    }
}

/// Completes when `stop` turns true (or its sender is gone); holds no
/// borrow of the value, so the future stays `Send`.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await.map(|_| ());
}

/// Unix seconds now.
fn now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

fn status_message(status: v1::WorkStatus) -> v1::AgentMessage {
    v1::AgentMessage {
        body: Some(agent_message::Body::Status(status)),
    }
}

/// Counts the agent in one gauge (connected, or a step of the handshake)
/// while it lives, so a session that ends anywhere leaves every gauge true.
struct Gauge<'a>(&'a AtomicU64);

impl<'a> Gauge<'a> {
    fn enter(gauge: &'a AtomicU64) -> Self {
        Counters::add(gauge, 1);
        Self(gauge)
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn session(
    cluster: &SimCluster,
    replica: usize,
    shared: &Shared,
    works: &mut HashMap<String, HeldWork>,
    certificate: Option<&ClientCertificate>,
) -> Ended {
    let Some(endpoint) = shared
        .endpoints
        .get(replica % shared.endpoints.len().max(1))
    else {
        return Ended::Stop;
    };
    let presented = certificate.and_then(|held| held.to_present(now_seconds()));
    // A certificate is this agent's own: its endpoint is too.
    let ca = shared
        .behaviour
        .certificates
        .as_ref()
        .and_then(|cas| cas.get(replica % cas.len().max(1)));
    let endpoint = match (&presented, ca) {
        (Some((cert, key)), Some(ca)) => {
            let tls = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(ca))
                .identity(Identity::from_pem(cert, key));
            match endpoint.clone().tls_config(tls) {
                Ok(endpoint) => endpoint,
                Err(_) => return Ended::Failed(None),
            }
        }
        _ => endpoint.clone(),
    };
    let dialing = Gauge::enter(&shared.counters.dialing);
    let Ok(channel) = endpoint.connect().await else {
        return Ended::Failed(None);
    };
    drop(dialing);
    let mut client = agent_client(channel, Some(&cluster.token))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let (tx, rx) = mpsc::channel::<v1::AgentMessage>(OUTBOUND_QUEUE);
    let hello = v1::Hello {
        protocol_version: PROTOCOL_VERSION,
        cluster_name: cluster.name.clone(),
        agent_version: "ferry-loadgen".into(),
        known_works: works
            .iter()
            .map(|(uid, w)| v1::WorkVersion {
                uid: uid.clone(),
                generation: w.generation,
            })
            .collect(),
        ..Default::default()
    };
    let hello = v1::AgentMessage {
        body: Some(agent_message::Body::Hello(hello)),
    };
    if tx.send(hello).await.is_err() {
        return Ended::Failed(None);
    }
    // Like the real agent, three heartbeat intervals without a word from the
    // hub (its response, its Welcome, any message) end the session: a hub
    // that accepted a stream and never answered must not hold the agent.
    let mut silence_limit = shared.behaviour.heartbeat * 3;
    let mut stop = shared.stop.clone();
    let awaiting = Gauge::enter(&shared.counters.awaiting_response);
    let response = tokio::select! {
        response = tokio::time::timeout(silence_limit, client.sync(ReceiverStream::new(rx))) => response,
        () = stopped(&mut stop) => return Ended::Stop,
    };
    let response = match response {
        Ok(Ok(response)) => response,
        Ok(Err(status)) => {
            if let Some(held) = certificate
                && presented.is_some()
                && status.code() == tonic::Code::Unauthenticated
            {
                held.forget();
            }
            return Ended::Failed(Some(status));
        }
        Err(_) => {
            Counters::add(&shared.counters.silent_hub, 1);
            return Ended::Failed(None);
        }
    };
    drop(awaiting);
    let mut waiting_welcome = Some(Gauge::enter(&shared.counters.awaiting_welcome));
    let silent = tokio::time::sleep(silence_limit);
    tokio::pin!(silent);
    let mut inbound = response.into_inner();
    let mut heartbeat = tokio::time::interval(shared.behaviour.heartbeat);
    let flap = tokio::time::sleep(shared.behaviour.flap_every.unwrap_or(Duration::MAX / 4));
    tokio::pin!(flap);
    let mut churn = shared.churn.clone();
    let mut churning = *churn.borrow_and_update();
    let mut churn_open = true;
    // The works in turn for churned reports, and the tick they carry.
    let mut churn_order: Vec<String> = Vec::new();
    let mut churn_next = 0usize;
    // Ticks start from the clock so a new session never repeats a report.
    let mut tick = now_seconds().saturating_mul(1000);
    let mut connected: Option<Gauge<'_>> = None;
    loop {
        tokio::select! {
            message = inbound.message() => {
                let message = match message {
                    Ok(Some(message)) => message,
                    Ok(None) | Err(_) => return broken(connected.is_some()),
                };
                silent.as_mut().reset(tokio::time::Instant::now() + silence_limit);
                Counters::add(&shared.counters.bytes_received, message.encoded_len() as u64);
                match message.body {
                    Some(hub_message::Body::Welcome(welcome)) => {
                        Counters::add(&shared.counters.welcomes, 1);
                        if connected.is_none() {
                            drop(waiting_welcome.take());
                            connected = Some(Gauge::enter(&shared.counters.connected));
                        }
                        if let Some(held) = certificate
                            && welcome.issues_client_certificates
                            && held.wants_one(now_seconds())
                        {
                            let Ok(request) = held.request(&cluster.name) else {
                                return broken(connected.is_some());
                            };
                            let ask = v1::AgentMessage {
                                body: Some(agent_message::Body::CertificateRequest(request)),
                            };
                            if tx.send(ask).await.is_err() {
                                return broken(connected.is_some());
                            }
                        }
                        let every = Duration::from_secs(welcome.heartbeat_interval_seconds.max(1).into());
                        heartbeat = tokio::time::interval(every);
                        silence_limit = every * 3;
                        silent.as_mut().reset(tokio::time::Instant::now() + silence_limit);
                    }
                    Some(hub_message::Body::Upsert(upsert)) => {
                        Counters::add(&shared.counters.upserts, 1);
                        Counters::add(&shared.counters.upsert_bytes, upsert.encoded_len() as u64);
                        let held = held_work(&upsert);
                        shared.arrivals.record(&held.work, held.generation).await;
                        let report = status_message(applied_status(&held, now_seconds(), None));
                        Counters::add(&shared.counters.held_bytes, held.upsert_bytes);
                        if let Some(old) = works.insert(held.work.uid.clone(), held) {
                            shared.counters.held_bytes.fetch_sub(old.upsert_bytes, Ordering::Relaxed);
                        }
                        if shared.behaviour.status_delay.is_zero() {
                            if tx.send(report).await.is_err() {
                                return broken(connected.is_some());
                            }
                        } else {
                            let tx = tx.clone();
                            let delay = shared.behaviour.status_delay;
                            tokio::spawn(async move {
                                tokio::time::sleep(delay).await;
                                let _ = tx.send(report).await;
                            });
                        }
                        Counters::add(&shared.counters.statuses_sent, 1);
                    }
                    Some(hub_message::Body::Delete(delete)) => {
                        Counters::add(&shared.counters.deletes, 1);
                        let work = delete.work.unwrap_or_default();
                        if let Some(old) = works.remove(&work.uid) {
                            shared.counters.held_bytes.fetch_sub(old.upsert_bytes, Ordering::Relaxed);
                        }
                        if tx.send(status_message(gone_status(work))).await.is_err() {
                            return broken(connected.is_some());
                        }
                        Counters::add(&shared.counters.statuses_sent, 1);
                    }
                    Some(hub_message::Body::Certificate(answer)) => {
                        let Some(held) = certificate else { continue };
                        match held.accept(answer) {
                            Ok(()) => Counters::add(&shared.counters.certificates_issued, 1),
                            Err(_) => Counters::add(&shared.counters.certificates_refused, 1),
                        }
                    }
                    Some(hub_message::Body::Heartbeat(_) | hub_message::Body::Synced(_)) | None => {}
                }
            }
            _ = heartbeat.tick() => {
                let beat = v1::AgentMessage {
                    body: Some(agent_message::Body::Heartbeat(v1::Heartbeat::now())),
                };
                if tx.send(beat).await.is_err() {
                    return broken(connected.is_some());
                }
            }
            permit = tx.reserve(), if churning && !works.is_empty() => {
                let Ok(permit) = permit else { return broken(connected.is_some()) };
                if churn_next >= churn_order.len() {
                    churn_order = works.keys().cloned().collect();
                    churn_next = 0;
                }
                let uid = &churn_order[churn_next];
                churn_next += 1;
                if let Some(work) = works.get(uid) {
                    tick += 1;
                    permit.send(status_message(applied_status(work, now_seconds(), Some(tick))));
                    Counters::add(&shared.counters.statuses_sent, 1);
                }
            }
            changed = churn.changed(), if churn_open => {
                if changed.is_err() {
                    churning = false;
                    churn_open = false;
                } else {
                    churning = *churn.borrow_and_update();
                }
            }
            () = &mut silent => {
                Counters::add(&shared.counters.silent_hub, 1);
                return broken(connected.is_some());
            }
            () = &mut flap => return Ended::Flap,
            () = stopped(&mut stop) => return Ended::Stop,
        }
    }
}
