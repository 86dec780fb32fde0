//! The Helm CLI for the chart tests: built once from its Go module
//! (`helm.sh/helm/v4/cmd/helm`, version [`HELM_VERSION`]) with `go install`
//! and cached in the ferry cache directory, like the control plane; and the
//! chart commands the tests and the manifest regeneration run with it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

use crate::harness::controlplane_build::cache_dir;
use crate::harness::image::workspace_dir;

/// The Helm release built and used.
pub const HELM_VERSION: &str = "v4.3.1";

/// The Go module path of the Helm CLI.
const HELM_PACKAGE: &str = "helm.sh/helm/v4/cmd/helm";

/// Helm could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum HelmError {
    /// Creating or moving the cached binary failed.
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
    /// No cache directory.
    #[error(transparent)]
    Cache(#[from] crate::harness::controlplane_build::BuildError),
    /// `go install` could not start or failed.
    #[error(
        "go install {HELM_PACKAGE}@{HELM_VERSION} with {go}: {detail} (set FERRY_GO to a Go toolchain)"
    )]
    GoInstall {
        /// The go command.
        go: String,
        /// Spawn error or exit status.
        detail: String,
    },
    /// A helm command could not start or failed; its output is kept.
    #[error("helm {args} failed ({status}):\n{output}")]
    Command {
        /// The arguments.
        args: String,
        /// Exit status or spawn error.
        status: String,
        /// stdout and stderr.
        output: String,
    },
}

static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// Path of the cached Helm binary, building it first when the cache lacks it
/// (a cold build takes minutes and needs the Go module proxy). Blocking.
pub fn ensure_helm() -> Result<PathBuf, HelmError> {
    let _guard = BUILD_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = cache_dir()?.join(format!("helm-{HELM_VERSION}"));
    let binary = dir.join("helm");
    if binary.is_file() {
        return Ok(binary);
    }
    // go install writes into GOBIN; a per-process directory keeps a
    // concurrent build from seeing a half-written binary.
    let partial = cache_dir()?.join(format!(".helm-{HELM_VERSION}.{}", std::process::id()));
    for path in [&dir, &partial] {
        std::fs::create_dir_all(path).map_err(|source| HelmError::Io {
            action: "creating",
            path: path.clone(),
            source,
        })?;
    }
    let go = std::env::var("FERRY_GO").unwrap_or_else(|_| "go".into());
    let _ = writeln_stderr(format_args!(
        "ferry-e2e: building Helm {HELM_VERSION} into {} (a cold build takes minutes)",
        binary.display()
    ));
    let started = Instant::now();
    let status = Command::new(&go)
        .args(["install", &format!("{HELM_PACKAGE}@{HELM_VERSION}")])
        .env("GOBIN", &partial)
        .env("GOFLAGS", "-mod=mod")
        .env("CGO_ENABLED", "0")
        .stdin(Stdio::null())
        .status()
        .map_err(|e| HelmError::GoInstall {
            go: go.clone(),
            detail: e.to_string(),
        })?;
    if !status.success() {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(HelmError::GoInstall {
            go,
            detail: status.to_string(),
        });
    }
    std::fs::rename(partial.join("helm"), &binary).map_err(|source| HelmError::Io {
        action: "moving the built helm to",
        path: binary.clone(),
        source,
    })?;
    let _ = std::fs::remove_dir_all(&partial);
    let _ = writeln_stderr(format_args!(
        "ferry-e2e: Helm built in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(binary)
}

// libtest captures `eprintln!` but not writes to the stderr handle, so the
// progress of a minutes-long build shows up under `cargo test` too.
fn writeln_stderr(args: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    use std::io::Write as _;
    writeln!(std::io::stderr(), "{args}")
}

/// The charts directory, `deploy/charts`.
pub fn charts_dir() -> PathBuf {
    workspace_dir().join("deploy/charts")
}

/// The directory of the manifests rendered from the charts, `deploy/manifests`.
pub fn manifests_dir() -> PathBuf {
    workspace_dir().join("deploy/manifests")
}

/// The charts and the namespace each one's manifests are rendered for.
pub const CHARTS: [(&str, &str); 2] = [("ferry-hub", "ferry"), ("ferry-agent", "ferry-agent")];

/// Runs `helm args` and returns its stdout; fails with its whole output
/// when it exits non-zero. Blocking.
pub fn helm(args: &[&str]) -> Result<String, HelmError> {
    let binary = ensure_helm()?;
    let joined = args.join(" ");
    let output = Command::new(&binary)
        .args(args)
        // No user's Helm configuration or repositories leak into the render.
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("ferry-helm-config"),
        )
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("ferry-helm-cache"),
        )
        .env(
            "HELM_DATA_HOME",
            std::env::temp_dir().join("ferry-helm-data"),
        )
        .stdin(Stdio::null())
        .output()
        .map_err(|e| HelmError::Command {
            args: joined.clone(),
            status: e.to_string(),
            output: String::new(),
        })?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        return Err(HelmError::Command {
            args: joined,
            status: output.status.to_string(),
            output: format!("{stdout}{}", String::from_utf8_lossy(&output.stderr)),
        });
    }
    Ok(stdout)
}

/// The manifests of chart `name` with its default values, as checked in
/// under `deploy/manifests/{name}.yaml`: `helm template` with release name
/// `name` in `namespace`, CRDs included. Blocking.
pub fn render(name: &str, namespace: &str) -> Result<String, HelmError> {
    let chart = charts_dir().join(name);
    let chart = chart.to_string_lossy();
    let rendered = helm(&[
        "template",
        name,
        &chart,
        "--namespace",
        namespace,
        "--include-crds",
    ])?;
    Ok(format!(
        "# Rendered from deploy/charts/{name} with its default values; do not edit.\n\
         # Regenerate: FERRY_UPDATE_MANIFESTS=1 cargo test -p ferry-e2e --test e2e charts::\n{rendered}"
    ))
}

/// `helm template` of chart `name` (release `name`) in `namespace` with the
/// values `sets` (each `KEY=VALUE`, as `--set` takes it), CRDs left out:
/// for tests that install what the chart renders with other values than
/// the defaults. Blocking.
pub fn render_with(name: &str, namespace: &str, sets: &[&str]) -> Result<String, HelmError> {
    let chart = charts_dir().join(name);
    let chart = chart.to_string_lossy();
    let mut args = vec!["template", name, &chart, "--namespace", namespace];
    for set in sets {
        args.extend(["--set", set]);
    }
    helm(&args)
}

/// `deploy/manifests/{name}.yaml`.
pub fn manifest_path(name: &str) -> PathBuf {
    manifests_dir().join(format!("{name}.yaml"))
}

/// Reads a checked-in file, empty when absent (so a missing file is a diff).
pub fn read_or_empty(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
