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

use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

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
        self.reserve_stretched(now, 1)
    }

    /// As [`ReviewPace::reserve`], with the next slot `stretch` times the
    /// usual interval after this one: while the replica turns new agents
    /// away (a connect storm), live sessions, whose tokens were reviewed
    /// already, leave most of the API server's reviews to the connects.
    pub fn reserve_stretched(&self, now: Instant, stretch: u32) -> Instant {
        let mut next_free = self
            .next_free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        take_slot(&mut next_free, now, None, self.every * stretch.max(1))
    }
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
    let slot = next_free.map_or(earliest, |free| free.max(earliest));
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
    fn stretched_slots_are_that_many_intervals_apart() {
        let pace = pace(100);
        let now = Instant::now();
        let first = pace.reserve_stretched(now, 10);
        let second = pace.reserve_stretched(now, 10);
        let third = pace.reserve(now);
        let fourth = pace.reserve(now);
        assert_eq!(first, now);
        assert_eq!(second - first, Duration::from_millis(100));
        assert_eq!(third - second, Duration::from_millis(100));
        assert_eq!(
            fourth - third,
            Duration::from_millis(10),
            "the usual pace after"
        );
    }
}
