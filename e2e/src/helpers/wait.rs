//! Waiting for objects to reach a state, by watching them (no polling loops).

use std::fmt::Debug;
use std::time::Duration;

use kube::Api;
use kube::runtime::wait::await_condition;
use serde::de::DeserializeOwned;

/// The state was not reached in time.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// The timeout passed; `last` is the object as last read.
    #[error("{what} not reached within {timeout:?}; object is now: {last}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        timeout: Duration,
        /// The object as JSON, or `absent`.
        last: String,
    },
    /// Reading or writing the object failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The watch failed.
    #[error("watching for {what}: {source}")]
    Watch {
        /// What was awaited.
        what: String,
        /// The watch error.
        #[source]
        source: kube::runtime::wait::Error,
    },
}

/// Waits until object `name` exists and `cond` holds for it, and returns it.
pub async fn wait_until<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    cond: impl Fn(&K) -> bool,
) -> Result<K, WaitError>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + serde::Serialize + 'static,
{
    let watched = await_condition(api.clone(), name, |obj: Option<&K>| obj.is_some_and(&cond));
    match tokio::time::timeout(timeout, watched).await {
        // The condition holds only for a present object, so None cannot come back.
        Ok(Ok(Some(obj))) => Ok(obj),
        Ok(Ok(None)) => Err(WaitError::Timeout {
            what: what.to_string(),
            timeout,
            last: "absent".into(),
        }),
        Ok(Err(source)) => Err(WaitError::Watch {
            what: what.to_string(),
            source,
        }),
        Err(_) => Err(timed_out(api, name, what, timeout).await),
    }
}

/// Waits until object `name` does not exist.
pub async fn wait_deleted<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
) -> Result<(), WaitError>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + serde::Serialize + 'static,
{
    let watched = await_condition(api.clone(), name, |obj: Option<&K>| obj.is_none());
    match tokio::time::timeout(timeout, watched).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(source)) => Err(WaitError::Watch {
            what: what.to_string(),
            source,
        }),
        Err(_) => Err(timed_out(api, name, what, timeout).await),
    }
}

// A timeout shows the object as it is now, which is usually the finding.
async fn timed_out<K>(api: &Api<K>, name: &str, what: &str, timeout: Duration) -> WaitError
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + serde::Serialize,
{
    let last = match api.get_opt(name).await {
        Ok(Some(obj)) => serde_json::to_string_pretty(&obj).unwrap_or_default(),
        Ok(None) => "absent".into(),
        Err(e) => format!("unreadable: {e}"),
    };
    WaitError::Timeout {
        what: what.to_string(),
        timeout,
        last,
    }
}
