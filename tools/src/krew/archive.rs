//! One platform's krew archive: a gzip-compressed tar holding
//! `kubectl-ferry` (mode 0755) and `LICENSE` (0644), written the same way
//! every time (owner 0:0, mtime 0, this order), so the same binary always
//! gives the same sha256 and a release can be checked by rebuilding it.

use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};

use super::error::KrewError;

/// The name of the plugin's binary inside the archive (and on `PATH` once
/// krew installed it): kubectl finds `kubectl-ferry` as `kubectl ferry`.
pub const BINARY: &str = "kubectl-ferry";
/// The license file inside the archive; krew's validator insists on one.
pub const LICENSE: &str = "LICENSE";

/// A written archive.
#[derive(Debug, Clone)]
pub struct Archive {
    /// Where it was written.
    pub path: PathBuf,
    /// Lowercase hex SHA-256 of the file, as krew's manifest wants it.
    pub sha256: String,
}

fn entry(name: &str, mode: u32, size: u64) -> std::io::Result<tar::Header> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_path(name)?;
    header.set_mode(mode);
    header.set_size(size);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header.set_cksum();
    Ok(header)
}

/// Packs `binary` and `license` into the archive `out`. Fails when either
/// cannot be read or `out` cannot be written.
pub fn write_archive(binary: &Path, license: &Path, out: &Path) -> Result<Archive, KrewError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| KrewError::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    let (binary_bytes, license_bytes) = (read(binary)?, read(license)?);
    let write_error = |source| KrewError::Write {
        path: out.to_path_buf(),
        source,
    };
    let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::best()));
    for (name, mode, bytes) in [
        (BINARY, 0o755, &binary_bytes),
        (LICENSE, 0o644, &license_bytes),
    ] {
        let header = entry(name, mode, bytes.len() as u64).map_err(write_error)?;
        tar.append(&header, bytes.as_slice()).map_err(write_error)?;
    }
    let compressed = tar
        .into_inner()
        .and_then(GzEncoder::finish)
        .map_err(write_error)?;
    let mut file = std::fs::File::create(out).map_err(write_error)?;
    file.write_all(&compressed).map_err(write_error)?;
    let sha256 = Sha256::digest(&compressed)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(Archive {
        path: out.to_path_buf(),
        sha256,
    })
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use flate2::read::GzDecoder;

    use super::*;

    fn files(dir: &Path) -> (PathBuf, PathBuf) {
        let binary = dir.join("bin");
        let license = dir.join("lic");
        std::fs::write(&binary, b"#!/bin/sh\necho ferry\n").expect("write binary");
        std::fs::write(&license, b"Apache License\n").expect("write license");
        (binary, license)
    }

    #[test]
    fn the_same_files_give_the_same_archive_and_it_holds_binary_and_license() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (binary, license) = files(dir.path());
        let first = write_archive(&binary, &license, &dir.path().join("a.tar.gz")).expect("a");
        let second = write_archive(&binary, &license, &dir.path().join("b.tar.gz")).expect("b");
        assert_eq!(first.sha256, second.sha256);
        assert_eq!(first.sha256.len(), 64);
        let bytes = std::fs::read(&first.path).expect("read archive");
        let mut archive = tar::Archive::new(GzDecoder::new(bytes.as_slice()));
        let mut seen = Vec::new();
        for entry in archive.entries().expect("entries") {
            let mut entry = entry.expect("entry");
            let mut body = String::new();
            entry.read_to_string(&mut body).expect("body");
            let header = entry.header();
            seen.push((
                entry.path().expect("path").display().to_string(),
                header.mode().expect("mode"),
                header.mtime().expect("mtime"),
                body,
            ));
        }
        assert_eq!(
            seen,
            [
                (BINARY.into(), 0o755, 0, "#!/bin/sh\necho ferry\n".into()),
                (LICENSE.into(), 0o644, 0, "Apache License\n".into()),
            ]
        );
    }

    #[test]
    fn a_missing_binary_is_named_in_the_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (_, license) = files(dir.path());
        let missing = dir.path().join("nope");
        let error =
            write_archive(&missing, &license, &dir.path().join("x.tar.gz")).expect_err("no binary");
        assert!(error.to_string().contains("nope"), "{error}");
    }
}
