//! Which lists of a kind merge by key, read from the spoke API server's
//! OpenAPI v3 document (`x-kubernetes-list-type: map` with
//! `x-kubernetes-list-map-keys`, or `x-kubernetes-patch-merge-key`). Built
//! once per kind and cached; when the document cannot be read, every list is
//! `Unknown` and the merge falls back to conventions.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kube::Client;
use kube::core::GroupVersionKind;
use moka::future::Cache;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::debug;

use ferry_semantics::list_items::{ListKind, ListSchema};

/// Schemas nest through `$ref`, and some are recursive (a CRD's
/// JSONSchemaProps refers to itself from several fields). The walk never
/// enters a named schema that is already on its path, and stops at this
/// depth and after this many nodes whatever the shape of the document.
const MAX_DEPTH: usize = 24;
const MAX_NODES: usize = 50_000;

/// List kinds of one resource kind, by schema path (object keys, `[]` for list items).
#[derive(Debug, Default)]
pub struct KindListSchema {
    lists: HashMap<Vec<String>, ListKind>,
}

impl ListSchema for KindListSchema {
    fn list_kind(&self, path: &[String]) -> ListKind {
        self.lists.get(path).cloned().unwrap_or(ListKind::Unknown)
    }
}

impl KindListSchema {
    /// Builds the table for `gvk` from one group-version OpenAPI v3 document;
    /// empty when the document does not describe the kind.
    pub fn from_openapi(document: &Value, gvk: &GroupVersionKind) -> Self {
        let schemas = &document["components"]["schemas"];
        let mut table = Self::default();
        let Some((name, root)) = schemas
            .as_object()
            .and_then(|all| all.iter().find(|(_, schema)| describes(schema, gvk)))
        else {
            return table;
        };
        let mut walk = Walk {
            schemas,
            path: Vec::new(),
            refs: vec![name.as_str()],
            budget: MAX_NODES,
        };
        walk.visit(&mut table, root);
        table
    }
}

struct Walk<'a> {
    schemas: &'a Value,
    path: Vec<String>,
    refs: Vec<&'a str>,
    budget: usize,
}

impl<'a> Walk<'a> {
    fn visit(&mut self, table: &mut KindListSchema, schema: &'a Value) {
        if self.path.len() > MAX_DEPTH || self.budget == 0 {
            return;
        }
        self.budget -= 1;
        let (schema, entered) = match reference(schema) {
            Some(name) if self.refs.contains(&name) => return,
            Some(name) => match self.schemas.get(name) {
                Some(target) => {
                    self.refs.push(name);
                    (target, true)
                }
                None => return,
            },
            None => (schema, false),
        };
        if let Some(items) = schema.get("items") {
            table.lists.insert(self.path.clone(), list_kind(schema));
            self.path.push("[]".into());
            self.visit(table, items);
            self.path.pop();
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, sub) in properties {
                self.path.push(name.clone());
                self.visit(table, sub);
                self.path.pop();
            }
        }
        if entered {
            self.refs.pop();
        }
    }
}

// OpenAPI v3 documents point at shared schemas with `$ref`, sometimes wrapped
// in `allOf: [{$ref}]` so a description can sit beside the reference.
fn reference(schema: &Value) -> Option<&str> {
    schema
        .get("$ref")
        .or_else(|| {
            schema
                .get("allOf")
                .and_then(|all| all.get(0))
                .and_then(|first| first.get("$ref"))
        })
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
}

fn describes(schema: &Value, gvk: &GroupVersionKind) -> bool {
    schema["x-kubernetes-group-version-kind"]
        .as_array()
        .is_some_and(|kinds| {
            kinds.iter().any(|k| {
                k["group"].as_str().unwrap_or_default() == gvk.group
                    && k["version"].as_str() == Some(gvk.version.as_str())
                    && k["kind"].as_str() == Some(gvk.kind.as_str())
            })
        })
}

