//! JSONPaths built from the RFC 9535 grammar (dotted and bracketed names,
//! keys with dots, slashes and quotes, wildcards, indexes, slices, filters,
//! descendant segments, several selectors in one bracket), in both the `$`
//! and the OCM spelling, against random objects. Random text rarely parses,
//! so this is what reaches the code behind the parser: every such path
//! parses, every location it yields exists, locations are not repeated, and
//! removing what a path names leaves nothing for it to name.

use ferry_semantics::paths::{IgnorePath, get, locate, remove_all};
use ferry_semantics::{IgnoreCondition, IgnoreRule, SsaInput, plan_server_side_apply};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Member names short enough to be written `.name`.
const PLAIN_KEYS: &[&str] = &["spec", "name", "a", "b", "image", "data", "items"];
/// Member names that only the bracket form can spell.
const QUOTED_KEYS: &[&str] = &["a.b/c", "x y", "it's", "tab\there", "ünï", ""];
const STRINGS: &[&str] = &["app", "side", "x", "", "a.b/c"];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(PLAIN_KEYS).prop_map(str::to_string),
        1 => prop::sample::select(QUOTED_KEYS).prop_map(str::to_string),
    ]
}

/// Objects whose keys and values come from the same small vocabulary as the
/// paths, so paths usually find something.
fn object() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<i8>().prop_map(|n| json!(n)),
        prop::sample::select(STRINGS).prop_map(|s| json!(s)),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
    ];
    let tree = leaf.prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..5)
                .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>())),
        ]
    });
    prop::collection::btree_map(key(), tree, 1..5)
        .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>()))
}

