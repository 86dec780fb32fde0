//! Agents authenticate with a ServiceAccount token of their cluster's
//! namespace, checked by TokenReview; the transport is TLS, optionally
//! mutual (issue 5, item 6). Only the `ferry-agent` ServiceAccount of a
//! joined cluster, with ferry's audience, is an agent, and a live session
//! ends when its token is revoked (issue 9, items 3 and 4).

use ferry_api::contract::AGENT_SERVICE_ACCOUNT;
use ferry_api::contract::AGENT_TOKEN_AUDIENCE;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work, wait_applied};
use ferry_hub::certs::tls::ServingCert;
use ferry_hub::join::hub_side::join_cluster;
use ferry_proto::v1::{self, agent_message};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::json;
use tonic::Code;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

async fn trusted_channel(fleet: &Fleet) -> Channel {
    Endpoint::from_shared(fleet.hub_url.clone())
        .expect("url")
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&fleet.hub_ca_pem)))
        .expect("tls")
        .connect()
        .await
        .expect("a client that trusts the hub's CA connects")
}

/// Says Hello for `cluster` with `token`; Ok when the hub accepts the session.
async fn hello_with(channel: Channel, token: Option<&str>, cluster: &str) -> Result<(), Code> {
    open_session(channel, token, cluster)
        .await
        .map(|_| ())
        .map_err(|s| s.code())
}

/// Opens a session for `cluster` with `token`, as an agent would.
use ferry_e2e::harness::agent_client::open_agent_stream as open_session;

/// Whether a connection attempt ends without a session: the TLS handshake
/// or connection fails, or the Hello is refused.
async fn refused(connected: Result<Channel, tonic::transport::Error>, token: &str) -> bool {
    match connected {
        Err(_) => true,
        Ok(channel) => hello_with(channel, Some(token), "cluster-a").await.is_err(),
    }
}

/// `token` with the same claims but expired an hour ago, signed with the
/// hub API server's ServiceAccount key: a token that was valid once.
fn expired_copy(token: &str, signing_key_pem: &[u8]) -> String {
    use base64::Engine;
    let payload = token.split('.').nth(1).expect("a JWT");
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .expect("base64url");
    let mut claims: serde_json::Value = serde_json::from_slice(&claims).expect("JSON claims");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    claims["iat"] = json!(now - 7200);
    claims["nbf"] = json!(now - 7200);
    claims["exp"] = json!(now - 3600);
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(signing_key_pem).expect("RSA key");
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
        &claims,
        &key,
    )
    .expect("signed")
}

