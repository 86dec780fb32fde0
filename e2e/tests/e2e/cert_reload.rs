//! The hub's serving certificates follow their files (issue 10, item 5): when
//! cert-manager rotates the Secret and the kubelet rewrites the mounted
//! files, new TLS connections to the agent port and to the webhook port get
//! the new certificate, sessions already open keep working, and a file that
//! does not parse keeps the last good certificate serving.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::harness::fleet::replica_lease;
use ferry_e2e::harness::hub_metrics::{scrape, wait_metric_above};
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work};
use ferry_hub::admission::target::WebhookTarget;
use ferry_hub::admission::webhook::{AdmissionOptions, DEFAULT_MAX_WORK_BYTES, FailurePolicy};
use ferry_hub::certs::reload::CertSource;
use ferry_hub::certs::tls::ServingCert;
use ferry_hub::crds::install_crds;
use ferry_hub::grpc::config::GrpcTls;
use ferry_hub::grpc::config::SessionConfig;
use ferry_hub::hub::{HubListeners, run_hub};
use ferry_hub::join::hub_side::join_cluster;
use ferry_proto::PROTOCOL_VERSION;
use ferry_proto::v1::work_distributor_client::WorkDistributorClient;
use ferry_proto::v1::{self, agent_message, hub_message};
use kube::api::{Api, PostParams};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

/// How often the hub checks its certificate files in this test.
const RELOAD: Duration = Duration::from_millis(200);
/// Longest the test waits for the hub to notice new files.
const NOTICE: Duration = Duration::from_secs(30);
/// The reload counter in the hub's exposition.
const RELOADS: &str = "ferry_hub_certificate_reloads_total";

/// A CA that signs leaves for 127.0.0.1, standing in for cert-manager's
/// issuer: the CA stays, the leaves rotate.
struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

/// A leaf certificate and its key, as PEM.
struct Leaf {
    chain: String,
    key: String,
}

impl TestCa {
    fn new() -> Self {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, "cert-reload test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).expect("CA");
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    fn leaf(&self, name: &str) -> Leaf {
        let key = KeyPair::generate().expect("leaf key");
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.signed_by(&key, &self.issuer).expect("leaf");
        Leaf {
            chain: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

fn write(dir: &Path, name: &str, leaf: &Leaf) {
    // The kubelet swaps a Secret volume's files by renaming a directory;
    // a plain write is the harsher case: a reader may see one file new
    // and the other old.
    std::fs::write(dir.join(format!("{name}.crt")), &leaf.chain).expect("write cert");
    std::fs::write(dir.join(format!("{name}.key")), &leaf.key).expect("write key");
}

fn leaf_der(leaf: &Leaf) -> Vec<u8> {
    CertificateDer::from_pem_slice(leaf.chain.as_bytes())
        .expect("leaf PEM")
        .to_vec()
}

/// The leaf certificate a new TLS connection to `addr` is served, offering
/// `alpn`.
async fn served_leaf(ca_pem: &str, addr: SocketAddr, alpn: &[u8]) -> Vec<u8> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.expect("CA PEM")).expect("CA");
    }
    let mut config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let tcp = TcpStream::connect(addr).await.expect("TCP connect");
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::IpAddress(addr.ip().into()), tcp)
        .await
        .expect("TLS handshake");
    let (_, session) = tls.get_ref();
    assert_eq!(session.alpn_protocol(), Some(alpn), "ALPN negotiated");
    session.peer_certificates().expect("a certificate")[0].to_vec()
}

/// Waits until new connections to `addr` are served `wanted`.
async fn wait_served(ca_pem: &str, addr: SocketAddr, alpn: &[u8], wanted: &[u8], what: &str) {
    let deadline = tokio::time::Instant::now() + NOTICE;
    while served_leaf(ca_pem, addr, alpn).await != wanted {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: still the old certificate after {NOTICE:?}"
        );
        tokio::time::sleep(RELOAD / 2).await;
    }
}

