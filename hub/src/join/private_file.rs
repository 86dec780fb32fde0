//! Writing secrets (agent tokens, the bundle Secret) to files only their
//! owner can read, without ever following a symlink at the path.
//!
//! The file is opened with `O_NOFOLLOW`, so a symlink planted at the path
//! makes the open fail instead of redirecting the secret elsewhere; an
//! existing regular file is narrowed to 0600 through the open descriptor
//! before it is truncated, so a file left 0644 by an older run is fixed on
//! every run, not only the first.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Why a private file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PrivateFileError {
    /// A symlink sits at the path; it is refused rather than followed.
    #[error("{path} is a symlink; refusing to write a secret through it")]
    Symlink {
        /// The refused path.
        path: PathBuf,
    },
    /// Something other than a regular file (directory, FIFO, device) is there.
    #[error("{path} is not a regular file; refusing to write a secret into it")]
    NotRegular {
        /// The refused path.
        path: PathBuf,
    },
    /// Opening, narrowing the mode of, or writing the file failed.
    #[error("writing {path}: {source}")]
    Io {
        /// The file being written.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

/// The only mode a secret file may have: read and write for its owner.
pub const PRIVATE_MODE: u32 = 0o600;

/// Writes `bytes` to `path` as a file of mode 0600, creating it if needed.
/// Fails with [`PrivateFileError::Symlink`] when the path is a symlink
/// (dangling or not), [`PrivateFileError::NotRegular`] when it is not a
/// regular file, and [`PrivateFileError::Io`] when the system refuses.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), PrivateFileError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let io = |source: std::io::Error| PrivateFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    // Checked first for a clear message; O_NOFOLLOW below closes the race
    // of a symlink appearing between this check and the open.
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && meta.file_type().is_symlink()
    {
        return Err(PrivateFileError::Symlink {
            path: path.to_path_buf(),
        });
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .mode(PRIVATE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|source| {
            if source.raw_os_error() == Some(libc::ELOOP) {
                PrivateFileError::Symlink {
                    path: path.to_path_buf(),
                }
            } else {
                io(source)
            }
        })?;
    if !file.metadata().map_err(io)?.file_type().is_file() {
        return Err(PrivateFileError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    // Narrowed before the secret is written, through the descriptor, so the
    // content is never readable by others even for a moment.
    file.set_permissions(std::fs::Permissions::from_mode(PRIVATE_MODE))
        .map_err(io)?;
    file.set_len(0).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.sync_all().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("ferry-private-file-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn a_new_secret_file_is_0600() {
        let dir = scratch("new");
        let path = dir.join("a.token");
        write_private(&path, b"secret").expect("write");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(std::fs::read(&path).expect("read"), b"secret");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn an_existing_world_readable_file_is_narrowed_to_0600_and_replaced() {
        let dir = scratch("existing");
        let path = dir.join("a.token");
        std::fs::write(&path, b"an older, longer token").expect("seed");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        write_private(&path, b"new").expect("write");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(std::fs::read(&path).expect("read"), b"new");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_symlink_at_the_path_is_refused_and_its_target_untouched() {
        let dir = scratch("symlink");
        let target = dir.join("elsewhere");
        std::fs::write(&target, b"victim").expect("seed");
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let path = dir.join("a.token");
        std::os::unix::fs::symlink(&target, &path).expect("symlink");
        let err = write_private(&path, b"secret").expect_err("a symlink must be refused");
        assert!(matches!(err, PrivateFileError::Symlink { .. }), "{err}");
        assert_eq!(std::fs::read(&target).expect("read"), b"victim");
        assert_eq!(mode(&target), 0o644);
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_dangling_symlink_is_refused_and_creates_nothing() {
        let dir = scratch("dangling");
        let target = dir.join("not-there");
        let path = dir.join("a.token");
        std::os::unix::fs::symlink(&target, &path).expect("symlink");
        let err = write_private(&path, b"secret").expect_err("a symlink must be refused");
        assert!(matches!(err, PrivateFileError::Symlink { .. }), "{err}");
        assert!(!target.exists());
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_directory_at_the_path_is_refused() {
        let dir = scratch("dir");
        let path = dir.join("a.token");
        std::fs::create_dir(&path).expect("dir");
        assert!(write_private(&path, b"secret").is_err());
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
