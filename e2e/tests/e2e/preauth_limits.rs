//! What a peer without a good token can make the hub hold: streams without a
//! token or with junk tokens and 10 MiB Hellos, 500 streams on one connection,
//! and connections that never finish their TLS handshake are each refused or
//! closed, the hub's memory stays bounded (printed: the hub runs in this
//! process), and the real agent beside them keeps being served (issue 9,
//! item 2).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work, wait_applied};
use ferry_proto::PROTOCOL_VERSION;
use ferry_proto::v1::{self, agent_message};
use prost::Message;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

const SYNC_PATH: &str = "/ferry.v1.WorkDistributor/Sync";

/// The most any one flood may add to this process's memory.
const FLOOD_GROWTH_BOUND_MIB: f64 = 64.0;

/// The longest the hub may leave a connection that never finishes its TLS
/// handshake open (its handshake timeout is 5 s by default).
const STALLED_HANDSHAKE_BOUND: Duration = Duration::from_secs(30);

/// This process's resident and peak resident memory, in MiB (the test runs
/// alone in its process: see `own_process`).
fn memory() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map(|kib| kib / 1024.0)
            .expect("a memory field")
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Samples the resident memory every 50 ms while a flood runs; `stop`
/// returns the highest seen, in MiB.
struct RssSampler {
    running: Arc<AtomicBool>,
    highest_kib: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    fn start() -> Self {
        let running = Arc::new(AtomicBool::new(true));
        let highest_kib = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn({
            let running = running.clone();
            let highest_kib = highest_kib.clone();
            async move {
                while running.load(Ordering::Relaxed) {
                    let (rss, _) = memory();
                    highest_kib.fetch_max((rss * 1024.0) as u64, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        });
        Self {
            running,
            highest_kib,
            task,
        }
    }

    async fn stop(self) -> f64 {
        self.running.store(false, Ordering::Relaxed);
        let _ = self.task.await;
        self.highest_kib.load(Ordering::Relaxed) as f64 / 1024.0
    }
}

/// Prints the memory a flood took and asserts it stayed under
/// [`FLOOD_GROWTH_BOUND_MIB`] over the baseline: generous for a loaded
/// machine (the floods measured +3 to +5 MiB), while a hub that buffered the
/// 200 Hellos of 10 MiB would grow by gigabytes.
fn report(label: &str, baseline: f64, highest: f64) {
    assert!(
        highest - baseline < FLOOD_GROWTH_BOUND_MIB,
        "{label}: the process grew {:.1} MiB over its baseline",
        highest - baseline
    );
    let (rss, peak) = memory();
    println!(
        "RSS {label}: highest during {highest:.1} MiB (+{:.1} over baseline {baseline:.1}), now {rss:.1} MiB, process peak {peak:.1} MiB",
        highest - baseline
    );
}

fn tls_connector(ca_pem: &str) -> TlsConnector {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.expect("CA PEM")).expect("CA certificate");
    }
    let mut config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    TlsConnector::from(Arc::new(config))
}

async fn tls_connect(connector: &TlsConnector, addr: std::net::SocketAddr) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.expect("TCP connect");
    connector
        .connect(ServerName::IpAddress(addr.ip().into()), tcp)
        .await
        .expect("TLS handshake")
}

/// A gRPC-framed Hello of about `bytes` bytes.
fn big_hello(bytes: usize) -> Bytes {
    let hello = v1::AgentMessage {
        body: Some(agent_message::Body::Hello(v1::Hello {
            protocol_version: PROTOCOL_VERSION,
            cluster_name: "cluster-a".into(),
            agent_version: "x".repeat(bytes),
            known_works: vec![],
            ..Default::default()
        })),
    };
    let message = hello.encode_to_vec();
    let mut frame = Vec::with_capacity(message.len() + 5);
    frame.push(0);
    frame.extend_from_slice(&u32::try_from(message.len()).expect("len").to_be_bytes());
    frame.extend_from_slice(&message);
    Bytes::from(frame)
}

