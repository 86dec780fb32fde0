//! The HTTP server: pages, the event stream, the embedded assets and the
//! action endpoint, bound to 127.0.0.1 only. Since the server reads and acts
//! with the user's credentials, it answers only a browser that holds its
//! session: the one-time link printed to the terminal sets an HttpOnly,
//! SameSite=Strict cookie and is used up, so another local user who can
//! reach the port has nothing to present. Requests naming another host
//! (DNS rebinding) and posts without the page's token (cross-site forms)
//! are refused, and every response carries a strict Content-Security-Policy.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::extract::{Form, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use futures::{Stream, StreamExt};
use kube::Client;
use subtle::ConstantTimeEq;
use tokio_stream::wrappers::BroadcastStream;
use tower_http::set_header::SetResponseHeaderLayer;

use super::actions::{Action, ActionError, action_from_form, gate_awaits, perform};
use super::cluster_page::{EventsView, cluster_body};
use super::fleet_page::{FleetFilter, fleet_body};
use super::layout::{main_content, page};
use super::live::{Live, Watched, raw_objects};
use super::rollouts_page::rollouts_body;
use super::serve_error::ServeError;
use crate::age::now;
use crate::events::recent;
use crate::hub_api::fleet::events_in;
use crate::work_rows::WorkEntry;

/// The stylesheet, embedded.
pub const STYLE_CSS: &str = include_str!("assets/style.css");
/// The page script (live updates, confirmed actions), embedded.
pub const LIVE_JS: &str = include_str!("assets/live.js");
/// Request header asking for `<main>`'s content (live updates) or the bare
/// action result text instead of a whole page.
const FRAGMENT_HEADER: &str = "x-ferry-fragment";
/// Response header of a page: the notice count it was rendered at.
const CHANGES_HEADER: &str = "x-ferry-changes";
/// Events listed for a cluster page: one bounded request.
const EVENTS_LIMIT: u32 = 200;
/// Where the one-time link points: `/session/<secret>`.
pub const SESSION_PATH: &str = "/session/";
/// The policy of every response: the page's own script and stylesheet
/// (no inline script or style), fetches and the event stream to itself,
/// forms posting only to itself, and no framing.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; \
     base-uri 'none'; frame-ancestors 'none'";

/// What every handler reads.
pub struct App {
    /// The watched hub.
    pub live: Live,
    /// The user's client, for events and actions.
    pub client: Client,
    /// The anti-forgery token every action form carries.
    pub token: String,
    /// Who may use the dashboard: the one-time secret, then the session.
    pub access: Access,
    /// The port bound, for the Host check.
    pub port: u16,
    /// Event streams open at once, at most [`MAX_STREAMS`]: each holds a
    /// receiver of the notices.
    pub streams: Arc<tokio::sync::Semaphore>,
}

/// The dashboard's access: a one-time secret printed to the terminal, which
/// the first visit exchanges for the session cookie.
pub struct Access {
    /// The secret of the one-time link; `None` once used.
    secret: std::sync::Mutex<Option<String>>,
    /// The session cookie's value.
    session: String,
    /// The cookie's name, with the port (a browser keeps cookies per host,
    /// not per port, so two dashboards must not share one).
    cookie_name: String,
}

/// What a visit to the one-time link gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exchange {
    /// The secret was right and unused: it is used up now; set the cookie.
    Granted,
    /// The secret was used before.
    Used,
    /// Not this dashboard's secret.
    Wrong,
}

impl Access {
    /// Access with the one-time `secret` and the `session` it is exchanged
    /// for, on `port`.
    pub fn new(secret: String, session: String, port: u16) -> Self {
        Access {
            secret: std::sync::Mutex::new(Some(secret)),
            session,
            cookie_name: format!("ferry-dashboard-{port}"),
        }
    }

    /// Exchanges `offered` for the session: [`Exchange::Granted`] exactly
    /// once, for the right secret.
    pub fn exchange(&self, offered: &str) -> Exchange {
        let mut secret = match self.secret.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        match secret.as_deref() {
            None => Exchange::Used,
            Some(s) if bool::from(s.as_bytes().ct_eq(offered.as_bytes())) => {
                *secret = None;
                Exchange::Granted
            }
            Some(_) => Exchange::Wrong,
        }
    }

