//! What of an opened Secret leaves the agent: its metadata and the hash of
//! what was applied, never its data. Feedback rules, condition rules and
//! drift reports read [`redact_object`]'s view; messages pass through
//! [`scrub`].

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use crate::hash::LAST_APPLIED_ANNOTATION;

/// What stands in for a sealed value wherever one would be shown.
pub const SEALED_VALUE: &str = "(sealed)";
/// Shortest value [`scrub`] looks for: shorter ones would blank ordinary
/// words of a message, and say little of a secret anyway.
const MIN_SCRUBBED: usize = 4;

/// `object` (a Secret as read from or written to the spoke) with every
/// `data` and `stringData` value replaced by [`SEALED_VALUE`] (the keys
/// stay) and the annotations that copy the applied manifest removed. Never
/// fails: anything that is not an object comes back as it was.
pub fn redact_object(object: &Value) -> Value {
    let mut view = object.clone();
    for field in ["data", "stringData"] {
        if let Some(Value::Object(values)) = view.get_mut(field) {
            for value in values.values_mut() {
                *value = Value::String(SEALED_VALUE.into());
            }
        }
    }
    if let Some(Value::Object(annotations)) = view.pointer_mut("/metadata/annotations") {
        annotations.retain(|key, _| {
            !key.starts_with(LAST_APPLIED_ANNOTATION)
                && key != "kubectl.kubernetes.io/last-applied-configuration"
        });
    }
    view
}

/// `message` with every value of Secret `secret` (as written, and decoded
/// or encoded) of at least four characters replaced by [`SEALED_VALUE`]:
/// an API server's error may quote what it was sent. Never fails.
pub fn scrub(message: &str, secret: &Value) -> String {
    let mut needles: Vec<String> = Vec::new();
    if let Some(Value::Object(data)) = secret.get("data") {
        for value in data.values().filter_map(Value::as_str) {
            needles.push(value.to_string());
            if let Ok(bytes) = STANDARD.decode(value)
                && let Ok(text) = String::from_utf8(bytes)
            {
                needles.push(text);
            }
        }
    }
    if let Some(Value::Object(data)) = secret.get("stringData") {
        for value in data.values().filter_map(Value::as_str) {
            needles.push(value.to_string());
            needles.push(STANDARD.encode(value));
        }
    }
    // Longest first, so a value inside another is not left half-shown.
    needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
    let mut scrubbed = message.to_string();
    for needle in needles.iter().filter(|n| n.len() >= MIN_SCRUBBED) {
        scrubbed = scrubbed.replace(needle.as_str(), SEALED_VALUE);
    }
    scrubbed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_view_keeps_keys_and_metadata_but_no_values() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db", "annotations": {
                "work.ferry.dev/object-hash": "abc",
                LAST_APPLIED_ANNOTATION: "{\"data\":{\"p\":\"aHVudGVyMjI=\"}}"}},
            "data": {"p": "aHVudGVyMjI="}, "stringData": {"q": "hunter22"}});
        let view = redact_object(&secret);
        let text = view.to_string();
        assert!(
            !text.contains("aHVudGVyMjI=") && !text.contains("hunter22"),
            "{text}"
        );
        assert_eq!(view["data"]["p"], SEALED_VALUE);
        assert_eq!(
            view["metadata"]["annotations"]["work.ferry.dev/object-hash"],
            "abc"
        );
    }

    #[test]
    fn messages_lose_every_form_of_a_value() {
        let secret = json!({"data": {"p": "aHVudGVyMjI="}, "stringData": {"q": "swordfish"}});
        let message = "Invalid value: \"hunter22\" and aHVudGVyMjI= and swordfish and c3dvcmRmaXNo";
        let scrubbed = scrub(message, &secret);
        for leaked in ["hunter22", "aHVudGVyMjI=", "swordfish", "c3dvcmRmaXNo"] {
            assert!(!scrubbed.contains(leaked), "{scrubbed}");
        }
    }
}