// kubectl's patch merge key wins over list-map-keys: for Service ports the
// map keys are (port, protocol), but manifests usually omit the defaulted
// protocol, and matching on both would duplicate the port.
fn list_kind(schema: &Value) -> ListKind {
    let merges = schema
        .get("x-kubernetes-patch-strategy")
        .and_then(Value::as_str)
        .is_some_and(|s| s.split(',').any(|p| p == "merge"));
    if let Some(key) = schema
        .get("x-kubernetes-patch-merge-key")
        .and_then(Value::as_str)
        && merges
    {
        return ListKind::Map(vec![key.to_string()]);
    }
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("map") => {
            let keys: Vec<String> = schema["x-kubernetes-list-map-keys"]
                .as_array()
                .map(|keys| {
                    keys.iter()
                        .filter_map(|k| k.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            if keys.is_empty() {
                ListKind::Unknown
            } else {
                ListKind::Map(keys)
            }
        }
        Some("atomic" | "set") => ListKind::Atomic,
        _ => ListKind::Unknown,
    }
}

/// An OpenAPI v3 document with only what the walk reads. The core group's
/// document is several megabytes, mostly descriptions; read into a whole
/// `Value` it took about 25 MB of heap that the allocator kept after the
/// table was built, more than everything else the agent holds.
#[derive(Debug, Default, Deserialize, Serialize)]
struct SlimDocument {
    #[serde(default)]
    components: SlimComponents,
}

#[derive(Debug, Default, Deserialize, Serialize)]
struct SlimComponents {
    #[serde(default)]
    schemas: BTreeMap<String, SlimSchema>,
}

/// One schema node: its references, children and the list extensions.
#[derive(Debug, Default, Deserialize, Serialize)]
struct SlimSchema {
    #[serde(rename = "$ref", default, skip_serializing_if = "Option::is_none")]
    reference: Option<String>,
    #[serde(rename = "allOf", default, skip_serializing_if = "Vec::is_empty")]
    all_of: Vec<SlimSchema>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    items: Option<Box<SlimSchema>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    properties: BTreeMap<String, SlimSchema>,
    #[serde(
        rename = "x-kubernetes-group-version-kind",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    group_version_kind: Option<Value>,
    #[serde(
        rename = "x-kubernetes-patch-strategy",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    patch_strategy: Option<String>,
    #[serde(
        rename = "x-kubernetes-patch-merge-key",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    patch_merge_key: Option<String>,
    #[serde(
        rename = "x-kubernetes-list-type",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    list_type: Option<String>,
    #[serde(
        rename = "x-kubernetes-list-map-keys",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    list_map_keys: Option<Value>,
}

/// Most kinds whose list schema is kept (kinds are few; the bound only
/// keeps a spoke with thousands of CRDs from growing it without end).
const MAX_KINDS: u64 = 1024;

/// Fetches and caches list schemas per kind from the spoke API server.
pub struct ListSchemas {
    client: Client,
    /// One fetch per kind at a time: many works of one kind arriving
    /// together wait for the first fetch instead of each holding its own
    /// copy of a multi-megabyte document.
    cache: Cache<GroupVersionKind, Arc<KindListSchema>>,
}

impl ListSchemas {
    /// An empty cache over `client`.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            cache: Cache::builder().max_capacity(MAX_KINDS).build(),
        }
    }

    /// The list schema of `gvk`. Never fails: an unreadable document yields an
    /// empty schema (conventions apply) and is asked for again next time.
    pub async fn for_kind(&self, gvk: &GroupVersionKind) -> Arc<KindListSchema> {
        let path = if gvk.group.is_empty() {
            format!("/openapi/v3/api/{}", gvk.version)
        } else {
            format!("/openapi/v3/apis/{}/{}", gvk.group, gvk.version)
        };
        let fetch = async {
            let request = http::Request::get(&path)
                .body(Vec::new())
                .map_err(|e| e.to_string())?;
            let document = self
                .client
                .request::<SlimDocument>(request)
                .await
                .map_err(|e| e.to_string())?;
            let document = serde_json::to_value(document).map_err(|e| e.to_string())?;
            Ok::<_, String>(Arc::new(KindListSchema::from_openapi(&document, gvk)))
        };
        match self.cache.try_get_with(gvk.clone(), fetch).await {
            Ok(schema) => schema,
            Err(error) => {
                debug!(%path, %error, "no OpenAPI schema; lists merge by convention");
                Arc::new(KindListSchema::default())
            }
        }
    }

    /// Forgets a kind, e.g. after its CRD changed.
    pub async fn forget(&self, gvk: &GroupVersionKind) {
        self.cache.invalidate(gvk).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_slim_document_keeps_what_the_walk_reads_and_drops_descriptions() {
        let document = json!({"components": {"schemas": {
            "io.k8s.api.apps.v1.Deployment": {
                "description": "a long text",
                "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Deployment"}],
                "properties": {"spec": {"description": "more text", "allOf": [{"$ref": "#/components/schemas/Spec"}]}}
            },
            "Spec": {"properties": {"containers": {
                "type": "array", "description": "containers",
                "items": {"properties": {"name": {"type": "string"}}},
                "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name",
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]
            }}}
        }}});
        let slim: SlimDocument = serde_json::from_value(document.clone()).expect("slim");
        let slim = serde_json::to_value(slim).expect("value");
        assert!(!slim.to_string().contains("description"), "{slim}");
        let gvk = GroupVersionKind::gvk("apps", "v1", "Deployment");
        let full = KindListSchema::from_openapi(&document, &gvk);
        let read = KindListSchema::from_openapi(&slim, &gvk);
        assert_eq!(full.lists, read.lists);
        assert_eq!(
            read.list_kind(&path(&["spec", "containers"])),
            ListKind::Map(vec!["name".into()])
        );
    }

    #[test]
    fn merge_keys_come_from_list_map_keys_and_patch_merge_keys_through_refs() {
        let document = json!({"components": {"schemas": {
            "io.k8s.api.apps.v1.Deployment": {
                "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Deployment"}],
                "properties": {"spec": {"allOf": [{"$ref": "#/components/schemas/Spec"}]}}
            },
            "Spec": {"properties": {"template": {"properties": {"spec": {"properties": {
                "containers": {
                    "type": "array",
                    "items": {"$ref": "#/components/schemas/Container"},
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"]
                },
                "volumes": {
                    "type": "array", "items": {"type": "object"},
                    "x-kubernetes-patch-merge-key": "name",
                    "x-kubernetes-patch-strategy": "merge,retainKeys"
                },
                "args": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"}
            }}}}}},
            "Container": {"properties": {"ports": {
                "type": "array", "items": {"type": "object"},
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["containerPort", "protocol"]
            }, "env": {
                "type": "array", "items": {"type": "object"},
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name", "value"],
                "x-kubernetes-patch-merge-key": "name",
                "x-kubernetes-patch-strategy": "merge"
            }}}
        }}});
        let gvk = GroupVersionKind::gvk("apps", "v1", "Deployment");
        let schema = KindListSchema::from_openapi(&document, &gvk);
        let pod = ["spec", "template", "spec"];
        let at = |rest: &[&str]| {
            let mut p = path(&pod);
            p.extend(path(rest));
            schema.list_kind(&p)
        };
        assert_eq!(at(&["containers"]), ListKind::Map(path(&["name"])));
        assert_eq!(at(&["volumes"]), ListKind::Map(path(&["name"])));
        assert_eq!(at(&["args"]), ListKind::Atomic);
        assert_eq!(
            at(&["containers", "[]", "ports"]),
            ListKind::Map(path(&["containerPort", "protocol"]))
        );
        assert_eq!(
            at(&["containers", "[]", "env"]),
            ListKind::Map(path(&["name"])),
            "the patch merge key wins over list-map-keys"
        );
        assert_eq!(at(&["nothing"]), ListKind::Unknown);
    }

    #[test]
    fn a_document_without_the_kind_gives_an_empty_schema() {
        let schema = KindListSchema::from_openapi(
            &json!({"components": {"schemas": {}}}),
            &GroupVersionKind::gvk("", "v1", "ConfigMap"),
        );
        assert_eq!(schema.list_kind(&path(&["data"])), ListKind::Unknown);
    }

    #[test]
    fn a_schema_that_refers_to_itself_from_many_fields_is_walked_once_per_path() {
        // Shaped like JSONSchemaProps: several fields refer back to the type,
        // which made a depth-limited walk explode exponentially.
        let recursive = json!({"$ref": "#/components/schemas/Props"});
        let document = json!({"components": {"schemas": {
            "Props": {
                "x-kubernetes-group-version-kind": [{"group": "x", "version": "v1", "kind": "Props"}],
                "properties": {
                    "not": recursive, "a": recursive, "b": recursive, "c": recursive, "d": recursive,
                    "allOf": {"type": "array", "items": recursive}
                }
            }
        }}});
        let schema =
            KindListSchema::from_openapi(&document, &GroupVersionKind::gvk("x", "v1", "Props"));
        assert_eq!(
            schema.lists.len(),
            1,
            "only the top-level list is recorded: {:?}",
            schema.lists
        );
        assert_eq!(schema.list_kind(&path(&["allOf"])), ListKind::Unknown);
    }

    #[test]
    fn recursive_schemas_stop_at_the_depth_limit() {
        let document = json!({"components": {"schemas": {
            "Node": {
                "x-kubernetes-group-version-kind": [{"group": "x", "version": "v1", "kind": "Node"}],
                "properties": {"child": {"$ref": "#/components/schemas/Node"}}
            }
        }}});
        let schema =
            KindListSchema::from_openapi(&document, &GroupVersionKind::gvk("x", "v1", "Node"));
        assert_eq!(schema.list_kind(&path(&["child"])), ListKind::Unknown);
    }
}
