//! `ferry-bench --api-requests`: where each new work's create → Applied
//! went, read from the hub's and the spoke's audit logs: the writes and
//! single-object reads within each work's window, the server's own time for
//! each, the span from the first request received to the last answered,
//! and on the hub the admission, the way through hub and agent, the status
//! write and the watch back. Figures to print, never to assert.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::stats::{StatsError, histogram, quantile_ms};

/// One work's create → Applied window, in wall-clock time (the audit log's).
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// When the bench sent the create.
    pub from: Timestamp,
    /// When the bench saw the work Applied.
    pub to: Timestamp,
}

/// The spoke requests of one window.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct WorkRequests {
    /// Writes, in the order the server received them, as `verb resource`
    /// (`resource/subresource` for a subresource).
    pub writes: Vec<String>,
    /// Single-object reads.
    pub reads: usize,
    /// The server's time for each write (received → response complete).
    pub write_times: Vec<Duration>,
    /// First request received → last response complete; none without
    /// requests.
    pub span: Option<Duration>,
    /// Every request, as `verb resource +at (took)` in milliseconds from
    /// the first one received: where the span goes.
    pub timeline: Vec<String>,
    /// Each write as (received, answered), in the order received.
    pub write_times_at: Vec<(Timestamp, Timestamp)>,
}

/// One audited request.
struct Audited {
    verb: String,
    /// The HTTP status answered.
    code: u64,
    resource: String,
    received: Timestamp,
    done: Timestamp,
}

fn audited(event: &Value, username: Option<&str>) -> Option<Audited> {
    if username.is_some_and(|u| event["user"]["username"] != u)
        || event["stage"] != "ResponseComplete"
    {
        return None;
    }
    let object = &event["objectRef"];
    let mut resource = object["resource"].as_str()?.to_string();
    if let Some(sub) = object["subresource"].as_str() {
        resource = format!("{resource}/{sub}");
    }
    Some(Audited {
        verb: event["verb"].as_str()?.to_string(),
        code: event["responseStatus"]["code"].as_u64().unwrap_or_default(),
        resource,
        received: event["requestReceivedTimestamp"].as_str()?.parse().ok()?,
        done: event["stageTimestamp"].as_str()?.parse().ok()?,
    })
}

fn elapsed(from: Timestamp, to: Timestamp) -> Duration {
    Duration::try_from(to.duration_since(from)).unwrap_or_default()
}

/// The requests `username` (any user with `None`) made within each of
/// `windows` (by the time the server received them), from the JSON-lines
/// audit log `audit`. Lines that are not audit events of that user are
/// skipped.
pub fn per_window(audit: &str, username: Option<&str>, windows: &[Window]) -> Vec<WorkRequests> {
    let requests: Vec<Audited> = audit
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|event| audited(&event, username))
        .collect();
    windows
        .iter()
        .map(|window| {
            let mut inside: Vec<&Audited> = requests
                .iter()
                .filter(|r| r.received >= window.from && r.received <= window.to)
                .collect();
            inside.sort_by_key(|r| r.received);
            let mut work = WorkRequests::default();
            let start = inside.first().map(|r| r.received);
            for request in &inside {
                let at = start.map_or(Duration::ZERO, |s| elapsed(s, request.received));
                // Only an answer other than 200/201 is shown: a conflict or
                // a 404 on the way is what the timeline is read for.
                let code = if matches!(request.code, 200 | 201) {
                    String::new()
                } else {
                    format!(" {}", request.code)
                };
                work.timeline.push(format!(
                    "{} {} +{:.1} ({:.1}){code}",
                    request.verb,
                    request.resource,
                    at.as_secs_f64() * 1e3,
                    elapsed(request.received, request.done).as_secs_f64() * 1e3
                ));
                match request.verb.as_str() {
                    "get" => work.reads += 1,
                    "create" | "update" | "patch" | "delete" | "deletecollection" => {
                        work.writes
                            .push(format!("{} {}", request.verb, request.resource));
                        work.write_times
                            .push(elapsed(request.received, request.done));
                        work.write_times_at.push((request.received, request.done));
                    }
                    _ => {}
                }
            }
            work.span = match (inside.first(), inside.iter().map(|r| r.done).max()) {
                (Some(first), Some(last)) => Some(elapsed(first.received, last)),
                _ => None,
            };
            work
        })
        .collect()
}

