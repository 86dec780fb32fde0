//! A worst-case cost estimate of a rollout gate's health expression,
//! computed from its parsed CEL (macros expanded), before it ever runs.
//!
//! The `cel` crate counts nothing while it evaluates, so a tenant's
//! expression of nine nested `.all` over a ten-element list (10^9 steps, in
//! 200 bytes) would burn a CPU for minutes. This walk charges every node of
//! the expression one unit, a comprehension (`all`, `exists`, `exists_one`,
//! `map`, `filter`) its body times the most elements its range can hold, and
//! functions that traverse strings or lists a tenth of a unit per element
//! or byte (as Kubernetes' estimator does). Sizes come from what the hub
//! knows of the variables it provides:
//!
//! - `clusters` holds at most [`MAX_CLUSTERS_IN_GROUP`] entries;
//! - `group` is a map of seven fields;
//! - anything read out of them (a feedback value above all) is at most
//!   [`MAX_RAW_FEEDBACK_BYTES`] of JSON, so at most
//!   [`UNKNOWN_LIST_ELEMENTS`] elements or [`UNKNOWN_STRING_BYTES`] bytes;
//! - a literal list, map or string has its literal size; a list built by
//!   `+` or `map` the sum of what it is built from.
//!
//! Each element a list or map allocates costs at least one unit, so the
//! estimate bounds memory as well as time: a nested `map` is refused like a
//! nested `all`. The estimate is an upper bound, never a measurement: an
//! expression over a small group costs less than it says.

use ferry_semantics::feedback::MAX_RAW_FEEDBACK_BYTES;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

/// The most clusters one decision group's `clusters` variable is assumed to
/// hold: a bound the estimate uses, well above any fleet ferry is tested at
/// (`ferry-scale` runs 2,000 clusters).
pub const MAX_CLUSTERS_IN_GROUP: u64 = 10_000;

/// The most elements a list read out of the variables (a feedback value) may
/// hold: a raw feedback value is at most [`MAX_RAW_FEEDBACK_BYTES`] of
/// compact JSON, and each element takes at least two bytes (`1,`).
pub const UNKNOWN_LIST_ELEMENTS: u64 = (MAX_RAW_FEEDBACK_BYTES / 2) as u64;

/// The most bytes a string read out of the variables may hold.
pub const UNKNOWN_STRING_BYTES: u64 = MAX_RAW_FEEDBACK_BYTES as u64;

/// The most a health expression may cost by [`estimate_cost`]: ten million
/// units, the order of the per-expression budget Kubernetes gives a CEL
/// validation rule. A gate over every cluster of a 10,000-cluster group
/// that compares a few feedback values per cluster costs a few million;
/// a comparison of every pair of clusters (10^8), or a scan of a feedback
/// list of every cluster (about 5×10^7), is refused.
pub const MAX_HEALTH_COST: u64 = 10_000_000;

/// Functions whose work grows with the length of their operands (strings
/// or lists): they are charged a tenth of a unit per byte or element.
const TRAVERSING: &[&str] = &[
    "_+_",
    "_==_",
    "_!=_",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "@in",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "size",
    "string",
    "bytes",
    "lowerAscii",
    "upperAscii",
    "trim",
    "replace",
    "split",
    "join",
    "indexOf",
    "lastIndexOf",
    "substring",
    "charAt",
];

/// What the estimate knows of a value's size: how many elements (list,
/// map) or bytes (string) it may hold, and the size of each element
/// (`None`: not known, so the unknown bound).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shape {
    len: u64,
    elem: Option<Box<Shape>>,
}

impl Shape {
    fn scalar() -> Self {
        Self { len: 1, elem: None }
    }

    /// A value the hub knows nothing of: the larger of the list and string
    /// bounds.
    fn unknown() -> Self {
        Self {
            len: UNKNOWN_LIST_ELEMENTS.max(UNKNOWN_STRING_BYTES),
            elem: None,
        }
    }

    fn element(&self) -> Shape {
        self.elem.as_deref().cloned().unwrap_or_else(Shape::unknown)
    }

    fn merge(a: &Shape, b: &Shape) -> Shape {
        let elem = match (&a.elem, &b.elem) {
            (Some(x), Some(y)) => Some(Box::new(Shape::merge(x, y))),
            _ => None,
        };
        Shape {
            len: a.len.max(b.len),
            elem,
        }
    }

    fn of_elements(len: u64, shapes: impl Iterator<Item = Shape>) -> Shape {
        let elem = shapes.reduce(|a, b| Shape::merge(&a, &b));
        Shape {
            len,
            elem: Some(Box::new(elem.unwrap_or_else(Shape::scalar))),
        }
    }
}

