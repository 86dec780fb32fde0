//! The krew plugin manifest (`ferry.yaml`, krew's `Plugin` of
//! `krew.googlecontainertools.github.com/v1alpha2`), rendered from a
//! release: its version and, per platform, the archive's address and
//! SHA-256. Pure: the caller hashes the archives.

use serde::Serialize;

use super::archive::{BINARY, LICENSE};
use super::error::KrewError;

/// The plugin's name in krew's index: `kubectl krew install ferry`, then
/// `kubectl ferry`. The manifest's file name must be this plus `.yaml`.
pub const PLUGIN_NAME: &str = "ferry";

/// The operating systems ferry builds kubectl-ferry for, of those krew's
/// selectors know. Windows is left out: its binary would need an `.exe`
/// name in the archive and `bin`, and ferry ships no Windows build.
const OSES: [&str; 2] = ["linux", "darwin"];
const ARCHES: [&str; 4] = ["amd64", "arm64", "386", "arm"];

/// One platform's archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    /// `os/arch` as Go names them, e.g. `linux/amd64`.
    pub os_arch: String,
    /// Where krew downloads the archive from.
    pub uri: String,
    /// Lowercase hex SHA-256 of the archive.
    pub sha256: String,
}

/// What a manifest says of one release.
#[derive(Debug, Clone)]
pub struct PluginRelease {
    /// `v` and a semantic version, e.g. `v0.1.0`.
    pub version: String,
    /// The project's home page.
    pub homepage: String,
    /// The archives, one per platform.
    pub platforms: Vec<Platform>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Manifest<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: Spec<'a>,
}

#[derive(Serialize)]
struct Metadata {
    name: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Spec<'a> {
    version: &'a str,
    homepage: &'a str,
    short_description: &'static str,
    description: &'static str,
    platforms: Vec<ManifestPlatform<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ManifestPlatform<'a> {
    selector: Selector<'a>,
    uri: &'a str,
    sha256: &'a str,
    files: Vec<FileOperation>,
    bin: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Selector<'a> {
    match_labels: MatchLabels<'a>,
}

#[derive(Serialize)]
struct MatchLabels<'a> {
    os: &'a str,
    arch: &'a str,
}

#[derive(Serialize)]
struct FileOperation {
    from: &'static str,
    to: &'static str,
}

const SHORT_DESCRIPTION: &str = "Inspect and roll out ferry's multi-cluster works";
/// Lines under 80 characters: krew's validator warns on longer ones.
const DESCRIPTION: &str = "kubectl ferry reads a ferry hub: the ManifestWorks of a cluster and\n\
their status on the spoke, the fleet's clusters and cluster sets, and the\n\
rollouts of ManifestWorkReplicaSets (status, history, undo). It runs with\n\
your kubeconfig's identity, so it shows and changes only what your RBAC on\n\
the hub allows.\n";

/// Whether `version` is what krew parses: `v`, then MAJOR.MINOR.PATCH of
/// digits, optionally followed by `-` or `+` and more.
fn is_krew_version(version: &str) -> bool {
    let Some(rest) = version.strip_prefix('v') else {
        return false;
    };
    let core = rest.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

/// The manifest of `release` as YAML. Fails on a version krew would refuse
/// or a platform its selectors do not know.
pub fn render_manifest(release: &PluginRelease) -> Result<String, KrewError> {
    if !is_krew_version(&release.version) {
        return Err(KrewError::Version(release.version.clone()));
    }
    let mut platforms = Vec::new();
    for platform in &release.platforms {
        let (os, arch) = platform
            .os_arch
            .split_once('/')
            .filter(|(os, arch)| OSES.contains(os) && ARCHES.contains(arch))
            .ok_or_else(|| KrewError::Platform(platform.os_arch.clone()))?;
        platforms.push(ManifestPlatform {
            selector: Selector {
                match_labels: MatchLabels { os, arch },
            },
            uri: &platform.uri,
            sha256: &platform.sha256,
            files: vec![
                FileOperation {
                    from: BINARY,
                    to: ".",
                },
                FileOperation {
                    from: LICENSE,
                    to: ".",
                },
            ],
            bin: BINARY,
        });
    }
    let manifest = Manifest {
        api_version: "krew.googlecontainertools.github.com/v1alpha2",
        kind: "Plugin",
        metadata: Metadata { name: PLUGIN_NAME },
        spec: Spec {
            version: &release.version,
            homepage: &release.homepage,
            short_description: SHORT_DESCRIPTION,
            description: DESCRIPTION,
            platforms,
        },
    };
    Ok(serde_yaml::to_string(&manifest)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(version: &str, os_arch: &str) -> PluginRelease {
        PluginRelease {
            version: version.into(),
            homepage: "https://github.com/ferry-rs/ferry".into(),
            platforms: vec![Platform {
                os_arch: os_arch.into(),
                uri: "https://example.invalid/kubectl-ferry_linux_amd64.tar.gz".into(),
                sha256: "ab".repeat(32),
            }],
        }
    }

    #[test]
    fn a_release_renders_krews_plugin_shape() {
        let yaml = render_manifest(&release("v0.1.0", "linux/amd64")).expect("renders");
        let value: serde_yaml::Value = serde_yaml::from_str(&yaml).expect("yaml");
        assert_eq!(
            value["apiVersion"],
            "krew.googlecontainertools.github.com/v1alpha2"
        );
        assert_eq!(value["kind"], "Plugin");
        assert_eq!(value["metadata"]["name"], PLUGIN_NAME);
        let platform = &value["spec"]["platforms"][0];
        assert_eq!(platform["selector"]["matchLabels"]["os"], "linux");
        assert_eq!(platform["selector"]["matchLabels"]["arch"], "amd64");
        assert_eq!(platform["bin"], BINARY);
        assert_eq!(platform["sha256"], "ab".repeat(32).as_str());
        assert!(
            !SHORT_DESCRIPTION.contains('\n'),
            "krew refuses line breaks there"
        );
        assert!(DESCRIPTION.lines().all(|l| l.len() <= 80), "{DESCRIPTION}");
    }

    #[test]
    fn versions_and_platforms_krew_would_refuse_are_refused_here() {
        for bad in ["0.1.0", "v0.1", "v1.2.x", "", "v"] {
            assert!(
                matches!(
                    render_manifest(&release(bad, "linux/amd64")),
                    Err(KrewError::Version(_))
                ),
                "{bad}"
            );
        }
        for good in ["v0.1.0", "v1.22.3-rc.1", "v2.0.0+build.5"] {
            assert!(
                render_manifest(&release(good, "linux/amd64")).is_ok(),
                "{good}"
            );
        }
        for bad in [
            "linux",
            "linux/amd64/v2",
            "plan9/amd64",
            "linux/riscv64",
            "windows/amd64",
        ] {
            assert!(
                matches!(
                    render_manifest(&release("v0.1.0", bad)),
                    Err(KrewError::Platform(_))
                ),
                "{bad}"
            );
        }
    }
}
