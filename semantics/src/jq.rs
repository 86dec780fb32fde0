//! jq path expressions for ignored fields (`ignoreFields[].jqPathExpressions`,
//! as in OCM), parsed and run by the `jaq` crates.
//!
//! A user's jq can loop forever or recurse until the stack overflows, and
//! the agent runs these on every apply. So only the part of jq that names
//! fields is accepted: field and index access (`.a`, `.["a/b"]`, `.[0]`),
//! iteration (`.[]`), pipes, and `select(...)` whose condition compares
//! single values (field access, literals, `==` `!=` `<` `<=` `>` `>=`,
//! `and`, `or`, `not`, `has`, `startswith`, `endswith`, `contains`, `test`).
//! Such an expression yields at most one path per location of the object,
//! so running it costs no more than walking the object.

use jaq_core::load::lex::StrPart;
use jaq_core::load::parse::{BinaryOp, Term};
use jaq_core::load::{Arena, File, Loader};
use jaq_core::path::{Part, Path};
use jaq_core::{Compiler, Ctx, Vars, data};
use jaq_json::Val;
use serde_json::Value;

use super::pointer::{Pointer, Segment, get};

/// Longest jq expression accepted.
pub const MAX_JQ_LENGTH: usize = 1024;
/// At most this many locations are taken from one expression.
const MAX_MATCHES: usize = 10_000;

/// Functions a `select` condition may call, with their argument count.
const CONDITION_FUNCTIONS: [(&str, usize); 6] = [
    ("not", 0),
    ("has", 1),
    ("startswith", 1),
    ("endswith", 1),
    ("contains", 1),
    ("test", 1),
];

/// Why a jq expression cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JqError {
    /// Not jq, too long, or outside the part of jq ferry accepts.
    #[error("invalid jq path expression {expression:?}: {reason}")]
    Invalid {
        /// The expression as the user wrote it.
        expression: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// A checked jq path expression. Kept as text: the compiled filter is not
/// `Send`, so it is compiled where it runs ([`locate_jq`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JqPath {
    expression: String,
}

impl JqPath {
    /// Checks `raw`: it must parse as jq and use only the accepted part
    /// of the language (see the module documentation). Fails naming the
    /// expression and the first thing wrong with it.
    pub fn parse(raw: &str) -> Result<JqPath, JqError> {
        let invalid = |reason: String| JqError::Invalid {
            expression: raw.to_string(),
            reason,
        };
        let expression = raw.trim();
        if expression.is_empty() {
            return Err(invalid("the expression is empty".into()));
        }
        if expression.len() > MAX_JQ_LENGTH {
            return Err(invalid(format!("longer than {MAX_JQ_LENGTH} characters")));
        }
        let term = jaq_core::load::parse(expression, |p| p.term())
            .ok_or_else(|| invalid("does not parse as jq".into()))?;
        check_path(&term).map_err(invalid)?;
        if matches!(term, Term::Id) {
            return Err(invalid(
                "`.` selects the whole object; name a field, e.g. .spec.replicas".into(),
            ));
        }
        // Compiling finds what parsing does not (unknown names, arity).
        compile(expression).map_err(invalid)?;
        Ok(JqPath {
            expression: expression.to_string(),
        })
    }

    /// The expression, trimmed.
    pub fn as_str(&self) -> &str {
        &self.expression
    }
}