/// The variables the hub provides a health expression, as shapes.
fn variable(name: &str) -> Shape {
    match name {
        "clusters" => Shape {
            len: MAX_CLUSTERS_IN_GROUP,
            // `{name, applied, available, degraded, feedback}`; a field
            // read from it is of unknown size (a feedback value).
            elem: Some(Box::new(Shape { len: 5, elem: None })),
        },
        "group" => Shape { len: 7, elem: None },
        _ => Shape::unknown(),
    }
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The walk: the cost of `expr` and the shape of its value, with the
/// comprehension variables in scope (innermost last).
fn walk(expr: &IdedExpr, scope: &mut Vec<(String, Shape)>) -> (u64, Shape) {
    match &expr.expr {
        Expr::Unspecified => (1, Shape::scalar()),
        Expr::Literal(LiteralValue::String(s)) => (
            1,
            Shape {
                len: count(s.len()),
                elem: None,
            },
        ),
        Expr::Literal(LiteralValue::Bytes(b)) => (
            1,
            Shape {
                len: count(b.len()),
                elem: None,
            },
        ),
        Expr::Literal(_) => (1, Shape::scalar()),
        Expr::Ident(name) => {
            let shape = scope
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|(_, s)| s.clone())
                .unwrap_or_else(|| variable(name));
            (1, shape)
        }
        Expr::Select(select) => {
            let (cost, operand) = walk(&select.operand, scope);
            let shape = if select.test {
                Shape::scalar()
            } else {
                operand.element()
            };
            (cost.saturating_add(1), shape)
        }
        Expr::List(list) => {
            let mut cost = 1u64;
            let mut shapes = Vec::with_capacity(list.elements.len());
            for element in &list.elements {
                let (c, s) = walk(element, scope);
                cost = cost.saturating_add(c);
                shapes.push(s);
            }
            (
                cost,
                Shape::of_elements(count(list.elements.len()), shapes.into_iter()),
            )
        }
        Expr::Map(map) => entries(map.entries.iter().map(|e| &e.expr), scope),
        Expr::Struct(st) => entries(st.entries.iter().map(|e| &e.expr), scope),
        Expr::Call(call) => {
            let mut cost = 1u64;
            let mut shapes = Vec::with_capacity(call.args.len() + 1);
            for operand in call.target.iter().map(|t| &**t).chain(call.args.iter()) {
                let (c, s) = walk(operand, scope);
                cost = cost.saturating_add(c);
                shapes.push(s);
            }
            let name = call.func_name.as_str();
            if TRAVERSING.contains(&name) {
                // A macro's accumulator (`@result + [x]`) is appended to in
                // place by the `cel` crate: only the appended part costs.
                let appended = name == "_+_"
                    && matches!(call.args.first().map(|a| &a.expr),
                        Some(Expr::Ident(n)) if n.starts_with('@'));
                let lengths = shapes
                    .iter()
                    .skip(usize::from(appended))
                    .fold(0u64, |sum, s| sum.saturating_add(s.len));
                cost = cost.saturating_add(lengths / 10);
            }
            let shape = match name {
                "_+_" => Shape {
                    len: shapes.iter().fold(0u64, |sum, s| sum.saturating_add(s.len)),
                    elem: shapes
                        .iter()
                        .map(Shape::element)
                        .reduce(|a, b| Shape::merge(&a, &b))
                        .map(Box::new),
                },
                "_[_]" | "_[?_]" => shapes.first().map(Shape::element).unwrap_or_default(),
                "_?_:_" => match (shapes.get(1), shapes.get(2)) {
                    (Some(a), Some(b)) => Shape::merge(a, b),
                    _ => Shape::unknown(),
                },
                "_&&_" | "_||_" | "!_" | "-_" | "@not_strictly_false" => Shape::scalar(),
                _ => Shape::unknown(),
            };
            (cost, shape)
        }
        Expr::Comprehension(c) => {
            let (range_cost, range) = walk(&c.iter_range, scope);
            let (init_cost, init) = walk(&c.accu_init, scope);
            // What a `map` or `filter` accumulates: at most one element
            // per iteration on top of its start.
            let accumulator = Shape {
                len: init.len.saturating_add(range.len),
                elem: None,
            };
            let depth = scope.len();
            scope.push((c.iter_var.clone(), range.element()));
            if let Some(second) = &c.iter_var2 {
                scope.push((second.clone(), range.element()));
            }
            scope.push((c.accu_var.clone(), accumulator));
            let (cond_cost, _) = walk(&c.loop_cond, scope);
            let (step_cost, _) = walk(&c.loop_step, scope);
            // The result sees the accumulator, not the iteration variables.
            scope.truncate(depth);
            scope.push((
                c.accu_var.clone(),
                Shape {
                    len: init.len.saturating_add(range.len),
                    elem: None,
                },
            ));
            let (result_cost, result) = walk(&c.result, scope);
            scope.truncate(depth);
            let per_iteration = cond_cost.saturating_add(step_cost);
            let cost = range_cost
                .saturating_add(init_cost)
                .saturating_add(range.len.saturating_mul(per_iteration))
                .saturating_add(result_cost);
            (cost, result)
        }
    }
}

impl Default for Shape {
    fn default() -> Self {
        Shape::unknown()
    }
}

