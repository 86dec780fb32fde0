//! The deletion budget of a replica set: whatever the cause (placement,
//! labels, taints, cluster sets, template), the hub deletes at most a share
//! of a replica set's works within a window. Past it, deletions wait until
//! the window ends or the user releases them. The window's state is recorded
//! in the replica set's status before the deletions it allows are carried
//! out, so a new leader continues the same window and never exceeds it.

/// The default share of a replica set's works deletable per window, in
/// percent: a fleet-wide mistake stops at a quarter of the fleet, while a
/// single cluster's change always passes (the allowance is at least 1).
pub const DEFAULT_SHARE_PERCENT: u32 = 25;
/// The default window, seconds: long enough for a person to see the status
/// and react, short enough that a deliberate shrink finishes within an hour.
pub const DEFAULT_WINDOW_SECONDS: i64 = 600;
/// How many waiting clusters a status message names.
pub const NAMED_WAITING: usize = 10;

/// The budget's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Share of the works at the window's start deletable in the window, percent.
    pub share_percent: u32,
    /// The window's length, seconds.
    pub window_seconds: i64,
}

impl Default for Budget {
    /// [`DEFAULT_SHARE_PERCENT`] per [`DEFAULT_WINDOW_SECONDS`].
    fn default() -> Self {
        Self {
            share_percent: DEFAULT_SHARE_PERCENT,
            window_seconds: DEFAULT_WINDOW_SECONDS,
        }
    }
}

/// The budget's recorded window (kept in the replica set's status).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Window {
    /// When the window opened, seconds since the epoch.
    pub start: i64,
    /// The number of works when it opened (the base of the share).
    pub base: usize,
    /// The deletions recorded in it so far.
    pub deleted: usize,
}

impl Window {
    /// The deletions this window allows in all: `share` of `base`, rounded
    /// up, at least 1.
    pub fn allowance(&self, budget: &Budget) -> usize {
        (self.base.saturating_mul(budget.share_percent as usize))
            .div_ceil(100)
            .max(1)
    }
}

/// What may be deleted now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Delete these clusters' works now.
    pub delete: Vec<String>,
    /// These wait for the next window or a release.
    pub waiting: Vec<String>,
    /// The window to record (before deleting) when `delete` is not empty;
    /// None when nothing changes.
    pub window: Option<Window>,
    /// When the current window ends, seconds since the epoch, if deletions
    /// wait (reconcile again then).
    pub retry_at: Option<i64>,
}

/// Decides which of `candidates` (clusters whose works are to go, in any
/// order: they are taken by name) are deleted now. `works` is the number of
/// works the replica set has; `recorded` the window in its status;
/// `released` the user's release annotation, which lets every candidate go
/// (still recorded). Never fails; a recorded window from the future (a
/// clock step) counts as current.
pub fn deletions_now(
    budget: &Budget,
    recorded: Option<Window>,
    works: usize,
    candidates: &[String],
    released: bool,
    now: i64,
) -> Verdict {
    let mut candidates = candidates.to_vec();
    candidates.sort();
    candidates.dedup();
    if candidates.is_empty() {
        return Verdict {
            delete: Vec::new(),
            waiting: Vec::new(),
            window: None,
            retry_at: None,
        };
    }
    let window = match recorded {
        Some(w) if now < w.start.saturating_add(budget.window_seconds) => w,
        _ => Window {
            start: now,
            base: works,
            deleted: 0,
        },
    };
    let room = if released {
        candidates.len()
    } else {
        window.allowance(budget).saturating_sub(window.deleted)
    };
    let waiting = candidates.split_off(room.min(candidates.len()));
    let retry_at =
        (!waiting.is_empty()).then(|| window.start.saturating_add(budget.window_seconds));
    let recorded_window = (!candidates.is_empty()).then_some(Window {
        deleted: window.deleted + candidates.len(),
        ..window
    });
    Verdict {
        delete: candidates,
        waiting,
        window: recorded_window,
        retry_at,
    }
}

/// The bounded status message for `waiting` deletions.
pub fn waiting_message(waiting: &[String], allowance: usize, window_seconds: i64) -> String {
    let first: Vec<&str> = waiting
        .iter()
        .take(NAMED_WAITING)
        .map(String::as_str)
        .collect();
    format!(
        "{} deletions wait, first {}: {}; the deletion budget allows {allowance} per {window_seconds}s window",
        waiting.len(),
        first.len(),
        first.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i:03}")).collect()
    }

    #[test]
    fn a_single_cluster_change_always_passes() {
        let v = deletions_now(&Budget::default(), None, 1, &names(1), false, 100);
        assert_eq!(v.delete, names(1));
        assert!(v.waiting.is_empty());
        let v = deletions_now(&Budget::default(), None, 3, &names(1), false, 100);
        assert_eq!(v.delete.len(), 1);
    }

    #[test]
    fn a_fleet_wide_loss_stops_at_a_quarter() {
        let v = deletions_now(&Budget::default(), None, 100, &names(100), false, 100);
        assert_eq!(v.delete.len(), 25);
        assert_eq!(v.waiting.len(), 75);
        assert_eq!(
            v.window,
            Some(Window {
                start: 100,
                base: 100,
                deleted: 25
            })
        );
        assert_eq!(v.retry_at, Some(700));
    }

    #[test]
    fn the_recorded_window_is_continued_by_a_new_leader() {
        let recorded = Window {
            start: 100,
            base: 100,
            deleted: 25,
        };
        // Same window: nothing more goes, whatever the works left.
        let v = deletions_now(
            &Budget::default(),
            Some(recorded),
            75,
            &names(75),
            false,
            200,
        );
        assert!(v.delete.is_empty());
        assert_eq!(v.waiting.len(), 75);
        assert_eq!(v.window, None);
        // Next window: a quarter of what is left.
        let v = deletions_now(
            &Budget::default(),
            Some(recorded),
            75,
            &names(75),
            false,
            700,
        );
        assert_eq!(v.delete.len(), 19);
    }

    #[test]
    fn a_release_lets_every_deletion_go_and_records_them() {
        let recorded = Window {
            start: 100,
            base: 4,
            deleted: 1,
        };
        let v = deletions_now(&Budget::default(), Some(recorded), 3, &names(3), true, 200);
        assert_eq!(v.delete.len(), 3);
        assert!(v.waiting.is_empty());
        assert_eq!(v.window.map(|w| w.deleted), Some(4));
    }

    #[test]
    fn nothing_to_delete_records_nothing() {
        let v = deletions_now(&Budget::default(), None, 10, &[], false, 100);
        assert_eq!(v.window, None);
        assert!(v.delete.is_empty());
    }

    #[test]
    fn candidates_are_taken_by_name() {
        let mut c = names(8);
        c.reverse();
        let v = deletions_now(&Budget::default(), None, 8, &c, false, 0);
        assert_eq!(v.delete, vec!["c000".to_string(), "c001".to_string()]);
    }

    #[test]
    fn the_message_is_bounded() {
        let m = waiting_message(&names(500), 25, 600);
        assert!(m.starts_with("500 deletions wait, first 10: c000,"));
        assert!(m.len() < 200);
    }
}
