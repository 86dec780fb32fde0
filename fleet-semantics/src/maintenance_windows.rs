//! Maintenance windows of a cluster: when a rollout may write a new
//! revision to it. A window is a cron schedule (five fields, minute
//! granular), a duration and an IANA time zone; it is open from each
//! occurrence of its schedule (inclusive) for its duration (exclusive end).
//! A cluster with several windows is open while any of them is. Pure: the
//! hub parses the platform team's annotation and asks [`state_at`] a
//! given instant.
//!
//! The annotation is written by whoever may edit ManagedClusters, still it
//! is bounded: its size, the number of windows, each schedule's length,
//! each duration (one minute to seven days) and how far ahead an opening
//! is searched for ([`HORIZON`]), so a schedule that never fires ("30 of
//! February") costs a bounded search and reads as "no opening ahead".

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde::Deserialize;

/// The largest annotation read, in bytes.
pub const MAX_ANNOTATION_BYTES: usize = 4096;
/// The most windows one cluster may have.
pub const MAX_WINDOWS: usize = 16;
/// The longest schedule read, in bytes.
pub const MAX_SCHEDULE_BYTES: usize = 128;
/// The shortest window.
pub const MIN_DURATION: SignedDuration = SignedDuration::from_secs(60);
/// The longest window: seven days.
pub const MAX_DURATION: SignedDuration = SignedDuration::from_hours(7 * 24);
/// How far ahead an opening is searched for: a little over a year, so a
/// yearly window is always found.
pub const HORIZON: SignedDuration = SignedDuration::from_hours(400 * 24);
/// How many chained or overlapping occurrences are followed to find when
/// an open cluster closes; past that the close reported is earlier than
/// the true one (the hub looks again then, which is safe).
const MAX_CHAIN: usize = 64;

/// Why a cluster's windows annotation cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowsError {
    /// The annotation is larger than [`MAX_ANNOTATION_BYTES`].
    #[error(
        "the maintenance windows annotation is {bytes} bytes, more than {MAX_ANNOTATION_BYTES}"
    )]
    TooLarge {
        /// Its size.
        bytes: usize,
    },
    /// The annotation is not a JSON list of windows.
    #[error(
        "the maintenance windows annotation is not a JSON list of {{schedule, duration, timeZone}}: {0}"
    )]
    NotJson(String),
    /// More than [`MAX_WINDOWS`] windows.
    #[error("{count} maintenance windows, more than {MAX_WINDOWS}")]
    TooMany {
        /// How many were given.
        count: usize,
    },
    /// A schedule is not a five-field cron expression.
    #[error("window {index}: schedule {schedule:?} is not a five-field cron expression: {reason}")]
    Schedule {
        /// The window's index in the list.
        index: usize,
        /// The schedule (cut to [`MAX_SCHEDULE_BYTES`]).
        schedule: String,
        /// What the cron parser said.
        reason: String,
    },
    /// A duration is not a duration (such as `4h` or `1h30m`).
    #[error(
        "window {index}: duration {duration:?} is not a duration such as 4h or 1h30m: {reason}"
    )]
    Duration {
        /// The window's index in the list.
        index: usize,
        /// The duration as written (cut).
        duration: String,
        /// What the parser said.
        reason: String,
    },
    /// A duration is outside one minute to seven days.
    #[error("window {index}: duration {duration:?} is not between 1m and 168h")]
    DurationOutOfRange {
        /// The window's index in the list.
        index: usize,
        /// The duration as written (cut).
        duration: String,
    },
    /// A time zone is not an IANA time zone name.
    #[error("window {index}: time zone {zone:?} is not an IANA time zone name: {reason}")]
    TimeZone {
        /// The window's index in the list.
        index: usize,
        /// The zone as written (cut).
        zone: String,
        /// What the zone database said.
        reason: String,
    },
}

/// One window as written in the annotation.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WindowSpec {
    schedule: String,
    duration: String,
    #[serde(default)]
    time_zone: Option<String>,
}

/// One parsed window.
#[derive(Debug, Clone)]
struct Window {
    cron: Cron,
    duration: SignedDuration,
    zone: TimeZone,
}

/// A cluster's parsed maintenance windows. Empty: always open.
#[derive(Debug, Clone, Default)]
pub struct Windows(Vec<Window>);

