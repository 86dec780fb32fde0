//! One agent's stream: sends the works of its cluster that the agent lacks,
//! keeps it up to date, and writes the status it reports.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ferry_proto::PROTOCOL_VERSION;
use ferry_proto::v1::work_distributor_server::WorkDistributor;
use ferry_proto::v1::{self, AgentMessage, agent_message, hub_message};
use futures::Stream;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use prost::Message;
use tokio::sync::{mpsc, oneshot, watch};
use tonic::{Request, Response, Status, Streaming};
use tracing::{Instrument as _, debug, info, info_span, warn};

use crate::agent_certs::issuing::AgentCertificates;
use crate::agent_certs::presented::ClientCertificate;
use crate::clusters::agent_report::AgentReport;
use crate::clusters::liveness::ClusterLiveness;
use crate::grpc::brake_reports::BrakeReports;
use crate::grpc::config::SessionConfig;
use crate::grpc::handshake::{Credential, Handshake, handshake};
use crate::grpc::held::{HeldWorks, labels_digest};
use crate::grpc::identity::AgentAuthenticator;
use crate::grpc::lifetime::{Lifetime, LiveCredential, jittered, unix_now};
use crate::grpc::outbound::{Outbound, Queued};
use crate::metrics::HubMetrics;
use crate::status::delivery::SessionReports;
use crate::status::order::{MAX_LIVE_SESSIONS, SessionOrder};
use crate::status::writer::StatusWriter;
use crate::wire::to_wire::{delete_option, work_ref, work_upsert};
use crate::works::deletion::{WorkDeletion, awaits_release};
use crate::works::index::WorkIndex;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::report_bounds::{MAX_REPORT_BYTES, bound_report};

/// Messages queued per agent before the sender waits; a slow agent only ever
/// slows its own session.
const OUTBOUND_QUEUE: usize = 32;

/// The `ferry.v1.WorkDistributor` service.
pub struct Distributor {
    /// Works by cluster, kept by the hub's watch.
    pub index: Arc<WorkIndex>,
    /// Checks the token each agent presents.
    pub auth: Arc<AgentAuthenticator>,
    /// Issues and checks agents' client certificates; None when the hub
    /// issues none (no TLS, or operator-run mutual TLS).
    pub certificates: Option<Arc<AgentCertificates>>,
    /// Lets deleted works go when their agent never held them.
    pub deletion: WorkDeletion,
    /// Writes ManagedCluster liveness. Shared (not cloned) by the sessions:
    /// a clone holds two API handles, about 600 bytes per session.
    pub liveness: Arc<ClusterLiveness>,
    /// Writes the status agents report.
    pub status: Arc<StatusWriter>,
    /// The order of each cluster's live sessions, so the newest one's
    /// reports win.
    pub sessions: Arc<SessionOrder>,
    /// Counts what sessions send and write.
    pub metrics: Arc<HubMetrics>,
    /// Heartbeat interval.
    pub config: SessionConfig,
    /// Turns true when the hub shuts down; every session then ends.
    pub stopping: watch::Receiver<bool>,
}

