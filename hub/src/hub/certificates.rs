//! Agent certificates for one replica: the agent CA (read or created), the
//! watch of agent ServiceAccounts revocation reads, and what the agent port
//! needs to ask for, judge and issue certificates.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use tracing::{error, info};

use super::{HubError, stopped};
use crate::agent_certs::ca_secret::load_or_create;
use crate::agent_certs::error::AgentCaError;
use crate::agent_certs::issuing::AgentCertificates;
use crate::agent_certs::presented::PresentedCheck;
use crate::agent_certs::standing::{Standing, watch_agent_accounts};
use crate::grpc::config::GrpcTls;
use crate::store_ready::StoresReady;
use ferry_api::managed_cluster::ManagedCluster;

/// How long the start waits to log that the caches certificate connects
/// are checked against were listed (the caches go on without the log).
const LISTED_LOG_WAIT: Duration = Duration::from_secs(3600);

/// The replica's agent certificates when `tls` asks for them (and no
/// operator client CA replaces them), reading `clusters` (listed once
/// `clusters_listed` is) for revocation, and
/// the watch of agent accounts (named `service_account`) to run until
/// `stop_rx` turns true. A hub that may not read or create its CA Secret
/// (RBAC of an older install) serves tokens only and says so; other
/// failures stop the start.
pub async fn agent_certificates(
    client: &Client,
    tls: Option<&GrpcTls>,
    service_account: &str,
    clusters: Store<ManagedCluster>,
    clusters_listed: &StoresReady,
    stop_rx: tokio::sync::watch::Receiver<bool>,
) -> Result<
    (
        Option<Arc<AgentCertificates>>,
        impl Future<Output = ()> + use<>,
    ),
    HubError,
> {
    let none = |stop_rx| (None, watching(None, stop_rx));
    let Some(options) = tls.and_then(|tls| {
        // Operator-run mutual TLS requires its own certificates: the hub
        // then issues none.
        tls.client_ca
            .is_none()
            .then_some(tls.agent_certificates.clone())
            .flatten()
    }) else {
        return Ok(none(stop_rx));
    };
    let (namespace, name) = &options.ca_secret;
    let now = Timestamp::now().as_second();
    let ca = match load_or_create(client.clone(), namespace, name, now).await {
        Ok(ca) => ca,
        Err(AgentCaError::Api { source, .. }) if matches!(&*source, kube::Error::Api(status) if status.code == 403) =>
        {
            error!(%namespace, %name, reason = %source,
                "agent certificates are off: the hub may not read or create its agent CA Secret; agents keep using tokens");
            return Ok(none(stop_rx));
        }
        Err(other) => return Err(HubError::AgentCa(other)),
    };
    let presented = PresentedCheck::new(ca.roots()).map_err(|reason| {
        HubError::AgentCa(AgentCaError::Malformed {
            namespace: namespace.clone(),
            name: name.clone(),
            reason,
        })
    })?;
    let (accounts, writer) = reflector::store::<PartialObjectMeta<ServiceAccount>>();
    let standing = Standing::new(
        clusters,
        clusters_listed,
        accounts,
        service_account.to_string(),
    );
    info!(%namespace, %name, lifetime_seconds = options.lifetime.as_secs(), "issuing agent certificates");
    let account_watch = watch_agent_accounts(
        client.clone(),
        service_account.to_string(),
        writer,
        standing.clone(),
    );
    // After a restart every agent dials with its certificate, and each
    // waits for these caches: how long they took is the first figure an
    // operator reading a slow reconnect wants.
    let listed = {
        let standing = standing.clone();
        let started = Instant::now();
        async move {
            if standing.ready(LISTED_LOG_WAIT).await {
                info!(
                    elapsed_ms = started.elapsed().as_millis(),
                    "listed the clusters and agent accounts: certificate connects are served"
                );
            }
        }
    };
    let account_watch = async move {
        futures::join!(account_watch, listed);
    };
    let certificates = Arc::new(AgentCertificates {
        ca,
        presented,
        standing,
        lifetime: options.lifetime,
    });
    Ok((Some(certificates), watching(Some(account_watch), stop_rx)))
}

/// Runs `watch` (if any) until `stop_rx` turns true.
async fn watching(
    watch: Option<impl Future<Output = ()>>,
    stop_rx: tokio::sync::watch::Receiver<bool>,
) {
    if let Some(watch) = watch {
        tokio::select! {
            () = watch => {}
            () = stopped(stop_rx) => {}
        }
    }
}
