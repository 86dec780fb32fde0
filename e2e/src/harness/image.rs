//! ferry's container image as tests see it: the OCI layout directory named
//! by `FERRY_IMAGE_OCI`, or one the test writes with ferry-tools' image
//! writer into a directory this handle owns; the workspace's ferry-hub and
//! ferry-agent binaries; and the image's root filesystem and config, read
//! from the layout (index.json → manifest → config and gzip-compressed tar
//! layers), every blob checked against its digest.

use std::collections::BTreeMap;
use std::io::BufRead as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The environment variable naming an already built image (OCI layout dir).
pub const IMAGE_ENV: &str = "FERRY_IMAGE_OCI";

/// The image could not be found, built or read.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// A file could not be read or written.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// A build step (cargo) could not start or failed.
    #[error("{step} failed: {detail}")]
    Build {
        /// The command.
        step: String,
        /// Its exit status or spawn error.
        detail: String,
    },
    /// A JSON document of the layout did not parse.
    #[error("parsing {path} as {what}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// What it should be.
        what: &'static str,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// The layout is not what an OCI image layout must be.
    #[error("OCI layout {layout}: {problem}")]
    Layout {
        /// The layout directory.
        layout: PathBuf,
        /// What is wrong.
        problem: String,
    },
}

/// An image to test: a layout directory, removed with this handle when it was
/// built here.
pub struct Image {
    /// The OCI layout directory.
    pub layout: PathBuf,
    /// How it was obtained, for the test output.
    pub origin: String,
    _built: Option<tempfile::TempDir>,
}

/// The image's runtime config (the part of the OCI config tests check).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RuntimeConfig {
    /// `uid[:gid]` the container runs as.
    #[serde(rename = "User", default)]
    pub user: String,
    /// The entrypoint.
    #[serde(rename = "Entrypoint", default)]
    pub entrypoint: Vec<String>,
    /// The default arguments.
    #[serde(rename = "Cmd", default)]
    pub cmd: Vec<String>,
    /// `NAME=value` environment entries.
    #[serde(rename = "Env", default)]
    pub env: Vec<String>,
    /// Labels (`org.opencontainers.image.*`).
    #[serde(rename = "Labels", default)]
    pub labels: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct ImageConfigDoc {
    #[serde(default)]
    config: RuntimeConfig,
}

#[derive(Deserialize)]
struct Descriptor {
    #[serde(rename = "mediaType", default)]
    media_type: String,
    digest: String,
    /// Set on artifacts (an SBOM, a signature), absent on images.
    #[serde(rename = "artifactType", default)]
    artifact_type: Option<String>,
}

#[derive(Deserialize)]
struct Index {
    manifests: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct Manifest {
    config: Descriptor,
    layers: Vec<Descriptor>,
}

/// The workspace root (the parent of `e2e/`).
pub fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// The image named by `FERRY_IMAGE_OCI`, if it is set.
pub fn named_image() -> Option<Image> {
    let layout = PathBuf::from(std::env::var_os(IMAGE_ENV)?);
    Some(Image {
        origin: format!("{IMAGE_ENV}={}", layout.display()),
        layout,
        _built: None,
    })
}

impl Image {
    /// An image written into `dir` (its layout at `layout`, inside `dir`),
    /// removed with the returned handle; `origin` says how it was made.
    pub fn built(dir: tempfile::TempDir, layout: PathBuf, origin: String) -> Self {
        Self {
            layout,
            origin,
            _built: Some(dir),
        }
    }
}

/// Every file under `root` (an unpacked or assembled image root) with its
/// permission bits, keyed by its absolute path inside the image. Panics when
/// the tree cannot be read: it is for tests.
pub fn root_files(root: &Path) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir") {
            let path = entry.expect("entry").path();
            let meta = std::fs::symlink_metadata(&path).expect("metadata");
            if meta.is_dir() {
                stack.push(path);
            } else {
                let inside = path.strip_prefix(root).expect("inside root");
                out.insert(
                    format!("/{}", inside.display()),
                    meta.permissions().mode() & 0o7777,
                );
            }
        }
    }
    out
}

/// The cargo arguments that build ferry's binaries exactly as
/// `cargo test --workspace` does. Cargo unifies features over the packages
/// and targets it is asked for, so `build -p ferry-hub -p ferry-agent` gives
/// tokio, kube, ring and their dependents other features than the test run
/// and rebuilds them all (minutes of both cores, in the middle of the e2e
/// run, which starved the tests running beside it). The whole workspace's
/// bins and tests unify to the same units as `cargo test --workspace`
/// (compared with `cargo +nightly build --unit-graph`), so under it this is
/// a no-op.
const BUILD_ARGS: [&str; 6] = [
    "build",
    "--workspace",
    "--bins",
    "--tests",
    "--locked",
    "--message-format=json",
];

/// Whether `name` is one of the variables cargo sets for the test process
/// itself (the test package's manifest, name and version, its temporary
/// directory). They must not reach the inner cargo: build scripts that
/// declare `rerun-if-env-changed` on one (ring's does, on
/// `CARGO_MANIFEST_DIR`) would see it change, and everything above ring
/// would be rebuilt mid-run, the running test binary overwritten with it
/// (the tests that start it again then find no file).
fn set_for_the_test_run(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || matches!(
            name,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_TARGET_TMPDIR"
                | "CARGO_RUSTC_CURRENT_DIR"
                | "OUT_DIR"
        )
}

