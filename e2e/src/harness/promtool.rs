//! Prometheus's rule checker and unit tester, `promtool`, for the alert
//! tests: built once from its Go module (`github.com/prometheus/prometheus`,
//! version [`PROMTOOL_VERSION`]) with `go install` and cached in the ferry
//! cache directory under a directory named for that version, as Helm is
//! (see `harness::helm`). Nothing is vendored.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

use crate::harness::controlplane_build::cache_dir;

/// The Prometheus module version promtool is built from.
pub const PROMTOOL_VERSION: &str = "v0.316.0";

/// The Go package of the promtool command.
const PROMTOOL_PACKAGE: &str = "github.com/prometheus/prometheus/cmd/promtool";

/// promtool could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum PromtoolError {
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
        "go install {PROMTOOL_PACKAGE}@{PROMTOOL_VERSION} with {go}: {detail} (set FERRY_GO to a Go toolchain)"
    )]
    GoInstall {
        /// The go command.
        go: String,
        /// Spawn error or exit status.
        detail: String,
    },
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

static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// Path of the cached promtool, building it first when the cache lacks it
/// (a cold build takes minutes and needs the Go module proxy). Blocking.
pub fn ensure_promtool() -> Result<PathBuf, PromtoolError> {
    let _guard = BUILD_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let cache = cache_dir()?;
    let dir = cache.join(format!("promtool-{PROMTOOL_VERSION}"));
    let binary = dir.join("promtool");
    if binary.is_file() {
        return Ok(binary);
    }
    // go install writes into GOBIN; a directory of this process's own keeps
    // another process building at the same time from seeing half a binary.
    let partial = cache.join(format!(
        ".promtool-{PROMTOOL_VERSION}.{}",
        std::process::id()
    ));
    for path in [&dir, &partial] {
        std::fs::create_dir_all(path).map_err(|source| PromtoolError::Io {
            action: "creating",
            path: path.clone(),
            source,
        })?;
    }
    let go = std::env::var("FERRY_GO").unwrap_or_else(|_| "go".into());
    progress(format_args!(
        "ferry-e2e: building promtool ({PROMTOOL_VERSION}) into {} (a cold build takes minutes)",
        binary.display()
    ));
    let started = Instant::now();
    let status = Command::new(&go)
        .args(["install", &format!("{PROMTOOL_PACKAGE}@{PROMTOOL_VERSION}")])
        .env("GOBIN", &partial)
        .env("GOFLAGS", "-mod=mod")
        .env("CGO_ENABLED", "0")
        .stdin(Stdio::null())
        .status()
        .map_err(|e| PromtoolError::GoInstall {
            go: go.clone(),
            detail: e.to_string(),
        })?;
    if !status.success() {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(PromtoolError::GoInstall {
            go,
            detail: status.to_string(),
        });
    }
    std::fs::rename(partial.join("promtool"), &binary).map_err(|source| PromtoolError::Io {
        action: "moving the built promtool to",
        path: binary.clone(),
        source,
    })?;
    let _ = std::fs::remove_dir_all(&partial);
    progress(format_args!(
        "ferry-e2e: promtool built in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(binary)
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

// libtest captures `eprintln!` but not writes to the stderr handle, so a
// minutes-long build shows its progress under `cargo test` too.
fn progress(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{args}");
}
