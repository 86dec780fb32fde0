//! ferry's container image written without a container tool: the root
//! filesystem `deploy/image/rootfs.sh` assembles for the Containerfile, as one
//! deterministic gzip-compressed tar layer, in an OCI image layout directory
//! with the Containerfile's config. `ferry-tools image` and
//! `deploy/image/build.sh` run it; the e2e image test runs what it writes.

mod error;
mod layer;
mod layout;
mod rootfs;

use std::path::{Path, PathBuf};

pub use error::ImageError;
pub use layer::Layer;
pub use layout::{CONFIG_TYPE, ImageMeta, LAYER_TYPE, MANIFEST_TYPE};
pub use rootfs::{CA_BUNDLE, Content, RootFile, RootFs, USER_ID, assemble, parse_ldd};

/// What [`write_image`] wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// The layout directory.
    pub out: PathBuf,
    /// `sha256:<hex>` of the manifest (the image's digest).
    pub manifest_digest: String,
    /// The layer, with its compressed and uncompressed sizes.
    pub layer: Layer,
    /// How many files the root filesystem holds.
    pub files: usize,
}

/// Writes the image of `binaries` (ferry-hub and ferry-agent) as an OCI
/// layout in `out`, replacing what was there. Blocking.
pub fn write_image(
    out: &Path,
    binaries: &[PathBuf],
    meta: &ImageMeta,
) -> Result<Written, ImageError> {
    let files = assemble(binaries)?;
    if out.exists() {
        std::fs::remove_dir_all(out).map_err(|source| ImageError::Write {
            path: out.to_path_buf(),
            source,
        })?;
    }
    let blobs = layout::blobs_dir(out);
    std::fs::create_dir_all(&blobs).map_err(|source| ImageError::Write {
        path: blobs.clone(),
        source,
    })?;
    let layer = layer::write_layer(&files, &blobs.join(".layer.partial"))?;
    let manifest_digest = layout::finish(out, meta, &layer)?;
    Ok(Written {
        out: out.to_path_buf(),
        manifest_digest,
        layer,
        files: files.len(),
    })
}

#[cfg(test)]
mod tests;
