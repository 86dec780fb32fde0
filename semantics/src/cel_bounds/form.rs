//! The algebra both bounds are written in: a linear form in the size of
//! the data an expression reads (and in the sizes of the elements of the
//! comprehensions over data around it), and the shape of a value.

use super::limits::LinearBound;

/// A linear form `c + s·S + Σ e[k]·E_k` (saturating), where `E_k` is the
/// size of the element of the `k`-th enclosing comprehension over data;
/// `nonlinear` when no linear bound is known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Form {
    pub(super) c: u64,
    pub(super) s: u64,
    pub(super) e: Vec<u64>,
    pub(super) nonlinear: bool,
}

impl Form {
    pub(super) fn constant(c: u64) -> Self {
        Self {
            c,
            ..Self::default()
        }
    }

    pub(super) fn data() -> Self {
        Self {
            s: 1,
            ..Self::default()
        }
    }

    pub(super) fn element(k: usize) -> Self {
        let mut e = vec![0; k + 1];
        e[k] = 1;
        Self {
            e,
            ..Self::default()
        }
    }

    pub(super) fn is_constant(&self) -> bool {
        !self.nonlinear && self.s == 0 && self.e.iter().all(|&x| x == 0)
    }

    pub(super) fn add(&self, other: &Form) -> Form {
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

    pub(super) fn scale(&self, k: u64) -> Form {
        Form {
            c: self.c.saturating_mul(k),
            s: self.s.saturating_mul(k),
            e: self.e.iter().map(|x| x.saturating_mul(k)).collect(),
            nonlinear: self.nonlinear && k > 0,
        }
    }

    /// The product, linear only when one side is a constant.
    pub(super) fn mul(&self, other: &Form) -> Form {
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
    pub(super) fn split(&self, k: usize) -> (u64, Form) {
        let mut rest = self.clone();
        let coefficient = rest.e.get(k).copied().unwrap_or(0);
        rest.e.truncate(k);
        (coefficient, rest)
    }

    /// The form with `E_k` replaced by `whole` (an element is a part of
    /// the list it comes from).
    pub(super) fn substitute(&self, k: usize, whole: &Form) -> Form {
        let (coefficient, rest) = self.split(k);
        rest.add(&whole.scale(coefficient))
    }

    /// As a [`LinearBound`], element symbols counted as data (an
    /// element is a part of the data).
    pub(super) fn bound(&self) -> LinearBound {
        let elements = self.e.iter().fold(0u64, |sum, x| sum.saturating_add(*x));
        LinearBound {
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
pub(super) struct Shape {
    pub(super) len: Form,
    pub(super) elem: Option<Box<Shape>>,
}

impl Shape {
    pub(super) fn scalar() -> Self {
        Self {
            len: Form::constant(1),
            elem: None,
        }
    }

    /// Whether the value is one number, bool or character: a literal, a
    /// count or a comparison, or an entry of a literal list of them.
    pub(super) fn is_scalar(&self) -> bool {
        self.elem.is_none() && self.len == Form::constant(1)
    }

    pub(super) fn sized(len: Form) -> Self {
        Self { len, elem: None }
    }

    /// An entry of the value, or a field read out of it.
    pub(super) fn part(&self) -> Shape {
        match &self.elem {
            Some(elem) => (**elem).clone(),
            None => Shape::sized(self.len.clone()),
        }
    }

    pub(super) fn merge(a: &Shape, b: &Shape) -> Shape {
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

    pub(super) fn substitute(&self, k: usize, whole: &Form) -> Shape {
        Shape {
            len: self.len.substitute(k, whole),
            elem: self.elem.as_ref().map(|e| Box::new(e.substitute(k, whole))),
        }
    }
}

pub(super) fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}
