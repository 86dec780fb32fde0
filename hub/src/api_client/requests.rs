//! Counts the hub's own requests to its API server by verb, group, resource
//! and subresource (`ferry_hub_api_requests_total`): what the hub costs the
//! API server, read from the hub alone. The API server's own
//! `apiserver_request_total` mixes every client (the controller manager,
//! kubelets, other operators), so it cannot say which requests are the
//! hub's.
//!
//! The labels follow the API server's request attributes, so the two sets
//! of counters read side by side: `verb` is GET, LIST, WATCH, POST, PUT,
//! PATCH, APPLY (a server-side apply patch), DELETE or DELETECOLLECTION.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// At most this many (group, resource, subresource) triples are counted by
/// name; requests to any other count under [`OTHER`]. The hub only calls
/// resources it knows, but the label set must stay bounded whatever a path
/// holds.
pub const MAX_RESOURCES: usize = 64;

/// The resource label of a request past [`MAX_RESOURCES`].
pub const OTHER: &str = "other";

/// The resource label of a request to a path outside `/api` and `/apis`
/// (`/version`, `/openapi/v2`, discovery of the API groups).
pub const NON_RESOURCE: &str = "non-resource";

/// The labels of one counted request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiRequestLabel {
    /// GET, LIST, WATCH, POST, PUT, PATCH, APPLY, DELETE, DELETECOLLECTION
    /// (or the HTTP method for any other).
    pub verb: String,
    /// The API group, empty for the core group.
    pub group: String,
    /// The resource (`managedclusters`), [`NON_RESOURCE`] or [`OTHER`].
    pub resource: String,
    /// The subresource (`status`), or empty.
    pub subresource: String,
}

/// What a request path names: `/api/v1/...` or `/apis/{group}/{version}/...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestTarget {
    /// The API group, empty for the core group.
    pub group: String,
    /// The resource, empty for a path outside `/api` and `/apis` or one
    /// that stops at the group version (discovery).
    pub resource: String,
    /// The subresource, or empty.
    pub subresource: String,
    /// Whether the path names one object (a GET of it is not a LIST).
    pub named: bool,
}

/// Reads `path` the way the API server does: an optional
/// `namespaces/{namespace}` scope (unless what follows is one of a
/// namespace's own subresources, `status` and `finalize`), then resource,
/// name and subresource. Never fails: a path it cannot read names no
/// resource.
pub fn request_target(path: &str) -> RequestTarget {
    let mut parts = path.split('/').filter(|p| !p.is_empty());
    let group = match parts.next() {
        Some("api") => {
            parts.next();
            String::new()
        }
        Some("apis") => {
            let group = parts.next().unwrap_or_default().to_string();
            parts.next();
            group
        }
        _ => {
            return RequestTarget {
                group: String::new(),
                resource: String::new(),
                subresource: String::new(),
                named: false,
            };
        }
    };
    let mut rest: Vec<&str> = parts.collect();
    if rest.len() > 2 && rest[0] == "namespaces" && !matches!(rest[2], "status" | "finalize") {
        rest.drain(..2);
    }
    RequestTarget {
        group,
        resource: rest.first().copied().unwrap_or_default().to_string(),
        subresource: rest.get(2).copied().unwrap_or_default().to_string(),
        named: rest.len() > 1,
    }
}

/// The verb of a request: its method, told apart as the API server does
/// (a GET with `watch=true` or `watch=1` is a WATCH, an unnamed GET a LIST,
/// an unnamed DELETE a DELETECOLLECTION, a PATCH of server-side apply an
/// APPLY).
pub fn verb(
    method: &http::Method,
    query: Option<&str>,
    content_type: Option<&str>,
    named: bool,
) -> String {
    let watching = query.is_some_and(|q| {
        q.split('&')
            .any(|pair| matches!(pair, "watch=true" | "watch=1"))
    });
    match *method {
        http::Method::GET if watching => "WATCH".into(),
        http::Method::GET if named => "GET".into(),
        http::Method::GET => "LIST".into(),
        http::Method::POST => "POST".into(),
        http::Method::PUT => "PUT".into(),
        http::Method::PATCH
            if content_type.is_some_and(|c| c.starts_with("application/apply-patch")) =>
        {
            "APPLY".into()
        }
        http::Method::PATCH => "PATCH".into(),
        http::Method::DELETE if named => "DELETE".into(),
        http::Method::DELETE => "DELETECOLLECTION".into(),
        ref other => other.as_str().to_string(),
    }
}

