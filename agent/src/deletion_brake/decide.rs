//! The brake's decisions, pure: from the ledger, the time and how many
//! objects the agent manages, whether one work's deletion goes ahead or is
//! held, and what a release lets go. No I/O here; `mod.rs` gathers and
//! `store.rs` writes what these functions return.

use std::collections::BTreeMap;
use std::time::Duration;

use super::ledger::{Admitted, Held, Ledger, MAX_OWNERS, MAX_RELEASES, Release};

/// The brake's settings (the agent's `--deletion-brake-*` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Percent of the managed objects (their high-water mark in the window)
    /// that may be deleted per window; 1 to 100.
    pub percent: u8,
    /// Objects that may always be deleted per window, however few the
    /// agent manages.
    pub floor: u64,
    /// How long an admitted deletion counts against the budget.
    pub window: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            percent: 25,
            floor: 20,
            window: Duration::from_secs(600),
        }
    }
}

/// One work's deletion, as the brake is asked about it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The work's UID on the hub.
    pub uid: &'a str,
    /// The work's name.
    pub work: &'a str,
    /// The work's owner (empty when the hub did not say).
    pub owner: &'a str,
    /// Objects the deletion would remove (orphaned ones do not count).
    pub objects: u64,
}

/// The objects the agent manages, per owner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Managed {
    /// Every record's objects, per owner.
    pub by_owner: BTreeMap<String, u64>,
}

impl Managed {
    /// One owner (`""`) managing `total` objects.
    pub fn unowned(total: u64) -> Self {
        Self {
            by_owner: [(String::new(), total)].into(),
        }
    }

    /// Every owner's objects together.
    pub fn total(&self) -> u64 {
        self.by_owner
            .values()
            .fold(0u64, |sum, n| sum.saturating_add(*n))
    }
}

/// Where the budget stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Objects admitted for deletion in the window (releases excluded).
    pub spent: u64,
    /// Objects that may be deleted in the window.
    pub allowed: u64,
    /// The percentage part of `allowed` (without the floor): what the
    /// owners' fair shares split; the floor's extra is first come.
    pub proportional: u64,
    /// The high-water mark of managed objects the budget is a share of.
    pub base: u64,
}

/// The brake's answer for one deletion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Delete now.
    Admit,
    /// Keep the objects until a platform admin releases the hold.
    Hold {
        /// The budget when the work was held.
        budget: Budget,
        /// The work owner's fair share of it.
        share: u64,
        /// Works held in all, this one included.
        works: usize,
        /// Objects held in all.
        objects: u64,
    },
}

/// A verdict and the ledger to record before acting on it (None: the
/// ledger is unchanged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// What to do with the deletion.
    pub verdict: Verdict,
    /// The ledger to write first, when it changed.
    pub ledger: Option<Ledger>,
}

/// The ledger at `now`: admissions older than the window dropped, and the
/// high-water mark raised to `managed` (or reset to it once a whole window
/// passed without a new high).
pub fn refresh(ledger: &Ledger, now: i64, managed: &Managed, limits: &Limits) -> Ledger {
    let window = i64::try_from(limits.window.as_secs()).unwrap_or(i64::MAX);
    let cutoff = now.saturating_sub(window);
    let mut next = ledger.clone();
    next.admitted.retain(|a| a.at > cutoff);
    if next.high_water_at <= cutoff {
        next.owner_high_water.clear();
    }
    let total = managed.total();
    if total >= next.high_water || next.high_water_at <= cutoff {
        next.high_water = total;
        next.high_water_at = now;
    }
    for (owner, &count) in &managed.by_owner {
        let room = next.owner_high_water.len() < MAX_OWNERS;
        match next.owner_high_water.get_mut(owner) {
            Some(mark) => *mark = (*mark).max(count),
            None if room && count > 0 => {
                next.owner_high_water.insert(owner.clone(), count);
            }
            None => {}
        }
    }
    next
}

/// The budget of `ledger` (refreshed) under `limits`.
pub fn budget(ledger: &Ledger, limits: &Limits) -> Budget {
    let base = ledger.high_water;
    let share = base
        .saturating_mul(u64::from(limits.percent.clamp(1, 100)))
        .div_ceil(100);
    Budget {
        spent: ledger
            .admitted
            .iter()
            .filter(|a| !a.released)
            .map(|a| a.objects)
            .sum(),
        allowed: share.max(limits.floor),
        proportional: share,
        base,
    }
}

