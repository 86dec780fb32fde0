//! What joining puts on a spoke, as objects: the agent's namespace, the
//! Secret holding what the hub gave the cluster (the shape the ferry-agent
//! chart reads), and the agent itself from the chart's rendered manifests,
//! embedded at build time. Also writes them as files, for GitOps.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;
use serde_json::{Value, json};

/// The ferry-agent chart rendered with its default values
/// (`deploy/manifests/ferry-agent.yaml`).
const AGENT_MANIFESTS: &str = include_str!("../../../deploy/manifests/ferry-agent.yaml");

/// The namespace the agent runs in on the spoke (the chart's default).
pub const AGENT_NAMESPACE: &str = "ferry-agent";
/// The spoke Secret holding what joining gave the cluster (the chart's
/// `hub.secretName`).
pub const AGENT_HUB_SECRET: &str = "ferry-agent-hub";
/// Key of the agent's hub token in [`AGENT_HUB_SECRET`].
pub const TOKEN_KEY: &str = "token";
/// Key of the hub's CA (PEM) in [`AGENT_HUB_SECRET`].
pub const CA_KEY: &str = "ca.crt";
/// Key of the hub URL in [`AGENT_HUB_SECRET`].
pub const HUB_URL_KEY: &str = "hub-url";
/// Key of the cluster's name in [`AGENT_HUB_SECRET`].
pub const CLUSTER_NAME_KEY: &str = "cluster-name";

/// File of a bundle holding the namespace and the agent's manifests.
pub const BUNDLE_AGENT_FILE: &str = "ferry-agent.yaml";
/// File of a bundle holding the Secret (kept apart so it can be sealed or
/// encrypted before it is committed).
pub const BUNDLE_SECRET_FILE: &str = "ferry-agent-hub-secret.yaml";
/// File of a bundle holding values for the ferry-agent chart, for those who
/// install the chart instead of the manifests.
pub const BUNDLE_VALUES_FILE: &str = "values.yaml";

/// The spoke objects could not be built or written.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// A document of the embedded manifests is not valid YAML: a broken build.
    #[error("document {index} of the embedded ferry-agent manifests: {source}")]
    Manifests {
        /// Its position, from 0.
        index: usize,
        /// The parse error.
        #[source]
        source: serde_yaml::Error,
    },
    /// An object could not be rendered as JSON or YAML: a bug.
    #[error("rendering {what}: {source}")]
    Render {
        /// Which object.
        what: String,
        /// The error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A bundle file could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The Secret file could not be written privately (a symlink or
    /// non-regular file at its path, or the system refused).
    #[error(transparent)]
    Private(#[from] crate::join::private_file::PrivateFileError),
    /// The blocking write task died.
    #[error("writing the bundle: {0}")]
    Task(String),
}

/// What a spoke's agent needs to reach the hub: the content of
/// [`AGENT_HUB_SECRET`].
#[derive(Clone, PartialEq, Eq)]
pub struct HubAccess {
    /// The agent's ServiceAccount token on the hub.
    pub token: String,
    /// The CA (PEM) of the hub's serving certificate; empty for a plaintext
    /// hub.
    pub ca_pem: String,
    /// The URL agents dial.
    pub hub_url: String,
    /// The cluster's name on the hub.
    pub cluster_name: String,
}

impl std::fmt::Debug for HubAccess {
    // Tokens stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubAccess")
            .field("hub_url", &self.hub_url)
            .field("cluster_name", &self.cluster_name)
            .finish_non_exhaustive()
    }
}

