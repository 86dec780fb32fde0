//! The image's single layer: the root filesystem as a tar, written the same
//! way every time (paths sorted, parent directories 0755 before their files,
//! owner 0:0, mtime 0), then gzip-compressed. Both digests are computed while
//! it streams to disk: the config's `diff_id` names the tar, the manifest the
//! compressed blob.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};

use super::error::ImageError;
use super::rootfs::{Content, RootFs};

/// A written layer: the gzip blob in a file with its digests.
#[derive(Debug, Clone)]
pub struct Layer {
    /// The compressed blob.
    pub path: PathBuf,
    /// `sha256:<hex>` of the compressed blob.
    pub digest: String,
    /// Size of the compressed blob in bytes.
    pub size: u64,
    /// `sha256:<hex>` of the uncompressed tar (the config's `diff_id`).
    pub diff_id: String,
    /// Size of the uncompressed tar in bytes.
    pub tar_size: u64,
}

/// A writer that hashes and counts what passes through it.
struct Hashing<W> {
    inner: W,
    hash: Sha256,
    count: u64,
}

impl<W: Write> Hashing<W> {
    fn new(inner: W) -> Self {
        Self {
            inner,
            hash: Sha256::new(),
            count: 0,
        }
    }

    fn finish(self) -> (W, String, u64) {
        (self.inner, sha256_name(&self.hash.finalize()), self.count)
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// `sha256:` and the hex of `digest`.
pub fn sha256_name(digest: &[u8]) -> String {
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Every directory above the files, parents first (`etc`, `etc/ssl`, ...).
fn directories(files: &RootFs) -> BTreeSet<String> {
    let mut dirs = BTreeSet::new();
    for path in files.keys() {
        let mut parent = Path::new(path.trim_start_matches('/')).parent();
        while let Some(dir) = parent.filter(|d| !d.as_os_str().is_empty()) {
            dirs.insert(dir.display().to_string());
            parent = dir.parent();
        }
    }
    dirs
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header
}

/// Writes `files` as a gzip-compressed tar to `path`.
pub fn write_layer(files: &RootFs, path: &Path) -> Result<Layer, ImageError> {
    let write_error = |source| ImageError::Write {
        path: path.to_path_buf(),
        source,
    };
    let file = File::create(path).map_err(write_error)?;
    let compressed = Hashing::new(BufWriter::new(file));
    let gzip = GzEncoder::new(compressed, Compression::default());
    let mut builder = tar::Builder::new(Hashing::new(gzip));
    // Directories and files in one sorted order: a directory sorts before
    // everything under it.
    let dirs = directories(files);
    let mut entries: Vec<(&str, Option<&super::rootfs::RootFile>)> = dirs
        .iter()
        .map(|d| (d.as_str(), None))
        .chain(
            files
                .iter()
                .map(|(p, f)| (p.trim_start_matches('/'), Some(f))),
        )
        .collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    for (name, file) in entries {
        match file {
            None => {
                let mut h = header(tar::EntryType::Directory, 0o755, 0);
                builder
                    .append_data(&mut h, format!("{name}/"), std::io::empty())
                    .map_err(write_error)?;
            }
            Some(file) => {
                let bytes = match &file.content {
                    Content::Bytes(bytes) => bytes.clone(),
                    Content::File(source) => {
                        std::fs::read(source).map_err(|source_error| ImageError::Read {
                            path: source.clone(),
                            source: source_error,
                        })?
                    }
                };
                let mut h = header(tar::EntryType::Regular, file.mode, bytes.len() as u64);
                builder
                    .append_data(&mut h, name, bytes.as_slice())
                    .map_err(write_error)?;
            }
        }
    }
    let tar_stream = builder.into_inner().map_err(write_error)?;
    let (gzip, diff_id, tar_size) = tar_stream.finish();
    let compressed = gzip.finish().map_err(write_error)?;
    let (mut file, digest, size) = compressed.finish();
    file.flush().map_err(write_error)?;
    Ok(Layer {
        path: path.to_path_buf(),
        digest,
        size,
        diff_id,
        tar_size,
    })
}
