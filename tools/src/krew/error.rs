//! Why an archive or manifest could not be written.

use std::path::PathBuf;

/// A krew archive or manifest could not be written.
#[derive(Debug, thiserror::Error)]
pub enum KrewError {
    /// A file to pack could not be read.
    #[error("reading {path} for the krew archive: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The archive or manifest could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The version is not what krew accepts (`v` and a semantic version).
    #[error("krew needs a version like v1.2.3, not {0:?}")]
    Version(String),
    /// A platform is not `os/arch` with a system ferry builds for (linux,
    /// darwin) and an architecture krew's selectors know.
    #[error(
        "{0:?} is not a platform ferry releases through krew (os/arch with os linux or darwin, e.g. linux/amd64)"
    )]
    Platform(String),
    /// The manifest could not be serialized (a bug: it is plain data).
    #[error("serializing the krew manifest: {0}")]
    Serialize(#[from] serde_yaml::Error),
}
