//! How big the data an expression reads is, in the units its bounds are
//! linear in.

use super::form::count;

/// The size of `value` in the units both bounds count data in: its
/// entries and string bytes (map keys' too: a comprehension over a map goes
/// through its keys), counted to at most `limit` (the walk stops
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
                map.map.keys().fold(count(map.map.len()), |sum, key| {
                    sum.saturating_add(match key {
                        cel::objects::Key::String(s) => count(s.len()),
                        _ => 1,
                    })
                })
            }
            _ => 1,
        });
    }
    size
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_of_data_counts_entries_and_bytes_up_to_a_limit() {
        let value = crate::condition_rules::to_cel(
            &serde_json::json!({"a": "12345", "b": [1, 2, {"c": "xy"}]}),
        );
        // 2 map entries and 2 key bytes, 5 bytes, 3 list entries, 1 + 1
        // scalars, 1 entry and 1 key byte, 2 bytes.
        assert_eq!(
            data_size(&value, u64::MAX),
            2 + 2 + 5 + 3 + 1 + 1 + 1 + 1 + 2
        );
        assert!(data_size(&value, 3) <= 3 + 5);
    }
}
