//! The writer's image: read back by the e2e harness's reader (which checks
//! every blob against its digest), its layer's entries with their modes and
//! owners, the same bytes when written twice, and the same files as
//! `deploy/image/rootfs.sh` assembles for the Containerfile.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use ferry_e2e::harness::image::{root_files, unpack};
use sha2::{Digest, Sha256};

use super::*;

/// Two small dynamically linked executables named as ferry's binaries
/// (copies of coreutils' `true`), in `dir`.
fn binaries(dir: &Path) -> Vec<PathBuf> {
    let source = ["/usr/bin/true", "/bin/true"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("coreutils' true");
    ["ferry-hub", "ferry-agent"]
        .into_iter()
        .map(|name| {
            let path = dir.join(name);
            std::fs::copy(&source, &path).expect("copy");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            path
        })
        .collect()
}

fn written(dir: &Path, name: &str) -> Written {
    write_image(&dir.join(name), &binaries(dir), &ImageMeta::default()).expect("image written")
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("read")).expect("json")
}

fn blob(out: &Path, digest: &str) -> Vec<u8> {
    std::fs::read(
        out.join("blobs/sha256")
            .join(digest.trim_start_matches("sha256:")),
    )
    .expect("blob")
}

#[test]
fn the_layout_reads_back_with_the_containerfile_config_and_every_digest_matching() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = written(dir.path(), "oci");
    let root = dir.path().join("root");
    std::fs::create_dir(&root).expect("root");
    // The reader refuses any blob whose content does not have its digest.
    let config = unpack(&image.out, &root).expect("the harness reads the layout");
    assert_eq!(config.user, "65532:65532");
    assert_eq!(config.entrypoint, ["/usr/local/bin/ferry-hub"]);
    assert_eq!(config.cmd, ["serve"]);
    assert_eq!(
        config.env,
        ["SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"]
    );
    assert_eq!(config.labels["org.opencontainers.image.title"], "ferry");
    assert_eq!(
        config.labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(
        config.labels["org.opencontainers.image.licenses"],
        "Apache-2.0"
    );
    assert_eq!(
        config.labels["org.opencontainers.image.source"],
        "https://github.com/ferry-rs/ferry"
    );
    let files = root_files(&root);
    assert_eq!(files["/usr/local/bin/ferry-hub"], 0o755);
    assert_eq!(files["/usr/local/bin/ferry-agent"], 0o755);
    assert!(files.contains_key(CA_BUNDLE));
    assert!(files.keys().any(|f| f.contains("libc.so")), "{files:?}");
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).expect("passwd");
    assert!(passwd.contains(":65532:65532:"), "{passwd}");
    let group = std::fs::read_to_string(root.join("etc/group")).expect("group");
    assert!(group.contains(":65532:"), "{group}");

    let index = json(&image.out.join("index.json"));
    assert_eq!(
        index["manifests"][0]["digest"],
        image.manifest_digest.as_str()
    );
    assert_eq!(
        index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(
        json(&image.out.join("oci-layout"))["imageLayoutVersion"],
        "1.0.0"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&blob(&image.out, &image.manifest_digest)).expect("manifest");
    assert_eq!(manifest["layers"][0]["mediaType"], LAYER_TYPE);
    assert_eq!(manifest["layers"][0]["size"], image.layer.size);
    let config_doc: serde_json::Value = serde_json::from_slice(&blob(
        &image.out,
        manifest["config"]["digest"]
            .as_str()
            .expect("config digest"),
    ))
    .expect("config");
    // diff_id names the uncompressed tar.
    let mut tar = Vec::new();
    flate2::read::GzDecoder::new(blob(&image.out, &image.layer.digest).as_slice())
        .read_to_end(&mut tar)
        .expect("gunzip");
    let diff_id = layer::sha256_name(&Sha256::digest(&tar));
    assert_eq!(config_doc["rootfs"]["diff_ids"][0], diff_id.as_str());
    assert_eq!(tar.len() as u64, image.layer.tar_size);
}

#[test]
fn the_layer_lists_directories_before_their_files_owned_by_root_with_zero_mtimes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = written(dir.path(), "oci");
    let gz = blob(&image.out, &image.layer.digest);
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(gz.as_slice()));
    let mut names = Vec::new();
    for entry in archive.entries().expect("entries") {
        let entry = entry.expect("entry");
        let header = entry.header();
        let name = entry.path().expect("path").display().to_string();
        assert_eq!(header.uid().expect("uid"), 0, "{name}");
        assert_eq!(header.gid().expect("gid"), 0, "{name}");
        assert_eq!(header.mtime().expect("mtime"), 0, "{name}");
        let mode = header.mode().expect("mode");
        match header.entry_type() {
            tar::EntryType::Directory => assert_eq!(mode, 0o755, "{name}"),
            tar::EntryType::Regular => {}
            other => panic!("{name} is a {other:?}; the layer holds only files and directories"),
        }
        if name == "usr/local/bin/ferry-hub" || name == "usr/local/bin/ferry-agent" {
            assert_eq!(mode, 0o755, "{name}");
        }
        if name == "etc/passwd" || name == "etc/group" {
            assert_eq!(mode, 0o644, "{name}");
        }
        names.push(name);
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "entries in sorted order");
    for (i, name) in names.iter().enumerate() {
        let Some((parent, _)) = name.trim_end_matches('/').rsplit_once('/') else {
            continue;
        };
        let parent_at = names.iter().position(|n| *n == format!("{parent}/"));
        assert!(
            parent_at.is_some_and(|at| at < i),
            "{name} comes before its directory {parent}/"
        );
    }
    assert!(names.contains(&"usr/local/bin/ferry-hub".to_string()));
    assert!(names.contains(&"etc/ssl/certs/ca-certificates.crt".to_string()));
}

