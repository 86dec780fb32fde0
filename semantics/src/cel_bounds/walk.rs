//! The walk over a parsed expression that computes both bounds at once:
//! what it may hold in memory at its peak and what it may cost to run (in tenths of a cost unit),
//! each as a linear form in the size of its data.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::form::{Form, Shape, count};
use super::limits::Bounds;

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

/// Functions that take a step or so whatever their operands: logic,
/// choice, indexing and numbers. Every other function is taken to go
/// through all of its operands (a comparison, `size`, `contains`, `join`).
const CONSTANT_TIME: &[&str] = &[
    "_&&_",
    "_||_",
    "!_",
    "-_",
    "_-_",
    "_*_",
    "_/_",
    "_%_",
    "_?_:_",
    "_[_]",
    "_[?_]",
    "@not_strictly_false",
    "int",
    "uint",
    "double",
    "bool",
    "type",
    "hasConditions",
];

/// What evaluating one node takes, in tenths of a cost unit: going through
/// one element or byte takes one tenth (as Kubernetes charges; on this
/// project's benchmark machine a node of the `cel` crate takes about 40 ns,
/// a byte compared about 1).
const NODE: u64 = 10;

/// A scope entry: a comprehension's variable and its shape.
type Scope = Vec<(String, Shape)>;

/// What evaluating an expression costs: in memory, the most it holds at
/// once while it runs (`peak`, what is bounded) and what its value keeps
/// once it is done (`kept`: what the caller goes on holding); in time, the
/// tenths of a cost unit it takes (`steps`: [`NODE`] per node, one per
/// element or byte gone through).
#[derive(Debug, Clone, Default)]
struct Cost {
    peak: Form,
    kept: Form,
    steps: Form,
}

impl Cost {
    /// A node that holds nothing.
    fn leaf() -> Cost {
        Cost {
            steps: Form::constant(NODE),
            ..Cost::default()
        }
    }

    /// `new` allocated for a value, on top of what its parts held.
    fn made(parts: Cost, new: Form) -> Cost {
        Cost {
            peak: parts.peak.add(&new),
            kept: parts.kept.add(&new),
            steps: parts.steps,
        }
    }

    /// Nothing of the parts kept: the value is a scalar.
    fn scalar(parts: Cost) -> Cost {
        Cost {
            kept: Form::default(),
            ..parts
        }
    }

    /// Parts evaluated one after another, each kept while the next runs:
    /// at most all their peaks at once (a bound, not the exact maximum),
    /// and all their steps.
    fn then(self, next: Cost) -> Cost {
        Cost {
            peak: self.peak.add(&next.peak),
            kept: self.kept.add(&next.kept),
            steps: self.steps.add(&next.steps),
        }
    }

    /// `steps` more taken.
    fn taking(mut self, steps: &Form) -> Cost {
        self.steps = self.steps.add(steps);
        self
    }
}

/// What one iteration's `cost` comes to over a comprehension with range
/// size `len`: when the range is data (`element` = the depth of its element
/// symbol), what the iteration makes of its element adds up to the range's
/// size rather than multiplying it; otherwise `len` times the iteration.
///
/// Over data, the size of a list counts its entries and, besides, each
/// element's size (`data_size`): with `n` elements of sizes `E_i`,
/// `n + ΣE_i ≤ len`. An iteration costing `c + own·E_i` (a constant `c`)
/// so comes to `c·n + own·ΣE_i ≤ max(c, own)·len` in all.
fn over_iterations(cost: &Form, len: &Form, element: Option<usize>) -> Form {
    match element {
        Some(k) => {
            let (own, rest) = cost.split(k);
            if rest.is_constant() {
                len.scale(own.max(rest.c))
            } else {
                len.mul(&rest).add(&len.scale(own))
            }
        }
        None => len.mul(cost),
    }
}

/// The tenths a call of `name` takes beyond its node, going through
/// its operands of sizes `shapes` (`appended`: the first operand is a
/// macro's accumulator, appended to in place).
fn call_steps(name: &str, shapes: &[Shape], appended: bool) -> Form {
    let len = |i: usize| shapes.get(i).map(|s| s.len.clone()).unwrap_or_default();
    match name {
        _ if CONSTANT_TIME.contains(&name) => Form::default(),
        // A regular expression is compiled, then run over the string in
        // time proportional to both.
        "matches" => len(0).mul(&len(1)).add(&len(0)).add(&len(1)),
        // Every match may become the replacement.
        "replace" => len(0).mul(&len(2).add(&Form::constant(1))).add(&len(1)),
        "_+_" if appended => len(1),
        _ => shapes
            .iter()
            .fold(Form::default(), |sum, s| sum.add(&s.len)),
    }
}

