//! Serves agents: the gRPC work distributor and its health service on the
//! agent port, behind the connection limits and, when configured, TLS.

use std::sync::Arc;

use ferry_proto::MAX_MESSAGE_BYTES;
use ferry_proto::v1::work_distributor_server::WorkDistributorServer;
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tracing::info;

use super::{HubError, stopped};
use crate::grpc::config::{CONNECTION_AGE_SLACK, GrpcTls};
use crate::grpc::connection_limit::{ConnectionLimits, limit_connections};
use crate::grpc::session::Distributor;
use crate::grpc::tls::{server_config, tls_incoming};
use crate::metrics::HubMetrics;

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
                    tls_incoming(accepted, config, limits.tls_handshake_timeout, check),
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
