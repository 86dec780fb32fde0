//! When the agent dials the hub again after a session ends: after its own
//! jittered exponential backoff, or later when the hub refused it with a
//! pushback (in a connect storm the hub tells each refused agent when it
//! expects to have room for it).

use std::time::Duration;

use backon::ExponentialBuilder;
use ferry_proto::{PUSHBACK_SPREAD, RETRY_PUSHBACK_METADATA};
use tonic::Status;

/// The shortest wait before the agent redials the hub (doubling, with
/// jitter, after each failed session, up to [`MAX_BACKOFF`]).
pub const MIN_BACKOFF: Duration = Duration::from_millis(200);
/// The longest wait before the agent redials the hub on its own.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The longest pushback the agent honours: a hub asking for more (a bug, a
/// clock gone wrong) gets this, so no answer parks an agent for long.
pub const MAX_PUSHBACK: Duration = Duration::from_secs(300);

/// The agent's own backoff between dials: from [`MIN_BACKOFF`] doubling to
/// [`MAX_BACKOFF`], jittered, never giving up.
pub fn backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(MIN_BACKOFF)
        .with_max_delay(MAX_BACKOFF)
        .with_jitter()
        .without_max_times()
}

/// The wait the hub asked for in `status`, bounded by [`MAX_PUSHBACK`];
/// `None` when it asked for none or wrote something that is not a count of
/// milliseconds (ignored: the agent's own backoff still applies).
pub fn pushback(status: &Status) -> Option<Duration> {
    let millis: u64 = status
        .metadata()
        .get(RETRY_PUSHBACK_METADATA)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_millis(millis).min(MAX_PUSHBACK))
}

/// How long to wait before the next dial: the backoff's next step, or, when
/// longer, the hub's pushback stretched by `spread` (in `[0, 1)`) times
/// [`PUSHBACK_SPREAD`] of it, so agents told the same time do not return
/// together.
pub fn redial_delay(backoff: Duration, pushback: Option<Duration>, spread: f64) -> Duration {
    let Some(pushback) = pushback else {
        return backoff;
    };
    // `mul_f64` panics on NaN; `clamp` passes NaN through.
    let spread = if spread.is_nan() {
        0.0
    } else {
        spread.clamp(0.0, 1.0)
    };
    backoff.max(pushback + pushback.mul_f64(spread * PUSHBACK_SPREAD))
}

/// [`redial_delay`] with a random spread, for a session that ended with
/// `status` (if the hub answered at all).
pub fn next_delay(backoff: Duration, status: Option<&Status>) -> Duration {
    redial_delay(backoff, status.and_then(pushback), rand::random::<f64>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::metadata::MetadataValue;

    fn refused(pushback: &str) -> Status {
        let mut status = Status::unavailable("busy");
        status.metadata_mut().insert(
            RETRY_PUSHBACK_METADATA,
            MetadataValue::try_from(pushback).expect("ascii"),
        );
        status
    }

    #[test]
    fn the_hubs_pushback_is_read_in_milliseconds_and_bounded() {
        assert_eq!(
            pushback(&refused("2500")),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(pushback(&refused("99999999999")), Some(MAX_PUSHBACK));
        assert_eq!(pushback(&Status::unavailable("no hint")), None);
        for junk in ["-5", "1.5", "soon", "", "18446744073709551616"] {
            assert_eq!(pushback(&refused(junk)), None, "{junk:?} is ignored");
        }
    }

    #[test]
    fn the_longer_of_the_backoff_and_the_pushback_is_waited() {
        let second = Duration::from_secs(1);
        assert_eq!(redial_delay(second, None, 0.7), second);
        assert_eq!(redial_delay(second * 30, Some(second), 0.9), second * 30);
        assert_eq!(redial_delay(second, Some(second * 8), 0.0), second * 8);
        assert_eq!(redial_delay(second, Some(second * 8), 0.5), second * 9);
        assert!(redial_delay(second, Some(second * 8), 1.0) <= second * 10);
        assert_eq!(redial_delay(second, Some(second * 8), f64::NAN), second * 8);
    }
}
