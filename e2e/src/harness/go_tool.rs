//! Command-line tools the tests run, built from their Go modules with
//! `go install` and cached in the ferry cache directory under a directory
//! named for the tool and its version (Helm, promtool). Nothing is vendored:
//! a cold build needs the Go module proxy and takes minutes, a warm one
//! finds the binary.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

use crate::harness::controlplane_build::cache_dir;

/// A Go command to build: its binary name, package and module version.
#[derive(Debug, Clone, Copy)]
pub struct GoTool {
    /// The binary `go install` writes (the package's last element).
    pub binary: &'static str,
    /// The Go package path of the command.
    pub package: &'static str,
    /// The module version, e.g. `v4.3.1`.
    pub version: &'static str,
}

/// A tool could not be built.
#[derive(Debug, thiserror::Error)]
pub enum GoToolError {
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
    #[error("go install {package}@{version} with {go}: {detail} (set FERRY_GO to a Go toolchain)")]
    GoInstall {
        /// The package.
        package: &'static str,
        /// The version.
        version: &'static str,
        /// The go command.
        go: String,
        /// Spawn error or exit status.
        detail: String,
    },
}

// One build at a time in this process: two tests asking for the same tool
// wait for the first build instead of starting a second.
static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// Path of the cached `tool`, building it first when the cache lacks it.
/// Blocking; fails when the cache or the build does.
pub fn ensure_go_tool(tool: GoTool) -> Result<PathBuf, GoToolError> {
    ensure_built(tool, |go, partial| {
        Command::new(go)
            .args(["install", &format!("{}@{}", tool.package, tool.version)])
            .env("GOBIN", partial)
            .env("GOFLAGS", "-mod=mod")
            .env("CGO_ENABLED", "0")
            .stdin(Stdio::null())
            .status()
    })
}

/// Like [`ensure_go_tool`], for a command whose module `go install
/// pkg@version` refuses because its go.mod has `replace` directives (Jaeger):
/// the module is downloaded into the module cache and the package built in
/// it as the main module, with the module's own go.sum. `module` is the
/// module path, `tool.package` the package path inside it. Blocking; fails
/// when the cache, the download or the build does.
pub fn ensure_go_module_tool(module: &'static str, tool: GoTool) -> Result<PathBuf, GoToolError> {
    ensure_built(tool, |go, partial| {
        let download = Command::new(go)
            .args([
                "mod",
                "download",
                "-json",
                &format!("{module}@{}", tool.version),
            ])
            .stdin(Stdio::null())
            .output()?;
        if !download.status.success() {
            return Ok(download.status);
        }
        let dir = module_dir(&download.stdout).ok_or_else(|| {
            std::io::Error::other(format!("go mod download names no Dir for {module}"))
        })?;
        let relative = tool
            .package
            .strip_prefix(module)
            .map(|rest| format!(".{rest}"))
            .unwrap_or_else(|| ".".into());
        Command::new(go)
            .current_dir(dir)
            .args(["build", "-o"])
            .arg(partial.join(tool.binary))
            .arg(relative)
            .env("CGO_ENABLED", "0")
            .stdin(Stdio::null())
            .status()
    })
}

/// The `Dir` of `go mod download -json` output.
fn module_dir(json: &[u8]) -> Option<PathBuf> {
    let value: serde_json::Value = serde_json::from_slice(json).ok()?;
    value.get("Dir")?.as_str().map(PathBuf::from)
}

fn ensure_built(
    tool: GoTool,
    build: impl FnOnce(&str, &std::path::Path) -> std::io::Result<std::process::ExitStatus>,
) -> Result<PathBuf, GoToolError> {
    let _guard = BUILD_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let GoTool {
        binary: name,
        package,
        version,
    } = tool;
    let cache = cache_dir()?;
    let dir = cache.join(format!("{name}-{version}"));
    let binary = dir.join(name);
    if binary.is_file() {
        return Ok(binary);
    }
    // go install writes into GOBIN; a directory of this process's own keeps
    // another process building at the same time from seeing half a binary.
    let partial = cache.join(format!(".{name}-{version}.{}", std::process::id()));
    for path in [&dir, &partial] {
        std::fs::create_dir_all(path).map_err(|source| GoToolError::Io {
            action: "creating",
            path: path.clone(),
            source,
        })?;
    }
    let go = std::env::var("FERRY_GO").unwrap_or_else(|_| "go".into());
    progress(format_args!(
        "ferry-e2e: building {name} {version} into {} (a cold build takes minutes)",
        binary.display()
    ));
    let started = Instant::now();
    let failed = |go: String, detail: String| GoToolError::GoInstall {
        package,
        version,
        go,
        detail,
    };
    let status = build(&go, &partial).map_err(|e| failed(go.clone(), e.to_string()))?;
    if !status.success() {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(failed(go, status.to_string()));
    }
    std::fs::rename(partial.join(name), &binary).map_err(|source| GoToolError::Io {
        action: "moving the built binary to",
        path: binary.clone(),
        source,
    })?;
    let _ = std::fs::remove_dir_all(&partial);
    progress(format_args!(
        "ferry-e2e: {name} built in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(binary)
}

// libtest captures `eprintln!` but not writes to the stderr handle, so a
// minutes-long build shows its progress under `cargo test` too.
fn progress(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{args}");
}