impl HubAccess {
    /// The Secret the ferry-agent chart mounts.
    pub fn to_secret(&self) -> Secret {
        let data = [
            (TOKEN_KEY, &self.token),
            (CA_KEY, &self.ca_pem),
            (HUB_URL_KEY, &self.hub_url),
            (CLUSTER_NAME_KEY, &self.cluster_name),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_string(), ByteString(value.as_bytes().to_vec())))
        .collect();
        Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(AGENT_HUB_SECRET.into()),
                namespace: Some(AGENT_NAMESPACE.into()),
                labels: Some(part_of_ferry()),
                ..Default::default()
            },
            type_: Some("Opaque".into()),
            data: Some(data),
            ..Default::default()
        }
    }

    /// Reads a Secret written by [`HubAccess::to_secret`]; None when a key is
    /// missing or not UTF-8 (a Secret written by hand, half filled).
    pub fn from_secret(secret: &Secret) -> Option<Self> {
        let data = secret.data.as_ref()?;
        let text = |key: &str| {
            data.get(key)
                .and_then(|v| String::from_utf8(v.0.clone()).ok())
        };
        Some(Self {
            token: text(TOKEN_KEY)?.trim().to_string(),
            ca_pem: text(CA_KEY)?,
            hub_url: text(HUB_URL_KEY)?,
            cluster_name: text(CLUSTER_NAME_KEY)?,
        })
    }
}

fn part_of_ferry() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/part-of".into(), "ferry".into()),
        (
            "app.kubernetes.io/managed-by".into(),
            "ferry-hub-join".into(),
        ),
    ])
}

/// The agent's namespace.
pub fn namespace_object() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": { "name": AGENT_NAMESPACE, "labels": part_of_ferry() },
    })
}

/// The objects of the ferry-agent chart's default render, in its order, with
/// every container's image replaced by `image` when given.
///
/// Fails only when the embedded manifests do not parse: a broken build.
pub fn agent_objects(image: Option<&str>) -> Result<Vec<Value>, BundleError> {
    let mut objects = Vec::new();
    for (index, document) in serde_yaml::Deserializer::from_str(AGENT_MANIFESTS).enumerate() {
        let value = Value::deserialize(document)
            .map_err(|source| BundleError::Manifests { index, source })?;
        if value.is_null() {
            continue;
        }
        objects.push(value);
    }
    if let Some(image) = image {
        for object in &mut objects {
            if let Some(containers) = object
                .pointer_mut("/spec/template/spec/containers")
                .and_then(Value::as_array_mut)
            {
                for container in containers {
                    container["image"] = json!(image);
                }
            }
        }
    }
    Ok(objects)
}

/// Everything joining applies on a spoke, in order: the namespace, the
/// Secret, then the agent.
///
/// Fails only when the embedded manifests do not parse: a broken build.
pub fn spoke_objects(access: &HubAccess, image: Option<&str>) -> Result<Vec<Value>, BundleError> {
    let secret = serde_json::to_value(access.to_secret()).map_err(|e| BundleError::Render {
        what: format!("secret/{AGENT_HUB_SECRET}"),
        source: e.into(),
    })?;
    let mut objects = vec![namespace_object(), secret];
    objects.extend(agent_objects(image)?);
    Ok(objects)
}

/// Values for the ferry-agent chart matching a bundle: the Secret's name,
/// and the image when one was given.
fn chart_values(image: Option<&str>) -> Value {
    let mut values = json!({ "hub": { "secretName": AGENT_HUB_SECRET } });
    if let Some(image) = image {
        // A tag follows the last ':' after the last '/' (a registry port
        // comes before it); a digest reference stays whole.
        let name_start = image.rfind('/').map_or(0, |i| i + 1);
        values["image"] = match image[name_start..].rfind(':') {
            Some(colon) if !image.contains('@') => json!({
                "repository": &image[..name_start + colon],
                "tag": &image[name_start + colon + 1..],
            }),
            _ => json!({ "repository": image }),
        };
    }
    values
}

fn render(objects: &[Value], header: &str) -> Result<String, BundleError> {
    let mut text = header.to_string();
    for object in objects {
        let yaml = serde_yaml::to_string(object).map_err(|e| BundleError::Render {
            what: object["kind"].as_str().unwrap_or("object").to_string(),
            source: e.into(),
        })?;
        text.push_str("---\n");
        text.push_str(&yaml);
    }
    Ok(text)
}

