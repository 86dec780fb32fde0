//! Reading the fleet on the hub: ManagedClusters, ManagedClusterSets,
//! Placements, ManifestWorks, replica sets and Events, page by page.

use ferry_api::cluster_set::ManagedClusterSet;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::placement::Placement;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, ObjectList};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::CliError;
use crate::work_ref::WorkRef;
use crate::work_rows::WorkEntry;

/// Objects per list request: large fleets are read in pages, so neither the
/// API server nor this process holds one huge response.
const PAGE_SIZE: u32 = 500;

/// The ManifestWorks of `namespace`, or of every namespace with `None`.
/// Works are read untyped and decoded one by one, so a work this build
/// cannot decode is shown as such instead of failing the whole list.
pub async fn list_works(
    client: &Client,
    namespace: Option<&str>,
) -> Result<Vec<WorkEntry>, CliError> {
    let resource = ApiResource::erase::<ManifestWork>(&());
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let action = match namespace {
        Some(ns) => format!("list manifestworks in namespace {ns}"),
        None => "list manifestworks in all namespaces".to_string(),
    };
    let objects = list_all(&api, ListParams::default(), &action, &full_name(&resource)).await?;
    Ok(objects
        .into_iter()
        .map(|o| WorkEntry::from_raw(raw_object(o, &resource)))
        .collect())
}

/// Every ManagedCluster, untyped: the accept gate and any other field a
/// newer hub adds are read from the object as stored.
pub async fn list_clusters(client: &Client) -> Result<Vec<Value>, CliError> {
    list_raw::<ManagedCluster>(client, None).await
}

/// Every ManifestWorkReplicaSet of `namespace` (every namespace for None),
/// untyped, as stored.
pub async fn list_replica_sets(
    client: &Client,
    namespace: Option<&str>,
) -> Result<Vec<Value>, CliError> {
    list_raw::<ManifestWorkReplicaSet>(client, namespace).await
}

/// Every Placement of `namespace` (every namespace for None), untyped, as
/// stored.
pub async fn list_placements(
    client: &Client,
    namespace: Option<&str>,
) -> Result<Vec<Value>, CliError> {
    list_raw::<Placement>(client, namespace).await
}

/// Every ManagedClusterSet, untyped, as stored.
pub async fn list_cluster_sets(client: &Client) -> Result<Vec<Value>, CliError> {
    list_raw::<ManagedClusterSet>(client, None).await
}

/// Every object of kind `K` in `namespace` (every namespace, or a
/// cluster-scoped kind, for None), untyped, as stored. Fails as [`list_all`]
/// does.
async fn list_raw<K: kube::Resource<DynamicType = ()>>(
    client: &Client,
    namespace: Option<&str>,
) -> Result<Vec<Value>, CliError> {
    let resource = ApiResource::erase::<K>(&());
    let (api, action): (Api<DynamicObject>, String) = match namespace {
        Some(ns) => (
            Api::namespaced_with(client.clone(), ns, &resource),
            format!("list {} in namespace {ns}", resource.plural),
        ),
        None => (
            Api::all_with(client.clone(), &resource),
            format!("list {}", resource.plural),
        ),
    };
    let objects = list_all(&api, ListParams::default(), &action, &full_name(&resource)).await?;
    Ok(objects
        .into_iter()
        .map(|o| raw_object(o, &resource))
        .collect())
}

/// The names of the clusters of cluster set `set` (those carrying its
/// label); fails with the API server's answer.
pub async fn cluster_set_members(client: &Client, set: &str) -> Result<Vec<String>, CliError> {
    let api: Api<ManagedCluster> = Api::all(client.clone());
    let listed = api
        .list(
            &ListParams::default()
                .labels(&format!("{}={set}", ferry_api::contract::CLUSTER_SET_LABEL)),
        )
        .await
        .map_err(|e| {
            CliError::from_kube(
                "list managedclusters",
                "managedclusters.cluster.ferry.dev",
                e,
            )
        })?;
    Ok(listed.items.iter().map(|c| c.name_any()).collect())
}

