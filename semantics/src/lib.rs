//! The pure core of applying a work. No IO here: the agent's appliers around
//! it are thin, and the hub's admission webhook runs the same parsers so that
//! it accepts exactly what an agent can apply. Each submodule has one job.
//! With the `pool` feature, `tenant_pool` is the one bounded pool hub and
//! agent run tenant expressions on.
#![forbid(unsafe_code)]

pub mod apply_outcome;
pub mod availability;
pub mod cel_bounds;
pub mod compare;
pub mod condition_rules;
pub mod config_match;
pub mod contract;
pub mod dependency_rule;
pub mod drift_report;
pub mod equality;
pub mod feedback;
mod feedback_values;
pub mod hash;
pub mod identity;
pub mod ignore;
pub mod jq;
pub mod list_items;
pub mod managed_fields;
pub mod merge;
pub mod ownership;
pub mod paths;
pub mod pointer;
pub mod release;
pub mod restricted;
pub mod sealing;
mod status_fields;
pub mod strategy;
#[cfg(feature = "pool")]
pub mod tenant_pool;
pub mod text;
mod well_known_status;

pub use availability::{Health, health};
pub use compare::is_subset;
pub use feedback::{
    FeedbackOutcome, FeedbackProblem, MAX_RAW_FEEDBACK_BYTES, evaluate_feedback,
    evaluate_feedback_with_limit, static_problems,
};
pub use hash::{
    FIELD_HASHES_ANNOTATION, LAST_APPLIED_ANNOTATION, OBJECT_HASH_ANNOTATION, canonical_json,
    field_hash, object_hash, parse_field_hashes, render_field_hashes,
};
pub use identity::{ManifestError, ManifestIdentity, apply_order, apply_rank, identify};
pub use ignore::{
    IgnoreCondition, IgnoreRule, PathNote, SsaInput, SsaPlan, plan_server_side_apply,
};
pub use list_items::{
    CONVENTIONAL_MERGE_KEYS, ListKind, ListSchema, NoSchema, conventional_merge_key,
};
pub use managed_fields::{Ownership, owners, ownership};
pub use merge::{merge_patch, three_way_merge};
pub use paths::{IgnorePath, PathError, Pointer, Segment};
