//! One release's krew files in a directory: an archive per platform,
//! `kubectl-ferry_<os>_<arch>.tar.gz`, and the manifest `ferry.yaml`
//! naming them at `<uri base>/<archive>`.

use std::path::{Path, PathBuf};

use super::archive::write_archive;
use super::error::KrewError;
use super::manifest::{PLUGIN_NAME, Platform, PluginRelease, render_manifest};

/// What to release.
#[derive(Debug, Clone)]
pub struct ReleaseInput {
    /// `(os/arch, kubectl-ferry binary for it)`.
    pub binaries: Vec<(String, PathBuf)>,
    /// The license file packed beside each binary.
    pub license: PathBuf,
    /// `v` and a semantic version.
    pub version: String,
    /// The project's home page.
    pub homepage: String,
    /// Where the archives will be served from, without a trailing `/`.
    pub uri_base: String,
}

/// Writes the archives and manifest of `input` into `out_dir` (created if
/// missing) and returns the manifest's path. Fails on an unreadable file,
/// an unwritable directory, or a version or platform krew would refuse
/// (checked before anything is written).
pub fn write_release(input: &ReleaseInput, out_dir: &Path) -> Result<PathBuf, KrewError> {
    let planned = PluginRelease {
        version: input.version.clone(),
        homepage: input.homepage.clone(),
        platforms: input
            .binaries
            .iter()
            .map(|(os_arch, _)| Platform {
                os_arch: os_arch.clone(),
                uri: String::new(),
                sha256: "0".repeat(64),
            })
            .collect(),
    };
    render_manifest(&planned)?;
    std::fs::create_dir_all(out_dir).map_err(|source| KrewError::Write {
        path: out_dir.to_path_buf(),
        source,
    })?;
    let mut platforms = Vec::new();
    for (os_arch, binary) in &input.binaries {
        let file_name = format!("kubectl-ferry_{}.tar.gz", os_arch.replace('/', "_"));
        let archive = write_archive(binary, &input.license, &out_dir.join(&file_name))?;
        platforms.push(Platform {
            os_arch: os_arch.clone(),
            uri: format!("{}/{file_name}", input.uri_base.trim_end_matches('/')),
            sha256: archive.sha256,
        });
    }
    let manifest = render_manifest(&PluginRelease {
        platforms,
        ..planned
    })?;
    let path = out_dir.join(format!("{PLUGIN_NAME}.yaml"));
    std::fs::write(&path, manifest).map_err(|source| KrewError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_platform_writes_nothing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("out");
        let input = ReleaseInput {
            binaries: vec![
                ("linux/amd64".into(), dir.path().join("bin")),
                ("beos/ppc".into(), dir.path().join("bin")),
            ],
            license: dir.path().join("LICENSE"),
            version: "v0.1.0".into(),
            homepage: "https://github.com/ferry-rs/ferry".into(),
            uri_base: "https://example.invalid".into(),
        };
        assert!(matches!(
            write_release(&input, &out),
            Err(KrewError::Platform(_))
        ));
        assert!(!out.exists());
    }
}
