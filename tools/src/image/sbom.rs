//! The image's software bill of materials, CycloneDX 1.5 JSON written by
//! the CycloneDX project's library: every file of the root filesystem
//! with its SHA-256, every crate compiled into each binary (the normal
//! dependency closure of the binary's package in cargo's own resolve graph
//! for this platform, from `cargo metadata`; dev- and build-only crates are
//! not in a binary and not listed) with its package URL, and which binary
//! holds which crates. Deterministic: no timestamp, and a serial number
//! derived from the content, so the same inputs give the same bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use cargo_metadata::{DependencyKind, Metadata, MetadataCommand, PackageId};
use cyclonedx_bom::models::component::Classification;
use cyclonedx_bom::models::dependency::{Dependencies, Dependency};
use cyclonedx_bom::models::hash::{Hash, HashAlgorithm, HashValue, Hashes};
use cyclonedx_bom::prelude::{
    Bom, Component, Components, Metadata as BomMetadata, Purl, SpecVersion, UrnUuid, Validate,
};
use sha2::{Digest, Sha256};

use super::error::ImageError;
use super::rootfs::{Content, RootFs};

/// The media type of the SBOM blob and the artifact type of its manifest.
pub const SBOM_TYPE: &str = "application/vnd.cyclonedx+json";

/// The directory binaries are shipped in (see `rootfs::assemble`).
const BIN_DIR: &str = "/usr/local/bin/";

/// The crates of one workspace: each package's name, version and normal
/// dependencies, read once from `cargo metadata`.
pub struct Crates {
    metadata: Metadata,
}

impl Crates {
    /// Reads the resolve graph of the workspace whose manifest is
    /// `workspace_manifest`, for this machine's Linux target (the image's).
    /// Fails when cargo cannot be run or refuses the workspace.
    pub fn read(workspace_manifest: &Path) -> Result<Self, ImageError> {
        let target = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
        let metadata = MetadataCommand::new()
            .manifest_path(workspace_manifest)
            .other_options(vec!["--filter-platform".to_string(), target])
            .exec()
            .map_err(|e| ImageError::Sbom(format!("cargo metadata: {e}")))?;
        Ok(Self { metadata })
    }

    /// The package of the workspace named `name`.
    fn package_id(&self, name: &str) -> Option<&PackageId> {
        self.metadata
            .packages
            .iter()
            .find(|p| p.name.as_str() == name && self.metadata.workspace_members.contains(&p.id))
            .map(|p| &p.id)
    }

    /// The packages `root` links: itself and its normal dependencies,
    /// transitively.
    fn closure(&self, root: &PackageId) -> BTreeSet<PackageId> {
        let Some(resolve) = &self.metadata.resolve else {
            return BTreeSet::new();
        };
        let nodes: BTreeMap<&PackageId, _> = resolve.nodes.iter().map(|n| (&n.id, n)).collect();
        let mut seen = BTreeSet::from([root.clone()]);
        let mut todo = vec![root.clone()];
        while let Some(id) = todo.pop() {
            let Some(node) = nodes.get(&id) else {
                continue;
            };
            for dep in &node.deps {
                let normal = dep
                    .dep_kinds
                    .iter()
                    .any(|k| k.kind == DependencyKind::Normal);
                if normal && seen.insert(dep.pkg.clone()) {
                    todo.push(dep.pkg.clone());
                }
            }
        }
        seen
    }
}

/// `bom-ref` of a crate.
fn crate_ref(name: &str, version: &str) -> String {
    format!("crate:{name}@{version}")
}

/// `bom-ref` of a file of the image.
fn file_ref(path: &str) -> String {
    format!("file:{path}")
}