/// Writes a GitOps bundle for a spoke into `dir` (created if needed):
/// [`BUNDLE_AGENT_FILE`] (namespace and agent), [`BUNDLE_SECRET_FILE`] (the
/// Secret, readable by its owner only) and [`BUNDLE_VALUES_FILE`] (for
/// installing the chart instead). Returns the files written. Fails when a
/// file cannot be written.
pub async fn write_bundle(
    dir: &Path,
    access: &HubAccess,
    image: Option<&str>,
) -> Result<Vec<PathBuf>, BundleError> {
    let header = format!(
        "# ferry agent of cluster {}, written by `ferry-hub join --output`.\n",
        access.cluster_name
    );
    let mut agent = vec![namespace_object()];
    agent.extend(agent_objects(image)?);
    let all = spoke_objects(access, image)?;
    let secret = all
        .iter()
        .filter(|o| o["kind"] == "Secret")
        .cloned()
        .collect::<Vec<_>>();
    let values = serde_yaml::to_string(&chart_values(image)).map_err(|e| BundleError::Render {
        what: "the chart values".into(),
        source: e.into(),
    })?;
    let files = vec![
        (dir.join(BUNDLE_AGENT_FILE), render(&agent, &header)?, false),
        (
            dir.join(BUNDLE_SECRET_FILE),
            render(&secret, &header)?,
            true,
        ),
        (
            dir.join(BUNDLE_VALUES_FILE),
            format!("{header}{values}"),
            false,
        ),
    ];
    let dir = dir.to_path_buf();
    // Files are written off the runtime's threads.
    tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&dir).map_err(|source| BundleError::Write {
            path: dir.clone(),
            source,
        })?;
        let mut written = Vec::new();
        for (path, text, private) in files {
            if private {
                // 0600 and no symlink followed on every run, not only the
                // first: an existing file is narrowed before it is written.
                crate::join::private_file::write_private(&path, text.as_bytes())?;
            } else {
                std::fs::write(&path, text).map_err(|source| BundleError::Write {
                    path: path.clone(),
                    source,
                })?;
            }
            written.push(path);
        }
        Ok(written)
    })
    .await
    .map_err(|e| BundleError::Task(e.to_string()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access() -> HubAccess {
        HubAccess {
            token: "t0k3n".into(),
            ca_pem: "-----BEGIN CERTIFICATE-----\n".into(),
            hub_url: "https://hub.example:8443".into(),
            cluster_name: "cluster-a".into(),
        }
    }

    fn deployment(objects: &[Value]) -> &Value {
        objects
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .expect("the agent manifests hold a Deployment")
    }

    #[test]
    fn the_embedded_chart_reads_the_secret_join_writes() {
        let objects = agent_objects(None).expect("manifests parse");
        let deployment = deployment(&objects);
        assert_eq!(deployment["metadata"]["namespace"], AGENT_NAMESPACE);
        let volumes = deployment["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .expect("volumes");
        let secret = volumes
            .iter()
            .find_map(|v| v.get("secret"))
            .expect("a Secret volume");
        assert_eq!(secret["secretName"], AGENT_HUB_SECRET);
        let keys: Vec<&str> = secret["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|i| i["key"].as_str())
            .collect();
        assert!(
            keys.contains(&TOKEN_KEY) && keys.contains(&CA_KEY),
            "{keys:?}"
        );
        let env = &deployment["spec"]["template"]["spec"]["containers"][0]["env"];
        let from_secret: Vec<(&str, &str)> = env
            .as_array()
            .expect("env")
            .iter()
            .filter_map(|e| {
                let r = e.pointer("/valueFrom/secretKeyRef")?;
                Some((r["name"].as_str()?, r["key"].as_str()?))
            })
            .collect();
        assert!(from_secret.contains(&(AGENT_HUB_SECRET, HUB_URL_KEY)));
        assert!(from_secret.contains(&(AGENT_HUB_SECRET, CLUSTER_NAME_KEY)));
        for object in &objects {
            if let Some(namespace) = object["metadata"]["namespace"].as_str() {
                assert_eq!(namespace, AGENT_NAMESPACE, "{object}");
            }
        }
    }

    #[test]
    fn the_image_can_be_replaced() {
        let objects = agent_objects(Some("registry.local:5000/ferry:dev")).expect("manifests");
        let containers = deployment(&objects)["spec"]["template"]["spec"]["containers"]
            .as_array()
            .expect("containers");
        assert!(!containers.is_empty());
        for container in containers {
            assert_eq!(container["image"], "registry.local:5000/ferry:dev");
        }
        assert_eq!(
            chart_values(Some("registry.local:5000/ferry:dev"))["image"],
            json!({"repository": "registry.local:5000/ferry", "tag": "dev"})
        );
        assert_eq!(
            chart_values(Some("registry.local:5000/ferry"))["image"],
            json!({"repository": "registry.local:5000/ferry"})
        );
    }

    #[test]
    fn the_secret_round_trips() {
        let secret = access().to_secret();
        assert_eq!(secret.metadata.name.as_deref(), Some(AGENT_HUB_SECRET));
        assert_eq!(HubAccess::from_secret(&secret), Some(access()));
        let mut partial = secret.clone();
        partial.data.as_mut().expect("data").remove(TOKEN_KEY);
        assert_eq!(HubAccess::from_secret(&partial), None);
    }

    #[test]
    fn spoke_objects_start_with_the_namespace_then_the_secret() {
        let objects = spoke_objects(&access(), None).expect("objects");
        let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
        assert_eq!(&kinds[..2], &["Namespace", "Secret"]);
        assert_eq!(objects[1]["apiVersion"], "v1");
        assert!(kinds.contains(&"Deployment"));
        assert!(!format!("{:?}", access()).contains("t0k3n"));
    }

    #[tokio::test]
    async fn a_bundle_holds_the_agent_the_secret_and_values() {
        let dir = std::env::temp_dir().join(format!("ferry-bundle-{}", rand::random::<u64>()));
        let written = write_bundle(&dir, &access(), Some("ferry:dev"))
            .await
            .expect("written");
        assert_eq!(written.len(), 3);
        let secret = std::fs::read_to_string(dir.join(BUNDLE_SECRET_FILE)).expect("secret");
        let parsed: Secret = serde_yaml::from_str(
            secret
                .split("---\n")
                .nth(1)
                .expect("one document after the header"),
        )
        .expect("a Secret");
        assert_eq!(HubAccess::from_secret(&parsed), Some(access()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join(BUNDLE_SECRET_FILE))
                .expect("metadata")
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "the Secret file is private: {mode:o}");
        }
        let agent = std::fs::read_to_string(dir.join(BUNDLE_AGENT_FILE)).expect("agent");
        assert!(agent.contains("kind: Namespace") && agent.contains("image: ferry:dev"));
        assert!(!agent.contains("t0k3n"), "no token outside the Secret file");
        let values = std::fs::read_to_string(dir.join(BUNDLE_VALUES_FILE)).expect("values");
        assert!(values.contains(AGENT_HUB_SECRET), "{values}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[tokio::test]
    async fn the_bundle_secret_stays_0600_on_a_second_run() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("ferry-bundle-{}", rand::random::<u64>()));
        write_bundle(&dir, &access(), None)
            .await
            .expect("first run");
        let secret = dir.join(BUNDLE_SECRET_FILE);
        // Someone (or an older ferry) widened the file between runs.
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        write_bundle(&dir, &access(), None)
            .await
            .expect("second run");
        let mode = std::fs::metadata(&secret)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "the Secret file after a second run: {mode:o}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[tokio::test]
    async fn a_symlink_at_the_bundle_secret_path_is_refused() {
        let dir = std::env::temp_dir().join(format!("ferry-bundle-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).expect("dir");
        let victim = dir.join("victim");
        std::fs::write(&victim, b"untouched").expect("victim");
        std::os::unix::fs::symlink(&victim, dir.join(BUNDLE_SECRET_FILE)).expect("symlink");
        let err = write_bundle(&dir, &access(), None)
            .await
            .expect_err("a symlink at the Secret path must be refused");
        assert!(matches!(err, BundleError::Private(_)), "{err}");
        assert_eq!(std::fs::read(&victim).expect("victim"), b"untouched");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
