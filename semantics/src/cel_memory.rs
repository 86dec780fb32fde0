//! A static bound on what a tenant's CEL expression on the agent (condition
//! rules, their messages, dependency readiness rules) may allocate, computed
//! from its parsed form (macros expanded) before it ever runs.
//!
//! The `cel` crate neither counts nor stops an evaluation, and the agent
//! bounds a rule's time only by giving up on it: memory it allocates meanwhile
//! stays allocated. A nested `map` of ten-element lists eight deep builds
//! 10^8 values in 60 bytes of expression and the agent is OOM-killed. So each
//! expression's allocation is bounded before it runs, in units of one value
//! (a list or map entry) or one string byte:
//!
//! - what is bounded is the most held at once: reading data allocates
//!   nothing; a literal list or map holds its entries; `+` on strings or
//!   lists and string functions hold their result (numbers add in place);
//! - in a comprehension, what an iteration makes and drops counts once, at
//!   its largest; what it keeps (a `map` or `filter` appends one entry per
//!   element) adds up: times the list's length over a literal list, and over
//!   data what it keeps of each element adds up to at most the list's size
//!   (the elements' sizes do), the rest times the length;
//! - the bound is `constant + per_data_unit × D`, where `D` is the size of
//!   the data the expression reads (entries plus string bytes of the object
//!   or status it is given); a product of two sizes that both grow with `D`
//!   (a nested comprehension over data that allocates, `replace` with a data
//!   replacement) has no such bound.
//!
//! The hub's webhook refuses what no data makes acceptable (no bound, or a
//! constant over [`MAX_RULE_ALLOCATION`]); the agent checks the bound at the
//! size of the data it has before each run. Reading without allocating is
//! free here: how long a rule runs is bounded by the agent's time bound and
//! its fair pool, not by this estimate.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

/// The most values or string bytes one expression may allocate: 4 Mi
/// units, at most about 200 MiB however they are made up (a value is a few
/// dozen bytes). A rule that reads, compares and counts allocates nothing;
/// a message that joins a few fields of an object allocates a few times
/// their length.
pub const MAX_RULE_ALLOCATION: u64 = 4 << 20;

/// A linear form `c + s·S + Σ e[k]·E_k` (saturating), where `E_k` is the
/// size of the element of the `k`-th enclosing comprehension over data;
/// `nonlinear` when no linear bound is known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Form {
    c: u64,
    s: u64,
    e: Vec<u64>,
    nonlinear: bool,
}

impl Form {
    fn constant(c: u64) -> Self {
        Self {
            c,
            ..Self::default()
        }
    }

    fn data() -> Self {
        Self {
            s: 1,
            ..Self::default()
        }
    }

    fn element(k: usize) -> Self {
        let mut e = vec![0; k + 1];
        e[k] = 1;
        Self {
            e,
            ..Self::default()
        }
    }

    fn is_constant(&self) -> bool {
        !self.nonlinear && self.s == 0 && self.e.iter().all(|&x| x == 0)
    }

    fn add(&self, other: &Form) -> Form {
        let len = self.e.len().max(other.e.len());
        Form {
            c: self.c.saturating_add(other.c),
            s: self.s.saturating_add(other.s),
            e: (0..len)
                .map(|k| {
                    let a = self.e.get(k).copied().unwrap_or(0);
                    a.saturating_add(other.e.get(k).copied().unwrap_or(0))
                })
                .collect(),
            nonlinear: self.nonlinear || other.nonlinear,
        }
    }

    fn scale(&self, k: u64) -> Form {
        Form {
            c: self.c.saturating_mul(k),
            s: self.s.saturating_mul(k),
            e: self.e.iter().map(|x| x.saturating_mul(k)).collect(),
            nonlinear: self.nonlinear && k > 0,
        }
    }

    /// The product, linear only when one side is a constant.
    fn mul(&self, other: &Form) -> Form {
        if self.is_constant() {
            other.scale(self.c)
        } else if other.is_constant() {
            self.scale(other.c)
        } else {
            Form {
                nonlinear: true,
                ..Form::default()
            }
        }
    }

