//! The one match condition the webhook and the duplicates policy share.

/// CEL condition under which the API server calls the webhook (and applies
/// the admission policy): a CREATE, or an UPDATE that changes the spec.
pub(crate) const SPEC_WRITTEN: &str = "request.operation != 'UPDATE' || !has(oldObject.spec) || !has(object.spec) || object.spec != oldObject.spec";
