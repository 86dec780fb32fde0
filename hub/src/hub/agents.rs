//! Serves agents: the gRPC work distributor and its health service on the
//! agent port, behind the connection limits and, when configured, TLS.

use std::sync::Arc;
use std::time::Duration;

use ferry_proto::MAX_MESSAGE_BYTES;
use ferry_proto::v1::work_distributor_server::WorkDistributorServer;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::transport::server::TcpIncoming;
use tracing::info;

use super::{HubError, stopped};
use crate::agent_certs::standing::Standing;
use crate::grpc::config::{CONNECTION_AGE_SLACK, GrpcTls};
use crate::grpc::connection_limit::{ConnectionLimits, limit_connections};
use crate::grpc::session::Distributor;
use crate::grpc::tls::{HandshakeLimits, server_config, tls_incoming};
use crate::metrics::HubMetrics;

/// How long TLS handshakes wait, at most, after the hub starts, for the
/// caches a certificate connect is checked against: after a restart every
/// agent dials at once, and handshakes finished before the caches are
/// listed take the CPU the lists need, only for their streams to wait for
/// them and be told to come back (at 30,000 clusters over three replicas
/// on two cores, a 3 s wait opened on lists that took far longer: no agent
/// was served for 42 s). Agents' TCP connects complete meanwhile and their
/// TLS handshake has no timeout of its own; the hub's handshake timeout and
/// unauthenticated deadline run from when the wait ends. Bounded so that a
/// replica whose caches cannot list (no RBAC for the accounts, no API
/// server) still serves agents on tokens.
const HANDSHAKES_HELD: Duration = Duration::from_secs(30);

/// Turns true once `standing`'s caches are listed or [`HANDSHAKES_HELD`]
/// passed, whichever comes first; true at once without certificates.
fn handshakes_open(standing: Option<Arc<Standing>>) -> watch::Receiver<bool> {
    let (open, opened) = watch::channel(standing.is_none());
    if let Some(standing) = standing {
        tokio::spawn(async move {
            standing.ready(HANDSHAKES_HELD).await;
            open.send_replace(true);
        });
    }
    opened
}