    /// `E_k`'s coefficient, and the form without it.
    fn split(&self, k: usize) -> (u64, Form) {
        let mut rest = self.clone();
        let coefficient = rest.e.get(k).copied().unwrap_or(0);
        rest.e.truncate(k);
        (coefficient, rest)
    }

    /// The form with `E_k` replaced by `whole` (an element is a part of
    /// the list it comes from).
    fn substitute(&self, k: usize, whole: &Form) -> Form {
        let (coefficient, rest) = self.split(k);
        rest.add(&whole.scale(coefficient))
    }

    /// As an [`AllocationBound`], element symbols counted as data (an
    /// element is a part of the data).
    fn bound(&self) -> AllocationBound {
        let elements = self.e.iter().fold(0u64, |sum, x| sum.saturating_add(*x));
        AllocationBound {
            constant: self.c,
            per_data_unit: self.s.saturating_add(elements),
            unbounded: self.nonlinear,
        }
    }
}

/// What the walk knows of a value: its size (elements or bytes, bounding
/// both its count and everything in it) and, for a literal list or map,
/// the shape of its entries (`None`: data, whose entries' sizes add up to
/// at most its own).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shape {
    len: Form,
    elem: Option<Box<Shape>>,
}

impl Shape {
    fn scalar() -> Self {
        Self {
            len: Form::constant(1),
            elem: None,
        }
    }

    /// Whether the value is one number, bool or character: a literal, a
    /// count or a comparison, or an entry of a literal list of them.
    fn is_scalar(&self) -> bool {
        self.elem.is_none() && self.len == Form::constant(1)
    }

    fn sized(len: Form) -> Self {
        Self { len, elem: None }
    }

    /// An entry of the value, or a field read out of it.
    fn part(&self) -> Shape {
        match &self.elem {
            Some(elem) => (**elem).clone(),
            None => Shape::sized(self.len.clone()),
        }
    }

    fn merge(a: &Shape, b: &Shape) -> Shape {
        let len = Form {
            c: a.len.c.max(b.len.c),
            s: a.len.s.max(b.len.s),
            e: (0..a.len.e.len().max(b.len.e.len()))
                .map(|k| {
                    let x = a.len.e.get(k).copied().unwrap_or(0);
                    x.max(b.len.e.get(k).copied().unwrap_or(0))
                })
                .collect(),
            nonlinear: a.len.nonlinear || b.len.nonlinear,
        };
        let elem = match (&a.elem, &b.elem) {
            (Some(x), Some(y)) => Some(Box::new(Shape::merge(x, y))),
            _ => None,
        };
        Shape { len, elem }
    }

    fn substitute(&self, k: usize, whole: &Form) -> Shape {
        Shape {
            len: self.len.substitute(k, whole),
            elem: self.elem.as_ref().map(|e| Box::new(e.substitute(k, whole))),
        }
    }
}

/// Functions whose result is a scalar and that allocate nothing.
const SCALAR: &[&str] = &[
    "_==_",
    "_!=_",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "_&&_",
    "_||_",
    "!_",
    "-_",
    "_-_",
    "_*_",
    "_/_",
    "_%_",
    "@in",
    "@not_strictly_false",
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "indexOf",
    "lastIndexOf",
    "int",
    "uint",
    "double",
    "bool",
    "timestamp",
    "duration",
    "type",
    "has",
    "hasConditions",
    "getField",
];

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// A scope entry: a comprehension's variable and its shape.
type Scope = Vec<(String, Shape)>;

/// What evaluating an expression costs in memory: the most it holds at
/// once while it runs (`peak`, what is bounded) and what its value keeps
/// once it is done (`kept`: what the caller goes on holding).
#[derive(Debug, Clone, Default)]
struct Cost {
    peak: Form,
    kept: Form,
}

impl Cost {
    /// `new` allocated for a value, on top of what its parts held.
    fn made(parts: Cost, new: Form) -> Cost {
        Cost {
            peak: parts.peak.add(&new),
            kept: parts.kept.add(&new),
        }
    }

