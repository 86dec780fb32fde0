//! A tenant as a real one is set up: a Role in one namespace of the hub and
//! a RoleBinding to a user, nothing more; the test then acts as that user
//! through impersonation (`Hub::client_as`).

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::harness::fleet::Fleet;
use crate::helpers::namespaces::create_namespace;
use crate::helpers::placement_helpers::create_placement;

/// How long a new RoleBinding may take to reach the API server's authorizer.
const GRANT_TIMEOUT: Duration = Duration::from_secs(60);

/// A namespace for team `team` on `fleet`'s hub, bound to `global`, with a
/// Placement `placement` of `spec`, and a client of user `team` holding
/// only a tenant's rights there (every verb on replica sets). Panics
/// (failing the test) when a step is refused.
pub async fn tenant(fleet: &Fleet, team: &str, placement: &str, spec: serde_json::Value) -> Client {
    let hub = &fleet.hub_client;
    create_namespace(hub, team).await;
    create_placement(hub, team, placement, spec).await;
    grant_work_resources(
        hub,
        team,
        "replica-sets",
        team,
        &["manifestworkreplicasets"],
    )
    .await;
    fleet.hub.client_as(team).await.expect("tenant client")
}

/// Lets `user` do everything to `resources` of `work.ferry.dev` in
/// `namespace`, through a Role and RoleBinding named `name`, and returns
/// once the API server's authorizer allows it. Panics when the hub API
/// server refuses either object or the grant does not take effect within
/// [`GRANT_TIMEOUT`] (a test set-up failure).
pub async fn grant_work_resources(
    admin: &Client,
    namespace: &str,
    name: &str,
    user: &str,
    resources: &[&str],
) {
    let meta = ObjectMeta {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        ..Default::default()
    };
    Api::<Role>::namespaced(admin.clone(), namespace)
        .create(
            &PostParams::default(),
            &Role {
                metadata: meta.clone(),
                rules: Some(vec![PolicyRule {
                    api_groups: Some(vec!["work.ferry.dev".into()]),
                    resources: Some(resources.iter().map(|r| r.to_string()).collect()),
                    verbs: vec!["*".into()],
                    ..Default::default()
                }]),
            },
        )
        .await
        .expect("create the tenant's Role");
    Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .create(
            &PostParams::default(),
            &RoleBinding {
                metadata: meta,
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "Role".into(),
                    name: name.into(),
                },
                subjects: Some(vec![Subject {
                    kind: "User".into(),
                    name: user.into(),
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    ..Default::default()
                }]),
            },
        )
        .await
        .expect("create the tenant's RoleBinding");
    wait_until_granted(admin, namespace, user, resources).await;
}

/// Returns once `user` may create each of `resources` in `namespace`, as a
/// SubjectAccessReview answers. The authorizer learns of RoleBindings from
/// its own informers and offers nothing to watch, so this asks again every
/// 50 ms; a tenant's first request would otherwise race it and get 403.
async fn wait_until_granted(admin: &Client, namespace: &str, user: &str, resources: &[&str]) {
    let reviews = Api::<SubjectAccessReview>::all(admin.clone());
    let deadline = tokio::time::Instant::now() + GRANT_TIMEOUT;
    for resource in resources {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.into()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some("work.ferry.dev".into()),
                    verb: Some("create".into()),
                    resource: Some(resource.to_string()),
                    namespace: Some(namespace.into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        loop {
            let allowed = reviews
                .create(&PostParams::default(), &review)
                .await
                .expect("the hub API server answers a SubjectAccessReview")
                .status
                .is_some_and(|s| s.allowed);
            if allowed {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{user} was not allowed to create {resource} in {namespace} within {GRANT_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
