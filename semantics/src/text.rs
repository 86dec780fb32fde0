//! Cutting text to a byte budget without splitting a character: status
//! messages, Event reasons and drift values are bounded in bytes, and a cut
//! inside a UTF-8 sequence would make the rest of the object invalid. Lists
//! in messages name their first few items and count the rest, so a message
//! about 10,000 clusters is as short as one about ten.

/// How many items a list in a message names; past that it counts them.
pub const LISTED: usize = 10;

/// The longest prefix of `text` that is at most `max` bytes and ends on a
/// character boundary (all of `text` when it fits). Never fails.
pub fn prefix_within(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `items` joined with `separator`, all of them when there are at most
/// [`LISTED`], else `N in all, first 10: ...`. Never fails.
pub fn first_few<S: AsRef<str>>(items: &[S], separator: &str) -> String {
    let named = items
        .iter()
        .take(LISTED)
        .map(AsRef::as_ref)
        .collect::<Vec<_>>()
        .join(separator);
    if items.len() <= LISTED {
        named
    } else {
        format!("{} in all, first {LISTED}: {named}", items.len())
    }
}

/// `text` cut to at most `max` bytes on a character boundary, ending in
/// `… (N more bytes)` when cut. Never fails; a `max` under 32 bytes keeps
/// only the mark.
pub fn clipped(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    // Room for the mark and "(1234567 more bytes)".
    let kept = prefix_within(&text, max.saturating_sub(32)).len();
    format!("{}… ({} more bytes)", &text[..kept], text.len() - kept)
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

    #[test]
    fn a_long_list_names_ten_and_counts_the_rest() {
        let few: Vec<String> = (0..3).map(|i| format!("c{i}")).collect();
        assert_eq!(first_few(&few, ", "), "c0, c1, c2");
        let many: Vec<String> = (0..10_000).map(|i| format!("c{i}")).collect();
        let text = first_few(&many, ", ");
        assert!(text.starts_with("10000 in all, first 10: c0, c1"), "{text}");
        assert!(text.ends_with("c9"), "{text}");
    }

    #[test]
    fn a_clipped_text_stays_within_its_budget_and_says_how_much_went() {
        assert_eq!(clipped("short".into(), 100), "short");
        let long = "é".repeat(5000);
        let cut = clipped(long, 1024);
        assert!(cut.len() <= 1024, "{}", cut.len());
        assert!(cut.ends_with("more bytes)"), "{cut}");
    }
}