    /// Parts evaluated one after another, each kept while the next runs:
    /// at most all their peaks at once (a bound, not the exact maximum).
    fn then(self, next: Cost) -> Cost {
        Cost {
            peak: self.peak.add(&next.peak),
            kept: self.kept.add(&next.kept),
        }
    }
}

/// What one iteration's `cost` comes to over a comprehension with range
/// size `len`: when the range is data (`element` = the depth of its element
/// symbol), what the iteration makes of its element adds up to the range's
/// size rather than multiplying it; otherwise `len` times the iteration.
fn over_iterations(cost: &Form, len: &Form, element: Option<usize>) -> Form {
    match element {
        Some(k) => {
            let (own, rest) = cost.split(k);
            len.mul(&rest).add(&len.scale(own))
        }
        None => len.mul(cost),
    }
}

/// The walk: what evaluating `expr` costs and the shape of its value, with
/// the comprehension variables in `scope` and `depth` comprehensions over
/// data around it (the element symbols `E_0..E_depth`).
fn walk(expr: &IdedExpr, scope: &mut Scope, depth: usize) -> (Cost, Shape) {
    match &expr.expr {
        Expr::Unspecified => (Cost::default(), Shape::scalar()),
        Expr::Literal(LiteralValue::String(s)) => (
            Cost::default(),
            Shape::sized(Form::constant(count(s.len()))),
        ),
        Expr::Literal(LiteralValue::Bytes(b)) => (
            Cost::default(),
            Shape::sized(Form::constant(count(b.len()))),
        ),
        Expr::Literal(_) => (Cost::default(), Shape::scalar()),
        Expr::Ident(name) => {
            let shape = scope
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|(_, s)| s.clone())
                .unwrap_or_else(|| Shape::sized(Form::data()));
            (Cost::default(), shape)
        }
        Expr::Select(select) => {
            let (cost, operand) = walk(&select.operand, scope, depth);
            let shape = if select.test {
                Shape::scalar()
            } else {
                operand.part()
            };
            (cost, shape)
        }
        Expr::List(list) => {
            let mut parts = Cost::default();
            let mut elem: Option<Shape> = None;
            for element in &list.elements {
                let (c, s) = walk(element, scope, depth);
                parts = parts.then(c);
                elem = Some(match elem {
                    Some(e) => Shape::merge(&e, &s),
                    None => s,
                });
            }
            let entries = Form::constant(count(list.elements.len()));
            let shape = Shape {
                len: entries.clone(),
                elem: Some(Box::new(elem.unwrap_or_else(Shape::scalar))),
            };
            (Cost::made(parts, entries), shape)
        }
        Expr::Map(map) => entries(map.entries.iter().map(|e| &e.expr), scope, depth),
        Expr::Struct(st) => entries(st.entries.iter().map(|e| &e.expr), scope, depth),
        Expr::Call(call) => {
            let mut parts = Cost::default();
            let mut shapes = Vec::with_capacity(call.args.len() + 1);
            for operand in call.target.iter().map(|t| &**t).chain(call.args.iter()) {
                let (c, s) = walk(operand, scope, depth);
                parts = parts.then(c);
                shapes.push(s);
            }
            let name = call.func_name.as_str();
            let total = shapes
                .iter()
                .fold(Form::default(), |sum, s| sum.add(&s.len));
            match name {
                // Numbers (and one-character strings, which cost as much)
                // add up in place: nothing is allocated.
                "_+_" if shapes.iter().all(Shape::is_scalar) => (
                    Cost {
                        peak: parts.peak,
                        kept: Form::default(),
                    },
                    Shape::scalar(),
                ),
                "_+_" => {
                    // A macro's accumulator (`@result + [x]`) is appended to
                    // in place: only the appended part is new, and it stays.
                    let appended = matches!(call.args.first().map(|a| &a.expr),
                        Some(Expr::Ident(n)) if n.starts_with('@'));
                    let new = if appended {
                        shapes.get(1).map(|s| s.len.clone()).unwrap_or_default()
                    } else {
                        total.clone()
                    };
                    let shape = Shape {
                        len: total,
                        elem: shapes
                            .iter()
                            .map(|s| s.elem.as_deref().cloned())
                            .reduce(|a, b| match (a, b) {
                                (Some(x), Some(y)) => Some(Shape::merge(&x, &y)),
                                _ => None,
                            })
                            .flatten()
                            .map(Box::new),
                    };
                    (Cost::made(parts, new), shape)
                }
                "replace" => {
                    // Every match of the pattern may become the
                    // replacement: the string's size times the
                    // replacement's (plus one).
                    let string = shapes.first().map(|s| s.len.clone()).unwrap_or_default();
                    let replacement = shapes
                        .get(2)
                        .map(|s| s.len.add(&Form::constant(1)))
                        .unwrap_or_else(|| Form::constant(1));
                    let len = string.mul(&replacement);
                    (Cost::made(parts, len.clone()), Shape::sized(len))
                }
                "_[_]" | "_[?_]" => (
                    parts,
                    shapes
                        .first()
                        .map(Shape::part)
                        .unwrap_or_else(Shape::scalar),
                ),
                "_?_:_" => (
                    parts,
                    match (shapes.get(1), shapes.get(2)) {
                        (Some(a), Some(b)) => Shape::merge(a, b),
                        _ => Shape::scalar(),
                    },
                ),
                _ if SCALAR.contains(&name) => (
                    Cost {
                        peak: parts.peak,
                        kept: Form::default(),
                    },
                    Shape::scalar(),
                ),
                // Any other function (`string`, `join`, `split`,
                // `lowerAscii`, ...): a new value the size of its operands.
                _ => (Cost::made(parts, total.clone()), Shape::sized(total)),
            }
        }
        Expr::Comprehension(c) => {
            let (range_cost, range) = walk(&c.iter_range, scope, depth);
            let (init_cost, init) = walk(&c.accu_init, scope, depth);
            let mark = scope.len();
            // Over a literal list: its entries' shape, the body counted
            // once per entry. Over data: a new element symbol, whose sizes
            // over every iteration add up to at most the list's.
            let (element, inner, symbol) = match &range.elem {
                Some(elem) => ((**elem).clone(), depth, None),
                None => (Shape::sized(Form::element(depth)), depth + 1, Some(depth)),
            };
            scope.push((c.iter_var.clone(), element.clone()));
            if let Some(second) = &c.iter_var2 {
                scope.push((second.clone(), element));
            }
            // Inside the loop the accumulator is only appended to.
            scope.push((c.accu_var.clone(), Shape::sized(Form::default())));
            let (cond, _) = walk(&c.loop_cond, scope, inner);
            let (step, _) = walk(&c.loop_step, scope, inner);
            scope.truncate(mark);
            // What the steps append stays (a `map` or `filter`); what an
            // iteration makes besides is freed before the next one, so it
            // counts once, at its largest (an element is at most the list).
            let grown = over_iterations(&step.kept, &range.len, symbol);
            let iteration = cond.peak.add(&step.peak);
            let iteration = match symbol {
                Some(k) => iteration.substitute(k, &range.len),
                None => iteration,
            };
            let accumulated = init_cost.kept.add(&grown);
            let accumulator = Shape::sized(init.len.add(&grown).add(&range.len));
            scope.push((c.accu_var.clone(), accumulator));
            let (result_cost, result) = walk(&c.result, scope, depth);
            scope.truncate(mark);
            let result = match symbol {
                Some(k) => result.substitute(k, &range.len),
                None => result,
            };
            let peak = range_cost
                .peak
                .add(&init_cost.peak)
                .add(&iteration)
                .add(&accumulated)
                .add(&result_cost.peak);
            let kept = range_cost.kept.add(&accumulated).add(&result_cost.kept);
            (Cost { peak, kept }, result)
        }
    }
}

