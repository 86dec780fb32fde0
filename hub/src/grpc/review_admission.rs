//! How many connect reviews (TokenReviews of tokens the hub does not know
//! yet) a replica has in flight at once. In a connect storm without a bound,
//! every connect queues its review behind the hub's API client limit, waits
//! out the review timeout there, and is refused: measured at 30,000 clusters
//! on three replicas, reviews took 9.9 s on average and about 30 connects a
//! second got through, while the API server still answered the abandoned
//! requests. With the bound a connect waits a moment for a slot and is
//! otherwise refused at once as busy (the agent backs off and redials), so
//! the reviews that do run are answered in time. Each refused connect is
//! also told when to come back, one slot's interval after the connect
//! refused before it: the refused agents then return about as fast as the
//! replica reviews, instead of redialling on their own backoff, where their
//! TLS handshakes (measured at 30,000 clusters: 341,540 refused redials)
//! took the CPU the API server needed to answer the reviews.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::grpc::review_pace::take_slot;
use ferry_proto::PUSHBACK_SPREAD;

/// The longest a refused connect is told to wait before it dials again.
/// Past it, refused connects are told the same time and the agents' own
/// jitter spreads them; a schedule hours long would outlive the storm it
/// was computed for.
pub const MAX_PUSHBACK: Duration = Duration::from_secs(60);

/// How long after its last busy refusal a replica counts as turning
/// connects away at least (see [`ReviewAdmission::turning_away`]).
pub const STORM_MEMORY: Duration = Duration::from_secs(10);

/// Connect reviews in flight at once, how long a connect waits for one, and
/// when each refused connect is told to come back.
#[derive(Clone, Debug)]
pub struct ReviewAdmission {
    slots: Arc<Semaphore>,
    in_flight: u32,
    wait: Duration,
    returns: Arc<Mutex<Returns>>,
}

/// A slot for one review, held until dropped; how long it was held feeds
/// the replica's estimate of a review's time.
#[derive(Debug)]
pub struct Admitted {
    _slot: OwnedSemaphorePermit,
    since: Instant,
    returns: Arc<Mutex<Returns>>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        lock(&self.returns).record(self.since.elapsed());
    }
}

impl ReviewAdmission {
    /// At most `in_flight` reviews at once; a connect waits up to `wait` for
    /// a slot.
    pub fn new(in_flight: usize, wait: Duration) -> Self {
        let in_flight = u32::try_from(in_flight.max(1)).unwrap_or(u32::MAX);
        Self {
            slots: Arc::new(Semaphore::new(in_flight as usize)),
            in_flight,
            wait,
            // Before any review has ended, a refusal itself says a review
            // takes at least the wait: no slot freed during it.
            returns: Arc::new(Mutex::new(Returns::new(wait))),
        }
    }

    /// A slot for one review, or, when none freed up within the wait, how
    /// long the refused connect should wait before it dials again (the
    /// caller refuses it as busy and passes that on). Never fails
    /// otherwise: the semaphore is never closed.
    pub async fn admit(&self) -> Result<Admitted, Duration> {
        match tokio::time::timeout(self.wait, self.slots.clone().acquire_owned()).await {
            Ok(Ok(slot)) => Ok(Admitted {
                _slot: slot,
                since: Instant::now(),
                returns: self.returns.clone(),
            }),
            Ok(Err(_)) | Err(_) => Err(lock(&self.returns).reserve(Instant::now(), self.in_flight)),
        }
    }

    /// Whether the replica is in a connect storm at `now`, one the API
    /// server's reviews should go to first: it turned a connect away as
    /// busy within the last [`STORM_MEMORY`], or agents it turned away are
    /// still due back (within their pushback, stretched by
    /// [`PUSHBACK_SPREAD`]).
    pub fn turning_away(&self, now: Instant) -> bool {
        lock(&self.returns).turning_away(now)
    }
}

fn lock(returns: &Mutex<Returns>) -> std::sync::MutexGuard<'_, Returns> {
    // A poisoned lock (a panic while holding it, which the code inside
    // cannot do) is taken over as it is.
    returns.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The replica's schedule of returns: refused connects are told to come
/// back one after another, as far apart as a review slot frees up on
/// average (a review's time over the slots), so they arrive about as fast
/// as the replica can review them.
#[derive(Debug)]
struct Returns {
    /// A review's time, a moving average (each new review weighs 1/8).
    review_time: Duration,
    /// The earliest time the next refused connect may be told to return.
    next_free: Option<Instant>,
    /// Until when the replica is in a connect storm: its last refusal plus
    /// [`STORM_MEMORY`], or the latest return it expects, if later.
    storm_until: Option<Instant>,
}

impl Returns {
    fn new(review_time: Duration) -> Self {
        Self {
            review_time,
            next_free: None,
            storm_until: None,
        }
    }

    /// Whether the storm lasts at `now` (see [`ReviewAdmission::turning_away`]).
    fn turning_away(&self, now: Instant) -> bool {
        self.storm_until.is_some_and(|until| now < until)
    }

    /// Counts one review that held its slot for `took`.
    fn record(&mut self, took: Duration) {
        self.review_time = (self.review_time * 7 + took) / 8;
    }

