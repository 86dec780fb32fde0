//! Spreads the periodic TokenReviews of a replica's live sessions so that
//! no more than the configured number start in any second.
//!
//! Each session sleeps its own review interval, stretched to the replica's
//! session count ([`super::identity::live_review_interval`]). That keeps the
//! average within the pace, but not a connect storm: sessions that
//! connected together come due together, and those that connected first
//! had their interval computed while the count was still small (10,000
//! clusters connected in 15 s were re-reviewed at 168 a second against a
//! pace of 100). So a session whose review comes due takes the next free
//! slot of the replica's pace and is reviewed then. Slots are handed out
//! in the order sessions ask, one `1 / pace` apart; nothing waits on a
//! shared lock or wakes for another session's slot, and an idle replica
//! has no timer of its own.
//!
//! While the replica turns connects away as busy (a connect storm), the
//! live reviews yield: slots ten times further apart, and only within a
//! short horizon; a session that finds the horizon full reserves nothing
//! and asks again later, for at most [`MAX_STORM_DEFERRAL`]. Reserving
//! the stretched slots however far ahead (as first built) left a queue
//! that kept live reviews at a tenth of the pace for up to sessions × 0.1 s
//! after the storm, about 17 minutes at 10,000 sessions.

use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How many times further apart live reviews' slots are while the replica
/// turns connects away (a tenth of the pace): in a connect storm the API
/// server's TokenReviews are the bottleneck, and at 30,000 clusters live
/// re-reviews at the full pace (300/s over three replicas) left 35 connects
/// a second through. Their tokens were reviewed already.
pub const STORM_STRETCH: u32 = 10;

/// How far ahead a live review may be slotted during a connect storm; a
/// session that would wait longer asks again this much later instead.
pub const STORM_HORIZON: Duration = Duration::from_secs(10);

/// The longest a connect storm defers one live session's due review; past
/// it the review takes the next slot at the usual pace, storm or not. A
/// revoked token's session so ends at most this much later than it would
/// without a storm.
pub const MAX_STORM_DEFERRAL: Duration = Duration::from_secs(300);

/// The replica-wide schedule of live-session reviews.
#[derive(Debug)]
pub struct ReviewPace {
    /// Time between two slots.
    every: Duration,
    /// The earliest time the next slot may be at.
    next_free: Mutex<Option<Instant>>,
}

impl ReviewPace {
    /// A pace of `per_second` reviews a second.
    pub fn per_second(per_second: NonZeroU32) -> Self {
        Self {
            every: Duration::from_secs(1) / per_second.get(),
            next_free: Mutex::new(None),
        }
    }

    /// Reserves the next slot at or after `now` and returns when it is: the
    /// review may start then. A slot reserved by a session that ends before
    /// it is simply unused (the pace only gets slower). Never fails: a
    /// poisoned lock (a panic while holding it, which the code inside
    /// cannot do) is taken over as it is.
    pub fn reserve(&self, now: Instant) -> Instant {
        take_slot(&mut self.lock(), now, None, self.every)
    }