async fn token_for(
    client: &kube::Client,
    namespace: &str,
    account: &str,
    audiences: Vec<String>,
) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences,
            expiration_seconds: Some(3600),
            bound_object_ref: None,
        },
        ..Default::default()
    };
    accounts
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .expect("token")
        .status
        .expect("status")
        .token
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_valid_token_of_the_clusters_own_namespace_opens_a_session() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a", "cluster-b"]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let channel = trusted_channel(&fleet).await;
    let a_token = join_cluster(&hub, "cluster-a", 3600)
        .await
        .expect("token a");
    let b_token = join_cluster(&hub, "cluster-b", 3600)
        .await
        .expect("token b");

    assert_eq!(
        hello_with(channel.clone(), None, "cluster-a").await,
        Err(Code::Unauthenticated),
        "no token"
    );
    assert_eq!(
        hello_with(channel.clone(), Some("not-a-token"), "cluster-a").await,
        Err(Code::Unauthenticated),
        "a made-up token"
    );
    assert_eq!(
        hello_with(channel.clone(), Some(&b_token), "cluster-a").await,
        Err(Code::PermissionDenied),
        "cluster-b's token cannot serve cluster-a"
    );
    let api_audience = token_for(&hub, "cluster-a", AGENT_SERVICE_ACCOUNT, vec![]).await;
    assert_eq!(
        hello_with(channel.clone(), Some(&api_audience), "cluster-a").await,
        Err(Code::Unauthenticated),
        "a token issued for the Kubernetes API, not for ferry, is refused"
    );
    // A token whose ServiceAccount is gone is revoked, like an expired one.
    let accounts: Api<ServiceAccount> = Api::namespaced(hub.clone(), "cluster-a");
    let temporary = ServiceAccount {
        metadata: ObjectMeta {
            name: Some("temporary".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    accounts
        .create(&PostParams::default(), &temporary)
        .await
        .expect("create account");
    let revoked = token_for(
        &hub,
        "cluster-a",
        "temporary",
        vec![AGENT_TOKEN_AUDIENCE.into()],
    )
    .await;
    accounts
        .delete("temporary", &Default::default())
        .await
        .expect("delete account");
    // The API server looks a token's ServiceAccount up in its own watch
    // cache: right after the delete it may still authenticate the token.
    // The signal is its own verdict, which is what the hub asks for.
    refused_by_the_api_server(&hub, &revoked).await;
    assert_eq!(
        hello_with(channel.clone(), Some(&revoked), "cluster-a").await,
        Err(Code::Unauthenticated),
        "a token of a deleted ServiceAccount is refused"
    );
    let sa_key = fleet
        .hub
        .info
        .ca_file
        .parent()
        .expect("data dir")
        .join("pki/sa.key");
    let expired = expired_copy(&a_token, &std::fs::read(sa_key).expect("hub signing key"));
    assert_eq!(
        hello_with(channel.clone(), Some(&expired), "cluster-a").await,
        Err(Code::Unauthenticated),
        "an expired token is refused"
    );
    assert_eq!(
        hello_with(channel, Some(&a_token), "cluster-a").await,
        Ok(()),
        "the cluster's own token"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_do_not_speak_tls_or_do_not_trust_the_hub_cannot_connect() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let token = join_cluster(&fleet.hub_client, "cluster-a", 3600)
        .await
        .expect("token");
    let plaintext_url = fleet.hub_url.replacen("https://", "http://", 1);
    let plaintext = Endpoint::from_shared(plaintext_url)
        .expect("url")
        .connect()
        .await;
    assert!(
        refused(plaintext, &token).await,
        "plaintext gRPC is not served"
    );
    let stranger = ServingCert::generate(&["127.0.0.1".into()]).expect("another CA");
    let untrusting = Endpoint::from_shared(fleet.hub_url.clone())
        .expect("url")
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&stranger.ca_pem)))
        .expect("tls")
        .connect()
        .await;
    assert!(
        refused(untrusting, &token).await,
        "a client that does not trust the hub's certificate gets nothing"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_mutual_tls_agents_need_a_client_certificate() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.mtls = true;
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "mutual",
            vec![config_map("default", "mutual", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "mutual")
        .await
        .expect("agents with a client certificate are served");
    let token = join_cluster(&fleet.hub_client, "cluster-a", 3600)
        .await
        .expect("token");
    let without_certificate = Endpoint::from_shared(fleet.hub_url.clone())
        .expect("url")
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&fleet.hub_ca_pem)))
        .expect("tls")
        .connect()
        .await;
    assert!(
        refused(without_certificate, &token).await,
        "a client without a certificate is refused even with a valid token"
    );
    fleet.stop().await;
}

