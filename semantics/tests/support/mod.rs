//! Code shared by the property tests of this directory.

pub mod work_pipeline;
