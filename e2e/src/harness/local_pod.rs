//! A chart's Deployment run as local processes, as a kubelet would start its
//! container: the Secret volumes are written to a directory and the
//! arguments' mount paths point there, `env` is resolved (values and
//! `secretKeyRef`s, the pod's name and namespace from the downward API),
//! and the container's identity is a kubeconfig holding
//! only a token minted for the pod's ServiceAccount (TokenRequest), so the
//! process has exactly the rights RBAC gives that ServiceAccount.
//!
//! Also: the workspace binaries cargo built next to the tests, and an
//! address of this machine that is not loopback (EndpointSlices refuse
//! 127.0.0.0/8).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::Api;
use kube::api::PostParams;
use serde_json::Value;

use crate::harness::controlplane::ControlPlane;

/// A Deployment's container could not be prepared to run locally.
#[derive(Debug, thiserror::Error)]
pub enum LocalPodError {
    /// The Deployment lacks a field a container needs.
    #[error("the Deployment has no {0}")]
    Missing(&'static str),
    /// A Secret it mounts or reads could not be read.
    #[error("reading Secret {namespace}/{name}: {source}")]
    Secret {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A key the Deployment names is not in the Secret.
    #[error("Secret {secret} has no key {key}")]
    MissingKey {
        /// The Secret's name.
        secret: String,
        /// The key.
        key: String,
    },
    /// The TokenRequest was refused or answered without a token.
    #[error("minting a token for ServiceAccount {namespace}/{name}: {detail}")]
    Token {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// What went wrong.
        detail: String,
    },
    /// Writing a file failed.
    #[error("writing {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
}

/// What the kubelet would run for the first container of a Deployment.
#[derive(Debug, Clone)]
pub struct LocalContainer {
    /// The file name of the container's command (e.g. `ferry-hub`).
    pub binary: String,
    /// Its arguments, mount paths replaced by local directories.
    pub args: Vec<String>,
    /// Its environment, resolved.
    pub env: Vec<(String, String)>,
}

impl LocalContainer {
    /// Replaces every argument starting with `prefix` (e.g. `--grpc-addr=`)
    /// by `prefix` followed by `value`; returns whether one was found.
    pub fn set_arg(&mut self, prefix: &str, value: &str) -> bool {
        let mut found = false;
        for arg in &mut self.args {
            if arg.starts_with(prefix) {
                *arg = format!("{prefix}{value}");
                found = true;
            }
        }
        found
    }

    /// The value of the first argument starting with `prefix`.
    pub fn arg(&self, prefix: &str) -> Option<&str> {
        self.args.iter().find_map(|a| a.strip_prefix(prefix))
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), LocalPodError> {
    std::fs::write(path, bytes).map_err(|source| LocalPodError::Io {
        path: path.to_path_buf(),
        source,
    })
}

async fn read_secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<BTreeMap<String, Vec<u8>>, LocalPodError> {
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(|source| LocalPodError::Secret {
            namespace: namespace.into(),
            name: name.into(),
            source,
        })?;
    Ok(secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect())
}

/// Prepares the first container of `deployment` (a rendered Deployment in
/// `namespace`) to run here: reads its Secret volumes through `admin` and
/// writes them under `dir` (one directory per volume, only the listed items
/// when the volume lists some), rewrites argument mount paths to those
/// directories, and resolves `env`. Fails when the Deployment lacks a
/// container, or a Secret or key it names is missing.
pub async fn local_container(
    admin: &kube::Client,
    namespace: &str,
    deployment: &Value,
    dir: &Path,
) -> Result<LocalContainer, LocalPodError> {
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let command = container["command"][0]
        .as_str()
        .ok_or(LocalPodError::Missing("container command"))?;
    let binary = command.rsplit('/').next().unwrap_or(command).to_string();

    // Volume name -> local directory holding the Secret's files.
    let mut volumes = BTreeMap::new();
    for volume in pod["volumes"].as_array().into_iter().flatten() {
        let (Some(name), Some(secret)) = (
            volume["name"].as_str(),
            volume["secret"]["secretName"].as_str(),
        ) else {
            continue;
        };
        let data = read_secret(admin, namespace, secret).await?;
        let local = dir.join(name);
        std::fs::create_dir_all(&local).map_err(|source| LocalPodError::Io {
            path: local.clone(),
            source,
        })?;
        match volume["secret"]["items"].as_array() {
            Some(items) => {
                for item in items {
                    let key = item["key"].as_str().unwrap_or_default();
                    let path = item["path"].as_str().unwrap_or(key);
                    let bytes = data.get(key).ok_or_else(|| LocalPodError::MissingKey {
                        secret: secret.into(),
                        key: key.into(),
                    })?;
                    write_file(&local.join(path), bytes)?;
                }
            }
            None => {
                for (key, bytes) in &data {
                    write_file(&local.join(key), bytes)?;
                }
            }
        }
        volumes.insert(name.to_string(), local);
    }
    // Mount path -> local directory, longest first so nested mounts win.
    let mut mounts: Vec<(String, PathBuf)> = container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let local = volumes.get(m["name"].as_str()?)?;
            Some((m["mountPath"].as_str()?.to_string(), local.clone()))
        })
        .collect();
    mounts.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    let args = container["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|arg| {
            mounts
                .iter()
                .find_map(|(path, local)| {
                    let at = arg.find(path.as_str())?;
                    Some(format!(
                        "{}{}{}",
                        &arg[..at],
                        local.display(),
                        &arg[at + path.len()..]
                    ))
                })
                .unwrap_or_else(|| arg.to_string())
        })
        .collect();

