//! Whether a placement's new schedule may replace its decisions, or must
//! hold the last ones because the clusters it may choose from vanished at
//! once: a ManagedClusterSetBinding deleted, every bound set emptied, or a
//! selector that stopped matching every cluster together. Such a loss is the
//! same outage as a deleted Placement through another door (issue 31), so it
//! holds, deleting nothing, until the grant comes back or the user confirms
//! the loss. A partial loss (some clusters leave, others stay) is an
//! ordinary change: it passes, and the replica set's deletion budget bounds
//! what it removes.

/// Why the schedule came out empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmptyCause {
    /// No existing set is bound to the namespace (or none the placement
    /// names): a binding was deleted.
    NoBindings,
    /// Sets are bound but hold no cluster.
    AllSetsEmpty,
    /// Clusters are eligible but none passes the predicates and tolerations.
    NothingMatched,
}

impl EmptyCause {
    /// The condition reason that names this cause.
    pub fn reason(self) -> &'static str {
        match self {
            Self::NoBindings => "NoManagedClusterSetBindings",
            Self::AllSetsEmpty => "AllManagedClusterSetsEmpty",
            Self::NothingMatched => "NoManagedClusterMatched",
        }
    }
}

/// What the placement controller does with a new schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantOutcome {
    /// Write the new decisions.
    Apply,
    /// Keep the `previous` decisions unchanged: every chosen cluster was
    /// lost at once for `cause` and the user has not confirmed.
    Hold {
        /// Why nothing is eligible or selected any more.
        cause: EmptyCause,
        /// How many clusters the held decisions name.
        previous: usize,
    },
}

/// Decides whether a schedule selecting `selected` clusters (empty for
/// `cause`, when `selected` is 0) may replace decisions that named
/// `previous` clusters. `confirmed` is the user's confirmation on the
/// Placement (`ferry_api::contract::CONFIRM_EMPTY_DECISIONS_ANNOTATION`).
/// Total loss (previous > 0, selected == 0) holds unless confirmed; every
/// other case applies. Never fails.
pub fn grant_outcome(
    previous: usize,
    selected: usize,
    cause: Option<EmptyCause>,
    confirmed: bool,
) -> GrantOutcome {
    match cause {
        Some(cause) if previous > 0 && selected == 0 && !confirmed => {
            GrantOutcome::Hold { cause, previous }
        }
        _ => GrantOutcome::Apply,
    }
}

/// The message of the held condition, naming the cause and how to confirm.
pub fn hold_message(cause: EmptyCause, previous: usize, annotation: &str) -> String {
    let why = match cause {
        EmptyCause::NoBindings => {
            "no ManagedClusterSet this placement may use is bound to its namespace any more"
        }
        EmptyCause::AllSetsEmpty => "every ManagedClusterSet bound to its namespace is empty",
        EmptyCause::NothingMatched => "no cluster matches the predicates and tolerations any more",
    };
    format!(
        "{why}: the last decisions ({previous} clusters) are held and no work is deleted; \
         restore the grant, or annotate the Placement {annotation}=true to apply the empty decision"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_binding_holds() {
        assert_eq!(
            grant_outcome(3, 0, Some(EmptyCause::NoBindings), false),
            GrantOutcome::Hold {
                cause: EmptyCause::NoBindings,
                previous: 3
            }
        );
    }

    #[test]
    fn an_emptied_set_holds() {
        assert_eq!(
            grant_outcome(1, 0, Some(EmptyCause::AllSetsEmpty), false),
            GrantOutcome::Hold {
                cause: EmptyCause::AllSetsEmpty,
                previous: 1
            }
        );
    }

    #[test]
    fn a_selector_matching_nothing_holds() {
        assert!(matches!(
            grant_outcome(50, 0, Some(EmptyCause::NothingMatched), false),
            GrantOutcome::Hold { .. }
        ));
    }

    #[test]
    fn a_partial_loss_applies() {
        // Some clusters stay: an ordinary change (the deletion budget bounds it).
        assert_eq!(grant_outcome(10, 1, None, false), GrantOutcome::Apply);
    }

    #[test]
    fn an_empty_placement_staying_empty_applies() {
        assert_eq!(
            grant_outcome(0, 0, Some(EmptyCause::NoBindings), false),
            GrantOutcome::Apply
        );
    }

    #[test]
    fn a_confirmed_loss_applies() {
        assert_eq!(
            grant_outcome(3, 0, Some(EmptyCause::NoBindings), true),
            GrantOutcome::Apply
        );
    }

    #[test]
    fn the_grant_coming_back_applies() {
        assert_eq!(grant_outcome(3, 3, None, false), GrantOutcome::Apply);
    }

    #[test]
    fn the_message_names_the_cause_and_the_annotation() {
        let m = hold_message(EmptyCause::NoBindings, 3, "x/confirm");
        assert!(m.contains("bound") && m.contains("3 clusters") && m.contains("x/confirm=true"));
    }
}