/// A name in single quotes, escaped as RFC 9535 asks.
fn quoted(name: &str) -> String {
    let mut out = String::from("'");
    for c in name.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// The shape of one selector, kept so a test can tell which paths shift
/// list positions when items are removed.
#[derive(Debug, Clone)]
enum Selector {
    Name(String),
    Wildcard,
    Index(i8),
    Slice(Option<i8>, Option<i8>, Option<i8>),
    Filter(String),
}

impl Selector {
    fn render(&self) -> String {
        let bound = |b: &Option<i8>| b.map(|n| n.to_string()).unwrap_or_default();
        match self {
            Selector::Name(name) => quoted(name),
            Selector::Wildcard => "*".into(),
            Selector::Index(i) => i.to_string(),
            Selector::Slice(start, end, step) => match step {
                Some(step) => format!("{}:{}:{step}", bound(start), bound(end)),
                None => format!("{}:{}", bound(start), bound(end)),
            },
            Selector::Filter(expr) => format!("?{expr}"),
        }
    }

    /// Whether removing what this selects can move other items into the
    /// positions it selects.
    fn positional(&self) -> bool {
        matches!(self, Selector::Index(_) | Selector::Slice(..))
    }
}

fn filter() -> impl Strategy<Value = String> {
    let operand = prop_oneof![
        prop::sample::select(PLAIN_KEYS).prop_map(|k| format!("@.{k}")),
        prop::sample::select(QUOTED_KEYS).prop_map(|k| format!("@[{}]", quoted(k))),
        Just("@".to_string()),
    ];
    let literal = prop_oneof![
        any::<i8>().prop_map(|n| n.to_string()),
        prop::sample::select(STRINGS).prop_map(quoted),
        Just("true".to_string()),
        Just("null".to_string()),
    ];
    let comparison = (
        operand.clone(),
        prop::sample::select(&["==", "!=", "<", "<=", ">", ">="][..]),
        literal,
    )
        .prop_map(|(left, op, right)| format!("{left} {op} {right}"));
    let test = prop_oneof![
        3 => comparison,
        1 => operand.clone(),
        1 => operand.clone().prop_map(|o| format!("!{o}")),
        1 => operand.prop_map(|o| format!("length({o}) > 1")),
    ];
    prop::collection::vec(test, 1..3).prop_flat_map(|tests| {
        let n = tests.len();
        prop::collection::vec(prop::sample::select(&[" && ", " || "][..]), n - 1).prop_map(
            move |joins| {
                let mut out = tests[0].clone();
                for (join, test) in joins.iter().zip(&tests[1..]) {
                    out.push_str(join);
                    out.push_str(test);
                }
                out
            },
        )
    })
}

fn selector() -> impl Strategy<Value = Selector> {
    let bound = prop::option::of(-4i8..6);
    prop_oneof![
        4 => key().prop_map(Selector::Name),
        2 => Just(Selector::Wildcard),
        2 => (-3i8..5).prop_map(Selector::Index),
        1 => (bound.clone(), bound, prop::option::of(prop_oneof![-2i8..=-1, 1i8..3]))
            .prop_map(|(a, b, c)| Selector::Slice(a, b, c)),
        2 => filter().prop_map(Selector::Filter),
    ]
}

/// One segment: child or descendant, with one or two selectors.
#[derive(Debug, Clone)]
struct SegmentSpec {
    descendant: bool,
    selectors: Vec<Selector>,
}

impl SegmentSpec {
    fn render(&self) -> String {
        let lead = if self.descendant { ".." } else { "" };
        match self.selectors.as_slice() {
            [Selector::Name(name)] if PLAIN_KEYS.contains(&name.as_str()) => {
                let dot = if self.descendant { "" } else { "." };
                format!("{lead}{dot}{name}")
            }
            [Selector::Wildcard] => {
                let dot = if self.descendant { "" } else { "." };
                format!("{lead}{dot}*")
            }
            selectors => {
                let inner: Vec<String> = selectors.iter().map(Selector::render).collect();
                format!("{lead}[{}]", inner.join(", "))
            }
        }
    }
}

fn segment() -> impl Strategy<Value = SegmentSpec> {
    (
        prop::bool::weighted(0.15),
        prop::collection::vec(selector(), 1..3),
    )
        .prop_map(|(descendant, selectors)| SegmentSpec {
            descendant,
            selectors,
        })
}

/// A generated path: its segments, and how it is spelled.
#[derive(Debug, Clone)]
struct GeneratedPath {
    segments: Vec<SegmentSpec>,
    text: String,
}

fn path() -> impl Strategy<Value = GeneratedPath> {
    (prop::collection::vec(segment(), 1..5), 0u8..3).prop_map(|(segments, spelling)| {
        let body: String = segments.iter().map(SegmentSpec::render).collect();
        // `$…`, the OCM `.spec…` form, and the OCM form without a dot.
        let text = match spelling {
            0 => format!("${body}"),
            1 if body.starts_with('.') || body.starts_with('[') => body.clone(),
            2 if body.starts_with('.') && !body.starts_with("..") => body[1..].to_string(),
            _ => format!("${body}"),
        };
        GeneratedPath { segments, text }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_path_of_the_grammar_parses(generated in path()) {
        let parsed = IgnorePath::parse(&generated.text);
        prop_assert!(parsed.is_ok(), "{:?} refused: {:?}", generated.text, parsed.err());
    }

    #[test]
    fn every_location_a_path_yields_exists_once(generated in path(), value in object()) {
        let path = IgnorePath::parse(&generated.text).expect("grammar paths parse");
        let found = locate(&value, &path);
        for pointer in &found {
            prop_assert!(
                get(&value, pointer).is_some(),
                "{} located {:?}, which is not in {}", generated.text, pointer, value
            );
        }
        let mut unique = found.clone();
        unique.sort();
        unique.dedup();
        prop_assert_eq!(unique.len(), found.len(), "{} repeats a location", generated.text);
    }

    #[test]
    fn removing_what_a_path_names_leaves_nothing_for_it(generated in path(), value in object()) {
        // An index or slice in the last segment names the next item once the
        // first is removed, and a filter tests contents that removal changes
        // (`..[?!@.a]` names a parent once its last child without `a` is
        // gone). Those paths must still make progress: removing what they
        // name again and again empties them in fewer rounds than the
        // document has nodes. All other paths must come back empty at once.
        let last_positional = generated
            .segments
            .last()
            .is_some_and(|s| s.selectors.iter().any(Selector::positional));
        let filtered = generated
            .segments
            .iter()
            .any(|s| s.selectors.iter().any(|sel| matches!(sel, Selector::Filter(_))));
        let path = IgnorePath::parse(&generated.text).expect("grammar paths parse");
        let mut edited = value.clone();
        remove_all(&mut edited, std::slice::from_ref(&path));
        if !last_positional && !filtered {
            prop_assert!(
                locate(&edited, &path).is_empty(),
                "{} still names {:?} in {} after removal from {}",
                generated.text, locate(&edited, &path), edited, value
            );
        } else {
            let mut rounds = 0;
            while !locate(&edited, &path).is_empty() {
                let before = nodes(&edited);
                remove_all(&mut edited, std::slice::from_ref(&path));
                prop_assert!(
                    nodes(&edited) < before,
                    "{} names {:?} in {} but removing it removes nothing",
                    generated.text, locate(&edited, &path), edited
                );
                rounds += 1;
                prop_assert!(rounds <= nodes(&value), "{} never empties", generated.text);
            }
        }
    }

    #[test]
    fn the_server_side_apply_plan_keeps_every_field_it_does_not_ignore(
        generated in path(),
        value in object(),
    ) {
        let path = IgnorePath::parse(&generated.text).expect("grammar paths parse");
        let rules = vec![IgnoreRule {
            condition: IgnoreCondition::OnSpokePresent,
            paths: vec![path.clone()],
        }];
        // Creating (no live object) sends the whole manifest, ignored fields
        // included: nothing the hub wrote may be lost on create.
        let plan = plan_server_side_apply(&SsaInput {
            desired: &value,
            live: None,
            rules: &rules,
            manager: "ferry-agent",
        });
        for (key, member) in value.as_object().expect("objects") {
            prop_assert_eq!(
                plan.body.get(key),
                Some(member),
                "{} lost {:?} on create", generated.text, key
            );
        }
    }
}

/// How many JSON values `value` holds, itself included.
fn nodes(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(nodes).sum(),
        Value::Object(members) => members.values().map(nodes).sum(),
        _ => 0,
    }
}