fn entries<'a>(
    entries: impl Iterator<Item = &'a EntryExpr>,
    scope: &mut Scope,
    depth: usize,
) -> (Cost, Shape) {
    let mut parts = Cost::default();
    let mut n = 0usize;
    let mut elem: Option<Shape> = None;
    for entry in entries {
        n += 1;
        let (c, s) = match entry {
            EntryExpr::MapEntry(e) => {
                let (kc, _) = walk(&e.key, scope, depth);
                let (vc, vs) = walk(&e.value, scope, depth);
                (kc.then(vc), vs)
            }
            EntryExpr::StructField(f) => walk(&f.value, scope, depth),
        };
        parts = parts.then(c);
        elem = Some(match elem {
            Some(e) => Shape::merge(&e, &s),
            None => s,
        });
    }
    let entries = Form::constant(count(n).saturating_mul(2));
    (
        Cost::made(parts, entries.clone()),
        Shape {
            len: entries,
            elem: Some(Box::new(elem.unwrap_or_else(Shape::scalar))),
        },
    )
}

/// What an expression may allocate: `constant + per_data_unit × D` for data
/// of size `D`, or `unbounded`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocationBound {
    /// What it allocates whatever the data.
    pub constant: u64,
    /// What it allocates per unit of data it reads.
    pub per_data_unit: u64,
    /// No bound linear in the data is known.
    pub unbounded: bool,
}

