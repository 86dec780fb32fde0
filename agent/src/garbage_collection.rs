//! Garbage collection of one pass: the objects recorded for a work that no
//! manifest names any more are released, and the record is brought to what
//! the work holds now.

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

/// What a pass's garbage collection leaves: whether something is left to
/// retry, and the list the record must hold now when it differs from the
/// stored one.
pub(crate) struct Collected {
    pub(crate) retry: bool,
    pub(crate) record: Option<Vec<AppliedResource>>,
}

/// Releases the objects recorded before this pass that no manifest names
/// any more, and says what the record must hold now (the caller writes it:
/// after the pass's report, see `Reconciled::record`). When a manifest
/// could not even be parsed, nothing is released: it might name any
/// recorded object.
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
    Collected {
        retry,
        record: (!same_set(&holding, pass.stored)).then_some(holding),
    }
}

fn same_set(a: &[AppliedResource], b: &[AppliedResource]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}
