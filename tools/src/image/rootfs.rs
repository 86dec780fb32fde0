//! The image's root filesystem, as a list of files to put in its layer: what
//! `deploy/image/rootfs.sh` assembles for the Containerfile. The binaries in
//! `/usr/local/bin` (0755), the shared libraries `ldd` resolves for them at
//! the paths it names (symlinks followed), the CA bundle, and `/etc/passwd`
//! and `/etc/group` naming the non-root user [`USER_ID`]. Nothing else.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::error::ImageError;

/// The uid and gid the image runs as.
pub const USER_ID: u32 = 65532;

/// The CA certificate bundle, at the same path inside the image.
pub const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Where a file's content comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// A file on this machine, read (through symlinks) when the layer is written.
    File(PathBuf),
    /// Bytes made here.
    Bytes(Vec<u8>),
}

/// One regular file of the root filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootFile {
    /// Its content.
    pub content: Content,
    /// Its permission bits.
    pub mode: u32,
}

/// The root filesystem: absolute paths inside the image to files, sorted.
pub type RootFs = BTreeMap<String, RootFile>;

/// The root filesystem for `binaries` (each shipped under its file name in
/// `/usr/local/bin`). Fails when a binary is not executable, `ldd` fails or
/// a library or the CA bundle cannot be read.
pub fn assemble(binaries: &[PathBuf]) -> Result<RootFs, ImageError> {
    let mut files = RootFs::new();
    for binary in binaries {
        let executable = std::fs::metadata(binary)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        let name = binary.file_name().map(|n| n.to_string_lossy().into_owned());
        let (true, Some(name)) = (executable, name) else {
            return Err(ImageError::NotExecutable {
                path: binary.clone(),
            });
        };
        files.insert(
            format!("/usr/local/bin/{name}"),
            RootFile {
                content: Content::File(binary.clone()),
                mode: 0o755,
            },
        );
        for library in libraries(binary)? {
            let mode = copied_mode(&library)?;
            files.insert(
                library.display().to_string(),
                RootFile {
                    content: Content::File(library),
                    mode,
                },
            );
        }
    }
    let ca = PathBuf::from(CA_BUNDLE);
    let mode = copied_mode(&ca)?;
    files.insert(
        CA_BUNDLE.into(),
        RootFile {
            content: Content::File(ca),
            mode,
        },
    );
    let passwd = format!(
        "root:x:0:0:root:/:/sbin/nologin\nnonroot:x:{USER_ID}:{USER_ID}:nonroot:/:/sbin/nologin\n"
    );
    let group = format!("root:x:0:\nnonroot:x:{USER_ID}:\n");
    for (path, text) in [("/etc/passwd", passwd), ("/etc/group", group)] {
        files.insert(
            path.into(),
            RootFile {
                content: Content::Bytes(text.into_bytes()),
                mode: 0o644,
            },
        );
    }
    Ok(files)
}

/// The mode `cp -L` gives a copy under the usual umask 022: the target's
/// permission bits without group and other write.
fn copied_mode(path: &Path) -> Result<u32, ImageError> {
    let meta = std::fs::metadata(path).map_err(|source| ImageError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(meta.permissions().mode() & 0o755)
}

/// The shared libraries `ldd` resolves for `binary`, with the loader.
fn libraries(binary: &Path) -> Result<Vec<PathBuf>, ImageError> {
    let output = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| ImageError::Ldd {
            binary: binary.to_path_buf(),
            detail: e.to_string(),
        })?;
    if !output.status.success() {
        return Err(ImageError::Ldd {
            binary: binary.to_path_buf(),
            detail: format!(
                "{}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        });
    }
    Ok(parse_ldd(&String::from_utf8_lossy(&output.stdout)))
}

/// The library paths in `ldd` output: lines like
/// `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)` and
/// `/lib64/ld-linux-x86-64.so.2 (0x...)`; `linux-vdso.so.1` has no file.
pub fn parse_ldd(output: &str) -> Vec<PathBuf> {
    output
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                [_, "=>", path, ..] if path.starts_with('/') => Some(PathBuf::from(path)),
                [path, ..] if path.starts_with('/') => Some(PathBuf::from(path)),
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_resolved_libraries_and_the_loader_but_not_the_vdso() {
        let output = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                      \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f1)\n\
                      \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2)\n\
                      \tlibmissing.so => not found\n\
                      \t/lib64/ld-linux-x86-64.so.2 (0x00007f3)\n";
        assert_eq!(
            parse_ldd(output),
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
    }

    #[test]
    fn a_file_that_is_not_executable_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ferry-hub");
        std::fs::write(&path, b"not a program").expect("write");
        let err = assemble(std::slice::from_ref(&path)).expect_err("refused");
        assert!(matches!(err, ImageError::NotExecutable { .. }), "{err}");
    }
}
