//! ferry's container image written without a container tool: the root
//! filesystem `deploy/image/rootfs.sh` assembles for the Containerfile, as one
//! deterministic gzip-compressed tar layer, in an OCI image layout directory
//! with the Containerfile's config, and the image's SBOM (CycloneDX) as an
//! artifact referring to it. `ferry-tools image` and
//! `deploy/image/build.sh` run it; the e2e image test runs what it writes.

mod error;
mod layer;
mod layout;
mod rootfs;
mod sbom;

use std::path::{Path, PathBuf};

pub use error::ImageError;
pub use layer::Layer;
pub use layout::{CONFIG_TYPE, EMPTY_TYPE, ImageMeta, LAYER_TYPE, MANIFEST_TYPE};
pub use rootfs::{CA_BUNDLE, Content, RootFile, RootFs, USER_ID, assemble, parse_ldd};
pub use sbom::{Crates, SBOM_TYPE, sbom};

/// What [`write_image`] wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// The layout directory.
    pub out: PathBuf,
    /// `sha256:<hex>` of the manifest (the image's digest).
    pub manifest_digest: String,
    /// `sha256:<hex>` of the SBOM's artifact manifest (its subject is the
    /// image).
    pub sbom_digest: String,
    /// The layer, with its compressed and uncompressed sizes.
    pub layer: Layer,
    /// How many files the root filesystem holds.
    pub files: usize,
}

/// Writes the image of `binaries` (ferry-hub and ferry-agent) as an OCI
/// layout in `out`, replacing what was there, with its SBOM (the crates of
/// each binary read from `meta.workspace` with `cargo metadata`). Blocking;
/// fails naming the step that did.
pub fn write_image(
    out: &Path,
    binaries: &[PathBuf],
    meta: &ImageMeta,
) -> Result<Written, ImageError> {
    let files = assemble(binaries)?;
    let crates = Crates::read(&meta.workspace)?;
    let sbom = sbom::sbom("ferry", &meta.version, &files, &crates)?;
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
    let (manifest_digest, sbom_digest) = layout::finish(out, meta, &layer, &sbom)?;
    Ok(Written {
        out: out.to_path_buf(),
        manifest_digest,
        sbom_digest,
        layer,
        files: files.len(),
    })
}

#[cfg(test)]
mod tests;