    /// The wait for a connect refused at `now`: the next free return, at
    /// least one slot's interval away and at most [`MAX_PUSHBACK`].
    fn reserve(&mut self, now: Instant, in_flight: u32) -> Duration {
        let every = self.review_time / in_flight.max(1);
        let slot = take_slot(
            &mut self.next_free,
            now + every,
            Some(now + MAX_PUSHBACK),
            every,
        );
        let pushback = slot - now;
        // Refused agents come back in waves as long as the storm lasts (at
        // 30,000 clusters, every ~60 s); counting only the refusals, the
        // replica thought the storm over between waves and its live
        // re-reviews took the API server back just before the next.
        let back_by = now + pushback.mul_f64(1.0 + PUSHBACK_SPREAD);
        let until = back_by.max(now + STORM_MEMORY);
        self.storm_until = Some(self.storm_until.map_or(until, |at| at.max(until)));
        pushback
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connect_finding_every_slot_taken_for_the_whole_wait_is_turned_away() {
        let admission = ReviewAdmission::new(2, Duration::from_secs(1));
        let first = admission.admit().await.expect("a free slot");
        let _second = admission.admit().await.expect("a free slot");
        let started = Instant::now();
        assert!(admission.admit().await.is_err(), "no slot within the wait");
        assert_eq!(started.elapsed(), Duration::from_secs(1));
        drop(first);
        assert!(admission.admit().await.is_ok(), "a freed slot is taken");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slot_freed_during_the_wait_goes_to_the_waiting_connect() {
        let admission = ReviewAdmission::new(1, Duration::from_secs(1));
        let held = admission.admit().await.expect("a free slot");
        let waiting = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit().await.is_ok() }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(held);
        assert!(
            waiting.await.expect("joins"),
            "admitted once the slot freed"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn refused_connects_are_told_to_return_one_slot_interval_apart() {
        // Two slots, no review ended yet: a review is taken to last the
        // wait (1 s), so a slot frees every 0.5 s.
        let admission = ReviewAdmission::new(2, Duration::from_secs(1));
        let _held = (admission.admit().await, admission.admit().await);
        let (a, b, c) = tokio::join!(admission.admit(), admission.admit(), admission.admit());
        let mut pushbacks = [a, b, c].map(|r| r.expect_err("refused"));
        pushbacks.sort();
        assert_eq!(
            pushbacks,
            [
                Duration::from_millis(500),
                Duration::from_millis(1000),
                Duration::from_millis(1500)
            ]
        );
        // Later, the schedule has moved on with the clock.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let next = admission.admit().await.expect_err("refused");
        assert_eq!(next, Duration::from_millis(500));
    }

    #[test]
    fn returns_are_spaced_by_the_measured_review_time_over_the_slots() {
        let now = Instant::now();
        let mut returns = Returns::new(Duration::from_secs(1));
        for _ in 0..64 {
            returns.record(Duration::from_millis(100));
        }
        let every = returns.review_time / 10;
        assert!(
            every < Duration::from_millis(11),
            "the average followed the reviews: {every:?}"
        );
        let first = returns.reserve(now, 10);
        let second = returns.reserve(now, 10);
        assert_eq!(first, every, "one interval away at the earliest");
        assert_eq!(second, every * 2, "the next one an interval later");
    }

    #[test]
    fn a_return_is_never_further_away_than_the_bound() {
        let now = Instant::now();
        let mut returns = Returns::new(Duration::from_secs(10));
        let pushbacks: Vec<Duration> = (0..100).map(|_| returns.reserve(now, 1)).collect();
        assert_eq!(pushbacks[0], Duration::from_secs(10));
        assert!(pushbacks.iter().all(|p| *p <= MAX_PUSHBACK));
        assert_eq!(pushbacks[99], MAX_PUSHBACK, "the queue is capped, not lost");
        // Time passing frees the schedule: an hour later the next refusal
        // waits one interval again.
        let later = now + Duration::from_secs(3600);
        assert_eq!(returns.reserve(later, 1), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_replica_counts_as_turning_connects_away_for_a_while_after_a_refusal() {
        let admission = ReviewAdmission::new(1, Duration::from_secs(1));
        let _held = admission.admit().await.expect("a free slot");
        assert!(
            !admission.turning_away(Instant::now()),
            "nothing refused yet"
        );
        admission.admit().await.expect_err("refused");
        assert!(admission.turning_away(Instant::now()));
        tokio::time::sleep(STORM_MEMORY).await;
        assert!(
            !admission.turning_away(Instant::now()),
            "forgotten once no connect was refused for a while"
        );
    }

    #[test]
    fn the_storm_lasts_until_the_agents_turned_away_are_due_back() {
        let now = Instant::now();
        // A review takes 40 s and there is one slot: the refused connect is
        // told to come back in 40 s, and may take up to 50 s.
        let mut returns = Returns::new(Duration::from_secs(40));
        assert_eq!(returns.reserve(now, 1), Duration::from_secs(40));
        let due_back = now + Duration::from_secs(50);
        assert!(returns.turning_away(now + STORM_MEMORY), "past the memory");
        assert!(returns.turning_away(due_back - Duration::from_millis(1)));
        assert!(
            !returns.turning_away(due_back),
            "every refused agent is due back"
        );
        // A later refusal moves the storm's end on with its own return
        // (at 45 s, told 40 s: due back by 95 s).
        assert_eq!(
            returns.reserve(now + Duration::from_secs(45), 1),
            Duration::from_secs(40),
            "the schedule had moved on by then"
        );
        assert!(returns.turning_away(now + Duration::from_secs(95) - Duration::from_millis(1)));
        assert!(!returns.turning_away(now + Duration::from_secs(95)));
    }
}