type HubStream = Pin<Box<dyn Stream<Item = Result<v1::HubMessage, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl WorkDistributor for Distributor {
    type SyncStream = HubStream;

    async fn sync(
        &self,
        request: Request<Streaming<v1::AgentMessage>>,
    ) -> Result<Response<Self::SyncStream>, Status> {
        let Handshake {
            cluster,
            credential,
            hello,
            inbound,
        } = handshake(
            request,
            &self.auth,
            self.certificates.as_deref(),
            &self.liveness,
            &self.metrics,
            self.config.transport.message_caps,
        )
        .await?;
        info!(%cluster, agent_version = %hello.agent_version, known = hello.known_works.len(),
            credential = credential.kind(), "agent connected");
        self.metrics
            .sessions_opened
            .get_or_create(&crate::metrics::CredentialLabel {
                credential: credential.kind(),
            })
            .inc();
        let session_id = format!("{:016x}", rand::random::<u64>());
        let (report, dropped) = AgentReport::from_hello(&hello);
        if !dropped.is_empty() {
            warn!(%cluster, ?dropped, "parts of the agent's Hello not recorded");
        }
        self.liveness
            .connecting(&cluster, &session_id, &report)
            .await;

        let (outbound, outbound_rx) = mpsc::channel::<Queued>(OUTBOUND_QUEUE);
        // Weak: the agent's stream ends when the pusher's sender goes (the
        // hub stopping, the session ending), whatever the reader holds.
        let answers = outbound.downgrade();
        let (inbound_done, inbound_done_rx) = oneshot::channel();
        let known = HeldWorks::from_hello(&hello.known_works, hello.protocol_version);
        let changes = self.index.subscribe(&cluster).await;
        self.metrics.sessions.inc();
        tokio::spawn(push_works(
            Pusher {
                cluster: cluster.clone(),
                index: self.index.clone(),
                deletion: self.deletion.clone(),
                metrics: self.metrics.clone(),
                heartbeat: self.config.heartbeat_interval,
                outbound,
                seen: HashSet::new(),
                deleting: HashSet::new(),
                issues_certificates: self.certificates.is_some(),
            },
            known,
            changes,
            inbound_done_rx,
            self.stopping.clone(),
        ));
        // The certificate the reader issues on this session, for its lifetime.
        let (issued_tx, issued_rx) = watch::channel(None);
        let reader = Reader {
            cluster: cluster.clone(),
            session_id: session_id.clone(),
            status: self.status.clone(),
            sessions: self.sessions.clone(),
            liveness: self.liveness.clone(),
            metrics: self.metrics.clone(),
            heartbeat: self.config.heartbeat_interval,
            max_report_bytes: self.config.transport.message_caps.report,
            certificates: self.certificates.clone(),
            answers,
            issued: issued_tx,
        };
        let credential = match credential {
            Credential::Token(token) => LiveCredential::Token(token),
            Credential::Certificate(cert) => LiveCredential::Certificate(Box::new(cert)),
        };
        let lifetime = Lifetime {
            auth: self.auth.clone(),
            certificates: self.certificates.clone(),
            credential,
            issued: issued_rx,
            cluster: cluster.clone(),
            max_age: jittered(self.config.max_session_age),
            not_accepted: self.liveness.not_accepted(),
            sessions: self.metrics.sessions.clone(),
        };
        let (end_tx, end_rx) = oneshot::channel::<Status>();
        tokio::spawn(
            SessionEnd {
                lifetime,
                reading: Box::pin(reader.read_reports(inbound)),
                end_tx,
                inbound_done,
                liveness: self.liveness.clone(),
                cluster,
                session_id,
            }
            .watch(),
        );
        Ok(Response::new(Box::pin(Outbound::new(end_rx, outbound_rx))))
    }
}

/// What ends a session: its lifetime running out (the hub's decision) or
/// its reader finishing (the agent's, or a message over its cap).
struct SessionEnd {
    lifetime: Lifetime,
    /// The reader, boxed before the task is spawned: a future holds its
    /// arguments for its whole life, so one moved into the task and boxed
    /// there would be held twice.
    reading: Pin<Box<dyn Future<Output = Option<Status>> + Send>>,
    /// The status the hub ends the agent's stream with.
    end_tx: oneshot::Sender<Status>,
    /// Dropped once the session ends: the pusher stops.
    inbound_done: oneshot::Sender<()>,
    liveness: Arc<ClusterLiveness>,
    cluster: String,
    session_id: String,
}

impl SessionEnd {
    /// Runs the session's reader until the session ends, then tells the
    /// pusher (and the agent, when the hub ended it).
    async fn watch(self) {
        let Self {
            lifetime,
            mut reading,
            end_tx,
            inbound_done,
            liveness,
            cluster,
            session_id,
        } = self;
        // `reading` is held outside the select so that it is dropped only
        // once the end is queued: the stream ends when the pusher does.
        tokio::select! {
            biased;
            end = lifetime.expire() => {
                let reason = end.message().to_string();
                info!(%cluster, %reason, "ending the agent session");
                let _ = end_tx.send(end);
                // Dropping the reader stops the pusher too, so nothing
                // more is delivered or written for this session.
                drop(reading);
                drop(inbound_done);
                if let Err(error) = Box::pin(liveness.disconnected(&cluster, &session_id, &reason, Timestamp::now())).await {
                    warn!(%cluster, %error, "cannot record the agent as disconnected");
                }
            }
            end = &mut reading => {
                // The end the reader decided (a message over its cap)
                // is queued before the pusher learns the reader is done.
                if let Some(end) = end {
                    let _ = end_tx.send(end);
                }
                drop(inbound_done);
            }
        }
    }
}

struct Pusher {
    cluster: String,
    index: Arc<WorkIndex>,
    deletion: WorkDeletion,
    metrics: Arc<HubMetrics>,
    heartbeat: Duration,
    outbound: mpsc::Sender<Queued>,
    /// Works this session has seen in the index: when one of them vanishes
    /// the hub saw it go, so the agent deletes at once instead of evicting.
    seen: HashSet<String>,
    /// Deleted works whose delete was sent; the agent reports `gone`.
    deleting: HashSet<String>,
    /// Whether the Welcome tells the agent it may ask for a certificate.
    issues_certificates: bool,
}

