//! Static bounds on what a tenant's CEL expression on the agent (condition
//! rules, their messages, dependency readiness rules) may allocate and what
//! it may cost to run, computed from its parsed form (macros expanded)
//! before it ever runs.
//!
//! The `cel` crate neither counts nor stops an evaluation: the agent's time
//! bound only gives up on one, which then runs on, holding its thread and
//! whatever it allocates. Nine nested `all` over ten-element lists take
//! 10^9 steps in 200 bytes of expression; a nested `map` of ten-element lists
//! eight deep builds 10^8 values in 60 and the agent is OOM-killed. So both
//! are bounded before an expression runs, and one over either limit never
//! starts.
//!
//! - **Memory**, in values (a list or map entry) or string bytes, the most
//!   held at once: reading data allocates nothing; a literal list or map
//!   holds its entries; `+` on strings or lists and string functions hold
//!   their result (numbers add in place). In a comprehension, what an
//!   iteration makes and drops counts once, at its largest; what it keeps (a
//!   `map` or `filter` appends one entry per element) adds up.
//! - **Cost**, in Kubernetes' units: one per node evaluated, a tenth per
//!   element or byte a function goes through (comparisons, `size`,
//!   `contains`, `join`; a regular expression the string's size times the
//!   pattern's). In a comprehension every iteration's cost adds up.
//! - Both are `constant + per_data_unit × D`, where `D` is the size of the
//!   data the expression reads (entries plus string bytes of the object or
//!   status it is given). Over a literal list a comprehension multiplies its
//!   body by the list's length; over data, what an iteration spends on its
//!   own element adds up to at most the list's size (the elements' sizes
//!   do), the rest times the length. A product of two sizes that both grow
//!   with `D` (a comprehension over data inside another over data, a
//!   replacement or a pattern read from data) has no such bound.
//!
//! The hub's webhook refuses what no data makes acceptable (no linear
//! bound, or a constant over a limit); the agent checks both bounds at the
//! size of the data it has before each run.

mod data_size;
mod form;
mod limits;
mod walk;

pub use data_size::data_size;
pub use limits::{Bounds, LinearBound, MAX_RULE_ALLOCATION, MAX_RULE_COST, Refusal};
pub use walk::bounds;

/// Why `expression` is refused whatever the data (what the hub's webhook
/// checks), or None: also None when it does not compile, which the agent
/// reports when it runs it.
pub fn refusal(expression: &str) -> Option<Refusal> {
    // The parser reports most bad input as an error; a panic inside it on
    // input it does not expect is left to the agent's report too.
    let program = std::panic::catch_unwind(|| cel::Program::compile(expression))
        .ok()?
        .ok()?;
    bounds(program.expression()).check(None).err()
}
