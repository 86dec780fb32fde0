//! kubectl's table look, built with comfy-table: upper-case headers, no
//! borders, columns three spaces apart, no trailing blanks.

use comfy_table::presets::NOTHING;
use comfy_table::{Cell, Table};

/// Space between columns, as kubectl prints them.
const COLUMN_GAP: u16 = 3;

/// Renders `rows` under `header` as kubectl does. Multi-line cells stay
/// multi-line; nothing is wrapped or cut.
pub fn render(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut table = Table::new();
    table.load_style(NOTHING);
    table.set_header(header.iter().map(|h| Cell::new(h.to_uppercase())));
    for row in rows {
        table.add_row(row);
    }
    let last = header.len().saturating_sub(1);
    for (index, column) in table.column_iter_mut().enumerate() {
        column.set_padding((0, if index == last { 0 } else { COLUMN_GAP }));
    }
    table.trim_fmt()
}

/// Prefixes every line of `text` with `spaces` spaces, to nest a table under
/// a heading.
pub fn indent(text: &str, spaces: usize) -> String {
    let pad = " ".repeat(spaces);
    text.lines()
        .map(|line| {
            if line.is_empty() {
                String::new()
            } else {
                format!("{pad}{line}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_three_spaces_apart_without_trailing_blanks() {
        let text = render(
            &["name", "connected"],
            vec![
                vec!["cluster-a".into(), "True".into()],
                vec!["b".into(), "False".into()],
            ],
        );
        assert_eq!(
            text,
            "NAME        CONNECTED\ncluster-a   True\nb           False"
        );
    }

    #[test]
    fn indent_shifts_every_non_empty_line() {
        assert_eq!(indent("a\n\nb", 2), "  a\n\n  b");
    }
}