impl Pusher {
    /// Queues `body` for the agent; false when the agent is gone. The
    /// message is boxed before the future is made, so an idle session's
    /// task holds a pointer rather than the largest message there is.
    fn send(&self, body: hub_message::Body) -> impl Future<Output = bool> + Send + '_ {
        let message = Box::new(v1::HubMessage { body: Some(body) });
        async move { self.outbound.send(message).await.is_ok() }
    }

    async fn send_delete(&self, mut delete: v1::WorkDelete) -> bool {
        let span = ferry_telemetry::span(|| {
            let uid = delete
                .work
                .as_ref()
                .map(|w| w.uid.as_str())
                .unwrap_or_default();
            info_span!("send_delete", cluster = %self.cluster, work.uid = %uid, evict = delete.evict)
        });
        delete.trace_context = ferry_telemetry::inject(&span);
        let sent = self
            .send(hub_message::Body::Delete(delete))
            .instrument(span)
            .await;
        if sent {
            self.metrics.deletes_sent.inc();
        }
        sent
    }

    /// Sends what differs between the index and what the agent holds, updating
    /// `held`. Returns false when the agent is gone.
    async fn sync_cluster(&mut self, held: &mut HeldWorks) -> bool {
        let works = self.index.works_of(&self.cluster).await;
        let mut present = HashSet::with_capacity(works.len());
        for work in &works {
            let uid = work.uid().unwrap_or_default();
            let generation = work.metadata.generation.unwrap_or_default();
            present.insert(uid.clone());
            if work.metadata.deletion_timestamp.is_some() {
                if !self.sync_deleted(work, &uid, held).await {
                    return false;
                }
                continue;
            }
            self.seen.insert(uid.clone());
            let labels = labels_digest(work.labels());
            if !held.is_due(&uid, generation, labels) {
                continue;
            }
            let span = ferry_telemetry::span(
                || info_span!("send_work", cluster = %self.cluster, work = %work.name_any(), work.uid = %uid, generation),
            );
            let mut upsert = match work_upsert(work) {
                Ok(upsert) => upsert,
                Err(error) => {
                    warn!(cluster = %self.cluster, work = %work.name_any(), %error, "cannot encode work");
                    continue;
                }
            };
            upsert.trace_context = ferry_telemetry::inject(&span);
            if !self
                .send(hub_message::Body::Upsert(upsert))
                .instrument(span)
                .await
            {
                return false;
            }
            self.metrics.upserts_sent.inc();
            held.sent(uid, generation, labels);
        }
        for uid in held.missing_from(&present) {
            held.remove(&uid);
            // The agent reported it gone, which let the work go.
            if self.deleting.remove(&uid) {
                continue;
            }
            let delete = v1::WorkDelete {
                work: Some(v1::WorkRef {
                    uid: uid.clone(),
                    namespace: self.cluster.clone(),
                    name: String::new(),
                }),
                evict: !self.seen.contains(&uid),
                delete_option: None,
                trace_context: Default::default(),
            };
            let evict = delete.evict;
            if !self.send_delete(delete).await {
                return false;
            }
            if evict {
                self.deletion.events().evicted(&self.cluster, &uid);
            }
        }
        true
    }

    /// A deleted work: the agent that holds it is told once to release it;
    /// one that never got it has nothing to release, so the hub lets the work
    /// go itself. Returns false when the agent is gone.
    async fn sync_deleted(&mut self, work: &ManifestWork, uid: &str, held: &HeldWorks) -> bool {
        if !awaits_release(work) {
            return true;
        }
        if !held.contains(uid) {
            if let Err(error) = self.deletion.release(work).await {
                warn!(cluster = %self.cluster, work = %work.name_any(), %error, "cannot let a deleted work go");
            }
            return true;
        }
        if !self.deleting.insert(uid.to_string()) {
            return true;
        }
        let delete = v1::WorkDelete {
            work: Some(work_ref(work)),
            evict: false,
            delete_option: work.spec.delete_option.as_ref().map(delete_option),
            trace_context: Default::default(),
        };
        self.send_delete(delete).await
    }
}