impl AllocationBound {
    /// Checks the bound against [`MAX_RULE_ALLOCATION`] for data of size
    /// `data`, or for any data (`None`). Fails with why.
    pub fn check(&self, data: Option<u64>) -> Result<(), AllocationError> {
        if self.unbounded {
            return Err(AllocationError::Unbounded);
        }
        let estimate = self.at(data.unwrap_or(0));
        if estimate > MAX_RULE_ALLOCATION {
            return Err(AllocationError::TooMuch { estimate, data });
        }
        Ok(())
    }

    /// The bound for data of size `data` (saturating; [`u64::MAX`] when
    /// unbounded).
    pub fn at(&self, data: u64) -> u64 {
        if self.unbounded {
            return u64::MAX;
        }
        self.constant
            .saturating_add(self.per_data_unit.saturating_mul(data))
    }
}

/// Why an expression is refused for what it may allocate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocationError {
    /// Its allocation grows with the product of two sizes of the data.
    #[error(
        "may allocate without a bound linear in its data (a comprehension over data inside another that allocates, or a replacement read from data); the agent runs no such expression"
    )]
    Unbounded,
    /// Its allocation, for the data at hand (or whatever the data), is over
    /// the limit.
    #[error(
        "may allocate {estimate} values or bytes{for_data}, over the limit of {MAX_RULE_ALLOCATION}",
        for_data = match data { Some(d) => format!(" over data of size {d}"), None => " whatever the data".to_string() }
    )]
    TooMuch {
        /// The estimate.
        estimate: u64,
        /// The data's size it is for (None: the constant part alone).
        data: Option<u64>,
    },
}

/// What the parsed (macro-expanded) expression `expr` may allocate while it
/// runs. Never fails: the arithmetic saturates.
pub fn allocation_bound(expr: &IdedExpr) -> AllocationBound {
    let (cost, _) = walk(expr, &mut Vec::new(), 0);
    cost.peak.bound()
}

/// Checks `expr`'s allocation against [`MAX_RULE_ALLOCATION`], for data of
/// size `data` (the agent, before a run) or for any data (`None`: the hub,
/// which refuses only what no data makes acceptable). Fails with why.
pub fn check_allocation(expr: &IdedExpr, data: Option<u64>) -> Result<(), AllocationError> {
    allocation_bound(expr).check(data)
}

/// Why `expression` is refused for what it may allocate whatever the data
/// (what the hub's webhook checks), or None: also None when it does not
/// compile, which the agent reports when it runs it.
pub fn refusal(expression: &str) -> Option<AllocationError> {
    // The parser reports most bad input as an error; a panic inside it on
    // input it does not expect is left to the agent's report too.
    let program = std::panic::catch_unwind(|| cel::Program::compile(expression))
        .ok()?
        .ok()?;
    check_allocation(program.expression(), None).err()
}

