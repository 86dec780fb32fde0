//! Policies fail closed: the leader checks, whenever its watches of them
//! see a change (and every [`CHECK_INTERVAL`] while one is not in force), that
//! each policy and binding of [`all_policies_for`] exists, is bound to
//! deny and matches what the hub installs (the spec fields it sets); when
//! one is not, it says so (`ferry_hub_admission_policy_missing{policy}`,
//! the leader's `/readyz`, a warning in the log, a Warning Event regarding
//! the policy, and a Normal one once it is back) and re-applies it. The
//! webhook asks [`PolicyHealth::missing`] to refuse what a missing policy
//! would have checked. The decision is [`check`], pure; [`run_watchdog`]
//! is the shell that watches, reports and repairs. It used to list both
//! kinds every 3 s: two thirds of an idle hub's requests to its API server.

use std::borrow::Borrow;
use std::time::Duration;

use crate::events::{HubEvent, HubEvents};
use futures::{Stream, StreamExt};
use k8s_openapi::api::admissionregistration::v1::{
    NamedRuleWithOperations, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingAdmissionPolicySpec,
};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tracing::{info, warn};

use super::policies::{all_policies_for, install_policy};
use super::policy_builder::PolicyDef;
use crate::leader::StopSignal;
use crate::metrics::{HubMetrics, PolicyLabel};
use crate::watch::backed_off_watch;

/// How often the leader checks the policies again while one is not in
/// force (repaired, but not yet seen in force).
pub const CHECK_INTERVAL: Duration = Duration::from_secs(3);

/// What is wrong with one policy the hub installs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// The policy does not exist.
    PolicyMissing(&'static str),
    /// The binding does not exist.
    BindingMissing(&'static str),
    /// The policy differs from what the hub installs, in the field named.
    PolicyAltered(&'static str, &'static str),
    /// The binding does not deny, names another policy, or narrows what it
    /// matches (the field named).
    BindingAltered(&'static str, &'static str),
    /// The policies could not be read (the error); every one counts as
    /// missing until they can.
    Unreadable(&'static str, String),
}

impl Finding {
    /// The name of the policy concerned.
    pub fn policy(&self) -> &'static str {
        match self {
            Self::PolicyMissing(p)
            | Self::BindingMissing(p)
            | Self::PolicyAltered(p, _)
            | Self::BindingAltered(p, _)
            | Self::Unreadable(p, _) => p,
        }
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::PolicyMissing(p) => write!(f, "admission policy {p} is missing"),
            Self::BindingMissing(p) => write!(f, "admission policy binding {p} is missing"),
            Self::PolicyAltered(p, what) => {
                write!(f, "admission policy {p} was altered ({what})")
            }
            Self::BindingAltered(p, what) => {
                write!(f, "admission policy binding {p} was altered ({what})")
            }
            Self::Unreadable(p, e) => {
                write!(f, "admission policy {p} could not be checked: {e}")
            }
        }
    }
}

/// A rule as compared: the fields the hub sets, sorted lists.
fn rule_key(rule: &NamedRuleWithOperations) -> [Vec<String>; 5] {
    let sorted = |v: &Option<Vec<String>>| {
        let mut v = v.clone().unwrap_or_default();
        v.sort();
        v
    };
    [
        sorted(&rule.api_groups),
        sorted(&rule.api_versions),
        sorted(&rule.operations),
        sorted(&rule.resources),
        vec![rule.scope.clone().unwrap_or_else(|| "*".into())],
    ]
}