impl Windows {
    /// Whether there are no windows (the cluster is always open). Never
    /// fails.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Whether a cluster's windows are open at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowState {
    /// Open; `closes_at` is when it closes (None: it has no windows and is
    /// always open).
    Open {
        /// When the open window (with those chained to it) closes.
        closes_at: Option<Timestamp>,
    },
    /// Closed; `opens_at` is the next opening, None when no window opens
    /// within [`HORIZON`].
    Closed {
        /// When the next window opens.
        opens_at: Option<Timestamp>,
    },
}

/// `text` cut to at most [`MAX_SCHEDULE_BYTES`], for an error message.
fn cut(text: &str) -> String {
    let mut end = text.len().min(MAX_SCHEDULE_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// Parses the windows annotation `text`: a JSON list of
/// `{"schedule": "0 2 * * SAT", "duration": "4h", "timeZone": "Europe/Berlin"}`
/// (time zone UTC when absent). Fails with the first thing wrong, bounded
/// in size and count before anything is parsed further.
pub fn parse_windows(text: &str) -> Result<Windows, WindowsError> {
    if text.len() > MAX_ANNOTATION_BYTES {
        return Err(WindowsError::TooLarge { bytes: text.len() });
    }
    let specs: Vec<WindowSpec> =
        serde_json::from_str(text).map_err(|e| WindowsError::NotJson(e.to_string()))?;
    if specs.len() > MAX_WINDOWS {
        return Err(WindowsError::TooMany { count: specs.len() });
    }
    // Minute granular and no year field: a per-second schedule would
    // make the chain of occurrences long, a year field one that never
    // fires again.
    let parser = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build();
    specs
        .into_iter()
        .enumerate()
        .map(|(index, spec)| {
            let schedule_error = |reason: String| WindowsError::Schedule {
                index,
                schedule: cut(&spec.schedule),
                reason,
            };
            if spec.schedule.len() > MAX_SCHEDULE_BYTES {
                return Err(schedule_error(format!(
                    "longer than {MAX_SCHEDULE_BYTES} bytes"
                )));
            }
            let cron = parser
                .parse(&spec.schedule)
                .map_err(|e| schedule_error(e.to_string()))?;
            let duration: SignedDuration =
                spec.duration
                    .parse()
                    .map_err(|e: jiff::Error| WindowsError::Duration {
                        index,
                        duration: cut(&spec.duration),
                        reason: e.to_string(),
                    })?;
            if !(MIN_DURATION..=MAX_DURATION).contains(&duration) {
                return Err(WindowsError::DurationOutOfRange {
                    index,
                    duration: cut(&spec.duration),
                });
            }
            let zone = match spec.time_zone.as_deref() {
                None => TimeZone::UTC,
                Some(name) => TimeZone::get(name).map_err(|e| WindowsError::TimeZone {
                    index,
                    zone: cut(name),
                    reason: e.to_string(),
                })?,
            };
            Ok(Window {
                cron,
                duration,
                zone,
            })
        })
        .collect::<Result<_, _>>()
        .map(Windows)
}

/// The first start of `window` strictly after `after`, if one comes within
/// [`HORIZON`] of it.
fn next_start(window: &Window, after: Timestamp) -> Option<Timestamp> {
    let from = after.to_zoned(window.zone.clone());
    let next = window.cron.find_next_occurrence(&from, false).ok()?;
    let next = next.timestamp();
    (next.duration_since(after) <= HORIZON).then_some(next)
}

/// The start of the occurrence of `window` open at `at` (start inclusive,
/// end exclusive), if any.
fn open_occurrence(window: &Window, at: Timestamp) -> Option<Timestamp> {
    let since = at.checked_sub(window.duration).ok()?;
    next_start(window, since).filter(|start| *start <= at)
}

/// Whether `windows` are open at `now`, and until or from when. Never
/// fails: a window whose schedule never fires within [`HORIZON`] only never
/// opens. Overlapping or back-to-back windows are one open stretch; its
/// end is followed through at most 64 occurrences.
pub fn state_at(windows: &Windows, now: Timestamp) -> WindowState {
    if windows.is_empty() {
        return WindowState::Open { closes_at: None };
    }
    let closes = windows
        .0
        .iter()
        .filter_map(|w| open_occurrence(w, now)?.checked_add(w.duration).ok())
        .max();
    let Some(mut closes) = closes else {
        let opens_at = windows.0.iter().filter_map(|w| next_start(w, now)).min();
        return WindowState::Closed { opens_at };
    };
    // A window open at the instant the stretch would close (one starting
    // right then, or overlapping it) carries it on.
    for _ in 0..MAX_CHAIN {
        let later = windows
            .0
            .iter()
            .filter_map(|w| open_occurrence(w, closes)?.checked_add(w.duration).ok())
            .max();
        match later {
            Some(later) if later > closes => closes = later,
            _ => break,
        }
    }
    WindowState::Open {
        closes_at: Some(closes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("timestamp")
    }

    fn windows(text: &str) -> Windows {
        parse_windows(text).expect("windows")
    }

    fn open(closes: &str) -> WindowState {
        WindowState::Open {
            closes_at: Some(at(closes)),
        }
    }

    fn closed(opens: &str) -> WindowState {
        WindowState::Closed {
            opens_at: Some(at(opens)),
        }
    }

    /// Saturday 02:00 Berlin for four hours.
    const SATURDAY: &str =
        r#"[{"schedule":"0 2 * * SAT","duration":"4h","timeZone":"Europe/Berlin"}]"#;

    #[test]
    fn a_weekly_window_is_open_inside_and_closed_outside() {
        let w = windows(SATURDAY);
        // 2026-11-28 is a Saturday; Berlin is UTC+1 in winter.
        assert_eq!(
            state_at(&w, at("2026-11-28T02:00:00Z")),
            open("2026-11-28T05:00:00Z")
        );
        assert_eq!(
            state_at(&w, at("2026-11-28T06:00:00Z")),
            closed("2026-12-05T01:00:00Z")
        );
        assert_eq!(
            state_at(&w, at("2026-11-27T12:00:00Z")),
            closed("2026-11-28T01:00:00Z")
        );
    }

    #[test]
    fn a_window_opens_at_its_start_and_is_closed_at_its_end() {
        let w = windows(SATURDAY);
        assert_eq!(
            state_at(&w, at("2026-11-28T01:00:00Z")),
            open("2026-11-28T05:00:00Z")
        );
        assert_eq!(
            state_at(&w, at("2026-11-28T00:59:59Z")),
            closed("2026-11-28T01:00:00Z")
        );
        assert_eq!(
            state_at(&w, at("2026-11-28T05:00:00Z")),
            closed("2026-12-05T01:00:00Z")
        );
        assert_eq!(
            state_at(&w, at("2026-11-28T04:59:59Z")),
            open("2026-11-28T05:00:00Z")
        );
    }

    #[test]
    fn a_window_follows_its_zone_across_daylight_saving_time() {
        // Summer time in Berlin is UTC+2: the same wall clock window opens
        // an hour earlier in UTC. 2026-03-29 is the switch (a Sunday).
        let w = windows(SATURDAY);
        assert_eq!(
            state_at(&w, at("2026-03-29T00:00:00Z")),
            closed("2026-04-04T00:00:00Z")
        );
        // A daily 02:30 window on the day 02:30 does not exist in Berlin
        // opens right after the gap, and the next day at 02:30 summer time.
        let daily =
            windows(r#"[{"schedule":"30 2 * * *","duration":"1h","timeZone":"Europe/Berlin"}]"#);
        let on_switch = state_at(&daily, at("2026-03-29T00:00:00Z"));
        let WindowState::Closed {
            opens_at: Some(opens),
        } = on_switch
        else {
            panic!("closed before the gap: {on_switch:?}");
        };
        assert!(opens >= at("2026-03-29T01:00:00Z") && opens <= at("2026-03-30T00:30:00Z"));
        assert_eq!(
            state_at(&daily, at("2026-03-30T00:45:00Z")),
            open("2026-03-30T01:30:00Z")
        );
        // In autumn the hour repeats: the window opens once, at the first
        // 02:30 (UTC+2), and lasts one real hour.
        assert_eq!(
            state_at(&daily, at("2026-10-25T00:30:00Z")),
            open("2026-10-25T01:30:00Z")
        );
    }

    #[test]
    fn a_window_spanning_midnight_is_open_on_both_days() {
        let w = windows(r#"[{"schedule":"0 22 * * *","duration":"4h"}]"#);
        assert_eq!(
            state_at(&w, at("2026-11-28T23:30:00Z")),
            open("2026-11-29T02:00:00Z")
        );
        assert_eq!(
            state_at(&w, at("2026-11-29T01:59:00Z")),
            open("2026-11-29T02:00:00Z")
        );
        assert_eq!(
            state_at(&w, at("2026-11-29T02:00:00Z")),
            closed("2026-11-29T22:00:00Z")
        );
    }

    #[test]
    fn overlapping_and_back_to_back_windows_are_one_stretch() {
        let w = windows(
            r#"[{"schedule":"0 1 * * *","duration":"2h"},{"schedule":"0 2 * * *","duration":"2h"},
                {"schedule":"0 4 * * *","duration":"30m"},{"schedule":"0 12 * * *","duration":"1h"}]"#,
        );
        assert_eq!(
            state_at(&w, at("2026-11-28T01:30:00Z")),
            open("2026-11-28T04:30:00Z")
        );
        assert_eq!(
            state_at(&w, at("2026-11-28T05:00:00Z")),
            closed("2026-11-28T12:00:00Z")
        );
        // Every minute for a minute: open for good, reported as far as the
        // chain is followed.
        let always = windows(r#"[{"schedule":"* * * * *","duration":"1m"}]"#);
        assert_eq!(
            state_at(&always, at("2026-11-28T00:00:00Z")),
            open("2026-11-28T01:05:00Z")
        );
    }

    #[test]
    fn a_schedule_that_never_fires_never_opens_and_the_search_ends() {
        let w = windows(r#"[{"schedule":"0 0 30 2 *","duration":"1h"}]"#);
        let started = std::time::Instant::now();
        assert_eq!(
            state_at(&w, at("2026-11-28T00:00:00Z")),
            WindowState::Closed { opens_at: None }
        );
        // Not a timing assertion of the feature: a guard that the search is
        // bounded (it takes milliseconds; an unbounded one never returns).
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
    }

    #[test]
    fn no_windows_is_always_open() {
        assert_eq!(
            state_at(&windows("[]"), at("2026-11-28T00:00:00Z")),
            WindowState::Open { closes_at: None }
        );
    }

    #[test]
    fn invalid_annotations_say_what_is_wrong() {
        let err = |text: &str| parse_windows(text).expect_err(text).to_string();
        assert!(err("{").contains("not a JSON list"));
        assert!(err(r#"[{"schedule":"0 2 * * SAT"}]"#).contains("missing field `duration`"));
        assert!(err(r#"[{"schedule":"0 2 * *","duration":"1h"}]"#).contains("window 0: schedule"));
        assert!(err(r#"[{"schedule":"0 0 2 * * SAT","duration":"1h"}]"#).contains("schedule"));
        assert!(
            err(r#"[{"schedule":"0 2 * * *","duration":"soon"}]"#).contains("duration \"soon\"")
        );
        assert!(
            err(r#"[{"schedule":"0 2 * * *","duration":"169h"}]"#).contains("between 1m and 168h")
        );
        assert!(err(r#"[{"schedule":"0 2 * * *","duration":"30s"}]"#).contains("between"));
        assert!(
            err(r#"[{"schedule":"0 2 * * *","duration":"1h","timeZone":"Mars/Olympus"}]"#)
                .contains("Mars/Olympus")
        );
        assert!(
            err(r#"[{"schedule":"0 2 * * *","duration":"1h","zone":"UTC"}]"#)
                .contains("unknown field")
        );
        let many = format!(
            "[{}]",
            vec![r#"{"schedule":"0 2 * * *","duration":"1h"}"#; 17].join(",")
        );
        assert_eq!(err(&many), "17 maintenance windows, more than 16");
        let large = format!("[{}]", " ".repeat(MAX_ANNOTATION_BYTES));
        assert!(err(&large).contains("more than 4096"));
    }

    proptest! {
        /// Whatever the instant: an open state closes after it, and a
        /// closed one opens after it, and the state at that opening is open.
        #[test]
        fn the_state_points_forward_and_is_true_there(secs in 1_700_000_000i64..1_900_000_000) {
            let w = windows(r#"[{"schedule":"15 */6 * * MON-FRI","duration":"90m","timeZone":"America/New_York"},
                              {"schedule":"0 3 1 * *","duration":"2h","timeZone":"Asia/Kolkata"}]"#);
            let now = Timestamp::from_second(secs).expect("in range");
            match state_at(&w, now) {
                WindowState::Open { closes_at } => {
                    let closes = closes_at.expect("windows close");
                    prop_assert!(closes > now);
                    let after = matches!(state_at(&w, closes), WindowState::Closed { .. });
                    prop_assert!(after, "open again at its close");
                }
                WindowState::Closed { opens_at } => {
                    let opens = opens_at.expect("windows open");
                    prop_assert!(opens > now);
                    let after = matches!(state_at(&w, opens), WindowState::Open { .. });
                    prop_assert!(after, "closed at its opening");
                }
            }
        }
    }
}