/// The size of `value` in the units of [`MAX_RULE_ALLOCATION`]: its
/// entries and string bytes, counted to at most `limit` (the walk stops
/// there, so a huge value costs no more than the limit to measure).
pub fn data_size(value: &cel::Value, limit: u64) -> u64 {
    let mut size = 0u64;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        if size >= limit {
            break;
        }
        size = size.saturating_add(match value {
            cel::Value::String(s) => count(s.len()),
            cel::Value::Bytes(b) => count(b.len()),
            cel::Value::List(items) => {
                stack.extend(items.iter());
                count(items.len())
            }
            cel::Value::Map(map) => {
                stack.extend(map.map.values());
                count(map.map.len())
            }
            _ => 1,
        });
    }
    size
}

#[cfg(test)]
mod tests {
    use super::*;
    use cel::Program;
    use proptest::prelude::*;

    /// A ConfigMap of about 1 MiB, in data units.
    const LARGE: u64 = 1 << 20;
    /// A typical object.
    const SMALL: u64 = 4_000;

    fn bound(expression: &str) -> AllocationBound {
        allocation_bound(Program::compile(expression).expect("compiles").expression())
    }

    fn check(expression: &str, data: Option<u64>) -> Result<(), AllocationError> {
        check_allocation(
            Program::compile(expression).expect("compiles").expression(),
            data,
        )
    }