/// The lines `ferry-bench --api-requests` prints: where each work's
/// create → Applied went, from the hub's and the spoke's audit logs (the
/// agent's requests are those of `ferry-admin`). Fails only when a
/// histogram cannot be built.
pub fn report(
    hub_audit: &str,
    spoke_audit: &str,
    windows: &[Window],
) -> Result<Vec<String>, StatsError> {
    let mut lines = Vec::new();
    let works = per_window(spoke_audit, Some("ferry-admin"), windows);
    let mut writes: Vec<usize> = works.iter().map(|w| w.writes.len()).collect();
    let mut reads: Vec<usize> = works.iter().map(|w| w.reads).collect();
    writes.sort_unstable();
    reads.sort_unstable();
    let median = |v: &[usize]| v.get(v.len() / 2).copied().unwrap_or_default();
    let write_times: Vec<Duration> = works.iter().flat_map(|w| w.write_times.clone()).collect();
    let spans: Vec<Duration> = works.iter().filter_map(|w| w.span).collect();
    let (write_times, spans) = (histogram(&write_times)?, histogram(&spans)?);
    lines.push(format!(
        "spoke requests per new work (the agent's, from the spoke's audit log), {} works: writes p50 {} (min {}, max {}), single-object reads p50 {}; server time per write p50 {:.1} ms, p99 {:.1} ms; first request received -> last answered p50 {:.1} ms, p99 {:.1} ms",
        works.len(),
        median(&writes),
        writes.first().copied().unwrap_or_default(),
        writes.last().copied().unwrap_or_default(),
        median(&reads),
        quantile_ms(&write_times, 0.5),
        quantile_ms(&write_times, 0.99),
        quantile_ms(&spans, 0.5),
        quantile_ms(&spans, 0.99),
    ));
    if let Some(typical) = median_span(&works) {
        lines.push(format!(
            "  the spoke requests of the work with the median span (ms after its first, server time): {}",
            typical.timeline.join(", ")
        ));
    }
    // The hub: the create (with admission), the way through hub and agent
    // to the status write that made the work Applied, and back to the bench.
    let hub = per_window(hub_audit, None, windows);
    let (mut admitted, mut through, mut status, mut seen) = (vec![], vec![], vec![], vec![]);
    for (work, window) in hub.iter().zip(windows) {
        let create = work
            .writes
            .iter()
            .position(|w| w == "create manifestworks")
            .and_then(|i| work.write_times_at.get(i).copied());
        let last_status = work
            .writes
            .iter()
            .rposition(|w| w.ends_with("manifestworks/status"))
            .and_then(|i| work.write_times_at.get(i).copied());
        if let (Some(create), Some(last_status)) = (create, last_status) {
            admitted.push(elapsed(create.0, create.1));
            through.push(elapsed(create.1, last_status.0));
            status.push(elapsed(last_status.0, last_status.1));
            seen.push(elapsed(last_status.1, window.to));
        }
    }
    let figure = |samples: &[Duration]| -> Result<String, StatsError> {
        let h = histogram(samples)?;
        Ok(format!(
            "p50 {:.1} ms, p99 {:.1} ms",
            quantile_ms(&h, 0.5),
            quantile_ms(&h, 0.99)
        ))
    };
    lines.push(format!(
        "hub side, {} works: create received -> answered (admission) {}; answered -> the status write received (hub -> agent -> hub) {}; status write {}; answered -> the bench's watch saw Applied {}",
        admitted.len(),
        figure(&admitted)?,
        figure(&through)?,
        figure(&status)?,
        figure(&seen)?,
    ));
    let rewritten: Vec<&WorkRequests> = hub
        .iter()
        .filter(|w| {
            w.writes
                .iter()
                .filter(|x| x.ends_with("manifestworks/status"))
                .count()
                > 1
        })
        .collect();
    lines.push(format!(
        "  works whose status took more than one write: {}{}",
        rewritten.len(),
        rewritten
            .first()
            .map(|w| format!(", the first: {}", w.timeline.join(", ")))
            .unwrap_or_default()
    ));
    // The tail: where the slowest work's time went, on both servers.
    if let Some((i, window)) = windows
        .iter()
        .enumerate()
        .max_by_key(|(_, w)| elapsed(w.from, w.to))
    {
        let timeline =
            |of: &[WorkRequests]| of.get(i).map(|w| w.timeline.join(", ")).unwrap_or_default();
        lines.push(format!(
            "  the slowest work ({:.1} ms): hub {}; spoke {}",
            elapsed(window.from, window.to).as_secs_f64() * 1e3,
            timeline(&hub),
            timeline(&works),
        ));
    }
    if let Some(typical) = median_span(&hub) {
        lines.push(format!(
            "  the hub writes of the work with the median span: {}",
            typical.timeline.join(", ")
        ));
    }
    Ok(lines)
}