    /// The `Set-Cookie` value granting the session: HttpOnly (no script
    /// reads it), SameSite=Strict (no other site's page sends it), for the
    /// whole dashboard, gone when the browser closes.
    pub fn set_cookie(&self) -> String {
        cookie::Cookie::build((self.cookie_name.clone(), self.session.clone()))
            .http_only(true)
            .same_site(cookie::SameSite::Strict)
            .path("/")
            .build()
            .to_string()
    }

    /// Whether `headers` carry the session cookie.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(cookie::Cookie::split_parse)
            .filter_map(Result::ok)
            .any(|c| {
                c.name() == self.cookie_name
                    && bool::from(c.value().as_bytes().ct_eq(self.session.as_bytes()))
            })
    }
}

/// Browser tabs that may follow the hub at once.
pub const MAX_STREAMS: usize = 32;

/// Binds 127.0.0.1:`port` (0: any free port) and returns the listener and
/// the address bound.
pub async fn bind(port: u16) -> Result<(tokio::net::TcpListener, SocketAddr), ServeError> {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port))
        .await
        .map_err(|source| ServeError::Bind { port, source })?;
    let addr = listener
        .local_addr()
        .map_err(|source| ServeError::Bind { port, source })?;
    Ok((listener, addr))
}

/// Serves `app` on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, app: Arc<App>) -> Result<(), ServeError> {
    axum::serve(listener, router(app))
        .await
        .map_err(ServeError::Serve)
}

/// The routes.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(fleet))
        .route("/clusters/{name}", get(cluster))
        .route("/rollouts", get(rollouts))
        .route("/events", get(events))
        .route(
            "/assets/style.css",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
                    STYLE_CSS,
                )
            }),
        )
        .route(
            "/assets/live.js",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
                    LIVE_JS,
                )
            }),
        )
        .route("/actions/{verb}", post(action))
        .route("/session/{secret}", get(session))
        .layer(middleware::from_fn_with_state(app.clone(), session_only))
        .layer(middleware::from_fn_with_state(app.clone(), local_host_only))
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ))
        .with_state(app)
}

/// Refuses every request but the one-time link's that does not carry the
/// session cookie: without it, another local user reaching the port sees
/// nothing and can do nothing.
async fn session_only(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    if request.uri().path().starts_with(SESSION_PATH) || app.access.admits(request.headers()) {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "this browser has no session of this dashboard: open the one-time link \
         `kubectl ferry dashboard` printed in its terminal\n",
    )
        .into_response()
}

