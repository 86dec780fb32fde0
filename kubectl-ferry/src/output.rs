//! `-o json|yaml`: records as JSON or YAML, lists in kubectl's `List` shape.

use serde::Serialize;
use serde_json::{Value, json};

use crate::cli::OutputFormat;
use crate::error::CliError;

/// `items` in a `v1` `List`, as `kubectl get -o json` prints several objects.
pub fn list(items: Vec<Value>) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": items,
    })
}

/// `value` as pretty JSON or YAML (with a trailing newline); `Table` prints
/// JSON too, since a table needs a renderer of its own.
pub fn serialize<T: Serialize>(value: &T, format: OutputFormat) -> Result<String, CliError> {
    match format {
        OutputFormat::Yaml => {
            serde_yaml::to_string(value).map_err(|e| CliError::Print(e.to_string()))
        }
        OutputFormat::Json | OutputFormat::Table => serde_json::to_string_pretty(value)
            .map(|mut text| {
                text.push('\n');
                text
            })
            .map_err(|e| CliError::Print(e.to_string())),
    }
}

/// Removes `metadata.managedFields` from `object`, as kubectl hides them
/// unless asked (`--show-managed-fields`): they are long and rarely read.
pub fn hide_managed_fields(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_fields_are_hidden_and_nothing_else() {
        let mut object = json!({"metadata": {"name": "w", "managedFields": [{"manager": "x"}]},
                                "spec": {"managedFields": 1}});
        hide_managed_fields(&mut object);
        assert_eq!(
            object,
            json!({"metadata": {"name": "w"}, "spec": {"managedFields": 1}})
        );
        let mut odd = json!("not an object");
        hide_managed_fields(&mut odd);
        assert_eq!(odd, json!("not an object"));
    }

    #[test]
    fn lists_round_trip_through_json_and_yaml() {
        let value = list(vec![
            json!({"kind": "ManifestWork", "metadata": {"name": "w"}}),
        ]);
        let text = serialize(&value, OutputFormat::Json).expect("json");
        assert_eq!(serde_json::from_str::<Value>(&text).expect("parses"), value);
        let text = serialize(&value, OutputFormat::Yaml).expect("yaml");
        assert_eq!(serde_yaml::from_str::<Value>(&text).expect("parses"), value);
        assert!(text.contains("kind: List"), "{text}");
    }
}