async fn push_works(
    mut pusher: Pusher,
    mut held: HeldWorks,
    mut changes: watch::Receiver<u64>,
    mut inbound_done: oneshot::Receiver<()>,
    mut stopping: watch::Receiver<bool>,
) {
    pusher.index.wait_ready().await;
    let welcome = v1::Welcome {
        protocol_version: PROTOCOL_VERSION,
        hub_version: env!("CARGO_PKG_VERSION").into(),
        heartbeat_interval_seconds: u32::try_from(pusher.heartbeat.as_secs()).unwrap_or(u32::MAX),
        issues_client_certificates: pusher.issues_certificates,
    };
    let mut alive = pusher.send(hub_message::Body::Welcome(welcome)).await;
    changes.mark_changed();
    let mut heartbeat = tokio::time::interval(pusher.heartbeat);
    let mut synced = false;
    while alive {
        tokio::select! {
            changed = changes.changed() => {
                // Boxed: a sync (which may call the API server) is rare
                // next to idle time, so its state is allocated only while
                // it runs instead of being part of every idle session.
                alive = changed.is_ok() && Box::pin(pusher.sync_cluster(&mut held)).await;
                // After the first round the agent knows every work the hub
                // has for it; a record of any other is an orphan.
                if alive && !synced {
                    synced = true;
                    alive = pusher.send(hub_message::Body::Synced(v1::Synced {})).await;
                }
            }
            _ = heartbeat.tick() => {
                alive = pusher.send(hub_message::Body::Heartbeat(v1::Heartbeat::now())).await;
            }
            _ = &mut inbound_done => alive = false,
            // Ending the stream lets a graceful shutdown finish at once; the
            // agent reconnects to another replica or to this one restarted.
            _ = async { stopping.wait_for(|s| *s).await.map(|_| ()) } => alive = false,
        }
    }
    pusher.metrics.sessions.dec();
    info!(cluster = %pusher.cluster, "agent session ended");
}

/// Reads one agent's messages, writes its reports, and keeps its
/// ManagedCluster liveness.
struct Reader {
    cluster: String,
    session_id: String,
    status: Arc<StatusWriter>,
    sessions: Arc<SessionOrder>,
    liveness: Arc<ClusterLiveness>,
    metrics: Arc<HubMetrics>,
    heartbeat: Duration,
    /// Largest message after the Hello.
    max_report_bytes: usize,
    /// Answers certificate requests; None when the hub issues none.
    certificates: Option<Arc<AgentCertificates>>,
    /// Where the answer to a certificate request goes, while the pusher
    /// still holds the stream open.
    answers: mpsc::WeakSender<Queued>,
    /// The certificate issued on this session, for its lifetime.
    issued: watch::Sender<Option<ClientCertificate>>,
}

impl Reader {
    /// Agents heartbeat every interval; three missed in a row end the session.
    fn silence_limit(&self) -> Duration {
        self.heartbeat * 3
    }

