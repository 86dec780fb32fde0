//! Whatever a work holds, the agent's pure pipeline (identify, order, config
//! and strategy, write plan, hash, feedback, availability) ends in a result
//! or a clear per-manifest error: never a panic, and every manifest keeps its
//! place in the apply order. Works are generated from the shapes users get
//! wrong: odd apiVersions, missing names, non-objects, bad strategies and
//! conditions, broken and real JSONPaths, wildcard identifiers.

mod support;

use ferry_proto::v1;
use proptest::prelude::*;
use serde_json::{Value, json};

const API_VERSIONS: &[&str] = &[
    "v1",
    "apps/v1",
    "batch/v1",
    "example.com/v1",
    "",
    "/",
    "a/b/c",
    "/v1",
];
const KINDS: &[&str] = &[
    "ConfigMap",
    "Deployment",
    "Namespace",
    "CustomResourceDefinition",
    "Job",
    "Pod",
    "StatefulSet",
    "DaemonSet",
    "",
];
const NAMES: &[&str] = &["web", "a", "*", "", "ns-1"];
const STRATEGIES: &[&str] = &[
    "",
    "Update",
    "CreateOnly",
    "ServerSideApply",
    "ReadOnly",
    "serverSideApply",
];
const CONDITIONS: &[&str] = &["", "OnSpokePresent", "OnSpokeChange", "Always"];
const PATHS: &[&str] = &[
    "$.spec.replicas",
    ".spec.template.spec.containers[?@.name=='app'].image",
    "$.metadata.annotations['a.b/c']",
    "spec.replicas",
    "$..image",
    "$.data[*]",
    "$.status.conditions[?@.type=='Ready'].status",
    "$",
    "",
    "$.spec[",
    "$.a[?@.b ==]",
    "$[-1:]",
];
const RULE_TYPES: &[&str] = &["WellKnownStatus", "JSONPaths", "Other", ""];

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("JSON has no NaN", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "\\PC{0,12}".prop_map(Value::String),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
    ]
}

fn body() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(
                    &[
                        "replicas",
                        "image",
                        "name",
                        "containers",
                        "type",
                        "status",
                        "a.b/c"
                    ][..]
                )
                .prop_map(str::to_string),
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Something that may or may not be text in the place of a string field.
fn text_or_not(choices: &'static [&'static str]) -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => prop::sample::select(choices).prop_map(|s| json!(s)),
        1 => scalar(),
    ]
}

fn manifest() -> impl Strategy<Value = Vec<u8>> {
    let object = (
        prop::option::of(text_or_not(API_VERSIONS)),
        prop::option::of(text_or_not(KINDS)),
        prop::option::of(text_or_not(NAMES)),
        prop::option::of(text_or_not(NAMES)),
        body(),
        body(),
    )
        .prop_map(|(api_version, kind, name, namespace, spec, status)| {
            let mut metadata = serde_json::Map::new();
            name.map(|n| metadata.insert("name".into(), n));
            namespace.map(|n| metadata.insert("namespace".into(), n));
            let mut object = serde_json::Map::new();
            api_version.map(|v| object.insert("apiVersion".into(), v));
            kind.map(|k| object.insert("kind".into(), k));
            object.insert("metadata".into(), Value::Object(metadata));
            object.insert("spec".into(), spec);
            object.insert("status".into(), status);
            serde_json::to_vec(&Value::Object(object)).expect("serializes")
        });
    prop_oneof![
        8 => object,
        1 => body().prop_map(|v| serde_json::to_vec(&v).expect("serializes")),
        1 => prop::collection::vec(any::<u8>(), 0..40),
    ]
}

fn pick(choices: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(choices).prop_map(str::to_string)
}

fn manifest_config() -> impl Strategy<Value = v1::ManifestConfig> {
    let identifier = (
        pick(&["", "apps", "batch", "example.com"]),
        pick(&["configmaps", "deployments", "jobs", "pods", ""]),
        pick(NAMES),
        pick(NAMES),
    )
        .prop_map(
            |(group, resource, name, namespace)| v1::ResourceIdentifier {
                group,
                resource,
                name,
                namespace,
            },
        );
    let ignore = (pick(CONDITIONS), prop::collection::vec(pick(PATHS), 0..3)).prop_map(
        |(condition, json_paths)| v1::IgnoreField {
            condition,
            json_paths,
            ..Default::default()
        },
    );
    let strategy = (
        pick(STRATEGIES),
        any::<bool>(),
        pick(&["", "ferry-agent", "someone-else"]),
        prop::collection::vec(ignore, 0..3),
    )
        .prop_map(
            |(r#type, force, field_manager, ignore_fields)| v1::UpdateStrategy {
                r#type,
                server_side_apply: Some(v1::ServerSideApplyConfig {
                    force,
                    field_manager,
                    ignore_fields,
                }),
            },
        );
    let named = (pick(&["replicas", "ready", ""]), pick(PATHS))
        .prop_map(|(name, path)| v1::NamedJsonPath { name, path });
    let rule = (pick(RULE_TYPES), prop::collection::vec(named, 0..3))
        .prop_map(|(r#type, json_paths)| v1::FeedbackRule { r#type, json_paths });
    (
        prop::option::of(identifier),
        prop::collection::vec(rule, 0..3),
        prop::option::of(strategy),
        pick(&["", "Recreate", "Leave", "Never"]),
    )
        .prop_map(
            |(resource_identifier, feedback_rules, update_strategy, when_deleted)| {
                v1::ManifestConfig {
                    resource_identifier,
                    feedback_rules,
                    update_strategy,
                    when_deleted,
                    ..Default::default()
                }
            },
        )
}

fn work() -> impl Strategy<Value = v1::WorkSpec> {
    (
        prop::collection::vec(manifest(), 0..6),
        prop::collection::vec(manifest_config(), 0..4),
    )
        .prop_map(|(manifests_json, manifest_configs)| v1::WorkSpec {
            manifests_json,
            manifest_configs,
            ..Default::default()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn any_work_is_planned_without_a_panic(spec in work()) {
        support::work_pipeline::run_work(&spec);
    }
}
