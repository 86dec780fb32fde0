//! The agent CA's Secret, in the hub's namespace: read when it exists, made
//! and created by the first replica that finds none. A replica that loses
//! the race to create it reads the winner's, so every replica signs and
//! verifies with one CA. Deleting the Secret (and restarting the hub)
//! replaces the CA: agents holding the old one's certificates are told to
//! connect with their token and get new ones.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use tracing::info;

use crate::agent_certs::authority::AgentCa;
use crate::agent_certs::error::AgentCaError;

/// Default name of the agent CA Secret.
pub const DEFAULT_SECRET: &str = "ferry-agent-ca";

/// The agent CA of Secret `namespace/name`, created first when there is
/// none (at `now`, Unix seconds). Fails when the Secret cannot be read or
/// created, or holds no usable CA.
pub async fn load_or_create(
    client: Client,
    namespace: &str,
    name: &str,
    now: i64,
) -> Result<AgentCa, AgentCaError> {
    let secrets: Api<Secret> = Api::namespaced(client, namespace);
    let api = |action: &'static str| {
        move |source| AgentCaError::Api {
            action,
            namespace: namespace.to_string(),
            name: name.to_string(),
            source: Box::new(source),
        }
    };
    if let Some(secret) = secrets.get_opt(name).await.map_err(api("reading"))? {
        return parse(&secret, namespace, name);
    }
    let (cert, key) = AgentCa::generate(now)?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/part-of".to_string(),
                "ferry".to_string(),
            )])),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(BTreeMap::from([
            ("tls.crt".to_string(), ByteString(cert.into_bytes())),
            ("tls.key".to_string(), ByteString(key.into_bytes())),
        ])),
        ..Default::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(created) => {
            info!(%namespace, %name, "created the agent CA");
            parse(&created, namespace, name)
        }
        // Another replica created it first: use theirs.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let secret = secrets.get(name).await.map_err(api("reading"))?;
            parse(&secret, namespace, name)
        }
        Err(error) => Err(api("creating")(error)),
    }
}

fn parse(secret: &Secret, namespace: &str, name: &str) -> Result<AgentCa, AgentCaError> {
    let malformed = |reason: String| AgentCaError::Malformed {
        namespace: namespace.to_string(),
        name: name.to_string(),
        reason,
    };
    let field = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|data| data.get(key))
            .and_then(|bytes| std::str::from_utf8(&bytes.0).ok())
            .ok_or_else(|| malformed(format!("no UTF-8 {key}")))
    };
    AgentCa::from_pem(field("tls.crt")?, field("tls.key")?).map_err(malformed)
}
