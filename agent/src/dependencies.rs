//! `spec.dependsOn` between the works of this cluster, enforced by the agent
//! so that it holds while the hub is down.
//!
//! The agent keeps one index of the works it holds, by name (all of them live
//! in the cluster's namespace on the hub, so names are unique): who owns
//! each, what each depends on and the conditions the agent itself last
//! computed for it. A
//! work's worker asks the index whether its dependencies are ready before it
//! applies a generation, and waits for the index to change (an event, not a
//! poll) when they are not. The decisions are pure functions ([`gate`],
//! [`find_cycle`], [`dependents`]) over a snapshot of the index.
//!
//! A dependency is ready when its named condition is True, or, with a
//! `celExpression`, when that expression holds over its last reported
//! status: [`gate`] says which rules to evaluate ([`Gate::Evaluate`]), the
//! worker evaluates them on the agent's bounded rule pool, and [`conclude`]
//! turns the verdicts into the decision.
//!
//! Owners are kept apart (the hub says who owns each work: its replica set's
//! namespace, or the cluster namespace): a work sees only works of its own
//! owner. A dependency on another owner's work is judged exactly as a
//! missing one, by the same code path, and neither its conditions nor its
//! status reach a readiness rule; a cycle is followed only through works of
//! one owner; a deleted work is held only for dependents of its own owner.
//!
//! Chosen behaviour (documented in docs/dependencies.md):
//! - a generation is applied only once every dependency exists on this agent
//!   and is ready; after that the generation stays applied
//!   (drift is still corrected) even if a dependency later turns not ready,
//!   and nothing is deleted; a new generation waits again;
//! - a work in a cycle is never applied and says so;
//! - a deleted work that others still depend on keeps its objects until those
//!   dependents are gone or no longer name it, for at most a timeout.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

use ferry_proto::v1;
use ferry_semantics::contract::{
    REASON_DEPENDENCY_CYCLE, REASON_DEPENDENCY_MISSING, REASON_DEPENDENCY_RULE_ERROR,
    REASON_WAITING_FOR_DEPENDENCY,
};
use ferry_semantics::text::{clipped, first_few};
use tokio::sync::watch;

/// Longest message the dependency conditions carry, in bytes.
pub const MAX_DEPENDENCY_MESSAGE_BYTES: usize = 1024;

/// The condition a dependency waits for when the wire leaves it empty.
pub const DEFAULT_CONDITION: &str = "Available";

/// Longest part of a readiness rule quoted in a message, in bytes.
const QUOTED_RULE_BYTES: usize = 160;

/// How a dependency is judged ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// This condition type is True on its status.
    Condition(String),
    /// This CEL expression holds over it
    /// (`ferry_semantics::dependency_rule`).
    Rule(String),
}

/// One entry of a work's `dependsOn`: a work of this cluster and how it is
/// judged ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// The work's name.
    pub work: String,
    /// Its readiness rule.
    pub readiness: Readiness,
}

impl Need {
    /// A need of `work` by condition type `condition`.
    pub fn condition(work: &str, condition: &str) -> Self {
        Self {
            work: work.to_string(),
            readiness: Readiness::Condition(condition.to_string()),
        }
    }
}

/// What the index knows of one work.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkView {
    /// The hub UID of the work the entry is for (a work deleted and created
    /// again under the same name is another work).
    pub uid: String,
    /// The tenant that owns it (`WorkUpsert.owner`): only works of the same
    /// owner see it.
    pub owner: String,
    /// The works it depends on, and how each is judged ready.
    pub depends_on: Vec<Need>,
    /// Its work conditions as this agent last reported them: (type, status).
    pub conditions: Vec<(String, String)>,
}

/// A readiness rule to evaluate before the gate can open: the dependency
/// (name and UID, to find its last status) and the expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleCheck {
    /// The dependency's name.
    pub work: String,
    /// The dependency's hub UID.
    pub uid: String,
    /// The CEL expression.
    pub expression: String,
}

/// What evaluating one [`RuleCheck`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The rule holds.
    Ready,
    /// The rule gave false.
    NotReady,
    /// The dependency has reported no status yet.
    NoStatus,
    /// The rule could not be evaluated: why (it names no work).
    Error(String),
}

/// Whether a work may be applied now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Every dependency is ready.
    Open,
    /// Every dependency judged by a condition is ready; these readiness
    /// rules decide (see [`conclude`]).
    Evaluate(Vec<RuleCheck>),
    /// Not yet: the `DependenciesReady=False` reason and message.
    Closed {
        /// One of the `REASON_DEPENDENCY_*`/`REASON_WAITING_FOR_DEPENDENCY` reasons.
        reason: &'static str,
        /// Which work and which condition, bounded in length.
        message: String,
    },
}

