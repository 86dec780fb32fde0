//! JSONPath handling for ignored fields: parsing user paths, finding what
//! they match, and reading/writing/removing values at concrete locations.
//!
//! Every path goes through `jsonpath-rust` (RFC 9535). Its query results come
//! back as RFC 9535 Normalized Paths (`$['spec']['replicas']`, `$['a'][0]`),
//! which we turn into [`Segment`]s so the rest of the module can edit values.

use std::fmt;

use jsonpath_rust::parser::errors::JsonPathError;
use jsonpath_rust::parser::model::JpQuery;
use jsonpath_rust::parser::parse_json_path;
use jsonpath_rust::query::js_path_process;
use serde_json::Value;

use super::jq::{JqError, JqPath, locate_jq};
use super::text::prefix_within;

/// Longest JSONPath accepted, in bytes. Paths are a tenant's input that the
/// agent evaluates against live objects (jsonpath-rust's work grows with
/// the path as well as the object), and a real one is a few dozen bytes.
pub const MAX_PATH_BYTES: usize = 512;
pub use super::pointer::{Pointer, Segment, get, normalized, remove, remove_pointers, set};

/// A validated JSONPath naming fields of a manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct IgnorePath {
    raw: String,
    normalized: String,
    selector: Selector,
}

/// What finds the locations a path names.
#[derive(Debug, Clone, PartialEq)]
enum Selector {
    /// RFC 9535 JSONPath (JSON pointers are turned into one).
    JsonPath(JpQuery),
    /// A jq path expression.
    Jq(JqPath),
}