/// The walk: what evaluating `expr` costs and the shape of its value, with
/// the comprehension variables in `scope` and `depth` comprehensions over
/// data around it (the element symbols `E_0..E_depth`).
fn walk(expr: &IdedExpr, scope: &mut Scope, depth: usize) -> (Cost, Shape) {
    match &expr.expr {
        Expr::Unspecified => (Cost::leaf(), Shape::scalar()),
        Expr::Literal(LiteralValue::String(s)) => {
            (Cost::leaf(), Shape::sized(Form::constant(count(s.len()))))
        }
        Expr::Literal(LiteralValue::Bytes(b)) => {
            (Cost::leaf(), Shape::sized(Form::constant(count(b.len()))))
        }
        Expr::Literal(_) => (Cost::leaf(), Shape::scalar()),
        Expr::Ident(name) => {
            let shape = scope
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|(_, s)| s.clone())
                .unwrap_or_else(|| Shape::sized(Form::data()));
            (Cost::leaf(), shape)
        }
        Expr::Select(select) => {
            let (cost, operand) = walk(&select.operand, scope, depth);
            let shape = if select.test {
                Shape::scalar()
            } else {
                operand.part()
            };
            (cost.then(Cost::leaf()), shape)
        }
        Expr::List(list) => {
            let mut parts = Cost::leaf();
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
            let mut parts = Cost::leaf();
            let mut shapes = Vec::with_capacity(call.args.len() + 1);
            for operand in call.target.iter().map(|t| &**t).chain(call.args.iter()) {
                let (c, s) = walk(operand, scope, depth);
                parts = parts.then(c);
                shapes.push(s);
            }
            let name = call.func_name.as_str();
            // A macro's accumulator (`@result + [x]`) is appended to in
            // place: only the appended part is new, and it stays.
            let appended = name == "_+_"
                && matches!(call.args.first().map(|a| &a.expr),
                    Some(Expr::Ident(n)) if n.starts_with('@'));
            let parts = parts.taking(&call_steps(name, &shapes, appended));
            let total = shapes
                .iter()
                .fold(Form::default(), |sum, s| sum.add(&s.len));
            match name {
                // Numbers (and one-character strings, which cost as much)
                // add up in place: nothing is allocated.
                "_+_" if shapes.iter().all(Shape::is_scalar) => {
                    (Cost::scalar(parts), Shape::scalar())
                }
                "_+_" => {
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
                _ if SCALAR.contains(&name) => (Cost::scalar(parts), Shape::scalar()),
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
            // Every iteration's steps add up.
            let looping = over_iterations(&cond.steps.add(&step.steps), &range.len, symbol);
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
            let steps = range_cost
                .steps
                .add(&init_cost.steps)
                .add(&looping)
                .add(&result_cost.steps);
            (Cost { peak, kept, steps }, result)
        }
    }
}

fn entries<'a>(
    entries: impl Iterator<Item = &'a EntryExpr>,
    scope: &mut Scope,
    depth: usize,
) -> (Cost, Shape) {
    let mut parts = Cost::leaf();
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

/// What the parsed (macro-expanded) expression `expr` may allocate and
/// what it may cost to run. Never fails: the arithmetic saturates.
pub fn bounds(expr: &IdedExpr) -> Bounds {
    let (cost, _) = walk(expr, &mut Vec::new(), 0);
    Bounds {
        allocation: cost.peak.bound(),
        cost_tenths: cost.steps.bound(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cel_bounds::{LinearBound, MAX_RULE_ALLOCATION, Refusal};
    use cel::Program;
    use proptest::prelude::*;

    /// A ConfigMap of about 1 MiB, in data units.
    const LARGE: u64 = 1 << 20;
    /// A typical object.
    const SMALL: u64 = 4_000;

    fn all(expression: &str) -> Bounds {
        bounds(Program::compile(expression).expect("compiles").expression())
    }

    fn bound(expression: &str) -> LinearBound {
        all(expression).allocation
    }

    fn cost(expression: &str) -> LinearBound {
        all(expression).cost_tenths
    }

    fn check(expression: &str, data: Option<u64>) -> Result<(), Refusal> {
        all(expression).check(data)
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
            Err(Refusal::TooMuchAllocation { data: None, .. })
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
            Err(Refusal::TooMuchAllocation {
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
                Err(Refusal::AllocationUnbounded),
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

    /// `depth` nested `all` over ten-element lists: 10^depth iterations.
    fn nested_all(depth: usize) -> String {
        let list = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]";
        let mut expression = "true".to_string();
        for level in (0..depth).rev() {
            expression = format!("{list}.all(x{level}, {expression})");
        }
        expression
    }

    #[test]
    fn nine_nested_alls_over_ten_elements_are_refused_whatever_the_data() {
        let estimate = cost(&nested_all(9)).at(0) / 10;
        assert!(estimate >= 1_000_000_000, "{estimate}");
        assert!(matches!(
            check(&nested_all(9), None),
            Err(Refusal::TooCostly { data: None, .. })
        ));
        assert_eq!(check(&nested_all(3), None), Ok(()), "a shallow one is not");
    }

    #[test]
    fn a_comprehension_over_data_inside_another_has_no_linear_bound() {
        for expression in [
            // Every pair of items compared: the square of the data.
            "object.data.items.all(x, object.data.items.all(y, x >= y || y >= x))",
            // Each condition compared with a field that may be most of
            // the object.
            "object.status.conditions.exists(c, c.type == object.spec.wanted)",
            // A pattern read from the data, run over the data.
            "object.data.a.matches(object.data.b)",
        ] {
            assert!(cost(expression).unbounded, "{expression}");
            assert_eq!(
                check(expression, None),
                Err(Refusal::CostUnbounded),
                "{expression}"
            );
        }
    }

    #[test]
    fn rules_over_an_objects_conditions_and_lists_are_linear_and_pass_for_large_objects() {
        for expression in [
            "object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')",
            "object.status.readyReplicas == object.spec.replicas",
            "object.spec.template.spec.containers.all(c, c.ports.all(p, p.containerPort > 0))",
            "has(object.status.succeeded) && object.status.succeeded > 0",
            "hasConditions(object.status)",
            "object.data.v.matches('^[a-z]+$')",
            "work.status.conditions.exists(c, c.type == 'Available')",
            "object.spec.containers.map(c, c.name + ':' + c.image).join(', ')",
            // docs/dependencies.md's readiness rule.
            "work.status.resourceStatus.manifests.exists(m, m.resourceMeta.kind == 'Deployment' \
             && has(m.statusFeedback) && m.statusFeedback.values.exists(v, \
             v.name == 'ReadyReplicas' && v.fieldValue.integer >= 2))",
        ] {
            let bound = cost(expression);
            assert!(
                !bound.unbounded && bound.per_data_unit <= 250,
                "{expression}: {bound:?}"
            );
            assert_eq!(check(expression, Some(SMALL)), Ok(()), "{expression}");
        }
        // A scan of every condition of a 512 KiB object passes.
        assert_eq!(
            check(
                "object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')",
                Some(LARGE / 2)
            ),
            Ok(())
        );
    }

    #[test]
    fn a_linear_scan_is_refused_only_for_data_too_large_to_scan() {
        let scan = "object.data.items.all(x, size(x) < 100 && x.startsWith('a'))";
        assert_eq!(check(scan, Some(SMALL)), Ok(()));
        let huge = 64 * LARGE;
        assert!(matches!(
            check(scan, Some(huge)),
            Err(Refusal::TooCostly { data: Some(d), .. }) if d == huge
        ));
    }

    #[test]
    fn a_literal_range_multiplies_the_cost_of_its_body() {
        let one = cost("[1].all(x, object.data.v == 'a')");
        let ten = cost("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, object.data.v == 'a')");
        assert!(
            ten.per_data_unit >= 10 * one.per_data_unit,
            "{one:?} {ten:?}"
        );
    }

    proptest! {
        #[test]
        fn each_level_of_nesting_allocates_at_least_ten_times_the_one_inside(levels in 1usize..9) {
            prop_assert!(bound(&nested_map(levels)).at(0) >= 10 * bound(&nested_map(levels - 1)).at(0));
        }

        #[test]
        fn each_level_of_nesting_costs_at_least_ten_times_the_one_inside(depth in 1usize..12) {
            prop_assert!(cost(&nested_all(depth)).at(0) >= 10 * cost(&nested_all(depth - 1)).at(0));
        }

        #[test]
        fn more_data_never_makes_a_scan_acceptable(small in 0u64..10_000, more in 0u64..100_000_000) {
            let scan = "object.data.items.all(x, x.contains('a'))";
            let refused_small = check(scan, Some(small)).is_err();
            let refused_more = check(scan, Some(small + more)).is_err();
            prop_assert!(!refused_small || refused_more);
        }

        #[test]
        fn the_estimate_never_panics_on_any_parsed_expression(expression in ".{0,64}") {
            if let Ok(Ok(program)) = std::panic::catch_unwind(|| Program::compile(&expression)) {
                let _ = bounds(program.expression());
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