    /// Where a live session whose review has been due since `due_since`
    /// stands at `now`, while the replica turns connects away (`storm`) or
    /// not. Outside a storm, and for a review a storm has deferred for
    /// [`MAX_STORM_DEFERRAL`] already, the next slot at the usual pace. In a
    /// storm, the API server's reviews go to the connects first: a slot
    /// [`STORM_STRETCH`] intervals after the one before, if that is within
    /// [`STORM_HORIZON`]; otherwise nothing is reserved and the session asks
    /// again later. So the queue a storm leaves behind is at most the
    /// horizon long, and once the storm passes the deferred reviews run at
    /// the usual pace. Never fails (see [`ReviewPace::reserve`]).
    pub fn slot_for(&self, now: Instant, due_since: Instant, storm: bool) -> LiveSlot {
        let deferred_for = now.saturating_duration_since(due_since);
        if !storm || deferred_for >= MAX_STORM_DEFERRAL {
            return LiveSlot::At(self.reserve(now));
        }
        let mut next_free = self.lock();
        if first_free(*next_free, now) <= now + STORM_HORIZON {
            return LiveSlot::At(take_slot(
                &mut next_free,
                now,
                None,
                self.every * STORM_STRETCH,
            ));
        }
        LiveSlot::AskAgain((now + STORM_HORIZON).min(due_since + MAX_STORM_DEFERRAL))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.next_free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Where a due live review stands (see [`ReviewPace::slot_for`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveSlot {
    /// Reserved: the review may start then.
    At(Instant),
    /// Deferred by a connect storm, nothing reserved: ask again then.
    AskAgain(Instant),
}

/// The first free slot at or after `earliest` of a schedule whose next free
/// slot is `next_free`.
fn first_free(next_free: Option<Instant>, earliest: Instant) -> Instant {
    next_free.map_or(earliest, |free| free.max(earliest))
}

/// Takes the next slot of a schedule whose next free slot is `next_free`:
/// the later of that and `earliest`, no later than `latest` if given, and
/// moves the next free slot `step` past it. Shared by the live-review pace
/// and the connect-return schedule (`review_admission`).
pub(super) fn take_slot(
    next_free: &mut Option<Instant>,
    earliest: Instant,
    latest: Option<Instant>,
    step: Duration,
) -> Instant {
    let slot = first_free(*next_free, earliest);
    let slot = latest.map_or(slot, |latest| slot.min(latest));
    *next_free = Some(slot + step);
    slot
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pace(per_second: u32) -> ReviewPace {
        ReviewPace::per_second(NonZeroU32::new(per_second).expect("non-zero"))
    }

    #[test]
    fn sessions_due_together_get_slots_one_pace_apart() {
        let pace = pace(100);
        let now = Instant::now();
        let slots: Vec<Instant> = (0..1_000).map(|_| pace.reserve(now)).collect();
        assert_eq!(slots[0], now, "the first one due is reviewed at once");
        for pair in slots.windows(2) {
            assert_eq!(pair[1] - pair[0], Duration::from_millis(10));
        }
        assert_eq!(slots[999] - now, Duration::from_millis(9_990));
    }

    #[test]
    fn in_any_second_no_more_slots_start_than_the_pace() {
        let pace = pace(100);
        let start = Instant::now();
        // Bursts and quiet stretches, as sessions come due.
        let mut slots = Vec::new();
        for (at_ms, how_many) in [(0u64, 400usize), (500, 50), (9_000, 3), (20_000, 250)] {
            let at = start + Duration::from_millis(at_ms);
            slots.extend((0..how_many).map(|_| pace.reserve(at)));
        }
        for (i, &first) in slots.iter().enumerate() {
            let within = slots[i..]
                .iter()
                .filter(|&&s| s >= first && s < first + Duration::from_secs(1))
                .count();
            assert!(within <= 100, "{within} slots in the second from slot {i}");
        }
    }

    #[test]
    fn after_a_quiet_stretch_the_next_session_is_not_held_back() {
        let pace = pace(10);
        let now = Instant::now();
        pace.reserve(now);
        pace.reserve(now);
        let later = now + Duration::from_secs(60);
        assert_eq!(pace.reserve(later), later);
    }

    #[test]
    fn in_a_storm_slots_are_stretched_within_the_horizon_and_the_rest_ask_again() {
        let pace = pace(100);
        let now = Instant::now();
        let slots: Vec<LiveSlot> = (0..150).map(|_| pace.slot_for(now, now, true)).collect();
        // 0, 0.1, ..., 10.0 s: 101 slots within the horizon.
        for (i, slot) in slots.iter().take(101).enumerate() {
            let after = Duration::from_millis(100) * u32::try_from(i).expect("small");
            assert_eq!(*slot, LiveSlot::At(now + after), "slot {i}");
        }
        for slot in &slots[101..] {
            assert_eq!(*slot, LiveSlot::AskAgain(now + STORM_HORIZON));
        }
    }

    #[test]
    fn after_a_storm_the_usual_pace_resumes_behind_at_most_the_horizon() {
        let pace = pace(100);
        let now = Instant::now();
        for _ in 0..10_000 {
            pace.slot_for(now, now, true);
        }
        // The storm passes: the 10,000 sessions that asked all come back
        // and are slotted at the usual pace behind the storm's short queue.
        let later = now + Duration::from_secs(1);
        let first = pace.reserve(later);
        assert!(
            first <= now + STORM_HORIZON + Duration::from_millis(100),
            "{:?} after the storm began",
            first - now
        );
        let last = (1..10_000)
            .map(|_| pace.reserve(later))
            .last()
            .expect("some");
        assert_eq!(last - first, Duration::from_millis(10) * 9_999);
    }

    #[test]
    fn a_storm_defers_a_review_for_at_most_the_bound() {
        let pace = pace(100);
        let now = Instant::now() + MAX_STORM_DEFERRAL;
        for _ in 0..200 {
            pace.slot_for(now, now, true);
        }
        let due_since = now - MAX_STORM_DEFERRAL + Duration::from_secs(4);
        assert_eq!(
            pace.slot_for(now, due_since, true),
            LiveSlot::AskAgain(due_since + MAX_STORM_DEFERRAL),
            "asks again no later than the bound"
        );
        let at_bound = due_since + MAX_STORM_DEFERRAL;
        let LiveSlot::At(slot) = pace.slot_for(at_bound, due_since, true) else {
            panic!("a review deferred for the bound is slotted");
        };
        let LiveSlot::At(next) = pace.slot_for(at_bound, at_bound - MAX_STORM_DEFERRAL, true)
        else {
            panic!("slotted");
        };
        assert_eq!(next - slot, Duration::from_millis(10), "at the usual pace");
    }

    #[test]
    fn outside_a_storm_a_due_review_is_always_slotted_at_the_usual_pace() {
        let pace = pace(100);
        let now = Instant::now();
        let slots: Vec<LiveSlot> = (0..3).map(|_| pace.slot_for(now, now, false)).collect();
        assert_eq!(
            slots,
            [0, 10, 20].map(|ms| LiveSlot::At(now + Duration::from_millis(ms)))
        );
    }
}