/// The hub client's request counters; clones share them.
#[derive(Clone, Debug, Default)]
pub struct ApiRequests {
    counts: Family<ApiRequestLabel, Counter>,
    /// The (group, resource, subresource) triples counted by name so far,
    /// at most [`MAX_RESOURCES`].
    resources: Arc<Mutex<HashSet<(String, String, String)>>>,
}

impl ApiRequests {
    /// Counts `request` once (a retry of it by the client is not counted
    /// again).
    pub fn count<B>(&self, request: &http::Request<B>) {
        let uri = request.uri();
        let target = request_target(uri.path());
        let content_type = request
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        let verb = verb(request.method(), uri.query(), content_type, target.named);
        let label = self.label(verb, target);
        self.counts.get_or_create(&label).inc();
    }

    /// The label of a request to `target`: by name while fewer than
    /// [`MAX_RESOURCES`] triples are known, else [`OTHER`].
    fn label(&self, verb: String, target: RequestTarget) -> ApiRequestLabel {
        if target.resource.is_empty() {
            return ApiRequestLabel {
                verb,
                group: String::new(),
                resource: NON_RESOURCE.into(),
                subresource: String::new(),
            };
        }
        let key = (target.group, target.resource, target.subresource);
        // A poisoned lock only means another thread panicked mid-insert;
        // the set is still a set.
        let mut known = self.resources.lock().unwrap_or_else(|e| e.into_inner());
        if known.contains(&key) || known.len() < MAX_RESOURCES {
            known.insert(key.clone());
            let (group, resource, subresource) = key;
            ApiRequestLabel {
                verb,
                group,
                resource,
                subresource,
            }
        } else {
            ApiRequestLabel {
                verb,
                group: String::new(),
                resource: OTHER.into(),
                subresource: String::new(),
            }
        }
    }

    /// Registers the counters as `api_requests` (exposed as
    /// `api_requests_total` under the registry's prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "api_requests",
            "Requests the hub sent its API server, by verb, group, resource and subresource (a client retry not counted again)",
            self.counts.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    impl ApiRequests {
        /// How many requests have been counted under `label` (0 if none).
        fn get(&self, label: &ApiRequestLabel) -> u64 {
            self.counts.get(label).map(|c| c.get()).unwrap_or_default()
        }
    }

    fn target(path: &str) -> (String, String, String, bool) {
        let t = request_target(path);
        (t.group, t.resource, t.subresource, t.named)
    }

    fn t(group: &str, resource: &str, sub: &str, named: bool) -> (String, String, String, bool) {
        (group.into(), resource.into(), sub.into(), named)
    }

    #[test]
    fn paths_are_read_as_the_api_server_reads_them() {
        let cases = [
            ("/api/v1/namespaces", t("", "namespaces", "", false)),
            ("/api/v1/namespaces/a", t("", "namespaces", "", true)),
            (
                "/api/v1/namespaces/a/status",
                t("", "namespaces", "status", true),
            ),
            (
                "/api/v1/namespaces/a/finalize",
                t("", "namespaces", "finalize", true),
            ),
            ("/api/v1/namespaces/a/secrets", t("", "secrets", "", false)),
            ("/api/v1/namespaces/a/secrets/s", t("", "secrets", "", true)),
            (
                "/api/v1/namespaces/a/serviceaccounts/agent/token",
                t("", "serviceaccounts", "token", true),
            ),
            (
                "/apis/cluster.ferry.dev/v1/managedclusters/c/status",
                t("cluster.ferry.dev", "managedclusters", "status", true),
            ),
            (
                "/apis/coordination.k8s.io/v1/namespaces/default/leases",
                t("coordination.k8s.io", "leases", "", false),
            ),
            (
                "/apis/authentication.k8s.io/v1/tokenreviews",
                t("authentication.k8s.io", "tokenreviews", "", false),
            ),
            ("/apis/apps/v1", t("apps", "", "", false)),
            ("/version", t("", "", "", false)),
            ("", t("", "", "", false)),
        ];
        for (path, want) in cases {
            assert_eq!(target(path), want, "{path}");
        }
    }