/// Serves `distributor` on `listener` (TLS when `tls` is given) until
/// `stopping` turns true. Fails when the TLS files cannot be loaded or the
/// server fails.
pub async fn serve_agents(
    distributor: Distributor,
    listener: TcpListener,
    tls: Option<&GrpcTls>,
    metrics: &Arc<HubMetrics>,
    stopping: tokio::sync::watch::Receiver<bool>,
) -> Result<(), HubError> {
    let limits = distributor.config.transport.clone();
    let check = distributor
        .certificates
        .as_ref()
        .map(|certificates| certificates.presented.clone());
    let handshakes_open = handshakes_open(
        distributor
            .certificates
            .as_ref()
            .map(|certificates| certificates.standing.clone()),
    );
    // Sessions end by their maximum age and agents dial a new connection;
    // a connection older than that (plus slack) holds no agent session, only
    // perhaps an idle peer, and is closed gracefully.
    let connection_age = distributor.config.max_session_age + CONNECTION_AGE_SLACK;
    // What one agent message may reach before it is decoded: the larger of
    // the Hello and report caps (the session checks the smaller one on the
    // decoded message). What the hub sends is its own works, up to the
    // protocol's maximum.
    let service = WorkDistributorServer::new(distributor)
        .max_decoding_message_size(limits.message_caps.transport())
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<WorkDistributorServer<Distributor>>()
        .await;

    info!(addr = ?listener.local_addr().ok(), "hub serving agents");
    let mut builder = tonic::transport::Server::builder()
        .max_concurrent_streams(limits.max_concurrent_streams)
        .initial_stream_window_size(limits.stream_window_bytes)
        .initial_connection_window_size(limits.connection_window_bytes)
        .http2_keepalive_interval(Some(limits.http2_keepalive_interval))
        .http2_keepalive_timeout(Some(limits.http2_keepalive_timeout))
        .max_connection_age(connection_age)
        .max_connection_age_grace(CONNECTION_AGE_SLACK);
    let tls = match tls {
        Some(tls) => Some(
            server_config(tls, metrics, check.is_some())
                .await
                .map_err(HubError::Tls)?,
        ),
        None => None,
    };
    let router = builder.add_service(health_service).add_service(service);
    let accepted = limit_connections(
        TcpIncoming::from(listener)
            .with_nodelay(Some(true))
            .with_keepalive(Some(limits.tcp_keepalive)),
        ConnectionLimits {
            max_connections: limits.max_connections,
            max_per_peer: limits.max_connections_per_peer,
            unauthenticated_idle: limits.unauthenticated_idle,
        },
        metrics.clone(),
    );
    match tls {
        Some(config) => {
            router
                .serve_with_incoming_shutdown(
                    tls_incoming(
                        accepted,
                        config,
                        HandshakeLimits {
                            timeout: limits.tls_handshake_timeout,
                            in_flight: limits.tls_handshakes_in_flight,
                            queued: limits.unauthenticated_idle,
                        },
                        check,
                        handshakes_open,
                        metrics.clone(),
                    ),
                    stopped(stopping),
                )
                .await?
        }
        None => {
            router
                .serve_with_incoming_shutdown(accepted, stopped(stopping))
                .await?
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ServiceAccount;
    use kube::api::PartialObjectMeta;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    use crate::store_ready::{StoresReady, store_ready};
    use ferry_api::managed_cluster::ManagedCluster;

    #[tokio::test(start_paused = true)]
    async fn handshakes_wait_for_the_caches_only_as_long_as_they_are_held() {
        // Writers kept: a store whose writer is gone is never waited for.
        let (clusters, _clusters_writer) = reflector::store::<ManagedCluster>();
        let (accounts, _accounts_writer) = reflector::store::<PartialObjectMeta<ServiceAccount>>();
        let clusters_listed = StoresReady::all(vec![store_ready(&clusters)]);
        let standing = Standing::new(clusters, &clusters_listed, accounts, "ferry-agent".into());
        let mut opened = handshakes_open(Some(standing));
        assert!(!*opened.borrow(), "closed while the caches are not listed");
        let start = tokio::time::Instant::now();
        opened.wait_for(|open| *open).await.expect("opens");
        assert_eq!(start.elapsed(), HANDSHAKES_HELD);
    }

    #[tokio::test(start_paused = true)]
    async fn handshakes_start_once_the_caches_are_listed() {
        let (clusters, mut clusters_writer) = reflector::store::<ManagedCluster>();
        let (accounts, mut accounts_writer) =
            reflector::store::<PartialObjectMeta<ServiceAccount>>();
        let clusters_listed = StoresReady::all(vec![store_ready(&clusters)]);
        let standing = Standing::new(clusters, &clusters_listed, accounts, "ferry-agent".into());
        let mut opened = handshakes_open(Some(standing.clone()));
        // Connects that wait for the caches too, polled after the gate: with
        // `Store::wait_until_ready` the last of them took the only wake-up,
        // and the gate opened at its bound instead of when the caches listed.
        let connects: Vec<_> = (0..4)
            .map(|_| {
                let standing = standing.clone();
                tokio::spawn(async move { standing.ready(Duration::from_secs(60)).await })
            })
            .collect();
        let start = tokio::time::Instant::now();
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert!(!*opened.borrow(), "the clusters alone are not enough");
        clusters_writer.apply_watcher_event(&Event::InitDone);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!*opened.borrow());
        accounts_writer.apply_watcher_event(&Event::InitDone);
        opened.wait_for(|open| *open).await.expect("opens");
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        for connect in connects {
            assert!(connect.await.expect("no panic"), "every waiter is woken");
        }
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test]
    async fn without_certificates_handshakes_start_at_once() {
        assert!(*handshakes_open(None).borrow());
    }
}
