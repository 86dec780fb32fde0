//! Waiting for an admission policy to take effect: the API server loads a
//! policy (and sees a namespace's labels) asynchronously, with nothing to
//! watch, so a test asks again until the policy answers.

use std::future::Future;
use std::time::Duration;

/// The API server's message of a refused request, or the error as text.
pub fn refusal(error: kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message,
        other => other.to_string(),
    }
}

/// Retries `attempt` every 100 ms until it is refused quoting `policy`, or
/// `timeout` has passed; returns the last outcome (Err with the refusal).
pub async fn until_refused_by<F, Fut>(
    policy: &str,
    timeout: Duration,
    attempt: F,
) -> Result<(), String>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let outcome = attempt().await;
        let refused = outcome.as_ref().is_err_and(|m| m.contains(policy));
        if refused || tokio::time::Instant::now() >= deadline {
            return outcome;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What a dry-run create of `object` through `api` comes to: Ok, or the
/// API server's refusal as [`refusal`] words it. Nothing is stored.
pub async fn dry_run_create(
    api: &kube::Api<kube::api::DynamicObject>,
    object: &kube::api::DynamicObject,
) -> Result<(), String> {
    let params = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    api.create(&params, object)
        .await
        .map(|_| ())
        .map_err(refusal)
}