/// The first field of `live` that differs from `want`, of those the hub
/// sets.
fn policy_difference(
    want: &ValidatingAdmissionPolicySpec,
    live: &ValidatingAdmissionPolicySpec,
) -> Option<&'static str> {
    if live.failure_policy.as_deref().unwrap_or("Fail") != "Fail" {
        return Some("failurePolicy");
    }
    let rules = |s: &ValidatingAdmissionPolicySpec| {
        let mut r: Vec<_> = s
            .match_constraints
            .as_ref()
            .and_then(|m| m.resource_rules.as_ref())
            .map(|r| r.iter().map(rule_key).collect())
            .unwrap_or_default();
        r.sort();
        r
    };
    if rules(want) != rules(live) {
        return Some("matchConstraints.resourceRules");
    }
    let narrowed = live.match_constraints.as_ref().is_some_and(|m| {
        m.exclude_resource_rules
            .as_ref()
            .is_some_and(|r| !r.is_empty())
            || m.namespace_selector
                .as_ref()
                .is_some_and(|s| s.match_labels.is_some() || s.match_expressions.is_some())
            || m.object_selector
                .as_ref()
                .is_some_and(|s| s.match_labels.is_some() || s.match_expressions.is_some())
    });
    if narrowed {
        return Some("matchConstraints");
    }
    let conditions = |s: &ValidatingAdmissionPolicySpec| {
        s.match_conditions
            .iter()
            .flatten()
            .map(|c| (c.name.clone(), c.expression.clone()))
            .collect::<Vec<_>>()
    };
    if conditions(want) != conditions(live) {
        return Some("matchConditions");
    }
    let variables = |s: &ValidatingAdmissionPolicySpec| {
        s.variables
            .iter()
            .flatten()
            .map(|v| (v.name.clone(), v.expression.clone()))
            .collect::<Vec<_>>()
    };
    if variables(want) != variables(live) {
        return Some("variables");
    }
    let validations = |s: &ValidatingAdmissionPolicySpec| {
        s.validations
            .iter()
            .flatten()
            .map(|v| (v.expression.clone(), v.message_expression.clone()))
            .collect::<Vec<_>>()
    };
    if validations(want) != validations(live) {
        return Some("validations");
    }
    None
}

/// What is wrong with the observed `policies` and `bindings` (all of the
/// cluster's; others than `expected` are ignored) against the `expected`
/// ones: missing, not denying, or altered. Empty when all are as the hub
/// installs them. Never fails.
pub fn check<P, B>(expected: &[PolicyDef], policies: &[P], bindings: &[B]) -> Vec<Finding>
where
    P: Borrow<ValidatingAdmissionPolicy>,
    B: Borrow<ValidatingAdmissionPolicyBinding>,
{
    let mut findings = Vec::new();
    for def in expected {
        let want = def.policy().spec.unwrap_or_default();
        match policies
            .iter()
            .map(Borrow::borrow)
            .find(|p| p.name_any() == def.name)
        {
            None => findings.push(Finding::PolicyMissing(def.name)),
            Some(p) if p.metadata.deletion_timestamp.is_some() => {
                findings.push(Finding::PolicyMissing(def.name))
            }
            Some(p) => {
                if let Some(what) = policy_difference(&want, &p.spec.clone().unwrap_or_default()) {
                    findings.push(Finding::PolicyAltered(def.name, what));
                }
            }
        }
        match bindings
            .iter()
            .map(Borrow::borrow)
            .find(|b| b.name_any() == def.name)
        {
            None => findings.push(Finding::BindingMissing(def.name)),
            Some(b) if b.metadata.deletion_timestamp.is_some() => {
                findings.push(Finding::BindingMissing(def.name))
            }
            Some(b) => {
                let spec = b.spec.clone().unwrap_or_default();
                let what = if spec.policy_name.as_deref() != Some(def.name) {
                    Some("policyName")
                } else if !spec
                    .validation_actions
                    .as_ref()
                    .is_some_and(|a| a.iter().any(|a| a == "Deny"))
                {
                    Some("validationActions")
                } else if spec.param_ref.is_some() {
                    Some("paramRef")
                } else if spec.match_resources.as_ref().is_some_and(|m| {
                    m.resource_rules.as_ref().is_some_and(|r| !r.is_empty())
                        || m.exclude_resource_rules
                            .as_ref()
                            .is_some_and(|r| !r.is_empty())
                        || m.namespace_selector.as_ref().is_some_and(|s| {
                            s.match_labels.is_some() || s.match_expressions.is_some()
                        })
                        || m.object_selector.as_ref().is_some_and(|s| {
                            s.match_labels.is_some() || s.match_expressions.is_some()
                        })
                }) {
                    Some("matchResources")
                } else {
                    None
                };
                if let Some(what) = what {
                    findings.push(Finding::BindingAltered(def.name, what));
                }
            }
        }
    }
    findings
}