/// Every location in `value` the expression names, in the order jq yields
/// them, without duplicates. A branch that fails (`.a` on a list) names
/// nothing, as an unmatched JSONPath does.
pub fn locate_jq(value: &Value, path: &JqPath) -> Vec<Pointer> {
    let Ok(filter) = compile(&path.expression) else {
        return Vec::new();
    };
    let Ok(input) = jaq_json::read::parse_single(value.to_string().as_bytes()) else {
        return Vec::new();
    };
    let ctx = Ctx::<data::JustLut<Val>>::new(&filter.lut, Vars::new([]));
    let mut found: Vec<Pointer> = Vec::new();
    for output in filter.id.run((ctx, input)).take(MAX_MATCHES) {
        let Ok(output) = output else { continue };
        let Ok(Value::Array(parts)) = serde_json::from_str::<Value>(&output.to_string()) else {
            continue;
        };
        let pointer: Option<Pointer> = parts
            .into_iter()
            .map(|part| match part {
                Value::String(key) => Some(Segment::Key(key)),
                Value::Number(n) => n
                    .as_u64()
                    .and_then(|i| usize::try_from(i).ok())
                    .map(Segment::Index),
                _ => None,
            })
            .collect();
        // jq names absent fields too (`path(.a)` on `{}` is `["a"]`);
        // like JSONPath, only what exists is located.
        if let Some(pointer) = pointer
            && !pointer.is_empty()
            && get(value, &pointer).is_some()
            && !found.contains(&pointer)
        {
            found.push(pointer);
        }
    }
    found
}

type Filter = jaq_core::compile::Filter<jaq_core::Native<data::JustLut<Val>>>;

/// `path(expression)` compiled with jq's standard definitions.
fn compile(expression: &str) -> Result<Filter, String> {
    let code = format!("path({expression})");
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs());
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs());
    let loader = Loader::new(defs);
    let arena = Arena::default();
    let modules = loader
        .load(
            &arena,
            File {
                code: &code,
                path: (),
            },
        )
        .map_err(|_| "does not parse as jq".to_string())?;
    Compiler::default()
        .with_funs(funs)
        .compile(modules)
        .map_err(|errors| {
            let names: Vec<String> = errors
                .into_iter()
                .flat_map(|(_, errors)| errors)
                .map(|(name, _)| name.to_string())
                .collect();
            format!("unknown or misused names: {}", names.join(", "))
        })
}

/// Accepts what names fields: `.`, access and iteration, pipes, `select`.
fn check_path(term: &Term<&str>) -> Result<(), String> {
    match term {
        Term::Id => Ok(()),
        Term::Path(base, path) => {
            check_path(base)?;
            check_parts(path, true)
        }
        Term::BinOp(left, BinaryOp::Pipe(None), right) => {
            check_path(left)?;
            check_path(right)
        }
        Term::Call(name, args) if *name == "select" && args.len() == 1 => check_condition(&args[0]),
        other => Err(format!(
            "{} is not allowed; use field and index access, .[], | and select(...)",
            describe(other)
        )),
    }
}

/// Accepts single-valued conditions: access without iteration, literals,
/// comparisons, `and`, `or` and a few string and membership tests.
fn check_condition(term: &Term<&str>) -> Result<(), String> {
    match term {
        Term::Id | Term::Num(_) => Ok(()),
        Term::Str(None, parts) if is_literal(parts) => Ok(()),
        Term::Call(name, args) if matches!(*name, "true" | "false" | "null") && args.is_empty() => {
            Ok(())
        }
        Term::Path(base, path) => {
            check_condition(base)?;
            check_parts(path, false)
        }
        Term::BinOp(
            left,
            BinaryOp::Pipe(None) | BinaryOp::And | BinaryOp::Or | BinaryOp::Cmp(_),
            right,
        ) => {
            check_condition(left)?;
            check_condition(right)
        }
        Term::Call(name, args)
            if CONDITION_FUNCTIONS
                .iter()
                .any(|(n, arity)| n == name && *arity == args.len()) =>
        {
            args.iter().try_for_each(check_condition)
        }
        other => Err(format!(
            "{} is not allowed in a select condition; compare fields with literals \
             (==, !=, <, <=, >, >=, and, or, not, has, startswith, endswith, contains, test)",
            describe(other)
        )),
    }
}

/// Path parts with literal indices; iteration (`.[]`) only where
/// `iterate` (outside conditions, where it multiplies the outputs).
fn check_parts(path: &Path<Term<&str>>, iterate: bool) -> Result<(), String> {
    for (part, _) in &path.0 {
        match part {
            Part::Index(index) => check_literal(index)?,
            Part::Range(None, None) if iterate => {}
            Part::Range(None, None) => {
                return Err(".[] is not allowed in a select condition".into());
            }
            Part::Range(..) => return Err("slices (.[a:b]) are not allowed".into()),
        }
    }
    Ok(())
}

