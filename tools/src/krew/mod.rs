//! kubectl-ferry as a krew plugin: the per-platform archives krew installs
//! from (`archive`) and the plugin manifest that names them (`manifest`),
//! which `ferry-tools krew` writes from release binaries. The e2e test
//! `krew_plugin::` has krew's own validator and installer, built from the
//! krew Go module, check and install what is written here.

pub mod archive;
pub mod error;
pub mod manifest;
pub mod release;

pub use archive::{Archive, write_archive};
pub use error::KrewError;
pub use manifest::{PLUGIN_NAME, Platform, PluginRelease, render_manifest};
pub use release::{ReleaseInput, write_release};
