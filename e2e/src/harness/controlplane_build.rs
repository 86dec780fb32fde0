//! Builds the Go control plane in `e2e/controlplane` once and caches the
//! binary, keyed by a hash of its sources, go.mod and go.sum. A cold build
//! takes minutes, so progress is printed while it runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// The control plane could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Reading the sources or writing the cache failed.
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
    /// The build script could not be started.
    #[error("starting build.sh with {go} (set FERRY_GO to a Go 1.26 toolchain): {source}")]
    GoMissing {
        /// The go command tried.
        go: String,
        /// The spawn error.
        #[source]
        source: std::io::Error,
    },
    /// `go build` failed.
    #[error("go build of the control plane failed ({status}); its output is above")]
    GoBuild {
        /// Exit status.
        status: std::process::ExitStatus,
    },
    /// No cache directory could be determined.
    #[error("no cache directory: set FERRY_CACHE_DIR, XDG_CACHE_HOME or HOME")]
    NoCacheDir,
}

static BUILD_LOCK: Mutex<()> = Mutex::new(());

// libtest captures `eprintln!` but not writes to the stderr handle, so the
// progress of a minutes-long build shows up under `cargo test` too.
macro_rules! progress {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// The directory of the Go module.
pub fn controlplane_source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("controlplane")
}

/// Where built binaries are kept: `$FERRY_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/ferry`, else `~/.cache/ferry`.
pub fn cache_dir() -> Result<PathBuf, BuildError> {
    if let Some(dir) = std::env::var_os("FERRY_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(dir).join("ferry"));
    }
    std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".cache/ferry"))
        .ok_or(BuildError::NoCacheDir)
}

/// Hash of everything that goes into the binary: go.mod, go.sum, build.sh and
/// the Go sources, in a stable order.
pub fn source_key(dir: &Path) -> Result<String, BuildError> {
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| BuildError::Io {
            action,
            path,
            source,
        }
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io("listing", dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name == "go.mod"
                || name == "go.sum"
                || (name.ends_with(".go") && !name.ends_with("_test.go"))
        })
        .collect();
    files.sort();
    let mut hasher = Sha256::new();
    for file in files {
        let bytes = std::fs::read(&file).map_err(io("reading", &file))?;
        hasher.update(
            file.file_name()
                .map(|n| n.as_encoded_bytes())
                .unwrap_or_default(),
        );
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    let digest = hasher.finalize();
    Ok(digest.iter().take(8).map(|b| format!("{b:02x}")).collect())
}

/// Path of the control-plane binary, building it first if the cache lacks it.
/// Blocking: call from `spawn_blocking` in async code.
pub fn ensure_controlplane_binary() -> Result<PathBuf, BuildError> {
    let _guard = BUILD_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let source = controlplane_source_dir();
    let key = source_key(&source)?;
    let cache = cache_dir()?;
    let binary = cache.join(format!("ferry-controlplane-{key}"));
    if binary.is_file() {
        return Ok(binary);
    }
    std::fs::create_dir_all(&cache).map_err(|source| BuildError::Io {
        action: "creating",
        path: cache.clone(),
        source,
    })?;
    let partial = cache.join(format!(".ferry-controlplane-{key}.{}", std::process::id()));
    // build.sh stamps the Kubernetes version; it runs the `go` on PATH, so a
    // toolchain named by FERRY_GO goes first on PATH.
    let go = std::env::var("FERRY_GO").unwrap_or_else(|_| "go".into());
    let mut path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(dir) = Path::new(&go)
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    {
        let mut dirs = vec![dir.to_path_buf()];
        dirs.extend(std::env::split_paths(&path));
        path = std::env::join_paths(dirs).unwrap_or(path);
    }
    progress!(
        "ferry-e2e: building the control plane into {} (a cold build takes several minutes)",
        binary.display()
    );
    let started = Instant::now();
    let mut child = Command::new("sh")
        .arg(source.join("build.sh"))
        .arg(&partial)
        .env("PATH", path)
        .current_dir(&source)
        .stdin(Stdio::null())
        .spawn()
        .map_err(|source| BuildError::GoMissing {
            go: go.clone(),
            source,
        })?;
    let mut next_report = Duration::from_secs(30);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {
                std::thread::sleep(Duration::from_millis(500));
                if started.elapsed() >= next_report {
                    progress!(
                        "ferry-e2e: still building the control plane ({} s)",
                        next_report.as_secs()
                    );
                    next_report += Duration::from_secs(30);
                }
            }
            Err(source) => {
                return Err(BuildError::Io {
                    action: "waiting for the build of",
                    path: controlplane_source_dir(),
                    source,
                });
            }
        }
    };
    if !status.success() {
        let _ = std::fs::remove_file(&partial);
        return Err(BuildError::GoBuild { status });
    }
    std::fs::rename(&partial, &binary).map_err(|source| BuildError::Io {
        action: "moving the built binary to",
        path: binary.clone(),
        source,
    })?;
    progress!(
        "ferry-e2e: control plane built in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(binary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_changes_with_any_source_file_and_ignores_other_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("go.mod"), "module x\n").expect("write");
        std::fs::write(dir.path().join("main.go"), "package main\n").expect("write");
        let first = source_key(dir.path()).expect("key");
        std::fs::write(dir.path().join("notes.txt"), "hello").expect("write");
        assert_eq!(source_key(dir.path()).expect("key"), first);
        std::fs::write(dir.path().join("main.go"), "package main\n// x\n").expect("write");
        assert_ne!(source_key(dir.path()).expect("key"), first);
    }
}