/// Each owner's fair share of the budget (`budget`, of the refreshed
/// `ledger`): its percentage part split in proportion to each owner's
/// high-water mark, rounded down, so the shares never add up to more than
/// the budget. The floor's extra (on a cluster managing few objects) is
/// nobody's share: reserved, it would go to whoever was counted first. An
/// owner absent from the map has none.
pub fn fair_shares(ledger: &Ledger, budget: &Budget) -> BTreeMap<String, u64> {
    let whole = ledger
        .owner_high_water
        .values()
        .sum::<u64>()
        .max(budget.base)
        .max(1);
    ledger
        .owner_high_water
        .iter()
        .map(|(owner, &base)| {
            let share = u128::from(budget.proportional) * u128::from(base) / u128::from(whole);
            (owner.clone(), u64::try_from(share).unwrap_or(u64::MAX))
        })
        .collect()
}

/// Whether `request`'s deletion goes ahead at `now`, with `managed` objects
/// under the agent. A deletion already admitted goes on (it may take several
/// passes, or an agent restart); once anything of an owner is held,
/// everything of that owner after it is held too, so a mass deletion stops
/// as a whole rather than trickling through in whatever order the hub sent
/// it.
///
/// The budget is the cluster's, and each owner (team) is sure of its fair
/// share of it ([`fair_shares`]): a deletion within its owner's share goes
/// ahead whatever other owners deleted, and one beyond it goes ahead only
/// while the budget has room beyond what the other owners' unused shares
/// keep. So one team's mass deletion never holds another team's deletions,
/// and all teams together never delete more than the budget.
pub fn decide(
    ledger: &Ledger,
    now: i64,
    managed: &Managed,
    limits: &Limits,
    request: Request<'_>,
) -> Decision {
    if request.objects == 0 || ledger.admits(request.uid) {
        return Decision {
            verdict: Verdict::Admit,
            ledger: None,
        };
    }
    let mut next = refresh(ledger, now, managed, limits);
    let budget = budget(&next, limits);
    let shares = fair_shares(&next, &budget);
    let spent_by = next.spent_by_owner();
    let spent_of = |owner: &str| spent_by.get(owner).copied().unwrap_or_default();
    let share = shares.get(request.owner).copied().unwrap_or_default();
    let spent = spent_of(request.owner).saturating_add(request.objects);
    let kept_for_others: u64 = shares
        .iter()
        .filter(|(owner, _)| owner.as_str() != request.owner)
        .map(|(owner, share)| share.saturating_sub(spent_of(owner)))
        .sum();
    let fits = spent <= share
        || budget
            .spent
            .saturating_add(request.objects)
            .saturating_add(kept_for_others)
            <= budget.allowed;
    if !next.holds_for(request.owner) && fits {
        next.admitted.push(Admitted {
            uid: request.uid.to_string(),
            work: request.work.to_string(),
            owner: request.owner.to_string(),
            objects: request.objects,
            at: now,
            released: false,
        });
        return Decision {
            verdict: Verdict::Admit,
            ledger: Some(next),
        };
    }
    if let Some(held) = next.held.iter_mut().find(|h| h.uid == request.uid) {
        held.objects = request.objects;
    } else {
        next.held.push(Held {
            uid: request.uid.to_string(),
            work: request.work.to_string(),
            owner: request.owner.to_string(),
            objects: request.objects,
            since: now,
        });
    }
    let verdict = Verdict::Hold {
        budget,
        share,
        works: next.held.len(),
        objects: next.held_objects(),
    };
    let changed = next != *ledger;
    Decision {
        verdict,
        ledger: changed.then_some(next),
    }
}

/// Acts on the release annotation's value `annotation` (written by
/// `manager`): when it is set and differs from the last one acted on, every
/// held deletion is admitted (not counted against the budget) and what was
/// spent is forgiven, so the budget starts again from the release. None
/// when there is nothing to act on.
pub fn release(ledger: &Ledger, now: i64, annotation: &str, manager: &str) -> Option<Ledger> {
    if annotation.is_empty() || annotation == ledger.last_release {
        return None;
    }
    let mut next = ledger.clone();
    let held = std::mem::take(&mut next.held);
    for admitted in &mut next.admitted {
        admitted.released = true;
    }
    next.releases.push(Release {
        at: now,
        by: annotation.to_string(),
        manager: manager.to_string(),
        works: held.len() as u64,
        objects: held.iter().map(|h| h.objects).sum(),
    });
    let excess = next.releases.len().saturating_sub(MAX_RELEASES);
    next.releases.drain(..excess);
    next.admitted.extend(held.into_iter().map(|h| Admitted {
        uid: h.uid,
        work: h.work,
        owner: h.owner,
        objects: h.objects,
        at: now,
        released: true,
    }));
    next.last_release = annotation.to_string();
    Some(next)
}

