//! Ages and timestamps as kubectl prints them (`45s`, `3m20s`, `5h`, `12d`).

use k8s_openapi::jiff::Timestamp;

/// How long ago `then` was at `now`, in kubectl's short form; `<invalid>`
/// when `then` lies more than a second in the future (clock skew of up to a
/// second counts as now, as kubectl does).
pub fn age(now: Timestamp, then: Timestamp) -> String {
    human_duration(now.as_second() - then.as_second())
}

/// The age of an RFC 3339 timestamp string, `-` when it is empty and
/// `<invalid>` when it does not parse (a status written by something else).
pub fn age_of_text(now: Timestamp, then: &str) -> String {
    if then.is_empty() {
        return "-".into();
    }
    match then.parse::<Timestamp>() {
        Ok(then) => age(now, then),
        Err(_) => "<invalid>".into(),
    }
}

/// kubectl's `HumanDuration` (k8s.io/apimachinery/pkg/util/duration): exact
/// seconds below two minutes, then coarser units with at most two parts.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return two_parts(minutes, "m", seconds % 60, "s");
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return two_parts(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return two_parts(days, "d", hours % 24, "h");
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        return two_parts(years, "y", days % 365, "d");
    }
    format!("{years}y")
}

/// `3m` or `3m20s`: the second part only when it is not zero.
fn two_parts(major: i64, major_unit: &str, minor: i64, minor_unit: &str) -> String {
    if minor == 0 {
        format!("{major}{major_unit}")
    } else {
        format!("{major}{major_unit}{minor}{minor_unit}")
    }
}

/// Now, to the second. The system clock before 1970 (or unrepresentable)
/// reads as the epoch: ages then print as large, never as a panic.
pub fn now() -> Timestamp {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn durations_read_like_kubectl() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (50 * 3600, "2d2h"),
            (8 * 86400, "8d"),
            (729 * 86400, "729d"),
            (730 * 86400, "2y"),
            (731 * 86400, "2y1d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (seconds, text) in cases {
            assert_eq!(human_duration(seconds), text, "{seconds}s");
        }
    }

    #[test]
    fn text_timestamps_age_and_bad_ones_say_so() {
        let now: Timestamp = "2026-11-23T18:00:00Z".parse().expect("now");
        assert_eq!(age_of_text(now, "2026-11-23T17:59:30Z"), "30s");
        assert_eq!(age_of_text(now, ""), "-");
        assert_eq!(age_of_text(now, "yesterday"), "<invalid>");
        assert_eq!(age_of_text(now, "2026-11-23T18:10:00Z"), "<invalid>");
    }

    proptest! {
        #[test]
        fn every_duration_prints_without_panicking(seconds in any::<i64>()) {
            prop_assert!(!human_duration(seconds).is_empty());
        }
    }
}
