//! `ferry-tools`: project tasks that need no outside tool. `image` writes
//! ferry's container image (OCI layout) from built ferry-hub and ferry-agent
//! binaries, as `deploy/image/build.sh` and the e2e image test do.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ferry_tools::image::{ImageMeta, write_image};

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
        } => {
            let started = Instant::now();
            let meta = ImageMeta {
                tag: tag.unwrap_or_else(|| image_version.clone()),
                version: image_version,
                source,
            };
            let written = write_image(&out_dir, &[hub, agent], &meta)
                .with_context(|| format!("writing the image to {}", out_dir.display()))?;
            println!(
                "ferry-tools image: localhost/ferry:{} ({}) in {}: {} files, {} bytes uncompressed, \
                 layer {} bytes, in {:.1} s",
                meta.tag,
                written.manifest_digest,
                written.out.display(),
                written.files,
                written.layer.tar_size,
                written.layer.size,
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
    }
}