/// Builds ferry-hub and ferry-agent with the cargo running the tests (a
/// no-op under `cargo test --workspace`, see [`BUILD_ARGS`]) and returns
/// their paths, [hub, agent], as cargo reports them. Blocking; fails when
/// cargo fails or reports no such executable.
pub fn build_binaries() -> Result<[PathBuf; 2], ImageError> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let step = format!("{cargo} {}", BUILD_ARGS.join(" "));
    let mut command = Command::new(&cargo);
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_for_the_test_run) {
            command.env_remove(name);
        }
    }
    let output = command
        .args(BUILD_ARGS)
        .current_dir(workspace_dir())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| ImageError::Build {
            step: step.clone(),
            detail: e.to_string(),
        })?;
    if !output.status.success() {
        return Err(ImageError::Build {
            step,
            detail: output.status.to_string(),
        });
    }
    let mut hub = None;
    let mut agent = None;
    for line in output.stdout.lines() {
        let Ok(line) = line else { continue };
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        // `--tests` also reports each binary's unit-test harness under the
        // binary's name; only the binary itself is wanted.
        if message["profile"]["test"].as_bool() != Some(false) {
            continue;
        }
        let Some(executable) = message["executable"].as_str() else {
            continue;
        };
        match message["target"]["name"].as_str() {
            Some("ferry-hub") => hub = Some(PathBuf::from(executable)),
            Some("ferry-agent") => agent = Some(PathBuf::from(executable)),
            _ => {}
        }
    }
    match (hub, agent) {
        (Some(hub), Some(agent)) => Ok([hub, agent]),
        _ => Err(ImageError::Build {
            step,
            detail: "cargo reported no ferry-hub or ferry-agent executable".into(),
        }),
    }
}

/// Reads blob `digest` of `layout`, checking that its content has that digest.
fn blob(layout: &Path, digest: &str) -> Result<Vec<u8>, ImageError> {
    let layout_error = |problem: String| ImageError::Layout {
        layout: layout.to_path_buf(),
        problem,
    };
    let hex = digest
        .strip_prefix("sha256:")
        .ok_or_else(|| layout_error(format!("digest {digest} is not sha256")))?;
    let path = layout.join("blobs/sha256").join(hex);
    let bytes = std::fs::read(&path).map_err(|source| ImageError::Io {
        action: "reading blob",
        path: path.clone(),
        source,
    })?;
    let actual: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if actual != hex {
        return Err(layout_error(format!(
            "blob {digest} has digest sha256:{actual}"
        )));
    }
    Ok(bytes)
}

fn json<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    path: PathBuf,
    what: &'static str,
) -> Result<T, ImageError> {
    serde_json::from_slice(bytes).map_err(|source| ImageError::Json { path, what, source })
}

/// Unpacks the single image of `layout` into `root` (layers in order) and
/// returns its runtime config. Whiteout entries (`.wh.*`, from images with
/// several layers deleting files) are refused rather than unpacked wrongly.
pub fn unpack(layout: &Path, root: &Path) -> Result<RuntimeConfig, ImageError> {
    let layout_error = |problem: String| ImageError::Layout {
        layout: layout.to_path_buf(),
        problem,
    };
    let index_path = layout.join("index.json");
    let index_bytes = std::fs::read(&index_path).map_err(|source| ImageError::Io {
        action: "reading",
        path: index_path.clone(),
        source,
    })?;
    let index: Index = json(&index_bytes, index_path, "an OCI index")?;
    // Artifacts referring to the image (its SBOM) are listed beside it.
    let images: Vec<&Descriptor> = index
        .manifests
        .iter()
        .filter(|m| m.artifact_type.is_none())
        .collect();
    let [manifest_desc] = images.as_slice() else {
        return Err(layout_error(format!(
            "index.json lists {} images, expected one",
            images.len()
        )));
    };
    let manifest: Manifest = json(
        &blob(layout, &manifest_desc.digest)?,
        layout.join(&manifest_desc.digest),
        "an OCI manifest",
    )?;
    let config: ImageConfigDoc = json(
        &blob(layout, &manifest.config.digest)?,
        layout.join(&manifest.config.digest),
        "an OCI image config",
    )?;
    for layer in &manifest.layers {
        let bytes = blob(layout, &layer.digest)?;
        let reader: Box<dyn std::io::Read> = match layer.media_type.as_str() {
            "application/vnd.oci.image.layer.v1.tar+gzip"
            | "application/vnd.docker.image.rootfs.diff.tar.gzip" => {
                Box::new(flate2::read::GzDecoder::new(bytes.as_slice()))
            }
            "application/vnd.oci.image.layer.v1.tar" => Box::new(bytes.as_slice()),
            other => {
                return Err(layout_error(format!(
                    "layer media type {other} unsupported"
                )));
            }
        };
        let mut archive = tar::Archive::new(reader);
        archive.set_preserve_permissions(true);
        archive.set_overwrite(true);
        let entries = archive.entries().map_err(|source| ImageError::Io {
            action: "reading the tar of layer",
            path: layout.join(&layer.digest),
            source,
        })?;
        for entry in entries {
            let mut entry = entry.map_err(|source| ImageError::Io {
                action: "reading an entry of layer",
                path: layout.join(&layer.digest),
                source,
            })?;
            let path = entry.path().map(|p| p.to_path_buf()).unwrap_or_default();
            if path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".wh."))
            {
                return Err(layout_error(format!(
                    "layer {} has a whiteout {}; only images built without deletions are supported",
                    layer.digest,
                    path.display()
                )));
            }
            // unpack_in refuses entries that would land outside `root`.
            entry.unpack_in(root).map_err(|source| ImageError::Io {
                action: "unpacking into",
                path: root.join(&path),
                source,
            })?;
        }
    }
    Ok(config.config)
}