/// The ManagedCluster `name`; [`CliError::ClusterNotFound`] when there is
/// none.
pub async fn get_cluster(client: &Client, name: &str) -> Result<ManagedCluster, CliError> {
    let clusters: Api<ManagedCluster> = Api::all(client.clone());
    let read = clusters.get_opt(name).await.map_err(|e| {
        CliError::from_kube(
            &format!("get managedcluster {name}"),
            "managedclusters.cluster.ferry.dev",
            e,
        )
    })?;
    read.ok_or_else(|| CliError::ClusterNotFound(name.to_string()))
}

/// The work named by `work`; [`CliError::WorkNotFound`] when there is none.
pub async fn get_work(client: &Client, work: &WorkRef) -> Result<WorkEntry, CliError> {
    let resource = ApiResource::erase::<ManifestWork>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &work.namespace, &resource);
    let action = format!("get manifestwork {}/{}", work.namespace, work.name);
    match api.get_opt(&work.name).await {
        Ok(Some(object)) => Ok(WorkEntry::from_raw(raw_object(object, &resource))),
        Ok(None) => Err(CliError::WorkNotFound {
            namespace: work.namespace.clone(),
            name: work.name.clone(),
        }),
        Err(error) => Err(CliError::from_kube(&action, &full_name(&resource), error)),
    }
}

/// The Events about `work` (core/v1, which also serves those written through
/// events.k8s.io/v1), selected as kubectl describe selects them: by the
/// involved object's kind, name and uid in the work's namespace.
pub async fn work_events(client: &Client, work: &WorkEntry) -> Result<Vec<Event>, CliError> {
    let api: Api<Event> = Api::namespaced(client.clone(), work.namespace());
    let mut selector = format!(
        "involvedObject.kind={},involvedObject.name={}",
        ManifestWork::kind(&()),
        work.name()
    );
    if let Some(uid) = work.raw["metadata"]["uid"].as_str() {
        selector.push_str(&format!(",involvedObject.uid={uid}"));
    }
    let action = format!(
        "list events about manifestwork {}/{}",
        work.namespace(),
        work.name()
    );
    list_all(
        &api,
        ListParams::default().fields(&selector),
        &action,
        "events",
    )
    .await
}

/// The first `limit` Events of `namespace`, one request (the dashboard
/// shows the recent ones); fails with the API server's answer, which the
/// dashboard shows in the page.
pub async fn events_in(
    client: &Client,
    namespace: &str,
    limit: u32,
) -> Result<Vec<Event>, kube::Error> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    Ok(api.list(&ListParams::default().limit(limit)).await?.items)
}

/// Every object `api` lists with `params`, page by page; `action` and
/// `resource` name what was asked in errors.
async fn list_all<K>(
    api: &Api<K>,
    params: ListParams,
    action: &str,
    resource: &str,
) -> Result<Vec<K>, CliError>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut objects = Vec::new();
    let mut params = params.limit(PAGE_SIZE);
    loop {
        let page: ObjectList<K> = api
            .list(&params)
            .await
            .map_err(|e| CliError::from_kube(action, resource, e))?;
        let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
        objects.extend(page.items);
        match next {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(objects),
        }
    }
}

/// `manifestworks.work.ferry.dev`, as error messages name a resource.
fn full_name(resource: &ApiResource) -> String {
    format!("{}.{}", resource.plural, resource.group)
}

/// The object as JSON with apiVersion and kind set: list responses may leave
/// them out of their items, and `-o json` should print whole objects.
pub(crate) fn raw_object(mut object: DynamicObject, resource: &ApiResource) -> Value {
    if object.types.is_none() {
        object.types = Some(kube::api::TypeMeta {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
        });
    }
    // A DynamicObject is JSON already, so this cannot fail; should it ever,
    // the object still shows by name with the reason instead of vanishing.
    let name = object.name_any();
    let namespace = object.namespace();
    serde_json::to_value(&object).unwrap_or_else(|e| {
        serde_json::json!({"metadata": {"name": name, "namespace": namespace}, "error": e.to_string()})
    })
}
