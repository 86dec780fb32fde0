//! Whether the agent can do its job right now, for `/readyz`: it holds an
//! established session with the hub (the hub answered its Hello) and the
//! spoke API server answered a recent check with the agent's own
//! credentials. Anything else is "not ready", with a short reason a person
//! can act on.
//!
//! The spoke check is a `GET /version` every `interval`, made with the
//! agent's credentials: the cheapest request that proves both that the API
//! server answers and that it still accepts those credentials (a request
//! with a token the API server does not accept gets 401, never the
//! anonymous answer). It is a read that every identity may make, so it
//! needs no RBAC and keeps the agent's steady state free of writes (a
//! SelfSubjectReview would be a `create` in the audit log). The agent's own
//! traffic cannot stand in for it: an agent with settled works sends nothing
//! to the spoke for as long as nothing drifts.

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use tokio::sync::watch;

/// How many check intervals the last good answer stays good for: one lost
/// check does not flip readiness.
const CHECKS_TO_STALE: u32 = 3;

/// The hub side of readiness.
#[derive(Debug, Clone, PartialEq)]
pub enum HubState {
    /// No session yet, or the last one ended; `error` says why, if known.
    Disconnected {
        /// When the agent last lost (or started without) its session.
        since: Timestamp,
        /// The last error opening or holding a session.
        error: Option<String>,
    },
    /// The hub answered Hello: works and status flow.
    Connected,
}

/// The spoke side of readiness.
#[derive(Debug, Clone, PartialEq)]
pub enum SpokeState {
    /// No check has finished yet.
    Unchecked,
    /// The last check succeeded at `at`.
    Answered {
        /// When.
        at: Instant,
    },
    /// Checks fail since `since`; `last_ok` is the last success, if any.
    Failing {
        /// When checks started failing.
        since: Timestamp,
        /// The last success, if there was one.
        last_ok: Option<Instant>,
        /// The last check's error.
        error: String,
    },
}

/// Both sides, as one value: what `/readyz` judges.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadinessState {
    /// The hub session.
    pub hub: HubState,
    /// The spoke API server.
    pub spoke: SpokeState,
}

impl ReadinessState {
    /// Ok when the hub session is up and the spoke answered within
    /// `fresh`; otherwise every reason it is not, joined by `; `.
    pub fn verdict(&self, now: Instant, fresh: Duration) -> Result<(), String> {
        let mut reasons = Vec::new();
        match &self.hub {
            HubState::Connected => {}
            HubState::Disconnected { since, error } => reasons.push(match error {
                Some(error) => format!("no hub session since {since}: {error}"),
                None => format!("no hub session since {since}"),
            }),
        }
        let answered_recently = |at: &Instant| {
            now.checked_duration_since(*at)
                .is_none_or(|age| age <= fresh)
        };
        match &self.spoke {
            SpokeState::Answered { at } if answered_recently(at) => {}
            SpokeState::Answered { at } => reasons.push(format!(
                "spoke API not checked for {} s",
                now.saturating_duration_since(*at).as_secs()
            )),
            SpokeState::Unchecked => reasons.push("spoke API not checked yet".into()),
            SpokeState::Failing {
                last_ok: Some(at), ..
            } if answered_recently(at) => {}
            SpokeState::Failing { since, error, .. } => {
                reasons.push(format!("spoke API unreachable since {since}: {error}"));
            }
        }
        if reasons.is_empty() {
            Ok(())
        } else {
            Err(reasons.join("; "))
        }
    }
}

/// The agent's readiness, shared by the session, the spoke check and the
/// probe endpoint. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Readiness {
    state: watch::Sender<ReadinessState>,
    interval: Duration,
}

impl Readiness {
    /// Not ready: no hub session, spoke not checked; the spoke is checked
    /// every `interval` once [`Readiness::check_spoke`] runs.
    pub fn new(interval: Duration) -> Self {
        let state = ReadinessState {
            hub: HubState::Disconnected {
                since: Timestamp::now(),
                error: None,
            },
            spoke: SpokeState::Unchecked,
        };
        Self {
            state: watch::Sender::new(state),
            interval: interval.max(Duration::from_millis(100)),
        }
    }

    /// Ok when ready, else why not.
    pub fn verdict(&self) -> Result<(), String> {
        self.state
            .borrow()
            .verdict(Instant::now(), self.interval * CHECKS_TO_STALE)
    }

    /// The current state.
    pub fn state(&self) -> ReadinessState {
        self.state.borrow().clone()
    }

    /// The hub answered Hello.
    pub fn hub_connected(&self) {
        self.state.send_modify(|s| s.hub = HubState::Connected);
    }

    /// The session ended or could not be opened, for `error` if known. The
    /// time of the first loss is kept while the agent stays disconnected.
    pub fn hub_disconnected(&self, error: Option<String>) {
        self.state.send_modify(|s| {
            let since = match &s.hub {
                HubState::Disconnected { since, .. } => *since,
                HubState::Connected => Timestamp::now(),
            };
            s.hub = HubState::Disconnected { since, error };
        });
    }

    /// Records one spoke check's result.
    pub fn spoke_checked(&self, result: Result<(), String>) {
        self.state.send_modify(|s| {
            s.spoke = next_spoke_state(&s.spoke, result, Instant::now(), Timestamp::now());
        });
    }

