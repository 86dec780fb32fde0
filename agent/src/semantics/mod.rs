//! The pure core of applying a work. No IO here: the appliers around it are
//! thin. Each submodule has one job.

pub mod identity;

pub use identity::{
    ManifestError, ManifestIdentity, apply_order, apply_rank, config_for, identify,
};
