//! The OCI image layout around the layer: the image config (user, entrypoint,
//! environment, labels, the layer's `diff_id`), the manifest naming config
//! and layer by digest, `index.json` naming the manifest with its tag, the
//! `oci-layout` marker, and every blob under `blobs/sha256/<hex>`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::error::ImageError;
use super::layer::{Layer, sha256_name};
use super::rootfs::{CA_BUNDLE, USER_ID};
use super::sbom::SBOM_TYPE;

/// The media type of an OCI manifest.
pub const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The media type of an OCI image config.
pub const CONFIG_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// The media type of a gzip-compressed layer.
pub const LAYER_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// The media type of the empty config of an artifact manifest (OCI 1.1).
pub const EMPTY_TYPE: &str = "application/vnd.oci.empty.v1+json";

/// What the image says about itself: its labels and its tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageMeta {
    /// `org.opencontainers.image.version`.
    pub version: String,
    /// `org.opencontainers.image.source`.
    pub source: String,
    /// The tag, `org.opencontainers.image.ref.name` in `index.json`.
    pub tag: String,
    /// The workspace's `Cargo.toml`: the binaries' crates in the SBOM come
    /// from its resolve graph.
    pub workspace: PathBuf,
}

impl Default for ImageMeta {
    /// The workspace version as version and tag, the project's repository as
    /// source, the workspace this crate was built in.
    fn default() -> Self {
        Self {
            version: env!("CARGO_PKG_VERSION").into(),
            source: "https://github.com/ferry-rs/ferry".into(),
            tag: env!("CARGO_PKG_VERSION").into(),
            workspace: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml")),
        }
    }
}

/// The OCI name of this machine's architecture (`amd64`, `arm64`, ...).
fn architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// The image config document for `layer`: what deploy/Containerfile says
/// (USER, WORKDIR, ENV, LABEL, ENTRYPOINT, CMD).
pub fn config(meta: &ImageMeta, layer: &Layer) -> Value {
    json!({
        "architecture": architecture(),
        "os": "linux",
        "config": {
            "User": format!("{USER_ID}:{USER_ID}"),
            "WorkingDir": "/",
            "Env": [format!("SSL_CERT_FILE={CA_BUNDLE}")],
            "Entrypoint": ["/usr/local/bin/ferry-hub"],
            "Cmd": ["serve"],
            "Labels": {
                "org.opencontainers.image.title": "ferry",
                "org.opencontainers.image.description": "ferry hub and agent (ferry-hub is the entrypoint; run /usr/local/bin/ferry-agent for the agent)",
                "org.opencontainers.image.source": meta.source,
                "org.opencontainers.image.version": meta.version,
                "org.opencontainers.image.licenses": "Apache-2.0",
            },
        },
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id]},
    })
}

/// A content descriptor.
fn descriptor(media_type: &str, digest: &str, size: u64) -> Value {
    json!({"mediaType": media_type, "digest": digest, "size": size})
}

/// The directory of blobs in `out`.
pub fn blobs_dir(out: &Path) -> PathBuf {
    out.join("blobs/sha256")
}

/// Writes `bytes` as a blob of `out` and returns its digest.
fn write_blob(out: &Path, bytes: &[u8]) -> Result<String, ImageError> {
    let digest = sha256_name(&Sha256::digest(bytes));
    let path = blobs_dir(out).join(digest.trim_start_matches("sha256:"));
    std::fs::write(&path, bytes).map_err(|source| ImageError::Write { path, source })?;
    Ok(digest)
}

fn write_file(path: PathBuf, bytes: &[u8]) -> Result<(), ImageError> {
    std::fs::write(&path, bytes).map_err(|source| ImageError::Write { path, source })
}

/// Finishes the layout in `out`, whose blob directory holds `layer` under a
/// temporary name: moves the layer to its digest and writes config,
/// manifest, the `sbom` as an artifact whose subject is the image (OCI 1.1
/// referrer), `index.json` listing both and `oci-layout`. Returns the
/// image manifest's digest and the SBOM artifact manifest's.
pub fn finish(
    out: &Path,
    meta: &ImageMeta,
    layer: &Layer,
    sbom: &[u8],
) -> Result<(String, String), ImageError> {
    let layer_path = blobs_dir(out).join(layer.digest.trim_start_matches("sha256:"));
    std::fs::rename(&layer.path, &layer_path).map_err(|source| ImageError::Write {
        path: layer_path,
        source,
    })?;
    let config_bytes = to_bytes(&config(meta, layer));
    let config_digest = write_blob(out, &config_bytes)?;
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": descriptor(CONFIG_TYPE, &config_digest, config_bytes.len() as u64),
        "layers": [descriptor(LAYER_TYPE, &layer.digest, layer.size)],
    });
    let manifest_bytes = to_bytes(&manifest);
    let manifest_digest = write_blob(out, &manifest_bytes)?;
    let subject = descriptor(MANIFEST_TYPE, &manifest_digest, manifest_bytes.len() as u64);
    let mut manifest_descriptor = subject.clone();
    manifest_descriptor["annotations"] = json!({"org.opencontainers.image.ref.name": meta.tag});
    let sbom_digest = write_blob(out, sbom)?;
    let empty = b"{}";
    let empty_digest = write_blob(out, empty)?;
    let mut sbom_layer = descriptor(SBOM_TYPE, &sbom_digest, sbom.len() as u64);
    sbom_layer["annotations"] = json!({"org.opencontainers.image.title": "sbom.cdx.json"});
    let artifact = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "artifactType": SBOM_TYPE,
        "config": descriptor(EMPTY_TYPE, &empty_digest, empty.len() as u64),
        "layers": [sbom_layer],
        "subject": subject,
    });
    let artifact_bytes = to_bytes(&artifact);
    let artifact_digest = write_blob(out, &artifact_bytes)?;
    let mut artifact_descriptor =
        descriptor(MANIFEST_TYPE, &artifact_digest, artifact_bytes.len() as u64);
    artifact_descriptor["artifactType"] = json!(SBOM_TYPE);
    let index = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [manifest_descriptor, artifact_descriptor],
    });
    write_file(out.join("index.json"), &to_bytes(&index))?;
    write_file(
        out.join("oci-layout"),
        &to_bytes(&json!({"imageLayoutVersion": "1.0.0"})),
    )?;
    Ok((manifest_digest, artifact_digest))
}

/// Compact JSON with keys in a fixed order, so equal documents are equal
/// bytes and have equal digests.
fn to_bytes(value: &Value) -> Vec<u8> {
    value.to_string().into_bytes()
}
