//! Reading fields of a live object's `status` that the feedback table and
//! the availability rules share. Missing or mistyped fields read as absent.

use serde_json::Value;

/// Whether `status.conditions` holds a condition of `kind` with `status`.
pub(crate) fn condition_is(live: &Value, kind: &str, status: &str) -> bool {
    condition(live, kind).is_some_and(|c| c.get("status").and_then(Value::as_str) == Some(status))
}

/// The first condition of `kind` in `status.conditions`.
pub(crate) fn condition<'a>(live: &'a Value, kind: &str) -> Option<&'a Value> {
    live.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

/// An integer at a JSON pointer, if there is one of that type.
pub(crate) fn int_at(live: &Value, pointer: &str) -> Option<i64> {
    live.pointer(pointer).and_then(Value::as_i64)
}