/// Creates ServiceAccount `name` in `namespace` on the hub.
async fn create_account(client: &kube::Client, namespace: &str, name: &str) {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    accounts
        .create(&PostParams::default(), &account)
        .await
        .expect("create account");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_agent_account_of_a_joined_cluster_with_the_hub_audience_is_served() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let channel = trusted_channel(&fleet).await;

    // Another account of the cluster's own namespace, even with ferry's
    // audience, is not the cluster's agent.
    create_account(&hub, "cluster-a", "impostor").await;
    let impostor = token_for(
        &hub,
        "cluster-a",
        "impostor",
        vec![AGENT_TOKEN_AUDIENCE.into()],
    )
    .await;
    let refused = open_session(channel.clone(), Some(&impostor), "cluster-a")
        .await
        .err()
        .expect("another account of the namespace is refused");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert!(
        refused.message().contains(AGENT_SERVICE_ACCOUNT),
        "the refusal names the account agents must use: {}",
        refused.message()
    );

    // The agent's own account, but a token for another audience.
    let elsewhere = token_for(
        &hub,
        "cluster-a",
        AGENT_SERVICE_ACCOUNT,
        vec!["some-other-service".into()],
    )
    .await;
    assert_eq!(
        hello_with(channel.clone(), Some(&elsewhere), "cluster-a").await,
        Err(Code::Unauthenticated),
        "a token without the hub's audience is refused"
    );

    // A namespace with the agent account but no ManagedCluster: not joined.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(hub.clone());
    namespaces
        .create(
            &PostParams::default(),
            &k8s_openapi::api::core::v1::Namespace {
                metadata: ObjectMeta {
                    name: Some("cluster-z".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("namespace");
    create_account(&hub, "cluster-z", AGENT_SERVICE_ACCOUNT).await;
    let unjoined = token_for(
        &hub,
        "cluster-z",
        AGENT_SERVICE_ACCOUNT,
        vec![AGENT_TOKEN_AUDIENCE.into()],
    )
    .await;
    let refused = open_session(channel.clone(), Some(&unjoined), "cluster-z")
        .await
        .err()
        .expect("a cluster without a ManagedCluster is refused");
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("ferry-hub join --cluster cluster-z"),
        "the refusal says how to join: {}",
        refused.message()
    );

    // Joining fixes it, with the same account.
    let joined = join_cluster(&hub, "cluster-z", 3600)
        .await
        .expect("join cluster-z");
    assert_eq!(
        hello_with(channel.clone(), Some(&joined), "cluster-z").await,
        Ok(()),
        "once joined, the agent account is served"
    );

    // The real agent beside all this is served.
    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "still-served",
            vec![config_map("default", "still-served", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "still-served")
        .await
        .expect("the real agent is served");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_session_ends_unauthenticated_once_its_service_account_is_deleted() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
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
        .expect("the agent is served while its token is good");

    // A session of our own next to the real agent's, to see how it ends; it
    // heartbeats like an agent so only the token can end it.
    let token = join_cluster(&hub, "cluster-a", 3600).await.expect("token");
    let mut session = open_session(trusted_channel(&fleet).await, Some(&token), "cluster-a")
        .await
        .expect("the token is good for now");
    let outbound = session.outbound.clone();
    let heartbeats = tokio::spawn(async move {
        let mut ticker = tokio::time::interval(std::time::Duration::from_secs(2));
        loop {
            ticker.tick().await;
            let beat = v1::AgentMessage {
                body: Some(agent_message::Body::Heartbeat(v1::Heartbeat::now())),
            };
            if outbound.send(beat).await.is_err() {
                return;
            }
        }
    });

    let accounts: Api<ServiceAccount> = Api::namespaced(hub.clone(), "cluster-a");
    accounts
        .delete(AGENT_SERVICE_ACCOUNT, &Default::default())
        .await
        .expect("delete the agent's account");
    let revoked_at = std::time::Instant::now();

    // The review interval (30 s) plus a heartbeat, and room for a slow machine.
    let limit = std::time::Duration::from_secs(90);
    let ended = tokio::time::timeout(limit, async {
        loop {
            match session.inbound.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => return None,
                Err(status) => return Some(status),
            }
        }
    })
    .await
    .expect("the session ends once its token is revoked");
    println!(
        "session ended {:.1} s after its ServiceAccount was deleted",
        revoked_at.elapsed().as_secs_f64()
    );
    let status = ended.expect("the session ends with a status, not quietly");
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    heartbeats.abort();

    let clusters: Api<ferry_api::managed_cluster::ManagedCluster> = Api::all(hub.clone());
    let cluster = ferry_e2e::helpers::wait::wait_until(
        &clusters,
        "cluster-a",
        "cluster-a shown disconnected because its token was refused",
        limit,
        |c| {
            c.status.as_ref().is_some_and(|s| {
                !s.connected
                    && s.disconnect_reason
                        .as_deref()
                        .is_some_and(|r| r.contains("no longer accepted"))
            })
        },
    )
    .await
    .expect("the ManagedCluster shows the agent disconnected with the reason");
    println!(
        "ManagedCluster status after revocation: {:?}",
        cluster.status
    );
    assert_eq!(
        hello_with(trusted_channel(&fleet).await, Some(&token), "cluster-a").await,
        Err(Code::Unauthenticated),
        "the revoked token opens no new session"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ferry_agent_token_is_refused_by_the_kubernetes_api() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[]))
        .await
        .expect("fleet starts");
    // The token `ferry-hub join` mints: bound to ferry's audience only.
    let token = join_cluster(&fleet.hub_client, "cluster-a", 3600)
        .await
        .expect("token");
    let info = &fleet.hub.info;
    let kubeconfig = info.token_kubeconfig("agent", &token, &info.ca_file.display().to_string());
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&kubeconfig).expect("kubeconfig"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    let client = kube::Client::try_from(config).expect("client");
    let accounts: Api<ServiceAccount> = Api::namespaced(client, "cluster-a");
    match accounts.list(&Default::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(
            status.code, 401,
            "the API server does not accept a token for ferry's audience: {status:?}"
        ),
        other => panic!("a ferry token reached the Kubernetes API: {other:?}"),
    }
    fleet.stop().await;
}

/// Waits until the hub's API server itself no longer authenticates `token`
/// for ferry's audience; panics after 30 s.
async fn refused_by_the_api_server(hub: &kube::Client, token: &str) {
    use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
    let reviews: Api<TokenReview> = Api::all(hub.clone());
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.into()),
            audiences: Some(vec![AGENT_TOKEN_AUDIENCE.into()]),
        },
        ..Default::default()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let answer = reviews
            .create(&PostParams::default(), &review)
            .await
            .expect("token review");
        if !answer.status.and_then(|s| s.authenticated).unwrap_or(false) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the API server still authenticates a deleted ServiceAccount's token after 30 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
