//! The fleet page's label filter: a Kubernetes equality-based label
//! selector (`k=v`, `k==v`, `k!=v`, `k`, `!k`, comma-separated), parsed
//! and matched locally against the clusters already watched.

use std::collections::BTreeMap;

/// Longest selector accepted: the filter comes from the URL.
pub const MAX_SELECTOR_LEN: usize = 1024;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// The label has this value.
    Equals(String, String),
    /// The label is absent or has another value.
    NotEquals(String, String),
    /// The label is present.
    Exists(String),
    /// The label is absent.
    Absent(String),
}

/// A parsed selector: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(pub Vec<Requirement>);

/// Why a selector was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// Longer than [`MAX_SELECTOR_LEN`].
    #[error("the label selector is longer than {MAX_SELECTOR_LEN} characters")]
    TooLong,
    /// A requirement with an empty key, or set-based syntax.
    #[error(
        "cannot read the label selector requirement {0:?}: use key=value, key!=value, key or !key, separated by commas"
    )]
    Malformed(String),
}

impl Selector {
    /// Parses `text`; an empty text selects everything. Fails with
    /// [`SelectorError`] for text it does not understand rather than
    /// guessing.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        if text.len() > MAX_SELECTOR_LEN {
            return Err(SelectorError::TooLong);
        }
        let mut requirements = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let malformed = || SelectorError::Malformed(part.to_string());
            let valid_key = |k: &str| {
                !k.is_empty()
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            };
            let requirement = if let Some((key, value)) = part.split_once("!=") {
                Requirement::NotEquals(key.trim().into(), value.trim().into())
            } else if let Some((key, value)) =
                part.split_once("==").or_else(|| part.split_once('='))
            {
                Requirement::Equals(key.trim().into(), value.trim().into())
            } else if let Some(key) = part.strip_prefix('!') {
                Requirement::Absent(key.trim().into())
            } else {
                Requirement::Exists(part.into())
            };
            let key = match &requirement {
                Requirement::Equals(k, _)
                | Requirement::NotEquals(k, _)
                | Requirement::Exists(k)
                | Requirement::Absent(k) => k,
            };
            if !valid_key(key) {
                return Err(malformed());
            }
            requirements.push(requirement);
        }
        Ok(Selector(requirements))
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::Absent(k) => !labels.contains_key(k),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn equality_inequality_and_existence_combine() {
        let selector = Selector::parse("env=prod, tier!=db,region,!legacy").expect("parses");
        assert!(selector.matches(&labels(&[("env", "prod"), ("region", "eu")])));
        assert!(!selector.matches(&labels(&[
            ("env", "prod"),
            ("tier", "db"),
            ("region", "eu")
        ])));
        assert!(!selector.matches(&labels(&[("env", "prod")])));
        assert!(!selector.matches(&labels(&[
            ("env", "prod"),
            ("region", "eu"),
            ("legacy", "")
        ])));
        assert!(Selector::parse("").expect("empty").matches(&labels(&[])));
    }

    #[test]
    fn set_syntax_and_empty_keys_are_refused() {
        assert!(matches!(
            Selector::parse("env in (a,b)"),
            Err(SelectorError::Malformed(_))
        ));
        assert!(matches!(
            Selector::parse("=x"),
            Err(SelectorError::Malformed(_))
        ));
        assert_eq!(
            Selector::parse(&"a".repeat(MAX_SELECTOR_LEN + 1)),
            Err(SelectorError::TooLong)
        );
    }
}
