//! The typed values a feedback rule reports, in OCM's four types: built
//! here for both the `JSONPaths` rules and the `WellKnownStatus` table.

use ferry_proto::v1::FeedbackValue;

/// `FeedbackValue.type` of an integer value.
pub const TYPE_INTEGER: &str = "Integer";
/// `FeedbackValue.type` of a string value.
pub const TYPE_STRING: &str = "String";
/// `FeedbackValue.type` of a boolean value.
pub const TYPE_BOOLEAN: &str = "Boolean";
/// `FeedbackValue.type` of a value reported as compact JSON text.
pub const TYPE_JSON_RAW: &str = "JsonRaw";

/// An `Integer` value named `name`.
pub(crate) fn integer(name: &str, value: i64) -> FeedbackValue {
    FeedbackValue {
        name: name.to_string(),
        r#type: TYPE_INTEGER.to_string(),
        integer: value,
        ..Default::default()
    }
}

/// A `String` value named `name`.
pub(crate) fn string(name: &str, value: String) -> FeedbackValue {
    FeedbackValue {
        name: name.to_string(),
        r#type: TYPE_STRING.to_string(),
        string: value,
        ..Default::default()
    }
}

/// A `Boolean` value named `name`.
pub(crate) fn boolean(name: &str, value: bool) -> FeedbackValue {
    FeedbackValue {
        name: name.to_string(),
        r#type: TYPE_BOOLEAN.to_string(),
        boolean: value,
        ..Default::default()
    }
}