/// The one-time link: the first visit with the right secret gets the
/// session cookie and goes to the fleet; the secret is used up. A browser
/// that already holds the session simply goes on.
async fn session(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(secret): Path<String>,
) -> Response {
    match app.access.exchange(&secret) {
        Exchange::Granted => (
            StatusCode::SEE_OTHER,
            [
                (header::SET_COOKIE, app.access.set_cookie()),
                (header::LOCATION, "/".to_string()),
                (header::CACHE_CONTROL, "no-store".to_string()),
            ],
        )
            .into_response(),
        _ if app.access.admits(&headers) => {
            (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response()
        }
        Exchange::Used => (
            StatusCode::FORBIDDEN,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "this one-time link was used already and works only once; if it was not you who \
             opened it, stop this dashboard (another process read the link); restart \
             `kubectl ferry dashboard` for a new one\n",
        )
            .into_response(),
        Exchange::Wrong => (
            StatusCode::FORBIDDEN,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "not this dashboard's link: open the one-time link `kubectl ferry dashboard` printed\n",
        )
            .into_response(),
    }
}

/// Refuses requests whose Host is not this server's loopback address: a
/// page on another site cannot read the dashboard through a DNS name that
/// resolves to 127.0.0.1.
async fn local_host_only(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let allowed = [
        format!("127.0.0.1:{}", app.port),
        format!("localhost:{}", app.port),
    ];
    if !allowed.iter().any(|a| a == host) {
        return (
            StatusCode::MISDIRECTED_REQUEST,
            "this dashboard answers only on its loopback address\n",
        )
            .into_response();
    }
    next.run(request).await
}

fn wants_fragment(headers: &HeaderMap) -> bool {
    headers.contains_key(FRAGMENT_HEADER)
}

/// The whole page, or only `<main>`'s content for a live update; `seen` is
/// the notice count read before the page's data was (sent with it, so the
/// script re-fetches when a change came in between).
async fn respond(
    app: &App,
    headers: &HeaderMap,
    seen: u64,
    title: &str,
    nav: &str,
    body: String,
) -> Response {
    let main = main_content(&app.live.error_lines().await, &body);
    let html = if wants_fragment(headers) {
        main
    } else {
        page(title, nav, &app.token, seen, &main)
    };
    (
        [
            (header::CACHE_CONTROL, "no-store".to_string()),
            (
                header::HeaderName::from_static(CHANGES_HEADER),
                seen.to_string(),
            ),
        ],
        Html(html),
    )
        .into_response()
}

fn works(app: &App) -> Vec<WorkEntry> {
    raw_objects(&app.live.works, Watched::Works)
        .into_iter()
        .map(WorkEntry::from_raw)
        .collect()
}

async fn fleet(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Query(filter): Query<FleetFilter>,
) -> Response {
    let seen = app.live.changes();
    let clusters = raw_objects(&app.live.clusters, Watched::Clusters);
    let body = fleet_body(&clusters, &works(&app), &filter);
    respond(&app, &headers, seen, "Fleet", "/", body).await
}

/// A valid Kubernetes name (RFC 1123 subdomain): only such a name is sent
/// to the API server as a namespace.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

async fn cluster(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    if !valid_name(&name) {
        return (StatusCode::BAD_REQUEST, "not a cluster name\n").into_response();
    }
    let seen = app.live.changes();
    let clusters = raw_objects(&app.live.clusters, Watched::Clusters);
    let cluster = clusters
        .iter()
        .find(|c| c["metadata"]["name"].as_str() == Some(name.as_str()));
    let works: Vec<WorkEntry> = works(&app)
        .into_iter()
        .filter(|w| w.namespace() == name)
        .collect();
    let events = cluster_events(&app.client, &name).await;
    let body = cluster_body(&name, cluster, &works, &events, now());
    respond(&app, &headers, seen, &format!("Cluster {name}"), "", body).await
}

/// The recent events of the cluster's namespace, or why they cannot be read.
async fn cluster_events(client: &Client, namespace: &str) -> EventsView {
    match events_in(client, namespace, EVENTS_LIMIT).await {
        Ok(events) => Ok(recent(&events)),
        Err(kube::Error::Api(status)) if status.code == 403 => Err(format!(
            "forbidden: you may not list events in namespace {namespace} ({})",
            status.message
        )),
        Err(error) => Err(format!(
            "cannot list events in namespace {namespace}: {error}"
        )),
    }
}

async fn rollouts(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let seen = app.live.changes();
    let replica_sets = raw_objects(&app.live.replica_sets, Watched::ReplicaSets);
    let body = rollouts_body(&replica_sets, &app.token);
    respond(&app, &headers, seen, "Rollouts", "/rollouts", body).await
}

/// The page's event stream: "hello" once with the notice count, then "changed" with the kind for
/// every notice ("lagged" when this browser fell behind the bounded channel
/// and should simply re-fetch).
async fn events(State(app): State<Arc<App>>) -> Response {
    // Each open tab holds one permit until its stream ends.
    let Ok(permit) = app.streams.clone().try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("more than {MAX_STREAMS} pages follow this dashboard; close some tabs\n"),
        )
            .into_response();
    };
    event_stream(&app, permit).into_response()
}

