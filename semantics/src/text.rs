//! Cutting text to a byte budget without splitting a character: status
//! messages, Event reasons and drift values are bounded in bytes, and a cut
//! inside a UTF-8 sequence would make the rest of the object invalid.

/// The longest prefix of `text` that is at most `max` bytes and ends on a
/// character boundary (all of `text` when it fits). Never fails.
pub fn prefix_within(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_never_splits_a_character() {
        assert_eq!(prefix_within("héllo", 2), "h");
        assert_eq!(prefix_within("héllo", 3), "hé");
        assert_eq!(prefix_within("héllo", 100), "héllo");
        assert_eq!(prefix_within("", 0), "");
        assert_eq!(prefix_within("€", 2), "");
    }
}
