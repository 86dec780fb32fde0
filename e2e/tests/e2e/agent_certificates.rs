//! Agents move from their ServiceAccount token to a client certificate the
//! hub issues (issue 51): its first session, opened with the token, goes on
//! as a certificate session once the certificate is issued, and every later
//! one dials with the certificate, which the hub checks with no call to its API server (no
//! TokenReview, even after a hub restart), and renews before it expires.
//! Revocation needs no call either: denying, deleting or re-joining the
//! cluster, deleting its agent ServiceAccount or rotating its identity ends
//! a live certificate session within seconds and refuses the next connect;
//! a certificate never serves another cluster, and one from another CA is
//! refused.

use std::time::{Duration, Instant};

use ferry_api::contract::AGENT_SERVICE_ACCOUNT;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_e2e::harness::agent_client::{AgentStream, open_agent_stream};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::{hub_metric, wait_metric_above};
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work, wait_applied};
use ferry_hub::agent_certs::authority::AgentCa;
use ferry_hub::agent_certs::subject::AgentSubject;
use ferry_hub::join::hub_side::{join_cluster, revoke_certificates};
use ferry_proto::v1::{self, agent_message, hub_message};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, Patch, PatchParams};
use rcgen::{CertificateParams, KeyPair};
use serde_json::json;
use tonic::Code;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

const CERT_SESSIONS: &str = "ferry_hub_agent_sessions_opened_total{credential=\"certificate\"}";
const TOKEN_SESSIONS: &str = "ferry_hub_agent_sessions_opened_total{credential=\"token\"}";
const TOKEN_REVIEWS: &str = "ferry_hub_token_review_duration_seconds_count";
const ISSUED: &str = "ferry_hub_agent_certificates_issued_total";
/// Long enough for a loaded machine; revocation takes a watch event.
const WAIT: Duration = Duration::from_secs(60);

/// A channel to the hub trusting its CA, presenting `identity` (PEM
/// certificate and key) if given.
async fn channel(fleet: &Fleet, identity: Option<&(String, String)>) -> Channel {
    let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&fleet.hub_ca_pem));
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    Endpoint::from_shared(fleet.hub_url.clone())
        .expect("url")
        .tls_config(tls)
        .expect("tls")
        .connect()
        .await
        .expect("connects")
}

/// A session the hub accepted, heartbeating every second so only the hub
/// can end it.
struct Session {
    inbound: tonic::Streaming<v1::HubMessage>,
    outbound: tokio::sync::mpsc::Sender<v1::AgentMessage>,
    heartbeats: tokio::task::JoinHandle<()>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.heartbeats.abort();
    }
}

impl Session {
    /// The next message of the hub, skipping upserts, heartbeats and the like.
    async fn next_certificate(&mut self) -> v1::CertificateIssued {
        loop {
            let message = self
                .inbound
                .message()
                .await
                .expect("the session goes on")
                .expect("a message");
            if let Some(hub_message::Body::Certificate(issued)) = message.body {
                return issued;
            }
        }
    }

    /// Waits until the hub ends the session; its status and how long it took.
    async fn ended(&mut self) -> (tonic::Status, Duration) {
        let started = Instant::now();
        let status = tokio::time::timeout(WAIT, async {
            loop {
                match self.inbound.message().await {
                    Ok(Some(_)) => continue,
                    Ok(None) => return tonic::Status::ok("closed quietly"),
                    Err(status) => return status,
                }
            }
        })
        .await
        .expect("the hub ends the session");
        (status, started.elapsed())
    }
}

/// Opens a session for `cluster` over `channel` with `token` (if any).
async fn open(
    channel: Channel,
    token: Option<&str>,
    cluster: &str,
) -> Result<Session, tonic::Status> {
    let AgentStream {
        mut inbound,
        outbound: tx,
    } = open_agent_stream(channel, token, cluster).await?;
    let first = inbound.message().await?.and_then(|m| m.body);
    let Some(hub_message::Body::Welcome(welcome)) = first else {
        return Err(tonic::Status::internal(format!(
            "no Welcome first: {first:?}"
        )));
    };
    assert!(
        welcome.issues_client_certificates,
        "the hub says it issues certificates"
    );
    let beats = tx.clone();
    let heartbeats = tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(1));
        loop {
            ticker.tick().await;
            let beat = v1::AgentMessage {
                body: Some(agent_message::Body::Heartbeat(v1::Heartbeat::now())),
            };
            if beats.send(beat).await.is_err() {
                return;
            }
        }
    });
    Ok(Session {
        inbound,
        outbound: tx,
        heartbeats,
    })
}