fn event_stream(
    app: &App,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Sse<impl Stream<Item = Result<Event, Infallible>> + use<>> {
    // Subscribe first, then count: a change after the count arrives as a
    // notice, one before it shows as a count the page has not seen.
    let receiver = app.live.notices.subscribe();
    let count = app.live.changes();
    let notices = BroadcastStream::new(receiver).map(move |notice| {
        let _held = &permit;
        let data = match notice {
            Ok(kind) => format!("{kind:?}"),
            Err(_lagged) => "lagged".to_string(),
        };
        Ok(Event::default().event("changed").data(data))
    });
    let hello = futures::stream::once(async move {
        Ok(Event::default().event("hello").data(count.to_string()))
    });
    Sse::new(hello.chain(notices)).keep_alive(KeepAlive::default())
}

/// Does one action from a posted form, after checking the form's token and,
/// for an approval, that the gate still awaits it. Answers with the result
/// sentence (text for the page's script, a small page otherwise); 403 when
/// the user's RBAC refused.
async fn action(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(verb): Path<String>,
    Form(fields): Form<HashMap<String, String>>,
) -> Response {
    let result = run_action(&app, &verb, &fields).await;
    let (status, text) = match &result {
        Ok(done) => (StatusCode::OK, done.clone()),
        Err(error) if error.is_forbidden() => (StatusCode::FORBIDDEN, error.to_string()),
        Err(ActionError::BadField(_)) => (StatusCode::BAD_REQUEST, result_text(&result)),
        Err(ActionError::NotAwaiting { .. }) => (StatusCode::CONFLICT, result_text(&result)),
        Err(_) => (StatusCode::BAD_GATEWAY, result_text(&result)),
    };
    if wants_fragment(&headers) {
        return (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            text,
        )
            .into_response();
    }
    let body = format!(
        r#"<p class="banner {}" role="status">{}</p><p><a href="/rollouts">Back to the rollouts</a></p>"#,
        if status == StatusCode::OK {
            "ok"
        } else {
            "error"
        },
        super::escape::escape(&text)
    );
    (
        status,
        Html(page("Action", "", &app.token, app.live.changes(), &body)),
    )
        .into_response()
}

fn result_text(result: &Result<String, ActionError>) -> String {
    match result {
        Ok(text) => text.clone(),
        Err(error) => error.to_string(),
    }
}

async fn run_action(
    app: &App,
    verb: &str,
    fields: &HashMap<String, String>,
) -> Result<String, ActionError> {
    if fields.get("token").map(String::as_str) != Some(app.token.as_str()) {
        return Err(ActionError::BadField("token (reload the page)"));
    }
    if fields.len() > 8 {
        return Err(ActionError::BadField("form"));
    }
    let action = action_from_form(verb, |k| fields.get(k).map(String::as_str))?;
    if let Action::Approve {
        namespace,
        replica_set,
        placement,
        after_group,
        revision,
    } = &action
    {
        let stored = raw_objects(&app.live.replica_sets, Watched::ReplicaSets);
        let awaits = stored.iter().any(|rs| {
            rs["metadata"]["namespace"].as_str() == Some(namespace.as_str())
                && rs["metadata"]["name"].as_str() == Some(replica_set.as_str())
                && gate_awaits(rs, placement, after_group, revision)
        });
        if !awaits {
            return Err(ActionError::NotAwaiting {
                namespace: namespace.clone(),
                replica_set: replica_set.clone(),
                after_group: after_group.clone(),
            });
        }
    }
    perform(&app.client, &action).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cookie_headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(value).expect("header value"),
        );
        headers
    }

    #[test]
    fn the_secret_is_exchanged_once_for_an_http_only_strict_cookie() {
        let access = Access::new("s3cret".into(), "sess".into(), 8080);
        assert_eq!(access.exchange("guess"), Exchange::Wrong);
        assert_eq!(access.exchange("s3cret"), Exchange::Granted);
        assert_eq!(access.exchange("s3cret"), Exchange::Used);
        let set = access.set_cookie();
        assert!(set.starts_with("ferry-dashboard-8080=sess"), "{set}");
        assert!(set.contains("HttpOnly"), "{set}");
        assert!(set.contains("SameSite=Strict"), "{set}");
        assert!(set.contains("Path=/"), "{set}");
    }

    #[test]
    fn only_the_session_cookie_of_this_port_is_admitted() {
        let access = Access::new("s".into(), "sess".into(), 8080);
        assert!(access.admits(&cookie_headers("a=b; ferry-dashboard-8080=sess")));
        assert!(!access.admits(&cookie_headers("ferry-dashboard-8080=other")));
        assert!(!access.admits(&cookie_headers("ferry-dashboard-8081=sess")));
        assert!(!access.admits(&HeaderMap::new()));
    }
}
