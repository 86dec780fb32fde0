//! The deletion budget of a replica set, for removals the author did not
//! ask for (cluster labels, taints, cluster sets, bindings, a deleted
//! ManagedCluster): the hub deletes at most a share of a replica set's works
//! within a window, and past it deletions are held until someone with the
//! platform role releases them; the clock never releases a hold. The
//! window's state is recorded in the replica set's status before the
//! deletions it allows are carried out, so a new leader continues the same
//! window and never exceeds it. (Removals the author's own spec asks for are
//! paced by its rollout strategy instead: [`intended_now`].)

/// The default share of a replica set's works deletable per window, in
/// percent: a fleet-wide mistake stops at a quarter of the fleet, while a
/// single cluster's change always passes (the allowance is at least 1).
pub const DEFAULT_SHARE_PERCENT: u32 = 25;
/// The default window, seconds: after a window with nothing held, the next
/// removal starts a new one.
pub const DEFAULT_WINDOW_SECONDS: i64 = 600;
/// How many waiting clusters a status message names.
pub const NAMED_WAITING: usize = 10;
/// How many clusters a window remembers removing (to give the budget back
/// when one returns): past this, a return is not refunded.
pub const MAX_REMEMBERED: usize = 100;

/// The budget's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Share of the works deletable in the window, percent of its base.
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
    /// The most works the replica set had within the window (a high-water
    /// mark: a deletion in progress does not shrink its own budget).
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

/// What the replica set's status recorded of the budget.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Recorded {
    /// The last window.
    pub window: Option<Window>,
    /// How many deletions it held: a window that holds any does not end.
    pub waiting: usize,
    /// The value of the last release acted on.
    pub release: Option<String>,
    /// The clusters the window removed (at most [`MAX_REMEMBERED`]).
    pub removed: Vec<String>,
}

/// What may be deleted now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Delete these clusters' works now.
    pub delete: Vec<String>,
    /// These are held until a release.
    pub waiting: Vec<String>,
    /// The window to record (before deleting) when `delete` is not empty
    /// or a release is acted on; None when nothing changes.
    pub window: Option<Window>,
    /// The release acted on now (to record with the window), if any.
    pub release: Option<String>,
    /// The clusters the window has removed, to record with it.
    pub removed: Vec<String>,
}

/// Decides which of `candidates` (clusters whose works are to go, in any
/// order: they are taken by name) are deleted now. `works` is the number of
/// works the replica set has; `recorded` what its status holds; `returned`
/// the clusters that have a work again made since the window opened (of
/// those it removed, each gives its share of the budget back, so a label
/// that flaps costs one removal, not one per flap); `release` the value of
/// the release annotation: a value other than the last one acted on lets
/// every candidate go once and starts a new window. Never fails; a
/// recorded window from the future (a clock step) counts as current.
pub fn deletions_now(
    budget: &Budget,
    recorded: &Recorded,
    works: usize,
    candidates: &[String],
    returned: &[String],
    release: Option<&str>,
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
            release: None,
            removed: Vec::new(),
        };
    }
    let release = release
        .map(str::trim)
        .filter(|v| !v.is_empty() && Some(*v) != recorded.release.as_deref());
    if let Some(value) = release {
        // Released: these go, outside any budget, and the budget starts
        // again from here.
        return Verdict {
            delete: candidates,
            waiting: Vec::new(),
            window: Some(Window {
                start: now,
                base: works,
                deleted: 0,
            }),
            release: Some(value.to_string()),
            removed: Vec::new(),
        };
    }
    let (mut window, mut removed) = match recorded.window {
        Some(w) if recorded.waiting > 0 || now < w.start.saturating_add(budget.window_seconds) => (
            Window {
                base: w.base.max(works),
                ..w
            },
            recorded.removed.clone(),
        ),
        _ => (
            Window {
                start: now,
                base: works,
                deleted: 0,
            },
            Vec::new(),
        ),
    };
    // A cluster the window removed that is back gives its share back.
    let before = removed.len();
    removed.retain(|c| !returned.contains(c));
    window.deleted = window.deleted.saturating_sub(before - removed.len());
    let room = window.allowance(budget).saturating_sub(window.deleted);
    let waiting = candidates.split_off(room.min(candidates.len()));
    let recorded_window = (!candidates.is_empty()).then_some(Window {
        deleted: window.deleted + candidates.len(),
        ..window
    });
    if recorded_window.is_some() {
        removed.extend(candidates.iter().cloned());
        removed.sort();
        removed.dedup();
        removed.truncate(MAX_REMEMBERED);
    }
    Verdict {
        delete: candidates,
        waiting,
        window: recorded_window,
        release: None,
        removed,
    }
}