/// A certificate for `cluster`, asked for on a session opened with `token`:
/// the certificate and the key (PEM) the test made for it.
async fn certificate(fleet: &Fleet, cluster: &str, token: &str) -> (String, String) {
    let mut session = open(channel(fleet, None).await, Some(token), cluster)
        .await
        .expect("the token opens a session");
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::default();
    // What the request asks for is ignored: the hub names the session's cluster.
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "some-other-cluster");
    let csr = params.serialize_request(&key).expect("CSR");
    session
        .outbound
        .send(v1::AgentMessage {
            body: Some(agent_message::Body::CertificateRequest(
                v1::CertificateRequest {
                    csr_der: csr.der().to_vec(),
                },
            )),
        })
        .await
        .expect("send");
    let issued = session.next_certificate().await;
    assert_eq!(issued.refused, "", "the hub issues a certificate");
    (issued.certificate_pem, key.serialize_pem())
}

/// Opens a session with `identity` and no token.
async fn open_with(
    fleet: &Fleet,
    identity: &(String, String),
    cluster: &str,
) -> Result<Session, tonic::Status> {
    open(channel(fleet, Some(identity)).await, None, cluster).await
}

/// Tries `attempt` every 200 ms until it yields something, for up to [`WAIT`]:
/// the signal is the hub's own answer once its watch caught up.
async fn retry<T, F: Future<Output = Option<T>>>(attempt: impl Fn() -> F) -> Option<T> {
    tokio::time::timeout(WAIT, async {
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        loop {
            tick.tick().await;
            if let Some(found) = attempt().await {
                return found;
            }
        }
    })
    .await
    .ok()
}