/// What the last check found, shared with `/readyz` and the webhook.
#[derive(Clone)]
pub struct PolicyHealth {
    findings: watch::Sender<Vec<Finding>>,
    checked: watch::Sender<bool>,
}

impl Default for PolicyHealth {
    fn default() -> Self {
        Self {
            findings: watch::Sender::new(Vec::new()),
            checked: watch::Sender::new(false),
        }
    }
}

impl PolicyHealth {
    /// The findings of the last check (empty before the first).
    pub fn findings(&self) -> Vec<Finding> {
        self.findings.borrow().clone()
    }

    /// Whether the policy `name` was found missing or altered at the last
    /// check (false before the first).
    pub fn missing(&self, name: &str) -> bool {
        self.findings.borrow().iter().any(|f| f.policy() == name)
    }

    /// Whether a check has run at all.
    pub fn checked(&self) -> bool {
        *self.checked.borrow()
    }
}

/// One change seen by the watches of the policies and bindings.
enum Seen {
    /// A watch delivered an event; `listed` names the watch (0: policies,
    /// 1: bindings) when the event completed a list.
    Event { listed: Option<usize> },
    /// A watch failed (retried with backoff); the stores may be stale.
    Failed(String),
}

/// The watches of every policy and binding, feeding `policies` and
/// `bindings`, merged into one stream of what they saw.
fn watch_policies(
    client: &Client,
    policies: reflector::store::Writer<ValidatingAdmissionPolicy>,
    bindings: reflector::store::Writer<ValidatingAdmissionPolicyBinding>,
) -> impl Stream<Item = Seen> + Send + use<> {
    fn seen<K>(watch: usize) -> impl Fn(Result<watcher::Event<K>, watcher::Error>) -> Seen {
        move |event| match event {
            Ok(event) => Seen::Event {
                listed: matches!(event, watcher::Event::InitDone).then_some(watch),
            },
            Err(error) => Seen::Failed(error.to_string()),
        }
    }
    let policy_events = backed_off_watch(
        Api::<ValidatingAdmissionPolicy>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(policies)
    .map(seen(0));
    let binding_events = backed_off_watch(
        Api::<ValidatingAdmissionPolicyBinding>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(bindings)
    .map(seen(1));
    futures::stream::select(policy_events, binding_events)
}

/// Event reason: an admission policy the hub relies on is missing or
/// altered (the note says which and how); the hub re-applies it.
pub const REASON_POLICY_NOT_IN_FORCE: &str = "AdmissionPolicyNotInForce";
/// Event reason: a policy reported not in force is in force again.
pub const REASON_POLICY_RESTORED: &str = "AdmissionPolicyRestored";

/// The Events a check's findings call for, given the previous check's: a
/// Warning for each policy newly not in force (with its findings), a
/// Normal one for each policy in force again. One per policy and change,
/// so a policy that stays missing is not announced every check.
pub fn transitions(previous: &[Finding], now: &[Finding]) -> Vec<(bool, &'static str, String)> {
    let policies = |findings: &[Finding]| {
        findings
            .iter()
            .map(Finding::policy)
            .collect::<std::collections::BTreeSet<_>>()
    };
    let (before, after) = (policies(previous), policies(now));
    let mut out = Vec::new();
    for policy in after.difference(&before) {
        let note = now
            .iter()
            .filter(|f| f.policy() == *policy)
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        out.push((
            true,
            *policy,
            format!("{note}; the checks it makes are not enforced by the API server until the hub re-applies it"),
        ));
    }
    for policy in before.difference(&after) {
        out.push((
            false,
            *policy,
            "in force again: present, bound to deny and as the hub installs it".to_string(),
        ));
    }
    out
}

/// Publishes one Event of [`transitions`] regarding the policy object
/// (cluster-scoped, so the Event lands in `default`); queued, never waited
/// on (the status and `/readyz` say it too).
fn announce(events: &HubEvents, warning: bool, policy: &str, note: String) {
    let regarding = ObjectReference {
        api_version: Some("admissionregistration.k8s.io/v1".into()),
        kind: Some("ValidatingAdmissionPolicy".into()),
        name: Some(policy.into()),
        ..ObjectReference::default()
    };
    let reason = if warning {
        REASON_POLICY_NOT_IN_FORCE
    } else {
        REASON_POLICY_RESTORED
    };
    events.publish(HubEvent::new(warning, reason, "Check", &note), &regarding);
}

/// When the watchdog checks, from what its watches saw and what it last
/// found. Pure: the shell feeds it and reads it.
#[derive(Debug, Default)]
struct Pacing {
    /// Which watches (policies, bindings) have completed a list.
    listed: [bool; 2],
    /// The last watch error, until a watch delivers an event again.
    failed: Option<String>,
    /// Whether the last check found a policy not in force (then the
    /// interval paces the checks, not the watches).
    not_in_force: bool,
}

impl Pacing {
    /// Takes what a watch saw; returns whether a check is due now: on a
    /// failure, on the first event after one, and on any event once both
    /// watches have listed while every policy was in force.
    fn saw(&mut self, seen: Seen) -> bool {
        match seen {
            Seen::Event { listed } => {
                if let Some(watch) = listed {
                    self.listed[watch] = true;
                }
                let recovered = self.failed.take().is_some();
                recovered || (self.listed == [true; 2] && !self.not_in_force)
            }
            Seen::Failed(error) => {
                self.failed = Some(error);
                true
            }
        }
    }

    /// Whether the stores can be checked: an error while a watch fails,
    /// false until both have listed.
    fn readable(&self) -> Result<bool, &str> {
        match &self.failed {
            Some(error) => Err(error),
            None => Ok(self.listed == [true; 2]),
        }
    }

    /// Records a check's outcome; returns whether it changed between in
    /// force and not (the interval then starts again).
    fn checked(&mut self, in_force: bool) -> bool {
        let changed = in_force == self.not_in_force;
        self.not_in_force = !in_force;
        changed
    }
}

/// Runs the check until `stop` fires: at once whenever a policy or binding
/// changes (both are watched, so an idle hub asks its API server nothing),
/// and, while one is not in force, every [`CHECK_INTERVAL`] instead (a
/// re-created binding takes the API server a moment to enforce, so a repair
/// is judged by the next check, not by the write's own watch event).
/// Publishes the findings to `health` and the metrics, and re-applies each
/// policy found missing or altered (its policy and binding). The hub runs
/// as `hub_writers`. Never fails: a failed watch counts every policy as
/// unchecked (a finding) until a watch answers again, and a refused repair
/// is logged and tried again at the next check.
pub async fn run_watchdog(
    client: Client,
    hub_writers: Vec<String>,
    health: PolicyHealth,
    metrics: std::sync::Arc<HubMetrics>,
    events: HubEvents,
    mut stop: StopSignal,
) {
    let expected = all_policies_for(&hub_writers);
    let (policies, policy_writer) = reflector::store();
    let (bindings, binding_writer) = reflector::store();
    let mut seen = std::pin::pin!(watch_policies(&client, policy_writer, binding_writer));
    let mut tick = tokio::time::interval(CHECK_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut pacing = Pacing::default();
    loop {
        let due = tokio::select! {
            item = seen.next() => match item {
                Some(seen) => {
                    if let Seen::Failed(error) = &seen {
                        warn!(%error, "watch of the admission policies failed; retrying with backoff");
                    }
                    pacing.saw(seen)
                }
                None => break,
            },
            _ = tick.tick(), if pacing.not_in_force => true,
            () = &mut stop => break,
        };
        if !due {
            continue;
        }
        let findings = match pacing.readable() {
            Err(error) => expected
                .iter()
                .map(|d| Finding::Unreadable(d.name, error.to_string()))
                .collect(),
            Ok(false) => continue,
            Ok(true) => check(&expected, &policies.state(), &bindings.state()),
        };
        if pacing.checked(findings.is_empty()) {
            // The interval counts from the first finding, not from start.
            tick.reset();
        }
        act_on(&client, &expected, &findings, &health, &metrics, &events).await;
    }
    // A replica that stops leading no longer vouches for the policies.
    health.findings.send_replace(Vec::new());
    health.checked.send_replace(false);
}

/// Publishes one check's `findings` (to `health`, the metrics, the log and
/// Events on a change) and re-applies each policy found missing or altered.
async fn act_on(
    client: &Client,
    expected: &[PolicyDef],
    findings: &[Finding],
    health: &PolicyHealth,
    metrics: &HubMetrics,
    events: &HubEvents,
) {
    for def in expected {
        let bad = findings.iter().any(|f| f.policy() == def.name);
        metrics
            .admission_policy_missing
            .get_or_create(&PolicyLabel {
                policy: def.name.into(),
            })
            .set(i64::from(bad));
    }
    let previous = health.findings.send_replace(findings.to_vec());
    health.checked.send_replace(true);
    if previous.is_empty() && !findings.is_empty() {
        for f in findings {
            warn!(finding = %f, "admission policy not in force; re-applying it");
        }
    }
    for (warning, policy, note) in transitions(&previous, findings) {
        announce(events, warning, policy, note);
    }
    for def in expected {
        let repairable = findings
            .iter()
            .any(|f| f.policy() == def.name && !matches!(f, Finding::Unreadable(..)));
        if !repairable {
            continue;
        }
        metrics
            .admission_policy_repairs
            .get_or_create(&PolicyLabel {
                policy: def.name.into(),
            })
            .inc();
        match install_policy(client, def).await {
            Ok(()) => info!(policy = def.name, "admission policy re-applied"),
            Err((name, error)) => {
                warn!(policy = name, %error, "re-applying the admission policy failed")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Seen {
        Seen::Event { listed: None }
    }

    fn listed(watch: usize) -> Seen {
        Seen::Event {
            listed: Some(watch),
        }
    }

    #[test]
    fn checks_wait_for_both_lists_then_follow_every_change_while_in_force() {
        let mut pacing = Pacing::default();
        assert!(!pacing.saw(event()));
        assert!(!pacing.saw(listed(0)));
        assert_eq!(pacing.readable(), Ok(false));
        assert!(
            !pacing.saw(listed(0)),
            "one watch listing twice is not both"
        );
        assert!(pacing.saw(listed(1)));
        assert_eq!(pacing.readable(), Ok(true));
        assert!(!pacing.checked(true), "in force from the start: no change");
        assert!(pacing.saw(event()));
    }

    #[test]
    fn while_a_policy_is_not_in_force_the_interval_paces_the_checks() {
        let mut pacing = Pacing::default();
        pacing.saw(listed(0));
        pacing.saw(listed(1));
        assert!(pacing.checked(false), "a finding starts the interval");
        // The repair's own watch events do not judge it: the API server
        // enforces a re-created binding a moment later.
        assert!(!pacing.saw(event()));
        assert!(!pacing.checked(false), "still not in force: no change");
        assert!(pacing.checked(true), "in force again");
        assert!(pacing.saw(event()));
    }

    #[test]
    fn a_failed_watch_is_checked_at_once_and_again_at_its_first_event() {
        let mut pacing = Pacing::default();
        assert!(
            pacing.saw(Seen::Failed("refused".into())),
            "fails closed before any list"
        );
        assert_eq!(pacing.readable(), Err("refused"));
        pacing.checked(false);
        assert!(
            pacing.saw(listed(0)),
            "the first event after a failure clears it"
        );
        assert_eq!(
            pacing.readable(),
            Ok(false),
            "yet the bindings have not listed"
        );
        pacing.saw(listed(1));
        assert_eq!(pacing.readable(), Ok(true));
    }
    use crate::admission::executor_policy::EXECUTOR_POLICY_NAME;

    fn installed(
        defs: &[PolicyDef],
    ) -> (
        Vec<ValidatingAdmissionPolicy>,
        Vec<ValidatingAdmissionPolicyBinding>,
    ) {
        (
            defs.iter().map(PolicyDef::policy).collect(),
            defs.iter().map(PolicyDef::binding).collect(),
        )
    }

    #[test]
    fn policies_as_installed_are_in_force() {
        let defs = all_policies_for(&["hub".into()]);
        let (p, b) = installed(&defs);
        assert_eq!(check(&defs, &p, &b), Vec::new());
    }

    #[test]
    fn a_deleted_binding_is_named() {
        let defs = all_policies_for(&["hub".into()]);
        let (p, mut b) = installed(&defs);
        b.retain(|b| b.name_any() != EXECUTOR_POLICY_NAME);
        assert_eq!(
            check(&defs, &p, &b),
            vec![Finding::BindingMissing(EXECUTOR_POLICY_NAME)]
        );
    }

    #[test]
    fn a_binding_that_only_warns_or_a_loosened_policy_is_altered() {
        let defs = all_policies_for(&["hub".into()]);
        let (mut p, mut b) = installed(&defs);
        if let Some(spec) = b[1].spec.as_mut() {
            spec.validation_actions = Some(vec!["Warn".into()]);
        }
        if let Some(spec) = p[4].spec.as_mut() {
            spec.validations = Some(Vec::new());
        }
        if let Some(spec) = p[0].spec.as_mut() {
            spec.failure_policy = Some("Ignore".into());
        }
        let found = check(&defs, &p, &b);
        assert!(found.contains(&Finding::BindingAltered(
            EXECUTOR_POLICY_NAME,
            "validationActions"
        )));
        assert!(found.contains(&Finding::PolicyAltered(defs[4].name, "validations")));
        assert!(found.contains(&Finding::PolicyAltered(defs[0].name, "failurePolicy")));
        assert_eq!(found.len(), 3);
    }

    #[test]
    fn a_policy_naming_another_hub_is_altered() {
        let defs = all_policies_for(&["hub".into()]);
        let (p, b) = installed(&all_policies_for(&["someone-else".into()]));
        assert_eq!(
            check(&defs, &p, &b),
            vec![Finding::PolicyAltered(defs[4].name, "validations")]
        );
    }

    #[test]
    fn policies_of_others_are_ignored_and_all_missing_is_named() {
        let defs = all_policies_for(&["hub".into()]);
        let found =
            check::<ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding>(&defs, &[], &[]);
        assert_eq!(found.len(), 2 * defs.len());
    }

    #[test]
    fn each_policy_is_announced_once_when_it_goes_and_once_when_it_is_back() {
        let gone = vec![Finding::BindingMissing("executors")];
        let events = transitions(&[], &gone);
        assert_eq!(events.len(), 1);
        assert!(events[0].0, "a Warning");
        assert_eq!(events[0].1, "executors");
        assert!(events[0].2.contains("executors"), "{}", events[0].2);
        assert!(transitions(&gone, &gone).is_empty(), "not every check");
        let also = vec![
            Finding::BindingMissing("executors"),
            Finding::PolicyMissing("approvals"),
        ];
        assert_eq!(
            transitions(&gone, &also)
                .iter()
                .map(|e| (e.0, e.1))
                .collect::<Vec<_>>(),
            [(true, "approvals")]
        );
        assert_eq!(
            transitions(&also, &[])
                .iter()
                .map(|e| (e.0, e.1))
                .collect::<Vec<_>>(),
            [(false, "approvals"), (false, "executors")]
        );
    }
}