    #[test]
    fn verbs_are_told_apart_as_the_api_server_does() {
        use http::Method;
        assert_eq!(
            verb(
                &Method::GET,
                Some("watch=true&resourceVersion=5"),
                None,
                false
            ),
            "WATCH"
        );
        assert_eq!(
            verb(&Method::GET, Some("labelSelector=a&watch=1"), None, false),
            "WATCH"
        );
        assert_eq!(verb(&Method::GET, Some("watch=false"), None, false), "LIST");
        assert_eq!(verb(&Method::GET, None, None, true), "GET");
        assert_eq!(verb(&Method::POST, None, None, false), "POST");
        assert_eq!(verb(&Method::PUT, None, None, true), "PUT");
        assert_eq!(
            verb(
                &Method::PATCH,
                None,
                Some("application/merge-patch+json"),
                true
            ),
            "PATCH"
        );
        assert_eq!(
            verb(
                &Method::PATCH,
                Some("fieldManager=ferry"),
                Some("application/apply-patch+yaml"),
                true
            ),
            "APPLY"
        );
        assert_eq!(verb(&Method::DELETE, None, None, true), "DELETE");
        assert_eq!(verb(&Method::DELETE, None, None, false), "DELETECOLLECTION");
        assert_eq!(verb(&Method::OPTIONS, None, None, false), "OPTIONS");
    }

    fn request(method: http::Method, uri: &str) -> http::Request<()> {
        http::Request::builder()
            .method(method)
            .uri(uri)
            .body(())
            .expect("a request")
    }

    #[test]
    fn each_request_counts_once_under_its_labels() {
        let counted = ApiRequests::default();
        let watch = "/apis/cluster.ferry.dev/v1/managedclusters?watch=true";
        counted.count(&request(http::Method::GET, watch));
        counted.count(&request(http::Method::GET, watch));
        counted.count(&request(
            http::Method::PATCH,
            "/apis/cluster.ferry.dev/v1/managedclusters/c/status",
        ));
        let label = |verb: &str, sub: &str| ApiRequestLabel {
            verb: verb.into(),
            group: "cluster.ferry.dev".into(),
            resource: "managedclusters".into(),
            subresource: sub.into(),
        };
        assert_eq!(counted.get(&label("WATCH", "")), 2);
        assert_eq!(counted.get(&label("PATCH", "status")), 1);
        assert_eq!(counted.get(&label("LIST", "")), 0);
    }

    #[test]
    fn resources_past_the_bound_count_as_other() {
        let counted = ApiRequests::default();
        for i in 0..MAX_RESOURCES + 10 {
            counted.count(&request(http::Method::GET, &format!("/apis/g/v1/r{i}")));
        }
        // A resource already known keeps its own label past the bound.
        counted.count(&request(http::Method::GET, "/apis/g/v1/r0"));
        let label = |resource: &str, group: &str| ApiRequestLabel {
            verb: "LIST".into(),
            group: group.into(),
            resource: resource.into(),
            subresource: String::new(),
        };
        assert_eq!(counted.get(&label("r0", "g")), 2);
        assert_eq!(
            counted.get(&label(&format!("r{}", MAX_RESOURCES - 1), "g")),
            1
        );
        assert_eq!(counted.get(&label(&format!("r{MAX_RESOURCES}"), "g")), 0);
        assert_eq!(counted.get(&label(OTHER, "")), 10);
    }

    proptest! {
        /// Whatever the path, reading it never panics, and however many
        /// distinct paths are counted the label set stays bounded.
        #[test]
        fn any_paths_keep_the_label_set_bounded(paths in proptest::collection::vec("(/api/v1|/apis/[a-z]{1,3}/v[12]|)(/[a-z0-9.]{1,6}){0,5}", 0..300)) {
            let counted = ApiRequests::default();
            for path in &paths {
                let _ = request_target(path);
                counted.count(&request(http::Method::GET, if path.is_empty() { "/" } else { path }));
            }
            let known = counted.resources.lock().map(|k| k.len()).unwrap_or(0);
            prop_assert!(known <= MAX_RESOURCES);
        }
    }
}