    /// Reads until the session ends; returns the status to end the
    /// agent's stream with when the hub ends it for a message over its cap
    /// (counted in `ferry_hub_agent_messages_too_large_total`).
    async fn read_reports(self, mut inbound: Streaming<v1::AgentMessage>) -> Option<Status> {
        let cluster = self.cluster.clone();
        // The session's liveness is vouched for by this replica's Lease,
        // not written per heartbeat; the time is kept for the disconnect.
        let mut last_heard = Timestamp::now();
        // Retries of this session's reports end with it; the agent's next
        // session sends every work's latest status again.
        let mut reports = SessionReports::new(
            &cluster,
            self.status.clone(),
            self.metrics.clone(),
            &self.sessions,
        );
        let mut brake = BrakeReports::default();
        let mut certificate_requests = 0;
        let mut end = None;
        let mut too_large = |size: Option<usize>| {
            self.metrics.message_too_large("report");
            let size = size.map(|n| format!(" of {n} bytes")).unwrap_or_default();
            let message = format!(
                "a message{size} is over the hub's limit of {} bytes (--max-work-bytes plus a margin)",
                self.max_report_bytes
            );
            warn!(%cluster, limit = self.max_report_bytes, "ending the agent session: a message is over the limit");
            end = Some(Status::out_of_range(message.clone()));
            message
        };
        let reason = loop {
            let received = tokio::select! {
                received = tokio::time::timeout(self.silence_limit(), inbound.message()) => received,
                () = reports.pushed_out() => break format!(
                    "{MAX_LIVE_SESSIONS} newer sessions of this cluster are live on this replica"
                ),
            };
            let message = match received {
                Ok(Ok(Some(message))) => message,
                Ok(Ok(None)) => break "the agent closed the stream".to_string(),
                // The transport's cap: the larger of Hello and report.
                Ok(Err(error)) if error.code() == tonic::Code::OutOfRange => break too_large(None),
                Ok(Err(error)) => {
                    debug!(%cluster, %error, "agent stream ended");
                    break format!("the stream broke: {}", error.message());
                }
                Err(_) => {
                    break format!("no heartbeat for {} s", self.silence_limit().as_secs());
                }
            };
            let size = message.encoded_len();
            let message = match message.body {
                // One work's report over the cap costs that work its
                // details, never the session every other work of the
                // cluster reports through (an agent that bounds its own
                // reports never sends one).
                Some(agent_message::Body::Status(mut report)) if size > self.max_report_bytes => {
                    self.metrics.message_too_large("report");
                    let trimmed = bound_report(&mut report, MAX_REPORT_BYTES);
                    warn!(%cluster, size, limit = self.max_report_bytes, ?trimmed,
                        "a work's report is over the limit; its details are left out and the session goes on");
                    AgentMessage {
                        body: Some(agent_message::Body::Status(report)),
                    }
                }
                _ if size > self.max_report_bytes => break too_large(Some(size)),
                body => AgentMessage { body },
            };
            last_heard = Timestamp::now();
            match message.body {
                // Boxed: reports are rare next to idle time.
                Some(agent_message::Body::Status(report)) => {
                    Box::pin(reports.deliver(report)).await
                }
                Some(agent_message::Body::Heartbeat(beat)) => brake.heard(
                    beat.deletion_brake.as_ref(),
                    &self.liveness,
                    &cluster,
                    &self.session_id,
                ),
                Some(agent_message::Body::CertificateRequest(request)) => {
                    certificate_requests += 1;
                    let (answer, issued) = match &self.certificates {
                        Some(certificates) => {
                            Box::pin(certificates.answer(
                                &cluster,
                                &request.csr_der,
                                certificate_requests,
                                unix_now(),
                            ))
                            .await
                        }
                        None => (
                            v1::CertificateIssued {
                                refused: "this hub does not issue client certificates".into(),
                                ..Default::default()
                            },
                            None,
                        ),
                    };
                    if let Some(issued) = issued {
                        self.metrics.certificates_issued.inc();
                        // A token session goes on as a certificate session.
                        self.issued.send_replace(Some(issued));
                    }
                    let answer = Box::new(v1::HubMessage {
                        body: Some(hub_message::Body::Certificate(answer)),
                    });
                    let sent = match self.answers.upgrade() {
                        Some(outbound) => outbound.send(answer).await.is_ok(),
                        None => false,
                    };
                    if !sent {
                        break "the session ended".to_string();
                    }
                }
                Some(agent_message::Body::Hello(_)) | None => {
                    warn!(%cluster, "unexpected message after Hello; closing the session");
                    break "the agent sent a second Hello or an empty message".to_string();
                }
            }
        };
        info!(%cluster, %reason, "agent disconnected");
        if let Err(error) =
            Box::pin(
                self.liveness
                    .disconnected(&cluster, &self.session_id, &reason, last_heard),
            )
            .await
        {
            warn!(%cluster, %error, "cannot record the agent as disconnected");
        }
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future the fn item `$f` of arguments `$arg...`
    /// returns, without calling it (so without the clients, stores and
    /// streams a session needs).
    macro_rules! output_size {
        ($f:expr, $($arg:ident),+) => {{
            fn size<F, $($arg,)+ R>(_: &F) -> usize
            where
                F: Fn($($arg),+) -> R,
            {
                std::mem::size_of::<R>()
            }
            size(&$f)
        }};
    }

    /// Every connected agent holds these three futures on the hub for as
    /// long as it is connected, mostly idle. An API call awaited inline (a
    /// kube request's future is several KiB) or a large message held across
    /// an await would make each of them that much larger for every agent:
    /// such work is boxed while it runs. Before it was, the two tasks were
    /// 3.5 and 6.0 KiB and the reader 2.5 KiB (debug build).
    #[test]
    fn an_idle_session_holds_small_futures() {
        const BOUND: usize = 2048;
        let sizes = [
            ("push_works", output_size!(push_works, A, B, C, D, E)),
            ("SessionEnd::watch", output_size!(SessionEnd::watch, A)),
            (
                "Reader::read_reports",
                output_size!(Reader::read_reports, A, B),
            ),
        ];
        for (name, size) in sizes {
            eprintln!("{name}: {size} bytes");
            assert!(
                size <= BOUND,
                "{name}'s future is {size} bytes (bound {BOUND})"
            );
        }
    }

    #[test]
    fn jitter_shortens_by_at_most_a_tenth() {
        let max = Duration::from_secs(3600);
        for _ in 0..1000 {
            let age = jittered(max);
            assert!(age <= max && age >= max.mul_f64(0.9), "{age:?}");
        }
    }
}
