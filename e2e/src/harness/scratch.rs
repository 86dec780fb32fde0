//! Directories a test process keeps until it exits, such as the container
//! image unpacked once for every test of a file and held in a static (Rust
//! never drops statics, so a plain temporary directory there outlives the
//! process: about 300 MB per e2e run). They live under
//! `<temp dir>/ferry-e2e-scratch/<pid>/`, and the first call in a process
//! removes the directories of processes that have exited, so each run
//! leaves at most its own behind until the next one starts.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Why a scratch directory could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ScratchError {
    /// Creating this process's directory or one inside it failed.
    #[error("creating a scratch directory under {path}: {source}")]
    Create {
        /// The directory being created.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
}

/// A new directory named `<prefix>XXXXXX` under this process's scratch
/// directory; removed when dropped, and otherwise by the next test process.
/// Fails when the directories cannot be created.
pub fn process_scratch(prefix: &str) -> Result<tempfile::TempDir, ScratchError> {
    let own = own_dir()?;
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(own)
        .map_err(|source| ScratchError::Create {
            path: own.to_path_buf(),
            source,
        })
}

fn own_dir() -> Result<&'static Path, ScratchError> {
    static OWN: OnceLock<PathBuf> = OnceLock::new();
    if let Some(own) = OWN.get() {
        return Ok(own);
    }
    let parent = std::env::temp_dir().join("ferry-e2e-scratch");
    let own = parent.join(std::process::id().to_string());
    std::fs::create_dir_all(&own).map_err(|source| ScratchError::Create {
        path: own.clone(),
        source,
    })?;
    remove_exited(&parent);
    Ok(OWN.get_or_init(|| own))
}

/// Removes the scratch directories under `parent` of processes that are no
/// longer running. Best effort: what cannot be read or removed is left for
/// a later run.
fn remove_exited(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directories_of_exited_processes_are_removed_and_running_ones_kept() {
        let parent = tempfile::tempdir().expect("parent");
        // No process has pid u32::MAX - 1 (pid_max is at most 2^22).
        let gone = parent.path().join((u32::MAX - 1).to_string());
        let running = parent.path().join(std::process::id().to_string());
        let other = parent.path().join("not-a-pid");
        for dir in [&gone, &running, &other] {
            std::fs::create_dir_all(dir.join("inside")).expect("create");
        }
        remove_exited(parent.path());
        assert!(!gone.exists(), "an exited process's directory is removed");
        assert!(running.exists(), "a running process's directory is kept");
        assert!(other.exists(), "what is not a process's directory is kept");
    }

    #[test]
    fn scratch_directories_are_inside_this_process_directory() {
        let dir = process_scratch("ferry-scratch-test-").expect("scratch");
        let own = dir.path().parent().expect("parent");
        assert_eq!(
            own.file_name().and_then(|n| n.to_str()),
            Some(std::process::id().to_string().as_str())
        );
    }
}
