//! `ferry-bench --api-requests`: what each new work cost an API server,
//! read from its audit log: the writes and single-object reads within each
//! work's create → Applied window, the server's own time for each, and the
//! span from the first request received to the last one answered. Figures
//! to print, never to assert.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

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
}