/// Opens one stream with `token` whose body is `hello` (shared, not copied)
/// and returns the grpc-status the hub answers with, or how the stream ended
/// without one.
async fn refused_stream(
    sender: h2::client::SendRequest<Bytes>,
    authority: &str,
    token: Option<String>,
    hello: Bytes,
) -> String {
    let mut request = http::Request::post(format!("https://{authority}{SYNC_PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let request = request.body(()).expect("request");
    let mut sender = match sender.ready().await {
        Ok(sender) => sender,
        Err(e) => return format!("connection closed: {e}"),
    };
    let (response, mut body) = match sender.send_request(request, false) {
        Ok(sent) => sent,
        Err(e) => return format!("stream refused: {e}"),
    };
    // The hub answers before it reads any of this; what it has not read
    // stays with us, held back by flow control.
    body.reserve_capacity(hello.len());
    let _ = body.send_data(hello, true);
    let response = match response.await {
        Ok(response) => response,
        Err(e) => return format!("stream reset: {e}"),
    };
    if let Some(status) = response.headers().get("grpc-status") {
        return status.to_str().unwrap_or("?").to_string();
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        if chunk.is_err() {
            break;
        }
    }
    match body.trailers().await {
        Ok(Some(trailers)) => trailers
            .get("grpc-status")
            .and_then(|s| s.to_str().ok())
            .unwrap_or("?")
            .to_string(),
        Ok(None) => "ended without a status".into(),
        Err(e) => format!("stream reset: {e}"),
    }
}

/// Opens `streams` refused streams over `connections` connections, all at
/// once, and counts the answers.
async fn flood(
    connector: &TlsConnector,
    addr: std::net::SocketAddr,
    connections: usize,
    streams: usize,
    token: impl Fn(usize) -> Option<String>,
    hello: &Bytes,
) -> HashMap<String, usize> {
    let mut senders = Vec::new();
    for _ in 0..connections {
        let tls = tls_connect(connector, addr).await;
        let (sender, connection) = h2::client::Builder::new()
            .initial_window_size(1024 * 1024)
            .handshake::<_, Bytes>(tls)
            .await
            .expect("HTTP/2 handshake");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        senders.push(sender);
    }
    let authority = addr.to_string();
    let answers = futures::future::join_all((0..streams).map(|i| {
        refused_stream(
            senders[i % connections].clone(),
            &authority,
            token(i),
            hello.clone(),
        )
    }))
    .await;
    let mut counts = HashMap::new();
    for answer in answers {
        *counts.entry(classify(&answer)).or_insert(0) += 1;
    }
    counts
}

/// How a flood stream ended, by the grpc-status or the transport's answer.
fn classify(answer: &str) -> String {
    match answer {
        "16" => "UNAUTHENTICATED".into(),
        "8" => "RESOURCE_EXHAUSTED".into(),
        // More streams than the hub allows on a connection, opened before
        // the client learnt the limit.
        a if a.contains("refused stream") => "REFUSED_STREAM".into(),
        other => format!("unexpected: {other}"),
    }
}

/// Whether every flood stream was refused.
fn all_refused(counts: &HashMap<String, usize>) -> bool {
    counts.keys().all(|k| !k.starts_with("unexpected"))
}

/// An HTTP/2 frame.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("len").to_be_bytes();
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&len[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// An HPACK string, not Huffman-coded.
fn hpack_string(out: &mut Vec<u8>, text: &str) {
    let mut len = text.len();
    if len < 127 {
        out.push(u8::try_from(len).expect("short"));
    } else {
        out.push(127);
        len -= 127;
        while len >= 128 {
            out.push(u8::try_from(len % 128).expect("digit") | 0x80);
            len /= 128;
        }
        out.push(u8::try_from(len).expect("digit"));
    }
    out.extend_from_slice(text.as_bytes());
}

/// A header block of literal fields that the decoder does not index.
fn header_block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.push(0x00);
        hpack_string(&mut out, name);
        hpack_string(&mut out, value);
    }
    out
}

const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;

/// Opens `streams` streams with junk tokens on one connection at once,
/// ignoring the hub's stream limit as a hostile client would, and returns how
/// many the hub answered, how many it reset, and whether it closed the
/// connection.
async fn many_streams_on_one_connection(
    connector: &TlsConnector,
    addr: std::net::SocketAddr,
    streams: u32,
) -> (usize, usize, bool) {
    let mut tls = tls_connect(connector, addr).await;
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(SETTINGS, 0, 0, &[]));
    let authority = addr.to_string();
    for i in 0..streams {
        let token = format!("Bearer junk-{i}");
        let block = header_block(&[
            (":method", "POST"),
            (":scheme", "https"),
            (":path", SYNC_PATH),
            (":authority", &authority),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("authorization", &token),
        ]);
        out.extend(frame(HEADERS, END_HEADERS, 2 * i + 1, &block));
    }
    tls.write_all(&out).await.expect("write streams");
    tls.flush().await.expect("flush");

    let mut answered = HashSet::new();
    let mut reset = HashSet::new();
    let mut closed = false;
    while answered.union(&reset).count() < streams as usize {
        let mut head = [0u8; 9];
        if tls.read_exact(&mut head).await.is_err() {
            closed = true;
            break;
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let (kind, flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; len];
        if tls.read_exact(&mut payload).await.is_err() {
            closed = true;
            break;
        }
        match kind {
            HEADERS if flags & END_STREAM != 0 => {
                answered.insert(stream);
            }
            RST_STREAM => {
                reset.insert(stream);
            }
            SETTINGS if flags & ACK == 0 => {
                let _ = tls.write_all(&frame(SETTINGS, ACK, 0, &[])).await;
            }
            PING if flags & ACK == 0 => {
                let _ = tls.write_all(&frame(PING, ACK, 0, &payload)).await;
            }
            GOAWAY => {
                closed = true;
                break;
            }
            _ => {}
        }
    }
    let reset_only = reset.difference(&answered).count();
    (answered.len(), reset_only, closed)
}

/// Opens `count` TCP connections that start a TLS handshake and never finish
/// it, and returns how long the hub took to close the last of them.
async fn stalled_handshakes(addr: std::net::SocketAddr, count: usize) -> Duration {
    let started = Instant::now();
    let closed = futures::future::join_all((0..count).map(|_| async move {
        let mut tcp = TcpStream::connect(addr).await.expect("TCP connect");
        // A TLS record header announcing a 512-byte ClientHello, and then
        // nothing more.
        tcp.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
            .await
            .expect("write");
        let mut buf = [0u8; 1024];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    }));
    tokio::time::timeout(Duration::from_secs(120), closed)
        .await
        .expect("the hub closes connections that never finish their TLS handshake");
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_floods_are_refused_with_bounded_memory_and_the_agent_is_served() {
    // It prints this process's memory: run it where no other test runs.
    if !crate::own_process::alone(
        module_path!(),
        "unauthenticated_floods_are_refused_with_bounded_memory_and_the_agent_is_served",
    )
    .await
    {
        return;
    }
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "before",
            vec![config_map("default", "before", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "before")
        .await
        .expect("the agent is served");

    let addr = fleet.hub_replica_addr(0);
    let connector = tls_connector(&fleet.hub_ca_pem);
    let hello = big_hello(10 * 1024 * 1024);
    let (baseline, _) = memory();
    println!(
        "RSS baseline (hub, agent, test client in one process): {baseline:.1} MiB; each flood Hello is {:.1} MiB, shared by every stream on the client side",
        hello.len() as f64 / (1024.0 * 1024.0)
    );

    // 1. No token, 10 MiB Hello, 200 streams over 4 connections. The real
    //    agent gets a new work meanwhile.
    let sampler = RssSampler::start();
    let during_work = manifest_work(
        "cluster-a",
        "during",
        vec![config_map("default", "during", json!({"k": "v"}))],
    );
    let during = fleet.create_work(&during_work);
    let (counts, created) = tokio::join!(flood(&connector, addr, 4, 200, |_| None, &hello), during);
    created.expect("create during the flood");
    report(
        "200 streams without a token, 10 MiB Hello each",
        baseline,
        sampler.stop().await,
    );
    println!("  answers: {counts:?}");
    assert!(
        all_refused(&counts) && counts.contains_key("UNAUTHENTICATED"),
        "every stream without a token is refused: {counts:?}"
    );

    // 2. Junk tokens, 10 MiB Hello, 200 streams: refused UNAUTHENTICATED
    //    after a TokenReview, or RESOURCE_EXHAUSTED once this address has
    //    used its budget of unknown tokens.
    let sampler = RssSampler::start();
    let counts = flood(
        &connector,
        addr,
        4,
        200,
        |i| Some(format!("junk-token-{i}")),
        &hello,
    )
    .await;
    report(
        "200 streams with junk tokens, 10 MiB Hello each",
        baseline,
        sampler.stop().await,
    );
    println!("  answers: {counts:?}");
    assert!(
        all_refused(&counts),
        "every junk token is refused: {counts:?}"
    );
    assert!(
        counts.contains_key("RESOURCE_EXHAUSTED"),
        "200 unknown tokens from one address exceed its budget: {counts:?}"
    );

    // 3. 500 streams at once on one connection, over the hub's limit.
    let sampler = RssSampler::start();
    let (answered, reset, closed) = many_streams_on_one_connection(&connector, addr, 500).await;
    report(
        "500 streams on one connection",
        baseline,
        sampler.stop().await,
    );
    println!("  answered {answered}, reset {reset}, connection closed by the hub: {closed}");
    assert!(
        closed || answered + reset == 500,
        "every stream is answered or reset, or the connection closed"
    );
    assert!(
        reset > 0 || closed,
        "streams over the limit are not all opened"
    );

    // 4. 100 connections that never finish their TLS handshake.
    let sampler = RssSampler::start();
    let took = stalled_handshakes(addr, 100).await;
    report("100 stalled TLS handshakes", baseline, sampler.stop().await);
    println!(
        "  the hub closed all of them within {:.1} s",
        took.as_secs_f64()
    );
    assert!(
        took < STALLED_HANDSHAKE_BOUND,
        "stalled handshakes were left open {took:?}"
    );

    wait_applied(&works, "during")
        .await
        .expect("the work created during the floods reaches the agent");
    let after = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "after",
            vec![config_map("default", "after", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&after, "after")
        .await
        .expect("the agent is served after the floods");
    let (rss, peak) = memory();
    println!("RSS at the end: {rss:.1} MiB, process peak {peak:.1} MiB");
    fleet.stop().await;
}