/// The window with the median span among those with requests.
fn median_span(works: &[WorkRequests]) -> Option<&WorkRequests> {
    let mut by_span: Vec<&WorkRequests> = works.iter().filter(|w| w.span.is_some()).collect();
    by_span.sort_by_key(|w| w.span);
    by_span.get(by_span.len() / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(user: &str, verb: &str, resource: &str, sub: Option<&str>, at_ms: u64) -> String {
        coded(user, verb, resource, sub, at_ms, 200)
    }

    fn coded(
        user: &str,
        verb: &str,
        resource: &str,
        sub: Option<&str>,
        at_ms: u64,
        code: u64,
    ) -> String {
        let at = |ms: u64| format!("2026-11-29T10:00:00.{:06}Z", ms * 1000);
        let mut object = json!({"resource": resource, "name": "x"});
        if let Some(sub) = sub {
            object["subresource"] = json!(sub);
        }
        json!({
            "stage": "ResponseComplete",
            "verb": verb,
            "user": {"username": user},
            "objectRef": object,
            "requestReceivedTimestamp": at(at_ms),
            "stageTimestamp": at(at_ms + 2),
            "responseStatus": {"code": code},
        })
        .to_string()
    }

    fn window(from_ms: u64, to_ms: u64) -> Window {
        let at = |ms: u64| {
            format!("2026-11-29T10:00:00.{:06}Z", ms * 1000)
                .parse()
                .expect("time")
        };
        Window {
            from: at(from_ms),
            to: at(to_ms),
        }
    }

    #[test]
    fn each_window_gets_the_users_requests_received_in_it_in_order() {
        let log = [
            coded("ferry-admin", "get", "appliedmanifestworks", None, 10, 404),
            event("ferry-admin", "create", "appliedmanifestworks", None, 12),
            event("system:apiserver", "update", "leases", None, 13),
            event("ferry-admin", "get", "configmaps", None, 15),
            event("ferry-admin", "patch", "configmaps", None, 17),
            "not json".to_string(),
            event(
                "ferry-admin",
                "patch",
                "appliedmanifestworks",
                Some("status"),
                20,
            ),
            event("ferry-admin", "patch", "configmaps", None, 150),
        ]
        .join("\n");
        let works = per_window(
            &log,
            Some("ferry-admin"),
            &[window(5, 100), window(100, 200)],
        );
        assert_eq!(
            works[0].writes,
            [
                "create appliedmanifestworks",
                "patch configmaps",
                "patch appliedmanifestworks/status"
            ]
        );
        assert_eq!(works[0].reads, 2);
        assert_eq!(works[0].write_times, [Duration::from_millis(2); 3]);
        // 10 ms received → 22 ms answered.
        assert_eq!(works[0].span, Some(Duration::from_millis(12)));
        assert_eq!(
            works[0].timeline[1],
            "create appliedmanifestworks +2.0 (2.0)"
        );
        assert_eq!(works[1].writes, ["patch configmaps"]);
        assert_eq!(works[1].reads, 0);
    }

    #[test]
    fn a_window_without_requests_has_no_span() {
        let works = per_window("", Some("ferry-admin"), &[window(0, 10)]);
        assert_eq!(works, [WorkRequests::default()]);
    }

    #[test]
    fn without_a_user_every_users_requests_count() {
        let log = [
            event("admin", "create", "manifestworks", None, 10),
            event("hub", "patch", "manifestworks", Some("status"), 30),
        ]
        .join("\n");
        let works = per_window(&log, None, &[window(0, 100)]);
        assert_eq!(
            works[0].writes,
            ["create manifestworks", "patch manifestworks/status"]
        );
        assert_eq!(works[0].write_times_at.len(), 2);
    }

    #[test]
    fn the_report_splits_a_works_time_and_names_a_rewritten_status() {
        let spoke = [
            event("ferry-admin", "create", "appliedmanifestworks", None, 20),
            coded("ferry-admin", "get", "configmaps", None, 23, 404),
            event("ferry-admin", "create", "configmaps", None, 26),
            event(
                "ferry-admin",
                "patch",
                "appliedmanifestworks",
                Some("status"),
                29,
            ),
        ]
        .join("\n");
        let hub = [
            event("admin", "create", "manifestworks", None, 10),
            event("hub", "patch", "manifestworks", None, 14),
            coded("hub", "patch", "manifestworks", Some("status"), 32, 409),
            event("hub", "patch", "manifestworks", Some("status"), 36),
        ]
        .join("\n");
        let lines = report(&hub, &spoke, &[window(5, 40)]).expect("report");
        assert!(
            lines[0].contains("1 works: writes p50 3 (min 3, max 3), single-object reads p50 1"),
            "{lines:#?}"
        );
        // 20 ms received -> 31 ms answered.
        assert!(lines[0].contains("last answered p50 11.0 ms"), "{lines:#?}");
        // Create 10 -> 12; on to the last status write at 36 -> 38; the
        // window ends at 40.
        assert!(
            lines[2].contains("(admission) p50 2.0 ms")
                && lines[2].contains("(hub -> agent -> hub) p50 24.0 ms")
                && lines[2].contains("status write p50 2.0 ms")
                && lines[2].contains("saw Applied p50 2.0 ms"),
            "{lines:#?}"
        );
        assert!(
            lines[3].starts_with("  works whose status took more than one write: 1, the first:")
                && lines[3].contains("patch manifestworks/status +22.0 (2.0) 409"),
            "{lines:#?}"
        );
        assert!(
            lines[4].starts_with("  the slowest work (35.0 ms)"),
            "{lines:#?}"
        );
    }
}
