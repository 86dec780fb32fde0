//! Prometheus's rule checker and unit tester, `promtool`, for the alert
//! tests: built once from its Go module (`github.com/prometheus/prometheus`,
//! version [`PROMTOOL_VERSION`]) with `go install` and cached in the ferry
//! cache directory under a directory named for that version, as Helm is
//! (see `harness::helm`). Nothing is vendored.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::harness::go_tool::{GoTool, GoToolError, ensure_go_tool};

/// The Prometheus module version promtool is built from.
pub const PROMTOOL_VERSION: &str = "v0.316.0";

/// The promtool Go command.
const PROMTOOL: GoTool = GoTool {
    binary: "promtool",
    package: "github.com/prometheus/prometheus/cmd/promtool",
    version: PROMTOOL_VERSION,
};

/// promtool could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum PromtoolError {
    /// promtool could not be built from its Go module.
    #[error(transparent)]
    Build(#[from] GoToolError),
    /// promtool could not start.
    #[error("running promtool {args}: {source}")]
    Spawn {
        /// The arguments.
        args: String,
        /// The spawn error.
        #[source]
        source: std::io::Error,
    },
}

/// What one promtool command did.
#[derive(Debug)]
pub struct PromtoolRun {
    /// Whether it exited 0.
    pub success: bool,
    /// Its stdout and stderr, in that order.
    pub output: String,
}

/// Path of the cached promtool, building it first when the cache lacks it
/// (a cold build takes minutes and needs the Go module proxy). Blocking.
pub fn ensure_promtool() -> Result<PathBuf, PromtoolError> {
    Ok(ensure_go_tool(PROMTOOL)?)
}

/// Runs `promtool args` in `dir` (where relative `rule_files` of a test
/// file resolve) and returns whether it passed, with its output. Blocking.
pub fn promtool(dir: &Path, args: &[&str]) -> Result<PromtoolRun, PromtoolError> {
    let binary = ensure_promtool()?;
    let output = Command::new(&binary)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| PromtoolError::Spawn {
            args: args.join(" "),
            source,
        })?;
    Ok(PromtoolRun {
        success: output.status.success(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    })
}
