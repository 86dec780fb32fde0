//! The write-loop breaker: defence in depth against any fight over one spoke
//! object (two works, a work and a spoke controller, two agents). The agent
//! may rewrite an object on its own initiative (drift correction: a write by
//! a work at a generation it already wrote the object at) only
//! [`MAX_REWRITES`] times within [`WINDOW`]; past that it holds off writing
//! that object with an exponential backoff, and the manifest reports who
//! else writes it. A new generation from the hub is never held.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBuilder};
use serde_json::Value;
use tokio::sync::Mutex;

use crate::ownership::ObjectKey;
use ferry_semantics::contract::AGENT_FIELD_MANAGER;

/// Rewrites of one object allowed within [`WINDOW`] before the breaker opens.
pub const MAX_REWRITES: usize = 3;
/// The window rewrites are counted in.
pub const WINDOW: Duration = Duration::from_secs(30);
/// The first hold; each further trip doubles it up to [`MAX_HOLD`].
const FIRST_HOLD: Duration = Duration::from_secs(2);
/// The longest hold.
const MAX_HOLD: Duration = Duration::from_secs(300);
/// Objects tracked at most; the oldest-touched entries go first. Bounded by
/// the works' manifests anyway; this only guards against growth over time.
const MAX_TRACKED: usize = 10_000;

/// Why a write is held back.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "ferry rewrote {what} {rewrites} times within {window}s because another writer keeps changing it ({writer}); not writing it for {hold}s"
)]
pub struct WriteLoop {
    /// The object.
    pub what: String,
    /// Rewrites counted before the breaker opened.
    pub rewrites: usize,
    /// The window, seconds.
    pub window: u64,
    /// The other writer(s) from the object's managedFields.
    pub writer: String,
    /// Seconds left in the hold.
    pub hold: u64,
}

#[derive(Debug, Default)]
struct Track {
    /// Per work UID: the generation it last wrote the object at.
    generations: HashMap<String, i64>,
    rewrites: VecDeque<Instant>,
    strikes: u32,
    held_until: Option<Instant>,
    touched: Option<Instant>,
    /// Who else had written the object when ferry last rewrote it: a
    /// rewrite takes the fields back, so the other writer's managedFields
    /// entry may be gone by the time the hold is reported.
    writers: Option<String>,
}

/// A hold in force on one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// Time left.
    pub left: Duration,
    /// The other writers seen at the last rewrite, if any were recorded.
    pub writers: Option<String>,
}

/// Per-object write counts and holds.
#[derive(Debug, Default)]
pub struct WriteBreaker {
    tracks: Mutex<HashMap<ObjectKey, Track>>,
}

impl WriteBreaker {
    /// The hold on writes to `key` by work `uid` at `generation` at `now`,
    /// if one is in force. A generation the work has not written the object
    /// at yet (the hub changed the work) is never held.
    pub async fn held(
        &self,
        key: &ObjectKey,
        uid: &str,
        generation: i64,
        now: Instant,
    ) -> Option<Hold> {
        let tracks = self.tracks.lock().await;
        let track = tracks.get(key)?;
        if track.generations.get(uid) != Some(&generation) {
            return None;
        }
        let until = track.held_until?;
        (until > now).then(|| Hold {
            left: until - now,
            writers: track.writers.clone(),
        })
    }

    /// Counts a write of `key` by work `uid` at `generation`, over an object
    /// `writers` (see [`other_writers`]) had written; returns the hold it
    /// opens, if this rewrite was one too many.
    pub async fn wrote(
        &self,
        key: &ObjectKey,
        uid: &str,
        generation: i64,
        writers: Option<String>,
        now: Instant,
    ) -> Option<Duration> {
        let mut tracks = self.tracks.lock().await;
        if tracks.len() >= MAX_TRACKED && !tracks.contains_key(key) {
            let oldest = tracks
                .iter()
                .min_by_key(|(_, t)| t.touched)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                tracks.remove(&oldest);
            }
        }
        let track = tracks.entry(key.clone()).or_default();
        track.touched = Some(now);
        let rewrite = track.generations.insert(uid.to_string(), generation) == Some(generation);
        if !rewrite {
            return None;
        }
        if writers.is_some() {
            track.writers = writers;
        }
        // Quiet for a window after the last hold: the fight is over.
        if let Some(until) = track.held_until
            && now.saturating_duration_since(until) > WINDOW
        {
            track.strikes = 0;
            track.held_until = None;
        }
        while track
            .rewrites
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > WINDOW)
        {
            track.rewrites.pop_front();
        }
        track.rewrites.push_back(now);
        // After a first trip, one rewrite inside the window trips again.
        let limit = if track.strikes == 0 { MAX_REWRITES } else { 1 };
        if track.rewrites.len() < limit {
            return None;
        }
        track.strikes += 1;
        track.rewrites.clear();
        let hold = hold_for(track.strikes);
        track.held_until = Some(now + hold);
        Some(hold)
    }

    /// Drops what is known about the writes of work `uid` (it was deleted).
    pub async fn forget(&self, uid: &str) {
        let mut tracks = self.tracks.lock().await;
        tracks.retain(|_, t| {
            t.generations.remove(uid);
            !t.generations.is_empty()
        });
    }
}

