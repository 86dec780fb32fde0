//! Kubernetes Events about a work, as `kubectl describe` lists them. Events
//! written through events.k8s.io/v1 (kube's `Recorder`) and core/v1 are the
//! same objects on the API server, so reading core/v1 sees both.

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;

use crate::age::age;
use crate::table;

/// At most this many events are listed, the most recent ones; a work that
/// flaps for days would otherwise bury its conditions.
pub const MAX_EVENTS: usize = 50;

/// One event, reduced to what a person reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventLine {
    /// `Normal` or `Warning`.
    pub type_: String,
    /// CamelCase reason.
    pub reason: String,
    /// Who reported it: the reporting controller, else the legacy source.
    pub from: String,
    /// What happened.
    pub message: String,
    /// How many times it happened (1 for a single event).
    pub count: i32,
    /// When it last happened, if any time is set at all.
    pub last_seen: Option<Timestamp>,
}

/// Reduces `event`, taking each field from wherever the two event APIs may
/// have put it (a series, eventTime, or the deprecated timestamps and count).
pub fn event_line(event: &Event) -> EventLine {
    let series = event.series.as_ref();
    let last_seen = series
        .and_then(|s| s.last_observed_time.as_ref().map(|t| t.0))
        .or_else(|| event.last_timestamp.as_ref().map(|t| t.0))
        .or_else(|| event.event_time.as_ref().map(|t| t.0))
        .or_else(|| event.first_timestamp.as_ref().map(|t| t.0))
        .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0));
    let count = series
        .and_then(|s| s.count)
        .or(event.count)
        .unwrap_or(1)
        .max(1);
    let from = event
        .reporting_component
        .clone()
        .filter(|c| !c.is_empty())
        .or_else(|| event.source.as_ref().and_then(|s| s.component.clone()))
        .unwrap_or_default();
    EventLine {
        type_: event.type_.clone().unwrap_or_default(),
        reason: event.reason.clone().unwrap_or_default(),
        from,
        message: event.message.clone().unwrap_or_default(),
        count,
        last_seen,
    }
}

/// The most recent `MAX_EVENTS` of `events`, oldest first (as kubectl
/// describe lists them), and how many older ones were left out.
pub fn recent(events: &[Event]) -> (Vec<EventLine>, usize) {
    let mut lines: Vec<EventLine> = events.iter().map(event_line).collect();
    // Events without any time sort first: they are the least recent we know.
    lines.sort_by_key(|l| l.last_seen);
    let dropped = lines.len().saturating_sub(MAX_EVENTS);
    (lines.split_off(dropped), dropped)
}

/// The events as a table at `now`, or `<none>`.
pub fn events_table(lines: &[EventLine], dropped: usize, now: Timestamp) -> String {
    if lines.is_empty() {
        return "<none>".into();
    }
    let rows = lines
        .iter()
        .map(|l| {
            let mut when = l
                .last_seen
                .map(|t| age(now, t))
                .unwrap_or_else(|| "<unknown>".into());
            if l.count > 1 {
                when.push_str(&format!(" (x{})", l.count));
            }
            vec![
                l.type_.clone(),
                l.reason.clone(),
                when,
                l.from.clone(),
                l.message.clone(),
            ]
        })
        .collect();
    let mut text = table::render(&["type", "reason", "age", "from", "message"], rows);
    if dropped > 0 {
        text.push_str(&format!("\n({dropped} older events not shown)"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EventSeries, EventSource};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};

    fn at(text: &str) -> Timestamp {
        text.parse().expect("time")
    }

    fn event(reason: &str, last: &str) -> Event {
        Event {
            type_: Some("Warning".into()),
            reason: Some(reason.into()),
            message: Some(format!("{reason} happened")),
            last_timestamp: Some(Time(at(last))),
            ..Default::default()
        }
    }

    #[test]
    fn fields_come_from_either_event_api() {
        // As events.k8s.io/v1 writes it: a series, eventTime, reportingController.
        let new_style = Event {
            reason: Some("Applied".into()),
            event_time: Some(MicroTime(at("2026-11-23T17:00:00Z"))),
            series: Some(EventSeries {
                count: Some(4),
                last_observed_time: Some(MicroTime(at("2026-11-23T17:58:00Z"))),
            }),
            reporting_component: Some("ferry-hub".into()),
            ..Default::default()
        };
        let line = event_line(&new_style);
        assert_eq!(line.count, 4);
        assert_eq!(line.last_seen, Some(at("2026-11-23T17:58:00Z")));
        assert_eq!(line.from, "ferry-hub");
        // As core/v1 writes it: source.component and the deprecated fields.
        let old_style = Event {
            source: Some(EventSource {
                component: Some("someone".into()),
                host: None,
            }),
            count: Some(2),
            ..event("Old", "2026-11-23T17:50:00Z")
        };
        let line = event_line(&old_style);
        assert_eq!((line.from.as_str(), line.count), ("someone", 2));
    }

    #[test]
    fn recent_events_are_listed_oldest_first_and_capped() {
        let mut events: Vec<Event> = (0..MAX_EVENTS + 3)
            .map(|i| {
                event(
                    &format!("E{i}"),
                    &format!("2026-11-23T{:02}:{:02}:00Z", 10 + i / 60, i % 60),
                )
            })
            .collect();
        events.reverse();
        let (lines, dropped) = recent(&events);
        assert_eq!(dropped, 3);
        assert_eq!(lines.len(), MAX_EVENTS);
        assert_eq!(lines[0].reason, "E3");
        assert_eq!(lines[MAX_EVENTS - 1].reason, format!("E{}", MAX_EVENTS + 2));
    }

    #[test]
    fn the_table_shows_age_count_and_message() {
        let now = at("2026-11-23T18:00:00Z");
        let mut repeated = event_line(&event("ApplyFailed", "2026-11-23T17:59:00Z"));
        repeated.count = 3;
        let text = events_table(&[repeated], 0, now);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("TYPE"), "{text}");
        assert!(
            lines[1].contains("ApplyFailed") && lines[1].contains("60s (x3)"),
            "{text}"
        );
        assert!(lines[1].ends_with("ApplyFailed happened"), "{text}");
        assert_eq!(events_table(&[], 0, now), "<none>");
    }
}
