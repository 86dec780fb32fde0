//! The Helm CLI for the chart tests: built once from its Go module
//! (`helm.sh/helm/v4/cmd/helm`, version [`HELM_VERSION`]) with `go install`
//! and cached in the ferry cache directory, like the control plane; and the
//! chart commands the tests and the manifest regeneration run with it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::harness::go_tool::{GoTool, GoToolError, ensure_go_tool};
use crate::harness::image::workspace_dir;

/// The Helm release built and used.
pub const HELM_VERSION: &str = "v4.3.1";

/// The Helm CLI's Go command.
const HELM: GoTool = GoTool {
    binary: "helm",
    package: "helm.sh/helm/v4/cmd/helm",
    version: HELM_VERSION,
};

/// Helm could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum HelmError {
    /// Helm could not be built from its Go module.
    #[error(transparent)]
    Build(#[from] GoToolError),
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

/// Path of the cached Helm binary, building it first when the cache lacks it
/// (a cold build takes minutes and needs the Go module proxy). Blocking.
pub fn ensure_helm() -> Result<PathBuf, HelmError> {
    Ok(ensure_go_tool(HELM)?)
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