fn entries<'a>(
    entries: impl Iterator<Item = &'a EntryExpr>,
    scope: &mut Vec<(String, Shape)>,
) -> (u64, Shape) {
    let mut cost = 1u64;
    let mut shapes = Vec::new();
    for entry in entries {
        let (c, s) = match entry {
            EntryExpr::MapEntry(e) => {
                let (kc, _) = walk(&e.key, scope);
                let (vc, vs) = walk(&e.value, scope);
                (kc.saturating_add(vc), vs)
            }
            EntryExpr::StructField(f) => walk(&f.value, scope),
        };
        cost = cost.saturating_add(c);
        shapes.push(s);
    }
    (
        cost,
        Shape::of_elements(count(shapes.len()), shapes.into_iter()),
    )
}

/// The worst-case cost of the parsed (macro-expanded) health expression
/// `expr`, in the units of [`MAX_HEALTH_COST`]. Never fails: sizes it does
/// not know take the bounds above, and the arithmetic saturates at
/// `u64::MAX`.
pub fn estimate_cost(expr: &IdedExpr) -> u64 {
    walk(expr, &mut Vec::new()).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use cel::Program;
    use proptest::prelude::*;

    fn cost(expression: &str) -> u64 {
        estimate_cost(Program::compile(expression).expect("compiles").expression())
    }

    fn nested_all(depth: usize) -> String {
        let list = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]";
        let mut expression = "true".to_string();
        for level in (0..depth).rev() {
            expression = format!("{list}.all(x{level}, {expression})");
        }
        expression
    }

    #[test]
    fn nine_nested_alls_over_ten_elements_are_over_the_limit() {
        let estimate = cost(&nested_all(9));
        assert!(estimate > MAX_HEALTH_COST, "{estimate}");
        assert!(estimate >= 1_000_000_000, "{estimate}");
    }

    #[test]
    fn the_documented_and_tested_gate_expressions_are_within_the_limit() {
        for expression in [
            "group.degraded == 0 && group.succeeded == group.total && \
             clusters.all(c, c.available && c.feedback.readyReplicas == c.feedback.replicas)",
            "group.degraded == 0 && clusters.all(c, c.feedback.readyReplicas >= 1)",
            "group.total > 0",
            "clusters.exists(c, c.name == 'a')",
            "clusters.filter(c, c.degraded).size() == 0",
            "clusters.map(c, c.name).exists_one(n, n.startsWith('canary'))",
            "size(clusters) == group.total",
            "clusters.all(c, c.feedback.phase == 'Running' && c.applied)",
        ] {
            let estimate = cost(expression);
            assert!(estimate <= MAX_HEALTH_COST, "{expression}: {estimate}");
        }
    }

    #[test]
    fn comprehensions_multiply_by_their_range() {
        let one = cost("[1, 2, 3].all(x, x > 0)");
        let two = cost("[1, 2, 3].all(x, [1, 2, 3].all(y, x > y))");
        assert!(two > one * 3, "{one} {two}");
        // Over the clusters: at least the cluster bound.
        assert!(cost("clusters.all(c, c.applied)") >= MAX_CLUSTERS_IN_GROUP);
        assert!(cost("clusters.all(a, clusters.all(b, a.name != b.name))") > MAX_HEALTH_COST);
    }

    #[test]
    fn nested_maps_that_would_exhaust_memory_are_over_the_limit() {
        let list = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]";
        let mut expression = "0".to_string();
        for level in 0..8 {
            expression = format!("{list}.map(m{level}, {expression})");
        }
        let estimate = cost(&format!("size({expression}) > 0"));
        assert!(estimate > MAX_HEALTH_COST, "{estimate}");
    }

    #[test]
    fn an_iteration_variable_has_the_shape_of_its_range_elements() {
        // Iterating the elements of a literal list of small lists is cheap;
        // a list concatenated with itself doubles.
        let small = cost("[[1, 2], [3]].all(l, l.all(x, x > 0))");
        assert!(small < 100, "{small}");
        let doubled = cost("(clusters + clusters).all(c, c.applied)");
        assert!(doubled >= 2 * MAX_CLUSTERS_IN_GROUP, "{doubled}");
    }

    proptest! {
        #[test]
        fn each_level_of_nesting_costs_at_least_ten_times_the_one_inside(depth in 1usize..12) {
            prop_assert!(cost(&nested_all(depth)) >= 10 * cost(&nested_all(depth - 1)));
        }

        #[test]
        fn the_estimate_never_panics_on_any_parsed_expression(expression in ".{0,64}") {
            if let Ok(Ok(program)) = std::panic::catch_unwind(|| Program::compile(&expression)) {
                let _ = estimate_cost(program.expression());
            }
        }

        #[test]
        fn a_deeper_nesting_is_refused_once_a_shallower_one_is(depth in 1usize..14) {
            let shallower = cost(&nested_all(depth)) > MAX_HEALTH_COST;
            let deeper = cost(&nested_all(depth + 1)) > MAX_HEALTH_COST;
            prop_assert!(!shallower || deeper);
        }
    }
}