/// The hold after `strikes` trips: exponential, from [`FIRST_HOLD`] to [`MAX_HOLD`].
fn hold_for(strikes: u32) -> Duration {
    ExponentialBuilder::default()
        .with_min_delay(FIRST_HOLD)
        .with_max_delay(MAX_HOLD)
        .without_max_times()
        .build()
        .nth(strikes.saturating_sub(1) as usize)
        .unwrap_or(MAX_HOLD)
}

/// The field managers other than ferry's that wrote `live`, most recent
/// first, as `name (operation at time)`; `ours` is the manager this work
/// writes with. None when there are none.
pub fn other_writers(live: &Value, ours: &str) -> Option<String> {
    let mut entries: Vec<(&str, &str, &str)> = live["metadata"]["managedFields"]
        .as_array()
        .map(|fields| {
            fields
                .iter()
                .filter_map(|f| {
                    let manager = f["manager"].as_str()?;
                    (manager != ours && manager != AGENT_FIELD_MANAGER).then_some((
                        manager,
                        f["operation"].as_str().unwrap_or(""),
                        f["time"].as_str().unwrap_or(""),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    // RFC 3339 times in one format sort as text.
    entries.sort_by(|a, b| b.2.cmp(a.2));
    if entries.is_empty() {
        return None;
    }
    let text = entries
        .iter()
        .map(|(m, op, t)| format!("field manager `{m}` ({op} at {t})"))
        .collect::<Vec<_>>()
        .join(", ");
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key() -> ObjectKey {
        ObjectKey::new("", "ConfigMap", "d", "c")
    }

    #[tokio::test]
    async fn rewrites_past_the_limit_open_a_growing_hold() {
        let breaker = WriteBreaker::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_millis(s);
        assert_eq!(breaker.wrote(&key(), "w", 1, None, at(0)).await, None);
        assert_eq!(breaker.wrote(&key(), "w", 1, None, at(10)).await, None);
        assert_eq!(breaker.wrote(&key(), "w", 1, None, at(20)).await, None);
        let first = breaker.wrote(&key(), "w", 1, None, at(30)).await;
        assert_eq!(first, Some(FIRST_HOLD));
        assert!(breaker.held(&key(), "w", 1, at(40)).await.is_some());
        let after = at(30) + FIRST_HOLD + Duration::from_millis(1);
        assert_eq!(breaker.held(&key(), "w", 1, after).await, None);
        let second = breaker.wrote(&key(), "w", 1, None, after).await;
        assert_eq!(second, Some(FIRST_HOLD * 2));
    }

    #[tokio::test]
    async fn a_hold_never_stops_a_new_generation() {
        let breaker = WriteBreaker::default();
        let now = Instant::now();
        for _ in 0..MAX_REWRITES + 1 {
            breaker.wrote(&key(), "w", 1, None, now).await;
        }
        assert!(breaker.held(&key(), "w", 1, now).await.is_some());
        assert_eq!(breaker.held(&key(), "w", 2, now).await, None);
    }

    #[tokio::test]
    async fn a_new_generation_is_not_a_rewrite() {
        let breaker = WriteBreaker::default();
        let now = Instant::now();
        for generation in 1..20 {
            assert_eq!(
                breaker.wrote(&key(), "w", generation, None, now).await,
                None
            );
        }
    }

    #[tokio::test]
    async fn rewrites_spread_beyond_the_window_never_trip() {
        let breaker = WriteBreaker::default();
        let t0 = Instant::now();
        for i in 0..10u32 {
            let at = t0 + (WINDOW + Duration::from_secs(1)) * i;
            assert_eq!(breaker.wrote(&key(), "w", 1, None, at).await, None);
        }
    }

    #[test]
    fn other_writers_names_the_latest_foreign_manager_first() {
        let live = json!({"metadata": {"managedFields": [
            {"manager": "ferry-agent", "operation": "Update", "time": "2026-01-01T00:00:03Z"},
            {"manager": "old", "operation": "Update", "time": "2026-01-01T00:00:01Z"},
            {"manager": "fighter", "operation": "Apply", "time": "2026-01-01T00:00:02Z"}
        ]}});
        let text = other_writers(&live, "ferry-agent").expect("others");
        assert!(text.starts_with("field manager `fighter`"), "{text}");
        assert!(text.contains("`old`"));
        assert!(!text.contains("ferry-agent"));
    }
}