    /// `levels` nested `map`s of ten-element lists: 10^levels values.
    fn nested_map(levels: usize) -> String {
        let list = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]";
        let mut expression = "0".to_string();
        for level in 0..levels {
            expression = format!("{list}.map(m{level}, {expression})");
        }
        format!("size({expression}) > 0")
    }

    #[test]
    fn a_nested_map_that_would_exhaust_the_agents_memory_is_refused_whatever_the_data() {
        let estimate = bound(&nested_map(8)).at(0);
        assert!(estimate >= 100_000_000, "{estimate}");
        assert!(matches!(
            check(&nested_map(8), None),
            Err(AllocationError::TooMuch { data: None, .. })
        ));
        assert!(bound(&nested_map(2)).at(0) < 1_000, "a small one is not");
        assert_eq!(check(&nested_map(2), None), Ok(()));
    }

    #[test]
    fn rules_that_read_compare_and_count_allocate_nothing() {
        for expression in [
            "object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')",
            "object.status.readyReplicas == object.spec.replicas",
            "object.data.items.all(x, object.data.items.all(y, x >= y || y >= x))",
            "has(object.status.succeeded) && object.status.succeeded > 0",
            "hasConditions(object.status)",
            "work.status.conditions.exists(c, c.type == 'Available')",
        ] {
            assert_eq!(bound(expression).at(LARGE), 0, "{expression}");
        }
    }

    #[test]
    fn arithmetic_on_numbers_allocates_nothing_however_deep() {
        // A runaway in time, not in memory: the time bound stops it.
        let range = format!("{:?}", (0..40).collect::<Vec<i64>>());
        let runaway = format!(
            "{range}.all(a, {range}.all(b, {range}.all(c, {range}.all(d, a + b + c + d >= 0))))"
        );
        // Only its four literal lists are held at once.
        assert!(bound(&runaway).at(LARGE) <= 4 * 40, "{:?}", bound(&runaway));
        assert_eq!(
            bound("object.data.items.all(x, size(x) + size(object.data) > 0)").at(LARGE),
            0
        );
    }

    #[test]
    fn messages_and_maps_over_the_object_pass_for_typical_objects() {
        for expression in [
            "'ready: ' + string(object.status.readyReplicas) + '/' + string(object.spec.replicas)",
            "object.spec.containers.map(c, c.name + ':' + c.image).join(', ')",
            "object.status.conditions.filter(c, c.status != 'True').map(c, c.type)",
            "object.data.v.replace('a', 'bb')",
        ] {
            let bound = bound(expression);
            assert!(
                !bound.unbounded && bound.constant < 1_000,
                "{expression}: {bound:?}"
            );
            assert_eq!(check(expression, None), Ok(()), "{expression}");
            assert_eq!(check(expression, Some(SMALL)), Ok(()), "{expression}");
        }
        // A message copying a 1 MiB object's fields several times is not.
        assert!(matches!(
            check(
                "object.spec.containers.map(c, c.name + ':' + c.image).join(', ')",
                Some(LARGE)
            ),
            Err(AllocationError::TooMuch {
                data: Some(LARGE),
                ..
            })
        ));
    }

    #[test]
    fn allocations_that_grow_with_the_product_of_two_sizes_are_refused() {
        for expression in [
            // Every pair of items, concatenated.
            "object.data.items.map(x, object.data.items.map(y, x + y))",
            // Each item with the whole object appended.
            "object.data.items.map(x, x + object.data.big).size() > 0",
            // A data replacement for every match.
            "object.data.a.replace('x', object.data.b)",
        ] {
            assert_eq!(
                check(expression, None),
                Err(AllocationError::Unbounded),
                "{expression}"
            );
        }
    }

    #[test]
    fn a_literal_range_multiplies_what_its_body_allocates() {
        let one = bound("[1].map(x, object.data.v + 'a')");
        let ten = bound("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(x, object.data.v + 'a')");
        assert!(
            ten.per_data_unit >= 10 * one.per_data_unit - 10,
            "{one:?} {ten:?}"
        );
        assert!(
            ten.at(LARGE) > MAX_RULE_ALLOCATION,
            "ten copies of the largest object"
        );
    }

    #[test]
    fn a_data_comprehension_adds_its_elements_rather_than_multiplying_them() {
        // Each element copied once: about the data's size, not its square.
        let copied = bound("object.data.items.map(x, x + '!')");
        assert!(!copied.unbounded);
        assert!(copied.per_data_unit <= 8, "{copied:?}");
        // Concatenations freed after each iteration count once, at their
        // largest, not once per pair: quadratic in time (the time bound's
        // business), linear in memory.
        let churn = bound("object.data.items.all(x, object.data.items.all(y, x + y != ''))");
        assert!(!churn.unbounded && churn.per_data_unit <= 4, "{churn:?}");
    }

    #[test]
    fn the_size_of_data_counts_entries_and_bytes_up_to_a_limit() {
        let value = crate::condition_rules::to_cel(
            &serde_json::json!({"a": "12345", "b": [1, 2, {"c": "xy"}]}),
        );
        // 2 map entries, 5 bytes, 3 list entries, 1 + 1 scalars, 1 entry, 2 bytes.
        assert_eq!(data_size(&value, u64::MAX), 2 + 5 + 3 + 1 + 1 + 1 + 2);
        assert!(data_size(&value, 3) <= 3 + 5);
    }

    proptest! {
        #[test]
        fn each_level_of_nesting_allocates_at_least_ten_times_the_one_inside(levels in 1usize..9) {
            prop_assert!(bound(&nested_map(levels)).at(0) >= 10 * bound(&nested_map(levels - 1)).at(0));
        }

        #[test]
        fn the_estimate_never_panics_on_any_parsed_expression(expression in ".{0,64}") {
            if let Ok(Ok(program)) = std::panic::catch_unwind(|| Program::compile(&expression)) {
                let _ = allocation_bound(program.expression());
            }
        }

        #[test]
        fn more_data_never_makes_an_expression_acceptable(levels in 0usize..4, small in 0u64..10_000, more in 0u64..10_000_000) {
            let expression = format!("[{}].map(x, object.data.v + 'a').size() > 0", vec!["1"; levels + 1].join(", "));
            let refused_small = check(&expression, Some(small)).is_err();
            let refused_more = check(&expression, Some(small + more)).is_err();
            prop_assert!(!refused_small || refused_more);
        }
    }
}
