//! Whether the API server enforces a check yet: it learns of webhooks and
//! policies asynchronously, so the hub probes with a dry run.

use std::time::Duration;

use kube::api::{Api, PostParams};

use ferry_api::manifest_work::ManifestWork;

/// Dry-run creates `probe` (nothing is stored) every 50 ms until the API
/// server refuses it with a message naming `checker`, which then enforces
/// its checks: the API server learns of webhooks and policies
/// asynchronously. Returns false when that does not happen within `timeout`.
pub(crate) async fn refused_by(
    api: &Api<ManifestWork>,
    probe: &ManifestWork,
    checker: &str,
    timeout: Duration,
) -> bool {
    let params = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        match api.create(&params, probe).await {
            Err(kube::Error::Api(status)) if status.message.contains(checker) => return true,
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    false
}
