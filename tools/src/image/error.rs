//! Why writing ferry's image failed.

use std::path::PathBuf;

/// Writing the image failed: one variant per step, each naming what it was
/// working on.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// A binary to ship is missing or not executable.
    #[error("{path} is not an executable file")]
    NotExecutable {
        /// The binary given.
        path: PathBuf,
    },
    /// `ldd` could not run or failed on a binary.
    #[error("running ldd on {binary} (ldd comes with libc-bin): {detail}")]
    Ldd {
        /// The binary.
        binary: PathBuf,
        /// The spawn error or exit status with ldd's stderr.
        detail: String,
    },
    /// A file of the root filesystem could not be read.
    #[error("reading {path} for the image (the CA bundle comes with ca-certificates): {source}")]
    Read {
        /// The file on this machine.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The layout directory or one of its files could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The SBOM could not be made: cargo's resolve graph unreadable, a
    /// binary with no workspace package, or the document invalid.
    #[error("the image's SBOM: {0}")]
    Sbom(String),
}