/// Why a path cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path is not RFC 9535 JSONPath (or selects the whole object).
    #[error("invalid JSONPath \"{path}\": {reason}")]
    Invalid {
        /// The path as the user wrote it.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl IgnorePath {
    /// Parses a user path. Accepts RFC 9535 paths (`$.spec.replicas`,
    /// `$.spec.template.spec.containers[?@.name=='app'].image`,
    /// `$.metadata.annotations['example.com/owner']`) and the OCM form
    /// without `$` (`.spec.replicas`, `spec.replicas`, `['data']`), which is
    /// prefixed with `$`. Fails when the path is empty, does not parse, or
    /// names the whole object (`$`).
    pub fn parse(raw: &str) -> Result<IgnorePath, PathError> {
        let invalid = |reason: String| PathError::Invalid {
            path: raw.to_string(),
            reason,
        };
        if raw.len() > MAX_PATH_BYTES {
            return Err(PathError::Invalid {
                path: format!("{}…", prefix_within(raw, 64)),
                reason: format!(
                    "the path is {} bytes, over the {MAX_PATH_BYTES}-byte limit",
                    raw.len()
                ),
            });
        }
        let trimmed = raw.trim();
        let normalized = if trimmed.is_empty() {
            return Err(invalid("the path is empty".into()));
        } else if trimmed.starts_with('$') {
            trimmed.to_string()
        } else if trimmed.starts_with('.') || trimmed.starts_with('[') {
            format!("${trimmed}")
        } else {
            format!("$.{trimmed}")
        };
        // Parser positions count in `normalized`; report them in what the
        // user wrote.
        let added = normalized.chars().count() - trimmed.chars().count();
        let leading = raw.chars().count() - raw.trim_start().chars().count();
        let query = parse_json_path(&normalized)
            .map_err(|e| invalid(describe(&e, leading as i64 - added as i64)))?;
        if normalized == "$" {
            return Err(invalid(
                "the path selects the whole object; name a field, e.g. $.spec.replicas".into(),
            ));
        }
        Ok(IgnorePath {
            raw: raw.to_string(),
            normalized,
            selector: Selector::JsonPath(query),
        })
    }

    /// Parses a jq path expression (`.spec.replicas`,
    /// `.spec.containers[] | select(.name == "app") | .image`); see
    /// [`crate::jq`] for the part of jq accepted. Fails naming the
    /// expression and what is wrong with it.
    pub fn from_jq(raw: &str) -> Result<IgnorePath, JqError> {
        let jq = JqPath::parse(raw)?;
        Ok(IgnorePath {
            raw: raw.to_string(),
            normalized: jq.as_str().to_string(),
            selector: Selector::Jq(jq),
        })
    }

    /// Parses an RFC 6901 JSON pointer (`/spec/replicas`,
    /// `/metadata/annotations/example.com~1owner`) into the path that
    /// selects exactly the location the pointer names. A token that reads as
    /// an array index (`/containers/0`) selects that item in a list and the
    /// member named `0` in an object, as RFC 6901 says. Fails when the
    /// pointer does not parse (no leading `/`, a bad `~` escape), names the
    /// whole object (``), or uses `-` (the end of a list, which names no
    /// existing field).
    pub fn from_json_pointer(raw: &str) -> Result<IgnorePath, PointerError> {
        let invalid = |reason: String| PointerError::Invalid {
            pointer: raw.to_string(),
            reason,
        };
        let pointer = jsonptr::Pointer::parse(raw).map_err(|e| invalid(e.to_string()))?;
        if pointer.is_root() {
            return Err(invalid(
                "the pointer names the whole object; name a field, e.g. /spec/replicas".into(),
            ));
        }
        let mut path = String::from("$");
        for token in pointer.tokens() {
            let key = token.decoded();
            let quoted = quote_member(&key);
            match token.to_index() {
                Ok(jsonptr::index::Index::Num(index)) => {
                    path.push_str(&format!("[{quoted},{index}]"));
                }
                Ok(jsonptr::index::Index::Next) => {
                    return Err(invalid(
                        "`-` names the position after the last list item, not a field".into(),
                    ));
                }
                Err(_) => path.push_str(&format!("[{quoted}]")),
            }
        }
        let parsed = IgnorePath::parse(&path).map_err(|e| invalid(e.to_string()))?;
        Ok(IgnorePath {
            raw: raw.to_string(),
            ..parsed
        })
    }

    /// The normalized form: a JSONPath starting with `$`, or the trimmed
    /// expression for jq (which never starts with `$`).
    pub fn as_str(&self) -> &str {
        &self.normalized
    }

    /// The path exactly as the user wrote it.
    pub fn raw(&self) -> &str {
        &self.raw
    }
}

impl fmt::Display for IgnorePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.normalized)
    }
}

