//! `ferry-tools`: project tasks that need no outside tool. `image` writes
//! ferry's container image (OCI layout) from built ferry-hub and ferry-agent
//! binaries, as `deploy/image/build.sh` and the e2e image test do; `krew`
//! writes kubectl-ferry's krew archives and plugin manifest.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ferry_tools::image::{ImageMeta, write_image};
use ferry_tools::krew::{ReleaseInput, write_release};

#[derive(Parser)]
#[command(name = "ferry-tools", version, about = "ferry's project tasks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write ferry's container image as an OCI layout directory (no
    /// container tool, no registry): the binaries, the libraries ldd resolves
    /// for them, the CA bundle, /etc/passwd and /etc/group naming user 65532.
    Image {
        /// The OCI layout directory to (re)create.
        out_dir: PathBuf,
        /// The ferry-hub binary.
        hub: PathBuf,
        /// The ferry-agent binary.
        agent: PathBuf,
        /// org.opencontainers.image.version.
        #[arg(long, env = "FERRY_IMAGE_VERSION", default_value = env!("CARGO_PKG_VERSION"))]
        image_version: String,
        /// org.opencontainers.image.source.
        #[arg(
            long,
            env = "FERRY_IMAGE_SOURCE",
            default_value = "https://github.com/ferry-rs/ferry"
        )]
        source: String,
        /// The tag in index.json (default: the version).
        #[arg(long, env = "FERRY_IMAGE_TAG")]
        tag: Option<String>,
        /// The workspace's Cargo.toml the binaries were built from: the
        /// SBOM lists the crates its resolve graph links into each.
        #[arg(long, default_value = "Cargo.toml")]
        workspace: PathBuf,
    },
    /// Write kubectl-ferry's krew plugin: one archive per platform
    /// (`kubectl-ferry_<os>_<arch>.tar.gz`: the binary and the license) and
    /// the manifest `ferry.yaml` naming them, to publish with a release and
    /// install with `kubectl krew install --manifest ferry.yaml`.
    Krew {
        /// The directory to write into.
        out_dir: PathBuf,
        /// A kubectl-ferry binary as `os/arch=path`, e.g.
        /// `linux/amd64=target/release/kubectl-ferry` (repeat per platform).
        #[arg(long = "binary", required = true)]
        binaries: Vec<String>,
        /// The license file packed beside the binary.
        #[arg(long, default_value = "LICENSE")]
        license: PathBuf,
        /// The release's version (`v` and a semantic version).
        #[arg(long, default_value = concat!("v", env!("CARGO_PKG_VERSION")))]
        version: String,
        /// The project's home page.
        #[arg(long, default_value = "https://github.com/ferry-rs/ferry")]
        homepage: String,
        /// Where the archives will be downloaded from (default: the
        /// release's download address under the home page).
        #[arg(long)]
        uri_base: Option<String>,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Image {
            out_dir,
            hub,
            agent,
            image_version,
            source,
            tag,
            workspace,
        } => {
            let started = Instant::now();
            let meta = ImageMeta {
                tag: tag.unwrap_or_else(|| image_version.clone()),
                version: image_version,
                source,
                workspace,
            };
            let written = write_image(&out_dir, &[hub, agent], &meta)
                .with_context(|| format!("writing the image to {}", out_dir.display()))?;
            println!(
                "ferry-tools image: localhost/ferry:{} ({}, SBOM {}) in {}: {} files, {} bytes uncompressed, \
                 layer {} bytes, in {:.1} s",
                meta.tag,
                written.manifest_digest,
                written.sbom_digest,
                written.out.display(),
                written.files,
                written.layer.tar_size,
                written.layer.size,
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
        Command::Krew {
            out_dir,
            binaries,
            license,
            version,
            homepage,
            uri_base,
        } => {
            let binaries = binaries
                .iter()
                .map(|b| {
                    b.split_once('=')
                        .map(|(os_arch, path)| (os_arch.to_string(), PathBuf::from(path)))
                        .with_context(|| format!("--binary {b:?} is not os/arch=path"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let uri_base =
                uri_base.unwrap_or_else(|| format!("{homepage}/releases/download/{version}"));
            let input = ReleaseInput {
                binaries,
                license,
                version,
                homepage,
                uri_base,
            };
            let manifest = write_release(&input, &out_dir)
                .with_context(|| format!("writing the krew plugin to {}", out_dir.display()))?;
            println!("ferry-tools krew: {}", manifest.display());
            Ok(())
        }
    }
}