    /// Checks the spoke every interval, forever.
    pub async fn check_spoke(self, client: Client) {
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let answer = tokio::time::timeout(
                self.interval.max(Duration::from_secs(1)),
                client.apiserver_version(),
            )
            .await;
            let result = match answer {
                Ok(Ok(_)) => Ok(()),
                // Forbidden (a cluster that took /version from everyone)
                // still says the API server answered and knows the agent.
                Ok(Err(kube::Error::Api(status))) if status.code == 403 => Ok(()),
                Ok(Err(error)) => Err(error.to_string()),
                Err(_) => Err("no answer in time".to_string()),
            };
            self.spoke_checked(result);
        }
    }
}

/// The spoke state after a check with `result` at `now` (`wall` for the
/// message).
fn next_spoke_state(
    previous: &SpokeState,
    result: Result<(), String>,
    now: Instant,
    wall: Timestamp,
) -> SpokeState {
    match result {
        Ok(()) => SpokeState::Answered { at: now },
        Err(error) => {
            let (since, last_ok) = match previous {
                SpokeState::Failing { since, last_ok, .. } => (*since, *last_ok),
                SpokeState::Answered { at } => (wall, Some(*at)),
                SpokeState::Unchecked => (wall, None),
            };
            SpokeState::Failing {
                since,
                last_ok,
                error,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRESH: Duration = Duration::from_secs(30);

    fn state(hub: HubState, spoke: SpokeState) -> ReadinessState {
        ReadinessState { hub, spoke }
    }

    fn disconnected() -> HubState {
        HubState::Disconnected {
            since: Timestamp::UNIX_EPOCH,
            error: Some("connection refused".into()),
        }
    }

    #[test]
    fn ready_only_with_a_hub_session_and_a_recent_spoke_answer() {
        let now = Instant::now();
        let answered = SpokeState::Answered { at: now };
        assert_eq!(
            state(HubState::Connected, answered.clone()).verdict(now, FRESH),
            Ok(())
        );
        let why = state(disconnected(), answered)
            .verdict(now, FRESH)
            .expect_err("no hub session");
        assert!(why.starts_with("no hub session since"), "{why}");
        assert!(why.contains("connection refused"), "{why}");
        let why = state(HubState::Connected, SpokeState::Unchecked)
            .verdict(now, FRESH)
            .expect_err("spoke unchecked");
        assert_eq!(why, "spoke API not checked yet");
    }

    #[test]
    fn both_reasons_are_given_when_both_sides_fail() {
        let now = Instant::now();
        let why = state(disconnected(), SpokeState::Unchecked)
            .verdict(now, FRESH)
            .expect_err("not ready");
        assert!(
            why.contains("no hub session") && why.contains("spoke API not checked yet"),
            "{why}"
        );
    }

    #[test]
    fn one_failed_check_after_a_recent_answer_keeps_the_agent_ready() {
        let start = Instant::now();
        let ok = next_spoke_state(&SpokeState::Unchecked, Ok(()), start, Timestamp::UNIX_EPOCH);
        let failing = next_spoke_state(
            &ok,
            Err("timeout".into()),
            start + Duration::from_secs(10),
            Timestamp::UNIX_EPOCH,
        );
        let at = |secs| start + Duration::from_secs(secs);
        assert_eq!(
            state(HubState::Connected, failing.clone()).verdict(at(10), FRESH),
            Ok(())
        );
        let why = state(HubState::Connected, failing.clone())
            .verdict(at(31), FRESH)
            .expect_err("the last answer is too old");
        assert!(why.starts_with("spoke API unreachable since"), "{why}");
        assert!(why.ends_with("timeout"), "{why}");
        // Failing on keeps the time it started failing.
        let still = next_spoke_state(&failing, Err("refused".into()), at(40), Timestamp::now());
        match still {
            SpokeState::Failing { since, last_ok, .. } => {
                assert_eq!(since, Timestamp::UNIX_EPOCH);
                assert_eq!(last_ok, Some(start));
            }
            other => panic!("still failing, got {other:?}"),
        }
        assert_eq!(
            next_spoke_state(&still, Ok(()), at(41), Timestamp::now()),
            SpokeState::Answered { at: at(41) }
        );
    }

    #[test]
    fn an_answer_that_is_too_old_is_not_ready() {
        let start = Instant::now();
        let why = state(HubState::Connected, SpokeState::Answered { at: start })
            .verdict(start + Duration::from_secs(31), FRESH)
            .expect_err("stale");
        assert_eq!(why, "spoke API not checked for 31 s");
    }

    #[test]
    fn the_first_loss_of_the_hub_is_when_disconnection_started() {
        let readiness = Readiness::new(Duration::from_secs(10));
        readiness.hub_connected();
        assert_eq!(readiness.state().hub, HubState::Connected);
        readiness.hub_disconnected(Some("hub closed the stream".into()));
        let HubState::Disconnected { since: first, .. } = readiness.state().hub else {
            panic!("disconnected");
        };
        readiness.hub_disconnected(Some("connection refused".into()));
        assert_eq!(
            readiness.state().hub,
            HubState::Disconnected {
                since: first,
                error: Some("connection refused".into())
            }
        );
    }
}
