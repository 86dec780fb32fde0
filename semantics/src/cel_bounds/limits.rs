//! The limits an expression's bounds are checked against, and why one is
//! refused.

/// The most values or string bytes one expression may allocate: 4 Mi
/// units, at most about 200 MiB however they are made up (a value is a few
/// dozen bytes). A rule that reads, compares and counts allocates nothing;
/// a message that joins a few fields of an object allocates a few times
/// their length.
pub const MAX_RULE_ALLOCATION: u64 = 4 << 20;

/// The most one expression may cost to run: ten million units, the limit
/// the hub puts on a rollout gate and the order of the per-expression
/// budget Kubernetes gives a CEL validation rule, counted as both count:
/// one unit per node of the expression evaluated, a tenth per element or
/// byte an operation goes through (a comparison, `size`, `contains`). On
/// this project's benchmark machine a unit takes at most about 40 ns, so
/// no rule the agent runs takes more than about half a second. A rule that
/// checks every condition of an object costs about 15 units per unit of
/// its size: objects up to about 600 KiB.
pub const MAX_RULE_COST: u64 = 10_000_000;

/// A bound `constant + per_data_unit × D` for data of size `D`, or
/// `unbounded` when none linear in the data is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinearBound {
    /// What it comes to whatever the data.
    pub constant: u64,
    /// What it adds per unit of data read.
    pub per_data_unit: u64,
    /// No bound linear in the data is known.
    pub unbounded: bool,
}

impl LinearBound {
    /// The bound for data of size `data` (saturating; [`u64::MAX`] when
    /// unbounded).
    pub fn at(&self, data: u64) -> u64 {
        if self.unbounded {
            return u64::MAX;
        }
        self.constant
            .saturating_add(self.per_data_unit.saturating_mul(data))
    }

    /// The smallest data size at which the bound passes `limit` (None: it
    /// never does, or always does): how much of the data needs measuring
    /// to check it.
    pub fn passes_limit_at(&self, limit: u64) -> Option<u64> {
        if self.unbounded || self.constant > limit || self.per_data_unit == 0 {
            return None;
        }
        Some((limit - self.constant) / self.per_data_unit + 1)
    }
}

/// What an expression may allocate and what it may cost to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The most values or string bytes held at once.
    pub allocation: LinearBound,
    /// The most it may cost, in tenths of the units of [`MAX_RULE_COST`]
    /// (going through an element or byte costs a tenth).
    pub cost_tenths: LinearBound,
}

impl Bounds {
    /// Checks both bounds against [`MAX_RULE_ALLOCATION`] and
    /// [`MAX_RULE_COST`], for data of size `data`, or for any data
    /// (`None`: only what no data makes acceptable fails). Fails with why.
    pub fn check(&self, data: Option<u64>) -> Result<(), Refusal> {
        let size = data.unwrap_or(0);
        if self.allocation.unbounded {
            return Err(Refusal::AllocationUnbounded);
        }
        if self.cost_tenths.unbounded {
            return Err(Refusal::CostUnbounded);
        }
        let estimate = self.allocation.at(size);
        if estimate > MAX_RULE_ALLOCATION {
            return Err(Refusal::TooMuchAllocation { estimate, data });
        }
        let estimate = self.cost_tenths.at(size).div_ceil(10);
        if estimate > MAX_RULE_COST {
            return Err(Refusal::TooCostly { estimate, data });
        }
        Ok(())
    }

    /// How much of the data needs measuring to check these bounds: past
    /// this size both are over their limits anyway (0: the data's size does
    /// not matter).
    pub fn data_worth_measuring(&self) -> u64 {
        [
            self.allocation.passes_limit_at(MAX_RULE_ALLOCATION),
            self.cost_tenths
                .passes_limit_at(MAX_RULE_COST.saturating_mul(10)),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0)
    }
}

fn for_data(data: &Option<u64>) -> String {
    match data {
        Some(d) => format!(" over data of size {d}"),
        None => " whatever the data".to_string(),
    }
}

/// Why an expression is refused before it runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Its allocation grows with the product of two sizes of the data.
    #[error(
        "may allocate without a bound linear in its data (a comprehension over data inside another that allocates, or a replacement read from data); the agent runs no such expression"
    )]
    AllocationUnbounded,
    /// Its cost grows with the product of two sizes of the data.
    #[error(
        "may run for a time without a bound linear in its data (a comprehension over data inside another over data, or a pattern read from data); the agent runs no such expression"
    )]
    CostUnbounded,
    /// Its allocation, for the data at hand (or whatever the data), is over
    /// the limit.
    #[error(
        "may allocate {estimate} values or bytes{}, over the limit of {MAX_RULE_ALLOCATION}",
        for_data(data)
    )]
    TooMuchAllocation {
        /// The estimate.
        estimate: u64,
        /// The data's size it is for (None: the constant part alone).
        data: Option<u64>,
    },
    /// Its cost, for the data at hand (or whatever the data), is over the
    /// limit.
    #[error(
        "may cost {estimate} units to run{}, over the limit of {MAX_RULE_COST}",
        for_data(data)
    )]
    TooCostly {
        /// The estimate.
        estimate: u64,
        /// The data's size it is for (None: the constant part alone).
        data: Option<u64>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_worth_measuring_is_where_a_bound_passes_its_limit() {
        let bound = LinearBound {
            constant: 10,
            per_data_unit: 2,
            unbounded: false,
        };
        let at = bound.passes_limit_at(110).expect("passes");
        assert!(bound.at(at) > 110 && bound.at(at - 1) <= 110, "{at}");
        let flat = LinearBound {
            per_data_unit: 0,
            ..bound
        };
        assert_eq!(flat.passes_limit_at(110), None);
        let bounds = Bounds {
            allocation: flat,
            cost_tenths: flat,
        };
        assert_eq!(bounds.data_worth_measuring(), 0);
    }
}
