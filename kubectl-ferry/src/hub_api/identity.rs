//! Who the caller is, as the API server authenticates them.

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::Client;
use kube::api::{Api, PostParams};

use crate::error::CliError;

/// The caller's user name, as the API server authenticates it.
pub async fn whoami(client: &Client) -> Result<String, CliError> {
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let review = api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .map_err(|e| {
            CliError::from_kube(
                "create selfsubjectreviews (to learn your user name)",
                "selfsubjectreviews.authentication.k8s.io",
                e,
            )
        })?;
    review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| CliError::Print("the API server did not say who you are".into()))
}
