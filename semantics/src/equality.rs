//! JSON equality as the API server means it: numbers compare by value.

use serde_json::{Number, Value};

/// JSON equality where numbers compare by value: the API server may return
/// `1` for a manifest's `1.0`, which is not a change.
pub(crate) fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => numbers_equal(x, y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| values_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

fn numbers_equal(x: &Number, y: &Number) -> bool {
    // Two integers compare exactly; a float compares by value, which is all
    // the precision it has.
    x == y || ((x.is_f64() || y.is_f64()) && x.as_f64() == y.as_f64())
}