/// Why a JSON pointer cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PointerError {
    /// The pointer is not RFC 6901 or names no field.
    #[error("invalid JSON pointer \"{pointer}\": {reason}")]
    Invalid {
        /// The pointer as the user wrote it.
        pointer: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// `key` as an RFC 9535 single-quoted name selector.
fn quote_member(key: &str) -> String {
    let mut quoted = String::with_capacity(key.len() + 2);
    quoted.push('\'');
    for c in key.chars() {
        match c {
            '\'' => quoted.push_str("\\'"),
            '\\' => quoted.push_str("\\\\"),
            c if (c as u32) < 0x20 => quoted.push_str(&format!("\\u{:04x}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('\'');
    quoted
}

/// Turns the parser's error into one line: pest renders a multi-line
/// diagram that would be unreadable in a condition message.
/// `shift` moves the parser's column back into the user's text.
fn describe(error: &JsonPathError, shift: i64) -> String {
    match error {
        JsonPathError::PestError(pest) => {
            let message = pest.variant.message();
            let rendered = pest.to_string();
            let column = rendered
                .lines()
                .find_map(|l| l.trim().strip_prefix("--> "))
                .and_then(|pos| pos.rsplit(':').next())
                .and_then(|col| col.parse::<i64>().ok())
                .map(|col| (col + shift).max(1));
            match column {
                Some(column) => format!("{message} at character {column}"),
                None => message.into_owned(),
            }
        }
        other => other.to_string(),
    }
}

/// Every location in `value` the path matches, in document order (object
/// members by name, list items by index, parents before children), without
/// duplicates. Evaluation errors (which RFC 9535 paths only raise for
/// function results, never for data) yield no matches.
pub fn locate(value: &Value, path: &IgnorePath) -> Vec<Pointer> {
    let query = match &path.selector {
        Selector::JsonPath(query) => query,
        Selector::Jq(jq) => {
            let mut pointers = locate_jq(value, jq);
            pointers.sort();
            return pointers;
        }
    };
    let Ok(found) = js_path_process(query, value) else {
        return Vec::new();
    };
    // Sorting gives one order whatever the map implementation's key order,
    // which keeps hashes of matched values independent of input order.
    let mut pointers: Vec<Pointer> = found
        .into_iter()
        .filter_map(|r| parse_normalized(&r.path))
        .collect();
    pointers.sort();
    pointers.dedup();
    pointers
}

/// Removes every match of every path. All locations are found first, then
/// removed from the last in document order to the first, so removing a list
/// item never shifts an item still to be removed.
pub fn remove_all(value: &mut Value, paths: &[IgnorePath]) {
    let mut pointers: Vec<Pointer> = paths.iter().flat_map(|p| locate(value, p)).collect();
    remove_pointers(value, &mut pointers);
}

/// Parses a Normalized Path as produced by jsonpath-rust. Returns None on
/// anything unexpected rather than guessing a location.
fn parse_normalized(path: &str) -> Option<Pointer> {
    let mut chars = path.strip_prefix('$')?.chars().peekable();
    let mut out = Vec::new();
    while let Some(open) = chars.next() {
        if open != '[' {
            return None;
        }
        if chars.peek() == Some(&'\'') {
            chars.next();
            let mut key = String::new();
            loop {
                match chars.next()? {
                    '\'' => break,
                    '\\' => key.push(match chars.next()? {
                        'b' => '\u{8}',
                        'f' => '\u{c}',
                        'n' => '\n',
                        'r' => '\r',
                        't' => '\t',
                        'u' => {
                            let hex: String = chars.by_ref().take(4).collect();
                            char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?
                        }
                        c @ ('\'' | '\\' | '"' | '/') => c,
                        _ => return None,
                    }),
                    c => key.push(c),
                }
            }
            out.push(Segment::Key(key));
        } else {
            let mut digits = String::new();
            while let Some(c) = chars.next_if(char::is_ascii_digit) {
                digits.push(c);
            }
            out.push(Segment::Index(digits.parse().ok()?));
        }
        if chars.next()? != ']' {
            return None;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(raw: &str) -> IgnorePath {
        IgnorePath::parse(raw).expect("valid path")
    }

    #[test]
    fn a_path_over_the_length_bound_is_refused_before_it_is_parsed() {
        let long = format!("$.spec{}", ".a".repeat(MAX_PATH_BYTES));
        let error = IgnorePath::parse(&long).expect_err("too long");
        let message = error.to_string();
        assert!(message.contains("over the 512-byte limit"), "{message}");
        assert!(
            message.len() < 200,
            "the error does not echo the path: {message}"
        );
        let fits = format!("$.spec{}", ".a".repeat((MAX_PATH_BYTES - 6) / 2));
        assert!(fits.len() <= MAX_PATH_BYTES);
        IgnorePath::parse(&fits).expect("a path at the bound parses");
    }

    fn key(k: &str) -> Segment {
        Segment::Key(k.to_string())
    }

    #[test]
    fn a_json_pointer_selects_exactly_the_location_it_names() {
        let doc = json!({
            "metadata": {"annotations": {"example.com/owner": "x", "a~b": "y", "it's": "z"}},
            "spec": {"containers": [{"image": "a"}, {"image": "b"}], "0": {"image": "k"}}
        });
        let at = |pointer: &str| {
            let p = IgnorePath::from_json_pointer(pointer).expect("valid pointer");
            assert_eq!(p.raw(), pointer);
            locate(&doc, &p)
        };
        assert_eq!(
            at("/metadata/annotations/example.com~1owner"),
            vec![vec![
                key("metadata"),
                key("annotations"),
                key("example.com/owner")
            ]]
        );
        assert_eq!(
            at("/metadata/annotations/a~0b"),
            vec![vec![key("metadata"), key("annotations"), key("a~b")]]
        );
        assert_eq!(
            at("/metadata/annotations/it's"),
            vec![vec![key("metadata"), key("annotations"), key("it's")]]
        );
        assert_eq!(
            at("/spec/containers/1/image"),
            vec![vec![
                key("spec"),
                key("containers"),
                Segment::Index(1),
                key("image")
            ]]
        );
        // In an object, a numeric token is a member name.
        assert_eq!(
            at("/spec/0/image"),
            vec![vec![key("spec"), key("0"), key("image")]]
        );
        assert!(at("/spec/absent").is_empty());
    }

    #[test]
    fn invalid_json_pointers_are_refused_with_the_pointer_named() {
        for bad in ["spec/replicas", "", "/a/~2", "/spec/containers/-"] {
            let err = IgnorePath::from_json_pointer(bad).expect_err(bad);
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn rfc9535_paths_are_kept_as_written() {
        let p = path("$.spec.replicas");
        assert_eq!(p.as_str(), "$.spec.replicas");
        assert_eq!(p.raw(), "$.spec.replicas");
        assert_eq!(
            path("$.spec.template.spec.containers[?@.name=='app'].image").as_str(),
            "$.spec.template.spec.containers[?@.name=='app'].image"
        );
    }

    #[test]
    fn the_ocm_form_without_dollar_is_prefixed() {
        assert_eq!(path(".spec.replicas").as_str(), "$.spec.replicas");
        assert_eq!(path("spec.replicas").as_str(), "$.spec.replicas");
        assert_eq!(path("['data']").as_str(), "$['data']");
        assert_eq!(path("  .data ").as_str(), "$.data");
        assert_eq!(path(".data").raw(), ".data");
    }

    #[test]
    fn a_malformed_path_is_an_error_naming_the_path() {
        let err = IgnorePath::parse("$.spec[").expect_err("must fail");
        assert_eq!(
            err.to_string(),
            "invalid JSONPath \"$.spec[\": expected selector at character 8"
        );
        // Positions count in what the user wrote, not the `$`-prefixed form.
        let err =
            IgnorePath::parse(" .metadata.annotations[example.com/x]").expect_err("must fail");
        let PathError::Invalid { path, reason } = &err;
        assert_eq!(path, " .metadata.annotations[example.com/x]");
        assert_eq!(reason, "expected selector at character 24");
    }

    #[test]
    fn empty_and_root_paths_are_rejected() {
        assert!(IgnorePath::parse("").is_err());
        assert!(IgnorePath::parse("  ").is_err());
        assert!(IgnorePath::parse("$").is_err());
    }

    #[test]
    fn locate_finds_a_plain_field() {
        let v = json!({"spec": {"replicas": 3}});
        assert_eq!(
            locate(&v, &path("$.spec.replicas")),
            vec![vec![key("spec"), key("replicas")]]
        );
        assert!(locate(&v, &path("$.spec.paused")).is_empty());
    }

    #[test]
    fn locate_follows_a_filter_into_a_list() {
        let v = json!({"spec": {"containers": [
            {"name": "sidecar", "image": "s"},
            {"name": "app", "image": "a"},
        ]}});
        let found = locate(&v, &path("$.spec.containers[?@.name=='app'].image"));
        assert_eq!(
            found,
            vec![vec![
                key("spec"),
                key("containers"),
                Segment::Index(1),
                key("image")
            ]]
        );
        assert_eq!(get(&v, &found[0]), Some(&json!("a")));
    }

    #[test]
    fn keys_with_dots_slashes_quotes_and_brackets_round_trip() {
        for name in [
            "example.com/owner",
            "it's",
            "a['b']",
            "back\\slash",
            "tab\there",
        ] {
            let v = json!({"metadata": {"annotations": {name: "x"}}});
            let found = locate(&v, &path("$.metadata.annotations.*"));
            assert_eq!(
                found,
                vec![vec![key("metadata"), key("annotations"), key(name)]],
                "{name}"
            );
            let rendered = normalized(&found[0]);
            assert_eq!(locate(&v, &path(&rendered)), found, "{rendered}");
        }
        let v = json!({"metadata": {"annotations": {"example.com/owner": "me"}}});
        let found = locate(&v, &path("$.metadata.annotations['example.com/owner']"));
        assert_eq!(get(&v, &found[0]), Some(&json!("me")));
    }

    #[test]
    fn locate_returns_document_order_without_duplicates() {
        let v = json!({"items": [{"a": 1}, {"a": 2}, {"a": 3}]});
        let found = locate(&v, &path("$.items[2,0,0].a"));
        assert_eq!(
            found,
            vec![
                vec![key("items"), Segment::Index(0), key("a")],
                vec![key("items"), Segment::Index(2), key("a")],
            ]
        );
    }

    #[test]
    fn set_creates_missing_objects_but_not_list_items() {
        let mut v = json!({"spec": {"items": [1]}});
        assert!(set(&mut v, &[key("spec"), key("a"), key("b")], json!(1)));
        assert_eq!(v["spec"]["a"]["b"], json!(1));
        assert!(set(
            &mut v,
            &[key("spec"), key("items"), Segment::Index(0)],
            json!(9)
        ));
        assert_eq!(v["spec"]["items"], json!([9]));
        assert!(!set(
            &mut v,
            &[key("spec"), key("items"), Segment::Index(1)],
            json!(2)
        ));
        assert!(!set(
            &mut v,
            &[key("spec"), key("items"), key("x")],
            json!(2)
        ));
        assert!(!set(
            &mut v,
            &[key("spec"), key("a"), key("b"), key("c")],
            json!(2)
        ));
    }

    #[test]
    fn remove_takes_out_members_and_items() {
        let mut v = json!({"a": {"b": 1}, "l": [1, 2]});
        assert_eq!(remove(&mut v, &[key("a"), key("b")]), Some(json!(1)));
        assert_eq!(
            remove(&mut v, &[key("l"), Segment::Index(0)]),
            Some(json!(1))
        );
        assert_eq!(remove(&mut v, &[key("l"), Segment::Index(5)]), None);
        assert_eq!(remove(&mut v, &[key("zz"), key("b")]), None);
        assert_eq!(remove(&mut v, &[]), None);
        assert_eq!(v, json!({"a": {}, "l": [2]}));
    }

    #[test]
    fn remove_all_removes_list_items_from_the_highest_index_down() {
        let mut v = json!({"l": [0, 1, 2, 3, 4], "keep": true, "drop": 1});
        remove_all(&mut v, &[path("$.l[1,3]"), path("$.l[4]"), path("$.drop")]);
        assert_eq!(v, json!({"l": [0, 2], "keep": true}));
    }

    #[test]
    fn odd_normalized_paths_are_refused_not_guessed() {
        assert_eq!(parse_normalized("$"), Some(vec![]));
        assert_eq!(
            parse_normalized("$['a'][0]"),
            Some(vec![key("a"), Segment::Index(0)])
        );
        assert_eq!(
            parse_normalized("$['a\\u001f']"),
            Some(vec![key("a\u{1f}")])
        );
        for bad in [
            "",
            "$a",
            "$['a'",
            "$[x]",
            "$['a\\q']",
            "$[1",
            "$['a'].['b']",
        ] {
            assert_eq!(parse_normalized(bad), None, "{bad}");
        }
    }
}