/// How many of `intended` removals (works the replica set's own spec no
/// longer places) go now: at most `pace` at once, counting the `in_flight`
/// ones (deleted, not yet gone). Never fails; a pace of 0 counts as 1.
pub fn intended_now(intended: &[String], pace: usize, in_flight: usize) -> Vec<String> {
    let mut intended = intended.to_vec();
    intended.sort();
    intended.dedup();
    intended.truncate(pace.max(1).saturating_sub(in_flight));
    intended
}

/// The bounded status message for `waiting` deletions.
pub fn waiting_message(waiting: &[String], allowance: usize, window_seconds: i64) -> String {
    let first: Vec<&str> = waiting
        .iter()
        .take(NAMED_WAITING)
        .map(String::as_str)
        .collect();
    format!(
        "{} deletions held, first {}: {}; the deletion budget allows {allowance} per {window_seconds}s window and holds the rest until a release",
        waiting.len(),
        first.len(),
        first.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i:03}")).collect()
    }

    fn held(window: Window, waiting: usize) -> Recorded {
        Recorded {
            window: Some(window),
            waiting,
            release: None,
            removed: Vec::new(),
        }
    }

    #[test]
    fn a_single_cluster_change_always_passes() {
        let none = Recorded::default();
        let v = deletions_now(&Budget::default(), &none, 1, &names(1), &[], None, 100);
        assert_eq!(v.delete, names(1));
        assert!(v.waiting.is_empty());
        let v = deletions_now(&Budget::default(), &none, 3, &names(1), &[], None, 100);
        assert_eq!(v.delete.len(), 1);
    }

    #[test]
    fn a_fleet_wide_loss_stops_at_a_quarter() {
        let v = deletions_now(
            &Budget::default(),
            &Recorded::default(),
            100,
            &names(100),
            &[],
            None,
            100,
        );
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
    }

    #[test]
    fn a_hold_outlasts_its_window_until_a_release() {
        let recorded = held(
            Window {
                start: 100,
                base: 100,
                deleted: 25,
            },
            75,
        );
        // Same window, the next, a day later: nothing more goes.
        for now in [200, 700, 86_500] {
            let v = deletions_now(
                &Budget::default(),
                &recorded,
                75,
                &names(75),
                &[],
                None,
                now,
            );
            assert!(v.delete.is_empty(), "at {now}");
            assert_eq!(v.waiting.len(), 75);
            assert_eq!(v.window, None);
        }
        // Released: all go once, and a new window starts.
        let v = deletions_now(
            &Budget::default(),
            &recorded,
            75,
            &names(75),
            &[],
            Some("alice: relabel intended"),
            900,
        );
        assert_eq!(v.delete.len(), 75);
        assert_eq!(v.release.as_deref(), Some("alice: relabel intended"));
        assert_eq!(
            v.window,
            Some(Window {
                start: 900,
                base: 75,
                deleted: 0
            })
        );
        // The same value again releases nothing.
        let after = Recorded {
            release: Some("alice: relabel intended".into()),
            ..recorded
        };
        let v = deletions_now(
            &Budget::default(),
            &after,
            75,
            &names(75),
            &[],
            Some("alice: relabel intended"),
            900,
        );
        assert!(v.delete.is_empty());
    }

    #[test]
    fn a_window_that_held_nothing_ends_on_time() {
        let recorded = held(
            Window {
                start: 100,
                base: 8,
                deleted: 2,
            },
            0,
        );
        let v = deletions_now(&Budget::default(), &recorded, 6, &names(1), &[], None, 300);
        assert!(v.delete.is_empty(), "the window's two are spent");
        let v = deletions_now(&Budget::default(), &recorded, 6, &names(1), &[], None, 700);
        assert_eq!(v.delete.len(), 1, "a new window");
    }

    #[test]
    fn the_base_is_the_high_water_mark() {
        let recorded = held(
            Window {
                start: 100,
                base: 4,
                deleted: 0,
            },
            0,
        );
        // 100 works now (grew within the window): a quarter of 100.
        let v = deletions_now(
            &Budget::default(),
            &recorded,
            100,
            &names(40),
            &[],
            None,
            200,
        );
        assert_eq!(v.delete.len(), 25);
        // Shrunk within the window: still a quarter of the most it had.
        let recorded = held(
            Window {
                start: 100,
                base: 100,
                deleted: 0,
            },
            0,
        );
        let v = deletions_now(
            &Budget::default(),
            &recorded,
            10,
            &names(10),
            &[],
            None,
            200,
        );
        assert_eq!(v.delete.len(), 10);
    }

    #[test]
    fn nothing_to_delete_records_nothing() {
        let v = deletions_now(
            &Budget::default(),
            &Recorded::default(),
            10,
            &[],
            &[],
            None,
            100,
        );
        assert_eq!(v.window, None);
        assert!(v.delete.is_empty());
    }

    #[test]
    fn candidates_are_taken_by_name() {
        let mut c = names(8);
        c.reverse();
        let v = deletions_now(
            &Budget::default(),
            &Recorded::default(),
            8,
            &c,
            &[],
            None,
            0,
        );
        assert_eq!(v.delete, vec!["c000".to_string(), "c001".to_string()]);
    }

    #[test]
    fn a_flapping_cluster_costs_one_removal_not_one_per_flap() {
        // Four works, c000's label flaps: out (removed), back, out again.
        let none = Recorded::default();
        let first = deletions_now(&Budget::default(), &none, 4, &names(1), &[], None, 100);
        assert_eq!(first.delete, names(1));
        assert_eq!(first.removed, names(1));
        let recorded = Recorded {
            window: first.window,
            removed: first.removed,
            ..Recorded::default()
        };
        // Back with a new work, then out again: its share came back.
        let again = deletions_now(
            &Budget::default(),
            &recorded,
            4,
            &names(1),
            &names(1),
            None,
            200,
        );
        assert_eq!(again.delete, names(1), "{again:?}");
        assert_eq!(again.window.map(|w| w.deleted), Some(1));
        // Without returning, the second removal of another cluster waits.
        let other = vec!["c001".to_string()];
        let held = deletions_now(&Budget::default(), &recorded, 3, &other, &[], None, 200);
        assert!(held.delete.is_empty() && held.waiting == other);
    }

    #[test]
    fn intended_removals_go_at_the_pace() {
        assert_eq!(intended_now(&names(10), 3, 0), names(3));
        assert_eq!(intended_now(&names(10), 3, 2), names(1));
        assert!(intended_now(&names(10), 3, 5).is_empty());
        assert_eq!(intended_now(&names(2), 0, 0), names(1));
    }

    #[test]
    fn the_message_is_bounded() {
        let m = waiting_message(&names(500), 25, 600);
        assert!(m.starts_with("500 deletions held, first 10: c000,"));
        assert!(m.len() < 250);
    }

    proptest! {
        /// However the candidates arrive and however time passes, without
        /// a release no more than the allowance of the high-water mark is
        /// deleted from the first window on, once anything is held.
        #[test]
        fn without_a_release_a_hold_never_lets_more_go(
            fleet in 4usize..200,
            steps in proptest::collection::vec((0usize..200, 0i64..2_000), 1..30),
        ) {
            let budget = Budget::default();
            let mut recorded = Recorded::default();
            let mut live = fleet;
            let mut now = 0i64;
            let mut deleted = 0usize;
            let mut held_since: Option<usize> = None;
            for (ask, dt) in steps {
                now += dt;
                let ask = ask.min(live);
                let v = deletions_now(&budget, &recorded, live, &names(ask), &[], None, now);
                if held_since.is_some() {
                    prop_assert!(v.delete.is_empty(), "a hold let more go");
                }
                deleted += v.delete.len();
                live -= v.delete.len();
                if let Some(w) = v.window {
                    recorded.window = Some(w);
                    recorded.removed = v.removed.clone();
                }
                recorded.waiting = v.waiting.len();
                if !v.waiting.is_empty() && held_since.is_none() {
                    held_since = Some(deleted);
                }
                // Once held, the waiting deletions keep being asked for.
                if held_since.is_some() && recorded.waiting == 0 {
                    recorded.waiting = 1;
                }
            }
            prop_assert!(deleted <= fleet);
        }

        /// Within one window, clusters leaving and coming back in any
        /// order: the works missing from the most the replica set had never
        /// exceed the allowance of that most.
        #[test]
        fn returns_refund_no_more_than_they_gave(
            fleet in 4usize..60,
            steps in proptest::collection::vec((0usize..60, 0usize..60, any::<bool>()), 1..40),
        ) {
            let budget = Budget::default();
            let all = names(fleet);
            let mut live: std::collections::BTreeSet<String> = all.iter().cloned().collect();
            let mut recorded = Recorded::default();
            let mut high_water = fleet;
            for (i, (from, count, come_back)) in steps.into_iter().enumerate() {
                let now = i64::try_from(i).unwrap_or(0);
                let mut returned = Vec::new();
                if come_back {
                    // Some removed clusters get a work again.
                    for c in all.iter().skip(from).take(count) {
                        if live.insert(c.clone()) {
                            returned.push(c.clone());
                        }
                    }
                }
                high_water = high_water.max(live.len());
                let candidates: Vec<String> =
                    live.iter().skip(from % live.len().max(1)).take(count).cloned().collect();
                let v = deletions_now(&budget, &recorded, live.len(), &candidates, &returned, None, now);
                for c in &v.delete {
                    live.remove(c);
                }
                if let Some(w) = v.window {
                    recorded.window = Some(w);
                    recorded.removed = v.removed.clone();
                    high_water = high_water.max(w.base);
                }
                recorded.waiting = v.waiting.len();
                let allowance = Window { start: 0, base: high_water, deleted: 0 }.allowance(&budget);
                prop_assert!(
                    high_water - live.len() <= allowance,
                    "{} of {high_water} missing, allowance {allowance}",
                    high_water - live.len()
                );
            }
        }
    }
}
