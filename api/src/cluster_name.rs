//! What a cluster name may be. A cluster's name is its namespace on the hub
//! and the name of its ManagedCluster, so it is a DNS-1123 label; a name from
//! the network is checked against this before it is logged, used or echoed.

/// Longest DNS-1123 label.
const MAX_LABEL_LEN: usize = 63;

/// Why a string is not a cluster name. The refused text itself is left out on
/// purpose: it came from an unauthenticated peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ClusterNameError {
    /// The name is empty.
    #[error("the cluster name is empty")]
    Empty,
    /// The name is longer than a DNS-1123 label may be.
    #[error("the cluster name is {0} bytes long; at most 63 are allowed")]
    TooLong(usize),
    /// The name has a character other than `a-z`, `0-9` and `-`, or starts or
    /// ends with `-`.
    #[error(
        "the cluster name is not a DNS-1123 label (lower-case letters, digits and '-', starting and ending with a letter or digit)"
    )]
    NotALabel,
}

/// Checks that `name` is a DNS-1123 label: 1 to 63 characters of `a-z`,
/// `0-9` and `-`, starting and ending with a letter or digit.
pub fn validate_cluster_name(name: &str) -> Result<(), ClusterNameError> {
    if name.is_empty() {
        return Err(ClusterNameError::Empty);
    }
    if name.len() > MAX_LABEL_LEN {
        return Err(ClusterNameError::TooLong(name.len()));
    }
    let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-';
    let bytes = name.as_bytes();
    if !bytes.iter().all(|&b| allowed(b))
        || bytes.first() == Some(&b'-')
        || bytes.last() == Some(&b'-')
    {
        return Err(ClusterNameError::NotALabel);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dns_labels_are_cluster_names() {
        for name in ["a", "cluster-a", "0", "a0-b1", &"x".repeat(63)] {
            assert_eq!(validate_cluster_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn anything_else_is_refused() {
        assert_eq!(validate_cluster_name(""), Err(ClusterNameError::Empty));
        assert_eq!(
            validate_cluster_name(&"x".repeat(64)),
            Err(ClusterNameError::TooLong(64))
        );
        for name in [
            "-a",
            "a-",
            "A",
            "cluster_a",
            "cluster.a",
            "a b",
            "a\nb",
            "é",
            "a:b",
            "a/b",
        ] {
            assert_eq!(
                validate_cluster_name(name),
                Err(ClusterNameError::NotALabel),
                "{name:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn an_accepted_name_is_safe_to_log_and_use_as_a_namespace(name in "\\PC{0,80}") {
            if validate_cluster_name(&name).is_ok() {
                prop_assert!(!name.is_empty() && name.len() <= 63);
                prop_assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
            }
        }

        #[test]
        fn every_label_shaped_name_is_accepted(name in "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?") {
            prop_assert_eq!(validate_cluster_name(&name), Ok(()));
        }
    }
}
