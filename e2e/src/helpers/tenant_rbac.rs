//! A tenant as a real one is set up: a Role in one namespace of the hub and
//! a RoleBinding to a user, nothing more; the test then acts as that user
//! through impersonation (`Hub::client_as`).

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

/// Lets `user` do everything to `resources` of `work.ferry.dev` in
/// `namespace`, through a Role and RoleBinding named `name`. Panics when
/// the hub API server refuses either (a test set-up failure).
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
}