fn check_literal(term: &Term<&str>) -> Result<(), String> {
    match term {
        Term::Num(_) => Ok(()),
        Term::Str(None, parts) if is_literal(parts) => Ok(()),
        other => Err(format!(
            "{} is not allowed as an index; use a string or a number",
            describe(other)
        )),
    }
}

fn is_literal(parts: &[StrPart<&str, Term<&str>>]) -> bool {
    parts
        .iter()
        .all(|p| matches!(p, StrPart::Str(_) | StrPart::Char(_)))
}

fn describe(term: &Term<&str>) -> String {
    match term {
        Term::Recurse => "recursion (..)".into(),
        Term::Call(name, _) => format!("calling {name}"),
        Term::Def(..) => "def".into(),
        Term::BinOp(_, BinaryOp::Comma, _) => "a comma (,)".into(),
        Term::BinOp(_, BinaryOp::Alt, _) => "an alternative (//)".into(),
        Term::BinOp(_, BinaryOp::Pipe(Some(_)), _) => "a binding (as $x)".into(),
        Term::BinOp(..) => "arithmetic".into(),
        Term::Fold(..) => "reduce/foreach".into(),
        Term::IfThenElse(..) => "if-then-else".into(),
        Term::TryCatch(..) => "try".into(),
        Term::Label(..) | Term::Break(_) => "label/break".into(),
        Term::Var(_) => "a variable".into(),
        Term::Str(..) => "a string with interpolation or format".into(),
        Term::Arr(_) | Term::Obj(_) => "an array or object constructor".into(),
        Term::Neg(_) => "negation".into(),
        Term::Num(_) => "a number".into(),
        Term::Id | Term::Path(..) => "this expression".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(k: &str) -> Segment {
        Segment::Key(k.into())
    }

    fn at(doc: &Value, expression: &str) -> Vec<Pointer> {
        locate_jq(doc, &JqPath::parse(expression).expect("valid"))
    }

    #[test]
    fn fields_items_and_selected_items_are_located() {
        let doc = json!({
            "metadata": {"annotations": {"example.com/a": "x"}},
            "spec": {"containers": [
                {"name": "app", "image": "a:1"},
                {"name": "sidecar", "image": "s:1"}]}
        });
        assert_eq!(
            at(&doc, ".metadata.annotations[\"example.com/a\"]"),
            vec![vec![
                key("metadata"),
                key("annotations"),
                key("example.com/a")
            ]]
        );
        assert_eq!(
            at(
                &doc,
                ".spec.containers[] | select(.name == \"sidecar\") | .image"
            ),
            vec![vec![
                key("spec"),
                key("containers"),
                Segment::Index(1),
                key("image")
            ]]
        );
        assert_eq!(at(&doc, ".spec.containers[].image").len(), 2, "every item");
        assert_eq!(
            at(&doc, ".spec.containers[0].name"),
            vec![vec![
                key("spec"),
                key("containers"),
                Segment::Index(0),
                key("name")
            ]]
        );
        assert!(at(&doc, ".spec.absent").is_empty(), "only what exists");
        // `.a` on a list fails in jq: that branch names nothing.
        assert!(at(&doc, ".spec.containers.name").is_empty());
    }

    #[test]
    fn what_could_run_away_is_refused_before_it_runs() {
        for bad in [
            "def f: f; f",
            "..",
            "repeat(.)",
            ".a, .b",
            ".a // .b",
            "range(10)",
            ".spec | select(.[] == 1)",
            ".[.a]",
            ".[1:2]",
            "reduce .[] as $x (0; .)",
            "",
            ".",
            ".spec[",
            "$__loc__",
        ] {
            let err = JqPath::parse(bad).expect_err(bad);
            assert!(err.to_string().contains(&format!("{:?}", bad)), "{err}");
        }
        let long = format!(".{}", "a".repeat(MAX_JQ_LENGTH));
        assert!(JqPath::parse(&long).is_err());
    }
}