/// The work `name` of `graph` as a work of `owner` sees it: None when it is
/// missing or belongs to another owner, the two cases no caller may tell
/// apart. Never fails.
fn visible<'g>(
    graph: &'g BTreeMap<String, WorkView>,
    owner: &str,
    name: &str,
) -> Option<&'g WorkView> {
    graph.get(name).filter(|view| view.owner == owner)
}

/// The shortest cycle of `dependsOn` through `start` (a work of `owner`),
/// as the works in order from `start` back to it (`[a, b, a]`), or None.
/// Works missing from `graph` or of another owner have no dependencies and
/// end no cycle. Visits each work at most once, so it is linear in the size
/// of the graph. Never fails.
pub fn find_cycle(
    start: &str,
    owner: &str,
    graph: &BTreeMap<String, WorkView>,
) -> Option<Vec<String>> {
    let deps_of = |name: &str| -> Vec<&str> {
        visible(graph, owner, name)
            .map(|w| w.depends_on.iter().map(|d| d.work.as_str()).collect())
            .unwrap_or_default()
    };
    // Another owner's work of this name is not there at all.
    visible(graph, owner, start)?;
    // Breadth first, so the cycle reported is a shortest one.
    let mut parent: HashMap<&str, &str> = HashMap::new();
    let mut queue: VecDeque<&str> = VecDeque::new();
    for dep in deps_of(start) {
        if dep == start {
            return Some(vec![start.to_string(), start.to_string()]);
        }
        if !parent.contains_key(dep) {
            parent.insert(dep, start);
            queue.push_back(dep);
        }
    }
    while let Some(name) = queue.pop_front() {
        for dep in deps_of(name) {
            if dep == start {
                // Walk back from `name` to `start`.
                let mut path = vec![start.to_string(), name.to_string()];
                let mut at = name;
                while let Some(&up) = parent.get(at) {
                    if up == start {
                        break;
                    }
                    path.push(up.to_string());
                    at = up;
                }
                path.push(start.to_string());
                path.reverse();
                return Some(path);
            }
            if !parent.contains_key(dep) && dep != start {
                parent.insert(dep, name);
                queue.push_back(dep);
            }
        }
    }
    None
}