/// The ledger without work `uid` among the held (the hub wants the work
/// after all); None when it was not held.
pub fn withdraw(ledger: &Ledger, uid: &str) -> Option<Ledger> {
    if !ledger.holds(uid) {
        return None;
    }
    let mut next = ledger.clone();
    next.held.retain(|h| h.uid != uid);
    Some(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: i64 = 1_000_000;

    fn limits(percent: u8, floor: u64) -> Limits {
        Limits {
            percent,
            floor,
            window: Duration::from_secs(600),
        }
    }

    fn ask(
        ledger: &mut Ledger,
        now: i64,
        managed: u64,
        limits: &Limits,
        uid: &str,
        objects: u64,
    ) -> Verdict {
        ask_at(
            ledger,
            now,
            &Managed::unowned(managed),
            limits,
            "",
            uid,
            objects,
        )
    }

    /// Asks about work `uid` of `owner` at `now` and keeps the ledger the
    /// decision records.
    fn ask_at(
        ledger: &mut Ledger,
        now: i64,
        managed: &Managed,
        limits: &Limits,
        owner: &str,
        uid: &str,
        objects: u64,
    ) -> Verdict {
        let decision = decide(
            ledger,
            now,
            managed,
            limits,
            Request {
                uid,
                work: uid,
                owner,
                objects,
            },
        );
        if let Some(next) = decision.ledger {
            *ledger = next;
        }
        decision.verdict
    }

    #[test]
    fn deletions_within_the_budget_go_ahead_and_the_next_is_held() {
        let limits = limits(25, 2);
        let mut ledger = Ledger::default();
        // 8 managed objects: a quarter is 2.
        assert_eq!(ask(&mut ledger, NOW, 8, &limits, "a", 1), Verdict::Admit);
        assert_eq!(ask(&mut ledger, NOW, 8, &limits, "b", 1), Verdict::Admit);
        let held = ask(&mut ledger, NOW, 8, &limits, "c", 1);
        assert!(
            matches!(
                held,
                Verdict::Hold {
                    works: 1,
                    objects: 1,
                    ..
                }
            ),
            "{held:?}"
        );
        assert!(ledger.holds("c"));
    }

    #[test]
    fn the_base_is_the_high_water_mark_not_what_is_left() {
        let limits = limits(50, 1);
        let mut ledger = Ledger::default();
        assert_eq!(ask(&mut ledger, NOW, 10, &limits, "a", 5), Verdict::Admit);
        // Five are gone: half of what is left would allow 2 more; the base
        // stays 10, and 5 are already spent.
        assert!(matches!(
            ask(&mut ledger, NOW + 1, 5, &limits, "b", 1),
            Verdict::Hold { .. }
        ));
    }

    #[test]
    fn once_something_is_held_smaller_deletions_wait_behind_it() {
        let limits = limits(25, 4);
        let mut ledger = Ledger::default();
        assert!(matches!(
            ask(&mut ledger, NOW, 8, &limits, "big", 10),
            Verdict::Hold { .. }
        ));
        assert!(matches!(
            ask(&mut ledger, NOW, 8, &limits, "small", 1),
            Verdict::Hold { works: 2, .. }
        ));
    }

    #[test]
    fn an_admitted_deletion_goes_on_and_is_counted_once() {
        let limits = limits(25, 2);
        let mut ledger = Ledger::default();
        assert_eq!(ask(&mut ledger, NOW, 8, &limits, "a", 2), Verdict::Admit);
        let before = ledger.clone();
        assert_eq!(
            ask(&mut ledger, NOW + 5, 8, &limits, "a", 2),
            Verdict::Admit
        );
        assert_eq!(ledger, before, "asking again records nothing");
    }

    #[test]
    fn orphaning_deletes_nothing_and_is_never_held() {
        let limits = limits(1, 0);
        let mut ledger = Ledger::default();
        assert!(matches!(
            ask(&mut ledger, NOW, 100, &limits, "big", 50),
            Verdict::Hold { .. }
        ));
        assert_eq!(
            ask(&mut ledger, NOW, 100, &limits, "orphaned", 0),
            Verdict::Admit
        );
    }

    #[test]
    fn the_window_passing_frees_the_budget_but_not_what_is_held() {
        let limits = limits(25, 1);
        let mut ledger = Ledger::default();
        assert_eq!(ask(&mut ledger, NOW, 4, &limits, "a", 1), Verdict::Admit);
        assert!(matches!(
            ask(&mut ledger, NOW, 4, &limits, "b", 1),
            Verdict::Hold { .. }
        ));
        let later = NOW + 601;
        assert!(
            matches!(
                ask(&mut ledger, later, 3, &limits, "b", 1),
                Verdict::Hold { .. }
            ),
            "a hold waits for a person, not for the clock"
        );
    }

    #[test]
    fn a_release_lets_every_held_deletion_go_and_records_who() {
        let limits = limits(25, 1);
        let mut ledger = Ledger::default();
        ask(&mut ledger, NOW, 4, &limits, "a", 1);
        ask(&mut ledger, NOW, 4, &limits, "b", 1);
        ask(&mut ledger, NOW, 4, &limits, "c", 2);
        let released = release(&ledger, NOW + 10, "alice: CRD restored", "kubectl-annotate")
            .expect("a new annotation releases");
        assert!(released.held.is_empty());
        assert!(released.admits("b") && released.admits("c"));
        let record = released.releases.last().expect("recorded");
        assert_eq!(
            (record.by.as_str(), record.works, record.objects),
            ("alice: CRD restored", 2, 3)
        );
        assert_eq!(
            release(&released, NOW + 20, "alice: CRD restored", "x"),
            None,
            "acted on once"
        );
        let mut ledger = released;
        assert_eq!(
            ask(&mut ledger, NOW + 30, 4, &limits, "b", 1),
            Verdict::Admit
        );
        assert_eq!(
            budget(&ledger, &limits).spent,
            0,
            "released deletions cost nothing"
        );
    }

    #[test]
    fn a_work_the_hub_wants_again_leaves_the_held_list() {
        let limits = limits(25, 0);
        let mut ledger = Ledger::default();
        ask(&mut ledger, NOW, 4, &limits, "a", 4);
        let next = withdraw(&ledger, "a").expect("held");
        assert!(next.held.is_empty());
        assert_eq!(withdraw(&next, "a"), None);
    }

    #[test]
    fn releases_are_bounded() {
        let mut ledger = Ledger::default();
        for i in 0..(MAX_RELEASES + 5) {
            ledger = release(&ledger, NOW, &format!("r{i}"), "m").expect("new value");
        }
        assert_eq!(ledger.releases.len(), MAX_RELEASES);
        assert_eq!(ledger.releases.last().map(|r| r.by.as_str()), Some("r14"));
    }

    /// Asks as `owner` with `managed` objects per owner.
    fn ask_as(
        ledger: &mut Ledger,
        managed: &[(&str, u64)],
        limits: &Limits,
        owner: &str,
        uid: &str,
        objects: u64,
    ) -> Verdict {
        let managed = Managed {
            by_owner: managed.iter().map(|(o, n)| (o.to_string(), *n)).collect(),
        };
        ask_at(ledger, NOW, &managed, limits, owner, uid, objects)
    }

    #[test]
    fn one_owners_mass_deletion_never_holds_another_owners_deletion() {
        // 12 objects, a quarter is 3: team-a is sure of 2, team-b of 1.
        let limits = limits(25, 2);
        let managed = [("team-a", 8), ("team-b", 4)];
        let mut ledger = Ledger::default();
        let verdicts: Vec<Verdict> = (0..8)
            .map(|i| {
                ask_as(
                    &mut ledger,
                    &managed,
                    &limits,
                    "team-a",
                    &format!("a{i}"),
                    1,
                )
            })
            .collect();
        let admitted = verdicts.iter().filter(|v| **v == Verdict::Admit).count();
        assert_eq!(admitted, 2, "team-a's own share, the rest kept for team-b");
        assert!(
            matches!(verdicts[2], Verdict::Hold { share: 2, .. }),
            "{:?}",
            verdicts[2]
        );
        assert_eq!(
            ask_as(&mut ledger, &managed, &limits, "team-b", "b0", 1),
            Verdict::Admit,
            "team-a's held deletions do not hold team-b's"
        );
        assert!(matches!(
            ask_as(&mut ledger, &managed, &limits, "team-b", "b1", 1),
            Verdict::Hold { .. }
        ));
    }

    #[test]
    fn on_a_cluster_managing_few_objects_the_floor_is_no_ones_share() {
        // 1 object managed, floor 20: team-a deleted its one work; team-b's
        // work, not counted yet (the managed count is a few seconds old),
        // still goes: the floor is first come, not team-a's reserve.
        let limits = limits(25, 20);
        let mut ledger = Ledger::default();
        assert_eq!(
            ask_as(&mut ledger, &[("team-a", 1)], &limits, "team-a", "a0", 1),
            Verdict::Admit
        );
        assert_eq!(
            ask_as(&mut ledger, &[("team-a", 1)], &limits, "team-b", "b0", 1),
            Verdict::Admit
        );
    }

    #[test]
    fn an_owner_alone_may_use_what_no_other_owner_is_sure_of() {
        let limits = limits(50, 0);
        // 10 objects, half is 5: team-a is sure of 4, team-b of 0 (a
        // share of 0.5 rounds down), so team-a may take the fifth.
        let managed = [("team-a", 9), ("team-b", 1)];
        let mut ledger = Ledger::default();
        for i in 0..5 {
            assert_eq!(
                ask_as(
                    &mut ledger,
                    &managed,
                    &limits,
                    "team-a",
                    &format!("a{i}"),
                    1
                ),
                Verdict::Admit
            );
        }
        assert!(matches!(
            ask_as(&mut ledger, &managed, &limits, "team-b", "b0", 1),
            Verdict::Hold { share: 0, .. }
        ));
    }

    #[test]
    fn the_owners_high_water_marks_are_bounded() {
        let limits = limits(25, 0);
        let managed = Managed {
            by_owner: (0..MAX_OWNERS + 10).map(|i| (format!("t{i}"), 1)).collect(),
        };
        let next = refresh(&Ledger::default(), NOW, &managed, &limits);
        assert_eq!(next.owner_high_water.len(), MAX_OWNERS);
    }

    proptest! {
        /// With several owners deleting in any order: all together never
        /// delete more than the budget, and an owner whose deletions fit
        /// its fair share is never held, whatever the others do.
        #[test]
        fn each_owner_keeps_its_share_and_all_keep_the_budget(
            percent in 1u8..=100,
            floor in 0u64..20,
            owners in proptest::collection::vec(1u64..200, 1..5),
            asks in proptest::collection::vec((0usize..5, 0usize..30, 1u64..10), 0..150),
        ) {
            let limits = limits(percent, floor);
            let names: Vec<String> = (0..owners.len()).map(|i| format!("team-{i}")).collect();
            let managed: Vec<(&str, u64)> =
                names.iter().map(String::as_str).zip(owners.iter().copied()).collect();
            let total: u64 = owners.iter().sum();
            let allowed = (total * u64::from(percent)).div_ceil(100).max(floor);
            let mut ledger = Ledger::default();
            let mut deleted = 0u64;
            let mut asked: BTreeMap<usize, u64> = BTreeMap::new();
            let mut seen = std::collections::HashSet::new();
            for (owner, work, objects) in asks {
                let owner = owner % owners.len();
                let uid = format!("{owner}-{work}");
                if !seen.insert(uid.clone()) {
                    continue;
                }
                let so_far = asked.entry(owner).or_default();
                *so_far += objects;
                let proportional = (total * u64::from(percent)).div_ceil(100);
                let share = u64::try_from(
                    u128::from(proportional) * u128::from(owners[owner]) / u128::from(total),
                ).expect("fits");
                let verdict = ask_as(&mut ledger, &managed, &limits, &names[owner], &uid, objects);
                if verdict == Verdict::Admit {
                    deleted += objects;
                } else {
                    prop_assert!(*so_far > share,
                        "{} held within its share: asked {so_far}, share {share}", names[owner]);
                }
            }
            prop_assert!(deleted <= allowed, "{deleted} deleted, {allowed} allowed");
        }
    }

    proptest! {
        /// However the hub orders a mass deletion, and however often each
        /// deletion is asked about, no more than the budget goes within one
        /// window without a release.
        #[test]
        fn nothing_beyond_the_budget_is_deleted_without_a_release(
            percent in 1u8..=100,
            floor in 0u64..20,
            managed in 0u64..500,
            asks in proptest::collection::vec((0usize..40, 0i64..600), 0..120),
        ) {
            let limits = limits(percent, floor);
            let mut ledger = Ledger::default();
            let mut deleted = 0u64;
            let mut seen = std::collections::HashSet::new();
            let mut asks = asks;
            asks.sort_by_key(|(_, at)| *at);
            for (work, at) in asks {
                let uid = format!("w{work}");
                // A work's object count does not change between asks.
                let objects = (work as u64 * 7) % 30;
                if ask(&mut ledger, NOW + at, managed, &limits, &uid, objects) == Verdict::Admit
                    && seen.insert(uid) {
                    deleted += objects;
                }
            }
            let allowed = (managed * u64::from(percent)).div_ceil(100).max(floor);
            prop_assert!(deleted <= allowed, "{deleted} deleted, {allowed} allowed");
        }
    }
}
