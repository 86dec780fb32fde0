//! Counts what a spoke's API server was asked to change, and which objects
//! the admin identity read, from its audit log: the proof that ferry stays
//! quiet when nothing needs writing while it keeps checking.

use serde_json::Value;

// Write requests made with the admin identity the in-process agent uses,
// excluding the API server's own traffic.
fn writes(audit_log: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(audit_log).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["user"]["username"] == "ferry-admin")
        .filter(|event| {
            matches!(
                event["verb"].as_str(),
                Some("create" | "update" | "patch" | "delete" | "deletecollection")
            )
        })
        .collect()
}

/// How many write requests (create, update, patch, delete) the agent's
/// identity has made so far.
pub fn count_writes(audit_log: &str) -> usize {
    writes(audit_log).len()
}

/// Those write requests as `verb URI` lines, for failure messages.
pub fn list_writes(audit_log: &str) -> Vec<String> {
    writes(audit_log)
        .iter()
        .map(|event| format!("{} {}", event["verb"], event["requestURI"]))
        .collect()
}

/// How many times the admin identity (the in-process agent's) has read the
/// single object at `uri` (e.g. `/api/v1/namespaces/default/configmaps/a`)
/// so far: each pass of the agent over a work reads its objects once.
pub fn count_reads(audit_log: &str, uri: &str) -> usize {
    let text = std::fs::read_to_string(audit_log).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["user"]["username"] == "ferry-admin")
        .filter(|event| event["verb"] == "get")
        .filter(|event| {
            event["requestURI"]
                .as_str()
                .is_some_and(|u| u.split('?').next() == Some(uri))
        })
        .count()
}

/// One request as the audit log records it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    /// The RBAC verb (`get`, `list`, `watch`, `create`, `patch`, ...).
    pub verb: String,
    /// The API group, empty for the core group.
    pub group: String,
    /// The resource, with its subresource as `resource/subresource`.
    pub resource: String,
    /// The object's name, empty for collections.
    pub name: String,
    /// The HTTP status answered (0 while a watch is still open).
    pub code: u16,
}

/// Every request `username` made (e.g.
/// `system:serviceaccount:ferry:ferry-hub`), as the audit log at `audit_log`
/// recorded them; a watch appears when it started. Empty when the log is
/// absent.
pub fn requests_by(audit_log: &str, username: &str) -> Vec<Request> {
    let text = std::fs::read_to_string(audit_log).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["user"]["username"] == username)
        .filter_map(|event| {
            let object = &event["objectRef"];
            let resource = object["resource"].as_str()?;
            let resource = match object["subresource"].as_str() {
                Some(sub) => format!("{resource}/{sub}"),
                None => resource.to_string(),
            };
            Some(Request {
                verb: event["verb"].as_str()?.to_string(),
                group: object["apiGroup"].as_str().unwrap_or_default().to_string(),
                resource,
                name: object["name"].as_str().unwrap_or_default().to_string(),
                code: event["responseStatus"]["code"]
                    .as_u64()
                    .and_then(|c| u16::try_from(c).ok())
                    .unwrap_or(0),
            })
        })
        .collect()
}