    let mut env = Vec::new();
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"]
            .as_str()
            .ok_or(LocalPodError::Missing("env name"))?;
        let field = var["valueFrom"]["fieldRef"]["fieldPath"].as_str();
        let value = match (var["value"].as_str(), &var["valueFrom"]["secretKeyRef"]) {
            (Some(value), _) => value.to_string(),
            // The downward API: the pod's name and namespace, as the kubelet
            // would give them (a pod of the Deployment, named after it).
            (None, _) if field == Some("metadata.name") => format!(
                "{}-local",
                deployment["metadata"]["name"].as_str().unwrap_or("pod")
            ),
            (None, _) if field == Some("metadata.namespace") => namespace.to_string(),
            (None, key_ref) => {
                let secret = key_ref["name"]
                    .as_str()
                    .ok_or(LocalPodError::Missing("env value or secretKeyRef"))?;
                let key = key_ref["key"].as_str().unwrap_or_default();
                let data = read_secret(admin, namespace, secret).await?;
                let bytes = data.get(key).ok_or_else(|| LocalPodError::MissingKey {
                    secret: secret.into(),
                    key: key.into(),
                })?;
                String::from_utf8_lossy(bytes).into_owned()
            }
        };
        env.push((name.to_string(), value));
    }
    Ok(LocalContainer { binary, args, env })
}

/// A kubeconfig for `plane`'s API server holding only a fresh token of
/// ServiceAccount `namespace/name` (TokenRequest through `admin`, for the
/// API server's default audience, valid an hour). Fails when the request is
/// refused.
pub async fn service_account_kubeconfig(
    plane: &ControlPlane,
    admin: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<String, LocalPodError> {
    let failed = |detail: String| LocalPodError::Token {
        namespace: namespace.into(),
        name: name.into(),
        detail,
    };
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(3600),
            bound_object_ref: None,
        },
        ..Default::default()
    };
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .map_err(|e| failed(e.to_string()))?
        .status
        .ok_or_else(|| failed("no status in the answer".into()))?
        .token;
    Ok(plane
        .info
        .token_kubeconfig(name, &token, &plane.info.ca_file.display().to_string()))
}

/// The workspace binary `name` cargo built next to the running test
/// (`target/<profile>/deps/<test>` → `target/<profile>/<name>`), or the path
/// in the environment variable `env`. Panics, naming the build command, when
/// it is missing.
pub fn workspace_binary(name: &str, env: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env) {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test knows its own path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test runs from target/<profile>/deps");
    let mut binary = profile_dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    // A binary (ferry-bench) runs from target/<profile>/ itself, next to the
    // binary it looks for.
    if !binary.exists()
        && let Some(own_dir) = exe.parent()
    {
        binary = own_dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    }
    assert!(
        binary.exists(),
        "{} is missing: run `cargo build -p {name}` (or `cargo test --workspace`), or set {env}",
        binary.display()
    );
    binary
}

/// A TCP port free on `ip` now.
pub fn free_port(ip: std::net::IpAddr) -> u16 {
    std::net::TcpListener::bind((ip, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// An IPv4 address of this machine's interfaces that is not loopback: the
/// source address the kernel picks for the default route, read from a UDP
/// socket connected to a documentation address (connecting a UDP socket sends
/// nothing), so no outside tool is needed. None without such a route.
pub fn non_loopback_ipv4() -> Option<Ipv4Addr> {
    let socket = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    socket.connect((Ipv4Addr::new(192, 0, 2, 1), 9)).ok()?;
    match socket.local_addr().ok()?.ip() {
        IpAddr::V4(v4) if !v4.is_loopback() && !v4.is_link_local() && !v4.is_unspecified() => {
            Some(v4)
        }
        _ => None,
    }
}