/// SHA-256 of a root file's content, lowercase hex.
fn sha256_of(content: &Content) -> Result<String, ImageError> {
    let bytes = match content {
        Content::Bytes(bytes) => std::borrow::Cow::Borrowed(bytes.as_slice()),
        Content::File(path) => {
            std::borrow::Cow::Owned(std::fs::read(path).map_err(|source| ImageError::Read {
                path: path.clone(),
                source,
            })?)
        }
    };
    Ok(hex(&Sha256::digest(&bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A UUID (version 5 layout: name-based, here on SHA-256) of `bytes`, as a
/// URN: the same content gives the same serial number.
fn content_urn(bytes: &[u8]) -> String {
    let mut d: [u8; 16] = Sha256::digest(bytes)[..16].try_into().unwrap_or([0; 16]);
    d[6] = (d[6] & 0x0f) | 0x50;
    d[8] = (d[8] & 0x3f) | 0x80;
    let h = hex(&d);
    format!(
        "urn:uuid:{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The SBOM of the image `name` at `version` holding `files`, whose
/// binaries (files under `/usr/local/bin/` named as a workspace package)
/// are described by `crates`. Fails when a file cannot be read, a binary
/// has no package of its name in the workspace, or the document fails the
/// library's validation (a bug).
pub fn sbom(
    name: &str,
    version: &str,
    files: &RootFs,
    crates: &Crates,
) -> Result<Vec<u8>, ImageError> {
    let mut components: BTreeMap<String, Component> = BTreeMap::new();
    let mut dependencies = Vec::new();
    let mut binaries = Vec::new();
    for (path, file) in files {
        let mut component = Component::new(Classification::File, path, "", Some(file_ref(path)));
        component.version = None;
        component.hashes = Some(Hashes(vec![Hash {
            alg: HashAlgorithm::SHA_256,
            content: HashValue(sha256_of(&file.content)?),
        }]));
        components.insert(file_ref(path), component);
        let Some(binary) = path.strip_prefix(BIN_DIR) else {
            continue;
        };
        let id = crates.package_id(binary).ok_or_else(|| {
            ImageError::Sbom(format!(
                "{path}: no workspace package {binary} to list the crates of"
            ))
        })?;
        let closure = crates.closure(id);
        let mut linked = Vec::new();
        for package in crates
            .metadata
            .packages
            .iter()
            .filter(|p| closure.contains(&p.id))
        {
            let (name, version) = (package.name.as_str(), package.version.to_string());
            let reference = crate_ref(name, &version);
            linked.push(reference.clone());
            components.entry(reference.clone()).or_insert_with(|| {
                let mut c =
                    Component::new(Classification::Library, name, &version, Some(reference));
                c.purl = Purl::new("cargo", name, &version).ok();
                c
            });
        }
        linked.sort();
        binaries.push(file_ref(path));
        dependencies.push(Dependency {
            dependency_ref: file_ref(path),
            dependencies: linked,
        });
    }
    let mut image = Component::new(
        Classification::Container,
        name,
        version,
        Some("image".to_string()),
    );
    image.purl = None;
    dependencies.push(Dependency {
        dependency_ref: "image".to_string(),
        dependencies: binaries,
    });
    let mut bom = Bom {
        spec_version: SpecVersion::V1_5,
        serial_number: None,
        metadata: Some(BomMetadata {
            timestamp: None,
            tools: None,
            authors: None,
            component: Some(image),
            manufacture: None,
            supplier: None,
            licenses: None,
            properties: None,
            lifecycles: None,
        }),
        components: Some(Components(components.into_values().collect())),
        dependencies: Some(Dependencies(dependencies)),
        ..Bom::default()
    };
    let unnumbered = output(bom.clone())?;
    bom.serial_number = Some(
        UrnUuid::new(content_urn(&unnumbered))
            .map_err(|e| ImageError::Sbom(format!("serial number: {e:?}")))?,
    );
    let validation = bom.validate_version(SpecVersion::V1_5);
    if !validation.passed() {
        return Err(ImageError::Sbom(format!(
            "the SBOM fails CycloneDX 1.5 validation: {validation:?}"
        )));
    }
    output(bom)
}

fn output(bom: Bom) -> Result<Vec<u8>, ImageError> {
    let mut out = Vec::new();
    bom.output_as_json_v1_5(&mut out)
        .map_err(|e| ImageError::Sbom(format!("writing the SBOM: {e}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_serial_number_is_a_uuid_urn_of_the_content() {
        let a = content_urn(b"one");
        assert_eq!(a, content_urn(b"one"));
        assert_ne!(a, content_urn(b"two"));
        assert!(UrnUuid::new(a.clone()).is_ok(), "{a}");
        assert_eq!(&a[23..24], "5", "{a}");
    }
}