/// Whether the work `name` of `owner`, depending on `depends_on`, may be
/// applied, judged from `graph` (every work this agent holds; those of
/// other owners count as missing). A cycle through the work closes the gate
/// for good (until it is broken); otherwise the first dependency that is
/// missing or whose condition is not True closes it, and the message counts
/// the others; when only readiness rules are left, they are returned to
/// evaluate. Never fails.
pub fn gate(
    name: &str,
    owner: &str,
    depends_on: &[Need],
    graph: &BTreeMap<String, WorkView>,
) -> Gate {
    if let Some(cycle) = find_cycle(name, owner, graph) {
        let message = format!(
            "dependsOn forms a cycle: {}; none of these works is applied until it is broken",
            first_few(&cycle, " -> ")
        );
        return Gate::Closed {
            reason: REASON_DEPENDENCY_CYCLE,
            message: clipped(message, MAX_DEPENDENCY_MESSAGE_BYTES),
        };
    }
    let mut blocked: Vec<(&'static str, String)> = Vec::new();
    let mut rules: Vec<RuleCheck> = Vec::new();
    for need in depends_on {
        let dep = &need.work;
        let condition = match &need.readiness {
            Readiness::Condition(c) if c.is_empty() => DEFAULT_CONDITION,
            Readiness::Condition(c) => c.as_str(),
            Readiness::Rule(expression) => {
                match visible(graph, owner, dep) {
                    None => blocked.push((
                        REASON_DEPENDENCY_MISSING,
                        format!("work {dep} is not on this cluster (waiting for it to exist and satisfy its readiness rule)"),
                    )),
                    Some(view) => rules.push(RuleCheck {
                        work: dep.clone(),
                        uid: view.uid.clone(),
                        expression: expression.clone(),
                    }),
                }
                continue;
            }
        };
        match visible(graph, owner, dep) {
            None => blocked.push((
                REASON_DEPENDENCY_MISSING,
                format!("work {dep} is not on this cluster (waiting for it to exist with {condition}=True)"),
            )),
            Some(view) => {
                let status = view
                    .conditions
                    .iter()
                    .find(|(t, _)| t == condition)
                    .map_or("absent", |(_, s)| s.as_str());
                if status != "True" {
                    blocked.push((
                        REASON_WAITING_FOR_DEPENDENCY,
                        format!("waiting for work {dep} to be {condition}=True (it is {status})"),
                    ));
                }
            }
        }
    }
    if blocked.is_empty() {
        return if rules.is_empty() {
            Gate::Open
        } else {
            Gate::Evaluate(rules)
        };
    }
    closed(blocked)
}

/// What keeps a work waiting once each readiness rule of a
/// [`Gate::Evaluate`] has its verdict: None when every one is
/// [`Verdict::Ready`], else the `DependenciesReady=False` reason and message
/// of the first that is not, counting the others. Never fails.
pub fn conclude(checked: &[(RuleCheck, Verdict)]) -> Option<(&'static str, String)> {
    let blocked: Vec<(&'static str, String)> = checked
        .iter()
        .filter_map(|(check, verdict)| {
            let work = &check.work;
            let rule = quoted(&check.expression);
            match verdict {
                Verdict::Ready => None,
                Verdict::NotReady => Some((
                    REASON_WAITING_FOR_DEPENDENCY,
                    format!(
                        "waiting for work {work} to satisfy its readiness rule {rule} (it is false)"
                    ),
                )),
                Verdict::NoStatus => Some((
                    REASON_WAITING_FOR_DEPENDENCY,
                    format!(
                        "waiting for work {work} to report a status for its readiness rule {rule}"
                    ),
                )),
                Verdict::Error(error) => Some((
                    REASON_DEPENDENCY_RULE_ERROR,
                    format!("the readiness rule {rule} of work {work} {error}"),
                )),
            }
        })
        .collect();
    first_blocked(blocked)
}

/// `expression` in quotes, cut to a readable length.
fn quoted(expression: &str) -> String {
    format!("{:?}", clipped(expression.to_string(), QUOTED_RULE_BYTES))
}

/// The gate for `blocked` (reason, message) pairs: open when there are
/// none, else closed as [`first_blocked`] says.
fn closed(blocked: Vec<(&'static str, String)>) -> Gate {
    first_blocked(blocked).map_or(Gate::Open, |(reason, message)| Gate::Closed {
        reason,
        message,
    })
}

/// The first of `blocked` (reason, message) pairs, its message counting the
/// others and bounded in length; None when there are none.
fn first_blocked(blocked: Vec<(&'static str, String)>) -> Option<(&'static str, String)> {
    let (reason, first) = blocked.first().cloned()?;
    let message = if blocked.len() > 1 {
        format!(
            "{first}; and {} more dependencies not ready",
            blocked.len() - 1
        )
    } else {
        first
    };
    Some((reason, clipped(message, MAX_DEPENDENCY_MESSAGE_BYTES)))
}

/// The works of `graph` other than `name` that depend on `name` and have
/// its owner, by name in order; none when `graph` does not hold `name` (its
/// owner is not known, so no other work may hold it). Never fails.
pub fn dependents(name: &str, graph: &BTreeMap<String, WorkView>) -> Vec<String> {
    let Some(owner) = graph.get(name).map(|view| view.owner.as_str()) else {
        return Vec::new();
    };
    graph
        .iter()
        .filter(|(other, view)| {
            other.as_str() != name
                && view.owner == owner
                && view.depends_on.iter().any(|d| d.work == name)
        })
        .map(|(other, _)| other.clone())
        .collect()
}

/// The needs of a wire spec's `dependsOn`: its CEL expression when it has
/// one, else its condition, defaulted to `Available`. Never fails.
pub fn wire_dependencies(spec: Option<&v1::WorkSpec>) -> Vec<Need> {
    spec.map(|s| {
        s.depends_on
            .iter()
            .map(|d| {
                let readiness = if !d.cel_expression.is_empty() {
                    Readiness::Rule(d.cel_expression.clone())
                } else if d.condition.is_empty() {
                    Readiness::Condition(DEFAULT_CONDITION.to_string())
                } else {
                    Readiness::Condition(d.condition.clone())
                };
                Need {
                    work: d.name.clone(),
                    readiness,
                }
            })
            .collect()
    })
    .unwrap_or_default()
}

/// The owner of the work `upsert` carries: the hub's `owner`, or, from a
/// hub that predates it, the work's namespace (every work of the cluster
/// then has one owner, as before owners were kept apart). Never fails.
pub fn work_owner(upsert: &v1::WorkUpsert) -> &str {
    if upsert.owner.is_empty() {
        upsert.work.as_ref().map_or("", |w| w.namespace.as_str())
    } else {
        &upsert.owner
    }
}

/// The works this agent holds, by name, and a signal that wakes whoever
/// waits for one of them to change. Held in memory only: a restarted agent
/// rebuilds it as the hub resends its works.
pub struct DependencyIndex {
    works: Mutex<Works>,
    changed: watch::Sender<u64>,
}

impl Default for DependencyIndex {
    fn default() -> Self {
        Self {
            works: Mutex::new(Works::default()),
            changed: watch::Sender::new(0),
        }
    }
}

/// The index's state: the works by name, and how many readiness rules of
/// each owner name each work, kept with every declare and withdraw so that
/// a status report (the agent's hot path) learns in one lookup whether a
/// rule of its own owner reads it (another owner's rules never do).
#[derive(Default)]
struct Works {
    by_name: BTreeMap<String, WorkView>,
    judged_by_rules: HashMap<(String, String), usize>,
}

impl Works {
    /// Counts (`add`) or uncounts the readiness rules of `needs`, written by
    /// a work of `owner`.
    fn count_rules(&mut self, owner: &str, needs: &[Need], add: bool) {
        for need in needs {
            if !matches!(need.readiness, Readiness::Rule(_)) {
                continue;
            }
            let key = (owner.to_string(), need.work.clone());
            if add {
                *self.judged_by_rules.entry(key).or_default() += 1;
            } else if let Some(count) = self.judged_by_rules.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    self.judged_by_rules.remove(&key);
                }
            }
        }
    }
}

impl DependencyIndex {
    /// Runs `f` on the index and wakes the waiters if it returns true. A
    /// poisoned lock (a panic elsewhere while holding it) is taken over:
    /// the map is always left whole.
    fn update(&self, f: impl FnOnce(&mut Works) -> bool) {
        let changed = {
            let mut works = self.works.lock().unwrap_or_else(|e| e.into_inner());
            f(&mut works)
        };
        if changed {
            self.changed.send_modify(|v| *v = v.wrapping_add(1));
        }
    }

    fn snapshot<T>(&self, f: impl FnOnce(&BTreeMap<String, WorkView>) -> T) -> T {
        let works = self.works.lock().unwrap_or_else(|e| e.into_inner());
        f(&works.by_name)
    }

    /// Records that the work `name` (hub UID `uid`), owned by `owner`,
    /// depends on `depends_on`, replacing an entry of another UID under that
    /// name (the newer work). Never fails.
    pub fn declare(&self, name: &str, uid: &str, owner: &str, depends_on: Vec<Need>) {
        self.update(|works| {
            let entry = works.by_name.entry(name.to_string()).or_default();
            if entry.uid == uid && entry.owner == owner && entry.depends_on == depends_on {
                return false;
            }
            if entry.uid != uid || entry.owner != owner {
                entry.conditions.clear();
            }
            entry.uid = uid.to_string();
            let previous_owner = std::mem::replace(&mut entry.owner, owner.to_string());
            let previous = std::mem::replace(&mut entry.depends_on, depends_on.clone());
            works.count_rules(&previous_owner, &previous, false);
            works.count_rules(owner, &depends_on, true);
            true
        });
    }

    /// Records the conditions the agent just reported for the work `name`
    /// of UID `uid`; `status_changed` says whether anything of its status
    /// changed. Waiters wake when a condition's status changed, or, for a
    /// work some other work judges by a readiness rule, when its status
    /// changed at all. A report of a UID the index does not hold under that
    /// name is ignored.
    pub fn observe(
        &self,
        name: &str,
        uid: &str,
        conditions: &[v1::Condition],
        status_changed: bool,
    ) {
        let current: Vec<(String, String)> = conditions
            .iter()
            .map(|c| (c.r#type.clone(), c.status.clone()))
            .collect();
        self.update(|works| {
            let Some(entry) = works.by_name.get_mut(name).filter(|e| e.uid == uid) else {
                return false;
            };
            if entry.conditions != current {
                entry.conditions = current;
                return true;
            }
            let key = (entry.owner.clone(), name.to_string());
            status_changed && works.judged_by_rules.contains_key(&key)
        });
    }

    /// Forgets the work `name` of UID `uid` (released or evicted). Never fails.
    pub fn withdraw(&self, name: &str, uid: &str) {
        self.update(|works| {
            if works.by_name.get(name).is_none_or(|w| w.uid != uid) {
                return false;
            }
            if let Some(removed) = works.by_name.remove(name) {
                works.count_rules(&removed.owner, &removed.depends_on, false);
            }
            true
        });
    }

    /// Whether the work `name` of `owner` may be applied now (see [`gate`]).
    pub fn gate(&self, name: &str, owner: &str, depends_on: &[Need]) -> Gate {
        self.snapshot(|works| gate(name, owner, depends_on, works))
    }

    /// The works that still depend on `name` (see [`dependents`]).
    pub fn dependents(&self, name: &str) -> Vec<String> {
        self.snapshot(|works| dependents(name, works))
    }

    /// A receiver that sees every later change of the index.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The owner of every work in these tests but the other team's.
    const OWNER: &str = "team-a";

    fn graph(edges: &[(&str, &[&str])]) -> BTreeMap<String, WorkView> {
        edges
            .iter()
            .map(|(name, deps)| {
                (
                    name.to_string(),
                    WorkView {
                        uid: format!("uid-{name}"),
                        owner: OWNER.into(),
                        depends_on: deps
                            .iter()
                            .map(|d| Need::condition(d, DEFAULT_CONDITION))
                            .collect(),
                        conditions: vec![],
                    },
                )
            })
            .collect()
    }

    fn available(graph: &mut BTreeMap<String, WorkView>, name: &str, status: &str) {
        let view = graph.get_mut(name).expect("work");
        view.conditions = vec![("Available".into(), status.into())];
    }

    fn deps(names: &[&str]) -> Vec<Need> {
        names
            .iter()
            .map(|n| Need::condition(n, DEFAULT_CONDITION))
            .collect()
    }

    fn rule(work: &str, expression: &str) -> Need {
        Need {
            work: work.into(),
            readiness: Readiness::Rule(expression.into()),
        }
    }

    #[test]
    fn no_cycle_in_a_chain_or_a_diamond() {
        let chain = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &[])]);
        assert_eq!(find_cycle("a", OWNER, &chain), None);
        let diamond = graph(&[("a", &["b", "c"]), ("b", &["d"]), ("c", &["d"]), ("d", &[])]);
        assert_eq!(find_cycle("a", OWNER, &diamond), None);
    }

    #[test]
    fn a_two_work_cycle_is_found_from_either_end() {
        let g = graph(&[("a", &["b"]), ("b", &["a"])]);
        assert_eq!(
            find_cycle("a", OWNER, &g),
            Some(vec!["a".into(), "b".into(), "a".into()])
        );
        assert_eq!(
            find_cycle("b", OWNER, &g),
            Some(vec!["b".into(), "a".into(), "b".into()])
        );
    }

    #[test]
    fn a_longer_cycle_is_reported_in_order() {
        let g = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("x", &["a"])]);
        let cycle = find_cycle("b", OWNER, &g).expect("cycle");
        assert_eq!(cycle, ["b", "c", "a", "b"]);
        // A work that only depends on a cycle is not in it: it just waits.
        assert_eq!(find_cycle("x", OWNER, &g), None);
    }

    #[test]
    fn a_self_dependency_is_a_cycle() {
        let g = graph(&[("a", &["a"])]);
        assert_eq!(
            find_cycle("a", OWNER, &g),
            Some(vec!["a".into(), "a".into()])
        );
    }

    #[test]
    fn the_gate_opens_only_when_every_dependency_has_its_condition_true() {
        let mut g = graph(&[("app", &["crds", "db"]), ("crds", &[]), ("db", &[])]);
        let gate_of =
            |g: &BTreeMap<String, WorkView>| gate("app", OWNER, &deps(&["crds", "db"]), g);
        match gate_of(&g) {
            Gate::Closed { reason, message } => {
                assert_eq!(reason, REASON_WAITING_FOR_DEPENDENCY);
                assert!(
                    message.contains("work crds to be Available=True (it is absent)"),
                    "{message}"
                );
                assert!(message.contains("and 1 more"), "{message}");
            }
            Gate::Open | Gate::Evaluate(_) => panic!("open without ready dependencies"),
        }
        available(&mut g, "crds", "True");
        available(&mut g, "db", "False");
        match gate_of(&g) {
            Gate::Closed { message, .. } => {
                assert!(
                    message.contains("work db to be Available=True (it is False)"),
                    "{message}"
                );
                assert!(!message.contains("more"), "{message}");
            }
            Gate::Open | Gate::Evaluate(_) => panic!("open with db not available"),
        }
        available(&mut g, "db", "True");
        assert_eq!(gate_of(&g), Gate::Open);
    }

    #[test]
    fn a_missing_dependency_is_named() {
        let g = graph(&[("app", &["db"])]);
        match gate("app", OWNER, &deps(&["db"]), &g) {
            Gate::Closed { reason, message } => {
                assert_eq!(reason, REASON_DEPENDENCY_MISSING);
                assert!(
                    message.contains("work db is not on this cluster"),
                    "{message}"
                );
            }
            Gate::Open | Gate::Evaluate(_) => panic!("open with a missing dependency"),
        }
    }

    #[test]
    fn a_custom_condition_is_read_by_its_type() {
        let mut g = graph(&[("app", &["job"]), ("job", &[])]);
        g.get_mut("job").expect("job").conditions = vec![
            ("Available".into(), "True".into()),
            ("Complete".into(), "False".into()),
        ];
        let wanted = vec![Need::condition("job", "Complete")];
        assert!(matches!(
            gate("app", OWNER, &wanted, &g),
            Gate::Closed { .. }
        ));
        g.get_mut("job").expect("job").conditions[1].1 = "True".into();
        assert_eq!(gate("app", OWNER, &wanted, &g), Gate::Open);
    }

    #[test]
    fn a_cycle_closes_the_gate_even_when_the_others_look_ready() {
        let mut g = graph(&[("a", &["b"]), ("b", &["a"])]);
        available(&mut g, "a", "True");
        available(&mut g, "b", "True");
        match gate("a", OWNER, &deps(&["b"]), &g) {
            Gate::Closed { reason, message } => {
                assert_eq!(reason, REASON_DEPENDENCY_CYCLE);
                assert!(message.contains("a -> b -> a"), "{message}");
            }
            Gate::Open | Gate::Evaluate(_) => panic!("a cycle opened the gate"),
        }
    }

    #[test]
    fn messages_stay_bounded_whatever_the_names() {
        let long = "x".repeat(253);
        let names: Vec<String> = (0..16).map(|i| format!("{long}{i}")).collect();
        let mut g: BTreeMap<String, WorkView> = BTreeMap::new();
        for (i, n) in names.iter().enumerate() {
            let next = names[(i + 1) % names.len()].clone();
            g.insert(
                n.clone(),
                WorkView {
                    uid: n.clone(),
                    owner: OWNER.into(),
                    depends_on: vec![Need::condition(&next, &"c".repeat(316))],
                    conditions: vec![],
                },
            );
        }
        let Gate::Closed { message, .. } =
            gate(&names[0], OWNER, &g[&names[0]].depends_on.clone(), &g)
        else {
            panic!("a cycle of 16 opened the gate");
        };
        assert!(
            message.len() <= MAX_DEPENDENCY_MESSAGE_BYTES,
            "{}",
            message.len()
        );
    }

    #[test]
    fn dependents_are_the_others_naming_the_work() {
        let g = graph(&[("crds", &[]), ("app", &["crds"]), ("cr", &["crds", "app"])]);
        assert_eq!(dependents("crds", &g), ["app", "cr"]);
        assert_eq!(dependents("cr", &g), Vec::<String>::new());
    }

    /// `graph` with the work `name` of another team, whose conditions are
    /// `conditions` and which depends on `depends_on`.
    fn with_foreign(
        mut graph: BTreeMap<String, WorkView>,
        name: &str,
        conditions: &[(&str, &str)],
        depends_on: &[&str],
    ) -> BTreeMap<String, WorkView> {
        graph.insert(
            name.into(),
            WorkView {
                uid: format!("uid-{name}"),
                owner: "team-b".into(),
                depends_on: deps(depends_on),
                conditions: conditions
                    .iter()
                    .map(|(t, s)| (t.to_string(), s.to_string()))
                    .collect(),
            },
        );
        graph
    }

    #[test]
    fn another_owners_work_is_judged_exactly_as_a_missing_one() {
        let alone = graph(&[("app", &["db"])]);
        for conditions in [&[("Available", "True")][..], &[("Available", "False")], &[]] {
            let beside = with_foreign(alone.clone(), "db", conditions, &[]);
            for needs in [deps(&["db"]), vec![rule("db", "true")]] {
                assert_eq!(
                    gate("app", OWNER, &needs, &beside),
                    gate("app", OWNER, &needs, &alone),
                    "{conditions:?} {needs:?}"
                );
            }
        }
        // And it is never handed to a readiness rule to read.
        let beside = with_foreign(alone, "db", &[("Available", "True")], &[]);
        assert!(matches!(
            gate("app", OWNER, &[rule("db", "true")], &beside),
            Gate::Closed {
                reason: REASON_DEPENDENCY_MISSING,
                ..
            }
        ));
    }

    #[test]
    fn cycles_and_deletion_holds_stay_inside_one_owner() {
        // team-b's `db` names team-a's `app` back: no cycle for team-a.
        let g = with_foreign(graph(&[("app", &["db"])]), "db", &[], &["app"]);
        assert_eq!(find_cycle("app", OWNER, &g), None);
        assert_eq!(find_cycle("db", "team-b", &g), None);
        // team-b's `db` depends on team-a's `crds`: it does not hold
        // `crds`'s deletion; team-a's own `app` does.
        let g = with_foreign(
            graph(&[("crds", &[]), ("app", &["crds"])]),
            "db",
            &[],
            &["crds"],
        );
        assert_eq!(dependents("crds", &g), ["app"]);
        assert_eq!(dependents("unknown", &g), Vec::<String>::new());
    }

    #[test]
    fn an_index_keeps_owners_apart_and_follows_a_change_of_owner() {
        let index = DependencyIndex::default();
        index.declare("db", "u-db", "team-b", vec![]);
        index.declare("app", "u-app", OWNER, deps(&["db"]));
        index.observe(
            "db",
            "u-db",
            &[v1::Condition {
                r#type: "Available".into(),
                status: "True".into(),
                ..Default::default()
            }],
            true,
        );
        assert!(matches!(
            index.gate("app", OWNER, &deps(&["db"])),
            Gate::Closed {
                reason: REASON_DEPENDENCY_MISSING,
                ..
            }
        ));
        assert_eq!(index.dependents("db"), Vec::<String>::new());
        // The same work handed to team-a (a relabel by the hub) starts with
        // no conditions: what it reported as team-b's is not carried over.
        index.declare("db", "u-db", OWNER, vec![]);
        assert!(matches!(
            index.gate("app", OWNER, &deps(&["db"])),
            Gate::Closed {
                reason: REASON_WAITING_FOR_DEPENDENCY,
                ..
            }
        ));
        assert_eq!(index.dependents("db"), ["app"]);
    }

    proptest::proptest! {
        /// Whatever another team holds on the cluster (any names, any
        /// conditions, any edges, including to and from team-a's works),
        /// team-a's gates, cycles and deletion holds are what they would be
        /// without it.
        #[test]
        fn another_owners_works_never_change_a_decision(
            ours in proptest::collection::btree_map(
                "[a-e]", (proptest::collection::vec("[a-h]", 0..3), proptest::bool::ANY), 1..5),
            theirs in proptest::collection::btree_map(
                "[d-h]", (proptest::collection::vec("[a-h]", 0..3), proptest::bool::ANY), 0..5),
        ) {
            let view = |owner: &str, name: &str, (needs, up): &(Vec<String>, bool)| WorkView {
                uid: format!("{owner}-{name}"),
                owner: owner.into(),
                depends_on: needs.iter().map(|n| Need::condition(n, DEFAULT_CONDITION)).collect(),
                conditions: vec![("Available".into(), if *up { "True" } else { "False" }.into())],
            };
            let alone: BTreeMap<String, WorkView> =
                ours.iter().map(|(n, w)| (n.clone(), view(OWNER, n, w))).collect();
            let mut shared = alone.clone();
            for (name, work) in &theirs {
                shared.entry(name.clone()).or_insert_with(|| view("team-b", name, work));
            }
            for (name, work) in &alone {
                proptest::prop_assert_eq!(
                    gate(name, OWNER, &work.depends_on, &shared),
                    gate(name, OWNER, &work.depends_on, &alone)
                );
                proptest::prop_assert_eq!(
                    find_cycle(name, OWNER, &shared),
                    find_cycle(name, OWNER, &alone)
                );
                proptest::prop_assert_eq!(dependents(name, &shared), dependents(name, &alone));
            }
        }
    }

    #[test]
    fn wire_dependencies_default_to_available() {
        let spec = v1::WorkSpec {
            depends_on: vec![
                v1::Dependency {
                    name: "a".into(),
                    ..Default::default()
                },
                v1::Dependency {
                    name: "b".into(),
                    condition: "Complete".into(),
                    ..Default::default()
                },
                v1::Dependency {
                    name: "c".into(),
                    condition: "Available".into(),
                    cel_expression: "true".into(),
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            wire_dependencies(Some(&spec)),
            [
                Need::condition("a", "Available"),
                Need::condition("b", "Complete"),
                rule("c", "true"),
            ]
        );
    }

    #[tokio::test]
    async fn the_index_wakes_waiters_on_status_changes_only() {
        let index = DependencyIndex::default();
        let mut rx = index.subscribe();
        index.declare("crds", "u1", OWNER, vec![]);
        assert!(rx.has_changed().expect("open"));
        rx.borrow_and_update();
        let ready = |status: &str| v1::Condition {
            r#type: "Available".into(),
            status: status.into(),
            message: "m".into(),
            ..Default::default()
        };
        index.observe("crds", "u1", &[ready("False")], true);
        assert!(rx.has_changed().expect("open"));
        rx.borrow_and_update();
        // A new message with the same status wakes nobody.
        index.observe(
            "crds",
            "u1",
            &[v1::Condition {
                message: "other".into(),
                ..ready("False")
            }],
            true,
        );
        assert!(!rx.has_changed().expect("open"));
        // A report of another work under the name is ignored.
        index.observe("crds", "old", &[ready("True")], true);
        assert!(!rx.has_changed().expect("open"));
        assert!(matches!(
            index.gate("app", OWNER, &deps(&["crds"])),
            Gate::Closed { .. }
        ));
        index.observe("crds", "u1", &[ready("True")], true);
        assert!(rx.has_changed().expect("open"));
        assert_eq!(index.gate("app", OWNER, &deps(&["crds"])), Gate::Open);
        index.withdraw("crds", "other-uid");
        assert_eq!(index.gate("app", OWNER, &deps(&["crds"])), Gate::Open);
        index.withdraw("crds", "u1");
        assert!(matches!(
            index.gate("app", OWNER, &deps(&["crds"])),
            Gate::Closed { .. }
        ));
    }

    #[test]
    fn readiness_rules_are_evaluated_only_once_the_conditions_hold() {
        let mut g = graph(&[("app", &[]), ("crds", &[]), ("db", &[])]);
        let needs = vec![Need::condition("crds", "Available"), rule("db", "x")];
        g.get_mut("app").expect("app").depends_on = needs.clone();
        // crds is not Available: closed without evaluating db's rule.
        assert!(matches!(
            gate("app", OWNER, &needs, &g),
            Gate::Closed { .. }
        ));
        available(&mut g, "crds", "True");
        assert_eq!(
            gate("app", OWNER, &needs, &g),
            Gate::Evaluate(vec![RuleCheck {
                work: "db".into(),
                uid: "uid-db".into(),
                expression: "x".into(),
            }])
        );
        // A rule's dependency that is not here is missing, not evaluated.
        g.remove("db");
        match gate("app", OWNER, &needs, &g) {
            Gate::Closed { reason, message } => {
                assert_eq!(reason, REASON_DEPENDENCY_MISSING);
                assert!(
                    message.contains("work db is not on this cluster"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn verdicts_decide_the_gate_and_say_which_rule_waits() {
        let checks = [
            RuleCheck {
                work: "db".into(),
                uid: "u".into(),
                expression: "work.status.ready".into(),
            },
            RuleCheck {
                work: "cache".into(),
                uid: "v".into(),
                expression: "y".repeat(1000),
            },
        ];
        let with = |verdicts: [Verdict; 2]| -> Vec<(RuleCheck, Verdict)> {
            checks.iter().cloned().zip(verdicts).collect()
        };
        assert_eq!(conclude(&with([Verdict::Ready, Verdict::Ready])), None);
        match conclude(&with([Verdict::NotReady, Verdict::NoStatus])) {
            Some((reason, message)) => {
                assert_eq!(reason, REASON_WAITING_FOR_DEPENDENCY);
                assert!(
                    message.contains(
                        "work db to satisfy its readiness rule \"work.status.ready\" (it is false)"
                    ),
                    "{message}"
                );
                assert!(message.contains("and 1 more"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        match conclude(&with([
            Verdict::Ready,
            Verdict::Error("does not compile: x".into()),
        ])) {
            Some((reason, message)) => {
                assert_eq!(reason, REASON_DEPENDENCY_RULE_ERROR);
                assert!(
                    message.contains("of work cache does not compile"),
                    "{message}"
                );
                // The expression is quoted cut short.
                assert!(message.len() < 400, "{}", message.len());
            }
            None => panic!("open with a rule in error"),
        }
    }

    #[tokio::test]
    async fn a_work_judged_by_a_rule_wakes_waiters_on_any_status_change() {
        let index = DependencyIndex::default();
        index.declare("db", "u-db", OWNER, vec![]);
        index.declare("app", "u-app", OWNER, vec![rule("db", "true")]);
        index.declare("other", "u-other", OWNER, vec![]);
        let mut rx = index.subscribe();
        rx.borrow_and_update();
        let available = [v1::Condition {
            r#type: "Available".into(),
            status: "True".into(),
            ..Default::default()
        }];
        index.observe("db", "u-db", &available, true);
        assert!(rx.has_changed().expect("open"));
        rx.borrow_and_update();
        // Same conditions, another feedback value: still a change for a rule.
        index.observe("db", "u-db", &available, true);
        assert!(rx.has_changed().expect("open"));
        rx.borrow_and_update();
        // Nothing changed: nobody wakes.
        index.observe("db", "u-db", &available, false);
        assert!(!rx.has_changed().expect("open"));
        // A work judged by no rule wakes nobody on a status change alone.
        index.observe("other", "u-other", &[], true);
        assert!(!rx.has_changed().expect("open"));
        // Once the only work with a rule on db is gone (or names db by a
        // condition instead), db's status changes wake nobody either.
        index.declare(
            "app",
            "u-app",
            OWNER,
            vec![Need::condition("db", "Available")],
        );
        rx.borrow_and_update();
        index.observe("db", "u-db", &available, true);
        assert!(!rx.has_changed().expect("open"));
        index.declare("app", "u-app", OWNER, vec![rule("db", "true")]);
        rx.borrow_and_update();
        index.observe("db", "u-db", &available, true);
        assert!(rx.has_changed().expect("open"));
        index.withdraw("app", "u-app");
        rx.borrow_and_update();
        index.observe("db", "u-db", &available, true);
        assert!(!rx.has_changed().expect("open"));
    }
}
