//! HTML escaping of every string that comes from the hub or the browser
//! (cluster names, labels, messages): text and attribute values alike.

/// `text` with `& < > " '` replaced by entities, safe inside element text
/// and inside a double- or single-quoted attribute value.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// `text` as one URL path segment or query value (RFC 3986 unreserved bytes
/// kept, everything else percent-encoded), so a name cannot change the URL's
/// shape; escape the result again with [`escape`] inside HTML.
pub fn url_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_are_neutralised() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        assert_eq!(escape("cluster-a"), "cluster-a");
    }

    #[test]
    fn url_components_keep_only_unreserved_bytes() {
        assert_eq!(url_component("cluster-a.b_c~"), "cluster-a.b_c~");
        assert_eq!(url_component("a/b?c=d&e f"), "a%2Fb%3Fc%3Dd%26e%20f");
        assert_eq!(url_component("é"), "%C3%A9");
    }
}
