//! The frame every page shares: head with the embedded assets, the
//! navigation, the notice region actions report into, and the banner of
//! hub errors above the page's own content.

use super::escape::escape;

/// The navigation entries: (path, label).
const NAV: [(&str, &str); 2] = [("/", "Fleet"), ("/rollouts", "Rollouts")];

/// A whole page: `title`, the nav entry `current` marked as the current
/// page, `token` for the action forms' anti-forgery check, `changes` (the
/// hub notices counted before it was rendered, which the script compares
/// with its event stream's greeting) and `main` (the page's content, already
/// HTML, as [`main_content`] builds it).
pub fn page(title: &str, current: &str, token: &str, changes: u64, main: &str) -> String {
    let mut nav = String::new();
    for (path, label) in NAV {
        let here = if path == current {
            r#" aria-current="page""#
        } else {
            ""
        };
        nav.push_str(&format!(r#"<a href="{path}"{here}>{label}</a>"#));
    }
    format!(
        concat!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
            "<meta name=\"color-scheme\" content=\"light dark\">",
            "<meta name=\"ferry-token\" content=\"{token}\">",
            "<meta name=\"ferry-changes\" content=\"{changes}\">",
            "<title>{title} · ferry</title>",
            "<link rel=\"stylesheet\" href=\"/assets/style.css\">",
            "<script src=\"/assets/live.js\" defer></script></head>\n",
            "<body><a class=\"skip\" href=\"#main\">Skip to content</a>",
            "<header><span class=\"brand\">ferry</span><nav aria-label=\"Pages\">{nav}</nav>",
            "<span id=\"live\" class=\"live\" role=\"status\">connecting…</span></header>\n",
            "<div id=\"notice\" class=\"notice\" role=\"status\" aria-live=\"polite\" tabindex=\"-1\"></div>\n",
            "<main id=\"main\" tabindex=\"-1\">{main}</main></body></html>\n"
        ),
        token = escape(token),
        title = escape(title),
        nav = nav,
        changes = changes,
        main = main,
    )
}

/// The content of `<main>`: a banner per hub error (hub unreachable,
/// forbidden ...) above `body`. Live updates replace exactly this.
pub fn main_content(errors: &[String], body: &str) -> String {
    let mut out = String::new();
    for error in errors {
        out.push_str(&format!(
            r#"<p class="banner error" role="alert">{}</p>"#,
            escape(error)
        ));
    }
    out.push_str(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_escaped_banners_above_the_body() {
        let main = main_content(&["forbidden: <you>".into()], "<p>body</p>");
        assert_eq!(
            main,
            r#"<p class="banner error" role="alert">forbidden: &lt;you&gt;</p><p>body</p>"#
        );
        let html = page("Fleet <x>", "/", "t\"k", 7, &main);
        assert!(html.contains(r#"<meta name="ferry-changes" content="7">"#));
        assert!(html.contains("<title>Fleet &lt;x&gt; · ferry</title>"));
        assert!(html.contains(r#"content="t&quot;k""#));
        assert!(html.contains(r#"<a href="/" aria-current="page">Fleet</a>"#));
        assert!(html.contains(r#"<a href="/rollouts">Rollouts</a>"#));
    }
}
