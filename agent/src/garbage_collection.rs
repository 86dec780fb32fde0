//! Garbage collection of one pass: the objects recorded for a work that no
//! manifest names any more are released, and the pass learns what the
//! record must hold now (the caller writes it, after the work's status is
//! out: the record already names every object the pass may have created).

use kube::Client;
use tracing::debug;

use crate::applied_works::AppliedResource;
use crate::release::release_each;
use ferry_semantics::release::{DeletePolicy, Owner};

/// A manifest that failed after it was identified still claims the object
/// it names, so a failing apply never garbage-collects its own object.
pub(crate) struct Claim {
    pub(crate) group: String,
    pub(crate) kind: String,
    pub(crate) namespace: Option<String>,
    pub(crate) name: String,
}

impl Claim {
    fn covers(&self, resource: &AppliedResource) -> bool {
        self.group == resource.group
            && self.kind == resource.kind
            && self.name == resource.name
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| *ns == resource.namespace)
    }
}

/// What one pass knows of a work's record: whose it is, what was stored
/// before the pass, and what the pass recorded (intents and applied objects).
pub(crate) struct PassObjects<'a> {
    pub(crate) owner: &'a Owner,
    pub(crate) stored: &'a [AppliedResource],
    pub(crate) recorded: &'a [AppliedResource],
}

/// What garbage collection left to do: a retry for objects not released
/// yet, and the record's new list of objects when it changed.
pub(crate) struct Collected {
    /// Some object the work no longer lists could not be released yet.
    pub(crate) retry: bool,
    /// What the record must hold now; `None` when it already does.
    pub(crate) holding: Option<Vec<AppliedResource>>,
}

/// Releases the objects recorded before this pass that no manifest names
/// any more, and says what the record must hold now. When a manifest could
/// not even be parsed, nothing is released: it might name any recorded
/// object. Never fails: an object not released is kept and retried.
pub(crate) async fn collect_garbage(
    client: &Client,
    pass: &PassObjects<'_>,
    claims: &[Claim],
    all_identified: bool,
    policy: &DeletePolicy,
) -> Collected {
    let mut holding = pass.recorded.to_vec();
    let mut unlisted = Vec::new();
    // What the record holds now: the intents of objects that failed to
    // apply stay (their manifests claim them), the others are released
    // only if this work created them.
    for old in pass.stored {
        if holding.iter().any(|r| r.same_object(old)) {
            continue;
        }
        if !all_identified || claims.iter().any(|c| c.covers(old)) {
            holding.push(old.clone());
        } else {
            unlisted.push(old.clone());
        }
    }
    let left = release_each(client, &unlisted, pass.owner, policy).await;
    for blocker in &left.blockers {
        debug!(%blocker, "an object the work no longer lists is not released yet");
    }
    let retry = !left.kept.is_empty();
    holding.extend(left.kept);
    let holding = (!same_set(&holding, pass.stored)).then_some(holding);
    Collected { retry, holding }
}

fn same_set(a: &[AppliedResource], b: &[AppliedResource]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}