async fn set_accepted(clusters: &Api<ManagedCluster>, name: &str, accepted: bool) {
    clusters
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"hubAcceptsClient": accepted}})),
        )
        .await
        .expect("patch the ManagedCluster");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_dials_with_its_certificate_after_one_token_session_and_across_a_hub_restart() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let probes = fleet.hub_probes_addr;
    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "first",
            vec![config_map("default", "first", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "first").await.expect("applied");
    wait_metric_above(probes, ISSUED, 0.0, WAIT)
        .await
        .expect("the agent gets a certificate on its first session");
    assert_eq!(hub_metric(probes, ISSUED).await.expect("scrape"), 1.0);
    assert_eq!(
        hub_metric(probes, TOKEN_SESSIONS).await.expect("scrape"),
        1.0
    );

    // A new hub knows nothing of the agent but its CA: the agent is served
    // on its certificate without a single TokenReview.
    fleet.stop_hub().await;
    fleet.start_hub().await.expect("hub starts again");
    wait_metric_above(probes, CERT_SESSIONS, 0.0, WAIT)
        .await
        .expect("the agent reconnects with its certificate");
    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "second",
            vec![config_map("default", "second", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "second")
        .await
        .expect("applied on the certificate session");
    assert_eq!(
        hub_metric(probes, TOKEN_REVIEWS).await.expect("scrape"),
        0.0,
        "no TokenReview"
    );
    assert_eq!(
        hub_metric(probes, TOKEN_SESSIONS).await.expect("scrape"),
        0.0
    );

    // Rotating the agent's identity revokes the certificate: the agent falls
    // back to its token once, gets a new certificate, and goes on.
    revoke_certificates(&fleet.hub_client, "cluster-a")
        .await
        .expect("rotate");
    wait_metric_above(probes, TOKEN_SESSIONS, 0.0, WAIT)
        .await
        .expect("the agent falls back to its token");
    wait_metric_above(probes, ISSUED, 0.0, WAIT)
        .await
        .expect("and gets a new certificate");
    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "third",
            vec![config_map("default", "third", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "third")
        .await
        .expect("applied after the rotation");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_stands_only_while_its_cluster_and_agent_account_do() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    let token = join_cluster(&hub, "cert-a", 3600).await.expect("join");
    join_cluster(&hub, "cert-b", 3600).await.expect("join");
    let identity = certificate(&fleet, "cert-a", &token).await;

    // No token needed; never another cluster.
    let mut session = open_with(&fleet, &identity, "cert-a")
        .await
        .expect("the certificate alone opens a session");
    assert_eq!(
        open_with(&fleet, &identity, "cert-b")
            .await
            .err()
            .map(|s| s.code()),
        Some(Code::PermissionDenied),
        "cert-a's certificate cannot serve cert-b"
    );
    let stranger = AgentCa::generate(0).expect("another CA");
    let stranger = AgentCa::from_pem(&stranger.0, &stranger.1).expect("CA");
    let forged_key = KeyPair::generate().expect("key");
    let forged = stranger
        .issue(
            CertificateParams::default()
                .serialize_request(&forged_key)
                .expect("CSR")
                .der(),
            &AgentSubject {
                cluster: "cert-a".into(),
                cluster_uid: "any".into(),
                account_uid: "any".into(),
            },
            k8s_openapi::jiff::Timestamp::now().as_second(),
            Duration::from_secs(3600),
        )
        .expect("forged");
    assert_eq!(
        open_with(&fleet, &(forged.pem, forged_key.serialize_pem()), "cert-a")
            .await
            .err()
            .map(|s| s.code()),
        Some(Code::Unauthenticated),
        "a certificate of another CA is refused"
    );

    // Denied: the live session ends, a connect is refused; accepted again,
    // the same certificate serves again.
    set_accepted(&clusters, "cert-a", false).await;
    let (status, took) = session.ended().await;
    println!(
        "denied: session ended in {:.2} s: {status:?}",
        took.as_secs_f64()
    );
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert_eq!(
        open_with(&fleet, &identity, "cert-a")
            .await
            .err()
            .map(|s| s.code()),
        Some(Code::PermissionDenied)
    );
    set_accepted(&clusters, "cert-a", true).await;
    // Served again once the replica's watch delivers the change.
    let mut session = retry(|| async { open_with(&fleet, &identity, "cert-a").await.ok() })
        .await
        .expect("accepted again, the certificate serves");

    // Rotated: ends, and stays refused.
    revoke_certificates(&hub, "cert-a").await.expect("rotate");
    let (status, took) = session.ended().await;
    println!(
        "rotated: session ended in {:.2} s: {status:?}",
        took.as_secs_f64()
    );
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    assert_eq!(
        open_with(&fleet, &identity, "cert-a")
            .await
            .err()
            .map(|s| s.code()),
        Some(Code::Unauthenticated)
    );

    // The agent account deleted: a certificate issued after the rotation
    // ends with it.
    let identity = certificate(&fleet, "cert-a", &token).await;
    let mut session = open_with(&fleet, &identity, "cert-a")
        .await
        .expect("a new certificate serves");
    let accounts: Api<ServiceAccount> = Api::namespaced(hub.clone(), "cert-a");
    accounts
        .delete(AGENT_SERVICE_ACCOUNT, &Default::default())
        .await
        .expect("delete the account");
    let (status, took) = session.ended().await;
    println!(
        "account deleted: session ended in {:.2} s: {status:?}",
        took.as_secs_f64()
    );
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");

    // Deleted and joined again: the old certificate is not the new cluster's.
    let token_b = join_cluster(&hub, "cert-b", 3600).await.expect("token");
    let identity_b = certificate(&fleet, "cert-b", &token_b).await;
    let mut session = open_with(&fleet, &identity_b, "cert-b")
        .await
        .expect("serves");
    clusters
        .delete("cert-b", &Default::default())
        .await
        .expect("delete the cluster");
    let (status, took) = session.ended().await;
    println!(
        "cluster deleted: session ended in {:.2} s: {status:?}",
        took.as_secs_f64()
    );
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    ferry_e2e::helpers::wait::wait_deleted(&clusters, "cert-b", "cert-b gone", WAIT)
        .await
        .expect("gone");
    join_cluster(&hub, "cert-b", 3600)
        .await
        .expect("joined again");
    // Refused as gone until the new ManagedCluster reaches the replica's
    // cache, then as another cluster of the same name.
    let refused = retry(|| async {
        let refused = open_with(&fleet, &identity_b, "cert-b").await.err()?;
        refused
            .message()
            .contains("joined again")
            .then_some(refused)
    })
    .await
    .expect("refused as re-joined");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_renews_its_certificate_before_it_expires_without_its_token() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    // Renewal at two thirds (60 s); sessions of 20 s, so one starts past it.
    options.agent_certificates = Some(Duration::from_secs(90));
    options.max_session_age = Duration::from_secs(20);
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let probes = fleet.hub_probes_addr;
    wait_metric_above(probes, ISSUED, 1.0, Duration::from_secs(150))
        .await
        .expect("the agent renews its certificate");
    assert_eq!(
        hub_metric(probes, TOKEN_SESSIONS).await.expect("scrape"),
        1.0,
        "the token served once, for the first certificate"
    );
    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "renewed",
            vec![config_map("default", "renewed", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "renewed").await.expect("applied");
    fleet.stop().await;
}