#[test]
fn writing_the_same_binaries_twice_gives_the_same_image_digest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = written(dir.path(), "one");
    let second = written(dir.path(), "two");
    assert_eq!(first.manifest_digest, second.manifest_digest);
    assert_eq!(first.layer.digest, second.layer.digest);
    assert_eq!(first.sbom_digest, second.sbom_digest, "the SBOM too");
}

/// The components of a CycloneDX document by `bom-ref`.
fn components(sbom: &serde_json::Value) -> BTreeMap<String, serde_json::Value> {
    sbom["components"]
        .as_array()
        .expect("components")
        .iter()
        .map(|c| {
            (
                c["bom-ref"].as_str().expect("bom-ref").to_string(),
                c.clone(),
            )
        })
        .collect()
}

#[test]
fn the_sbom_is_an_artifact_of_the_image_listing_its_files_and_each_binarys_crates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = written(dir.path(), "oci");
    let index = json(&image.out.join("index.json"));
    let entry = &index["manifests"][1];
    assert_eq!(entry["digest"], image.sbom_digest.as_str());
    assert_eq!(entry["artifactType"], SBOM_TYPE);
    let artifact: serde_json::Value =
        serde_json::from_slice(&blob(&image.out, &image.sbom_digest)).expect("artifact manifest");
    assert_eq!(
        artifact["subject"]["digest"],
        image.manifest_digest.as_str()
    );
    assert_eq!(artifact["config"]["mediaType"], EMPTY_TYPE);
    assert_eq!(artifact["layers"][0]["mediaType"], SBOM_TYPE);
    let bytes = blob(
        &image.out,
        artifact["layers"][0]["digest"].as_str().expect("digest"),
    );
    // Read back and validated by the CycloneDX library as a consumer would.
    let parsed =
        cyclonedx_bom::prelude::Bom::parse_from_json_v1_5(bytes.as_slice()).expect("CycloneDX 1.5");
    use cyclonedx_bom::prelude::Validate as _;
    assert!(parsed.validate().passed(), "{:?}", parsed.validate());
    let sbom: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
    assert_eq!(sbom["metadata"]["component"]["type"], "container");
    assert!(sbom["metadata"].get("timestamp").is_none(), "no timestamp");
    let all = components(&sbom);
    // Every file with its SHA-256, the binaries as shipped.
    let hub = &all["file:/usr/local/bin/ferry-hub"];
    let shipped = hex_sha256(&std::fs::read(dir.path().join("ferry-hub")).expect("binary"));
    assert_eq!(hub["hashes"][0]["alg"], "SHA-256");
    assert_eq!(hub["hashes"][0]["content"], shipped.as_str());
    assert!(all.contains_key("file:/etc/passwd"));
    // Each binary's crates: its package and what it links, not test-only
    // crates.
    let linked = |binary: &str| -> Vec<String> {
        sbom["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .find(|d| d["ref"] == format!("file:/usr/local/bin/{binary}"))
            .map(|d| {
                d["dependsOn"]
                    .as_array()
                    .expect("dependsOn")
                    .iter()
                    .map(|r| r.as_str().expect("ref").to_string())
                    .collect()
            })
            .expect("the binary's dependencies")
    };
    let version = env!("CARGO_PKG_VERSION");
    let hub_crates = linked("ferry-hub");
    let agent_crates = linked("ferry-agent");
    assert!(hub_crates.contains(&format!("crate:ferry-hub@{version}")));
    assert!(agent_crates.contains(&format!("crate:ferry-agent@{version}")));
    for both in ["tokio@", "kube-client@", "tonic@", "rustls@"] {
        assert!(
            hub_crates
                .iter()
                .any(|c| c.starts_with(&format!("crate:{both}")))
                && agent_crates
                    .iter()
                    .any(|c| c.starts_with(&format!("crate:{both}"))),
            "{both} in both binaries"
        );
    }
    assert!(
        !agent_crates
            .iter()
            .any(|c| c.starts_with("crate:ferry-fleet-semantics@")),
        "the agent does not link the fleet rules"
    );
    for dev_only in ["proptest@", "tempfile@", "fantoccini@", "ferry-e2e@"] {
        assert!(
            !hub_crates
                .iter()
                .chain(&agent_crates)
                .any(|c| c.starts_with(&format!("crate:{dev_only}"))),
            "{dev_only} is test-only"
        );
    }
    let tokio = hub_crates
        .iter()
        .find(|c| c.starts_with("crate:tokio@"))
        .expect("tokio");
    assert_eq!(
        all[tokio]["purl"],
        format!("pkg:cargo/{}", tokio.trim_start_matches("crate:")).as_str()
    );
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn the_root_filesystem_has_the_files_and_modes_rootfs_sh_assembles_for_the_containerfile() {
    let dir = tempfile::tempdir().expect("tempdir");
    let binaries = binaries(dir.path());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/image/rootfs.sh");
    let shell_root = dir.path().join("rootfs");
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg("umask 022 && exec \"$0\" \"$@\"")
        .arg(&script)
        .arg(&shell_root)
        .args(&binaries)
        .status()
        .expect("run rootfs.sh");
    assert!(status.success(), "rootfs.sh: {status}");
    let from_script = root_files(&shell_root);
    let from_rust: BTreeMap<String, u32> = assemble(&binaries)
        .expect("assemble")
        .into_iter()
        .map(|(path, file)| (path, file.mode))
        .collect();
    assert_eq!(from_rust, from_script);
}