/// The reload counter for `listener` and `outcome` in an exposition.
fn reloads(exposition: &str, listener: &str, outcome: &str) -> f64 {
    let series = format!("{RELOADS}{{listener=\"{listener}\",outcome=\"{outcome}\"}}");
    exposition
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The failed reloads of `listener` the hub counted so far.
async fn failed_reloads(probes: SocketAddr, listener: &str) -> f64 {
    reloads(&scrape(probes).await.expect("scrape"), listener, "failed")
}

/// Waits until the hub counted more failed reloads of `listener` than
/// `before` (read before the bad file was written: the poller may notice it
/// before this function first looks).
async fn wait_failed_reload(probes: SocketAddr, listener: &str, before: f64) {
    let deadline = tokio::time::Instant::now() + NOTICE;
    while reloads(&scrape(probes).await.expect("scrape"), listener, "failed") <= before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{listener}: the bad file was not noticed"
        );
        tokio::time::sleep(RELOAD / 2).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_certificate_files_are_served_to_new_connections_without_a_restart() {
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let client = hub.client().await.expect("client");
    install_crds(&client).await.expect("CRDs");
    let token = join_cluster(&client, "cluster-a", 3600)
        .await
        .expect("join");

    let dir = tempfile::tempdir().expect("dir");
    let ca = TestCa::new();
    std::fs::write(dir.path().join("ca.crt"), &ca.pem).expect("write CA");
    let (grpc_a, webhook_a) = (ca.leaf("grpc A"), ca.leaf("webhook A"));
    write(dir.path(), "grpc", &grpc_a);
    write(dir.path(), "webhook", &webhook_a);

    let grpc = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let grpc_addr = grpc.local_addr().expect("addr");
    let probes = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let probes_addr = probes.local_addr().expect("addr");
    let webhook = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let webhook_addr = webhook.local_addr().expect("addr");
    let mut webhook_cert = ServingCert::load(
        &dir.path().join("webhook.crt"),
        &dir.path().join("webhook.key"),
        Some(&dir.path().join("ca.crt")),
    )
    .expect("webhook files");
    webhook_cert.reload_interval = RELOAD;
    let listeners = HubListeners {
        grpc,
        grpc_tls: Some(GrpcTls {
            reload_interval: RELOAD,
            ..GrpcTls::new(CertSource::Files {
                cert: dir.path().join("grpc.crt"),
                key: dir.path().join("grpc.key"),
            })
        }),
        probes: Some(probes),
        admission: Some(AdmissionOptions {
            listener: webhook,
            target: WebhookTarget::Url(format!("https://{webhook_addr}")),
            cert: webhook_cert,
            max_work_bytes: DEFAULT_MAX_WORK_BYTES,
            failure_policy: FailurePolicy::default(),
        }),
        leader_election: None,
        cluster_profiles: None,
        api_requests: None,
        replica_lease: replica_lease(0, Duration::from_secs(1)),
        unreachable_grace: ferry_e2e::harness::fleet::UNREACHABLE_GRACE,
        controller_sweep: ferry_hub::hub::DEFAULT_CONTROLLER_SWEEP,
        watch_policies: false,
        health_pool: Default::default(),
    };
    let session = SessionConfig {
        heartbeat_interval: Duration::from_secs(1),
        ..SessionConfig::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let hub_task = tokio::spawn(run_hub(client.clone(), listeners, session, async {
        let _ = stopped.await;
    }));

    // An agent session on certificate A.
    let channel = Endpoint::from_shared(format!("https://{grpc_addr}"))
        .expect("url")
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&ca.pem)))
        .expect("tls")
        .connect()
        .await
        .expect("connect on A");
    let bearer: MetadataValue<_> = format!("Bearer {token}").parse().expect("ascii");
    let mut agent =
        WorkDistributorClient::with_interceptor(channel, move |mut r: tonic::Request<()>| {
            r.metadata_mut().insert("authorization", bearer.clone());
            Ok(r)
        });
    let (outbound, rx) = tokio::sync::mpsc::channel(4);
    outbound
        .send(v1::AgentMessage {
            body: Some(agent_message::Body::Hello(v1::Hello {
                protocol_version: PROTOCOL_VERSION,
                cluster_name: "cluster-a".into(),
                agent_version: "cert-reload".into(),
                known_works: vec![],
                ..Default::default()
            })),
        })
        .await
        .expect("queue");
    let mut inbound = agent
        .sync(ReceiverStream::new(rx))
        .await
        .expect("session on A")
        .into_inner();
    // Heartbeats at twice the hub's rate, as a real agent sends them, so the
    // hub never ends this session for silence while the test runs.
    let beating = outbound.clone();
    let heartbeats = tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_millis(500));
        loop {
            ticker.tick().await;
            let beat = v1::AgentMessage {
                body: Some(agent_message::Body::Heartbeat(v1::Heartbeat::now())),
            };
            if beating.send(beat).await.is_err() {
                return;
            }
        }
    });
    assert_eq!(
        served_leaf(&ca.pem, grpc_addr, b"h2").await,
        leaf_der(&grpc_a),
        "A is served at first"
    );
    assert_eq!(
        served_leaf(&ca.pem, webhook_addr, b"http/1.1").await,
        leaf_der(&webhook_a)
    );

    // Rotation: new leaves under the same CA.
    let (grpc_b, webhook_b) = (ca.leaf("grpc B"), ca.leaf("webhook B"));
    let rotated = std::time::Instant::now();
    write(dir.path(), "grpc", &grpc_b);
    write(dir.path(), "webhook", &webhook_b);
    wait_served(&ca.pem, grpc_addr, b"h2", &leaf_der(&grpc_b), "agent port").await;
    println!(
        "agent port served the rotated certificate {:?} after the files changed (polling every {RELOAD:?})",
        rotated.elapsed()
    );
    wait_served(
        &ca.pem,
        webhook_addr,
        b"http/1.1",
        &leaf_der(&webhook_b),
        "webhook port",
    )
    .await;
    wait_metric_above(probes_addr, RELOADS, 0.0, NOTICE)
        .await
        .expect("reloads counted");

    // The session opened on A keeps working: a new work reaches it.
    let works: Api<ManifestWork> = Api::namespaced(client.clone(), "cluster-a");
    works
        .create(
            &PostParams::default(),
            &manifest_work(
                "cluster-a",
                "after-rotation",
                vec![config_map("default", "c", serde_json::json!({"x": "1"}))],
            ),
        )
        .await
        .expect("create work");
    let upsert = tokio::time::timeout(NOTICE, async {
        loop {
            let message = inbound
                .message()
                .await
                .expect("the old session is alive")
                .expect("not ended");
            if let Some(hub_message::Body::Upsert(upsert)) = message.body {
                return upsert;
            }
        }
    })
    .await
    .expect("the work reaches the session opened on A");
    assert_eq!(
        upsert.work.map(|w| w.name).as_deref(),
        Some("after-rotation")
    );

    // A half-written or garbage file keeps B serving.
    let before = failed_reloads(probes_addr, "grpc").await;
    std::fs::write(
        dir.path().join("grpc.crt"),
        "-----BEGIN CERTIFICATE-----\ngarbage",
    )
    .expect("write");
    wait_failed_reload(probes_addr, "grpc", before).await;
    assert_eq!(
        served_leaf(&ca.pem, grpc_addr, b"h2").await,
        leaf_der(&grpc_b),
        "B still served on the agent port"
    );
    // A key that does not match the certificate: also refused.
    let before = failed_reloads(probes_addr, "webhook").await;
    std::fs::write(dir.path().join("webhook.key"), &webhook_a.key).expect("write");
    wait_failed_reload(probes_addr, "webhook", before).await;
    assert_eq!(
        served_leaf(&ca.pem, webhook_addr, b"http/1.1").await,
        leaf_der(&webhook_b),
        "B still served on the webhook port"
    );

    heartbeats.abort();
    drop(outbound);
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), hub_task).await;
    hub.stop().await;
}
