//! What a pass decides from values it already holds: no reads, no writes.
//! Each answer here is one the act functions (`apply_one.rs`,
//! `manifest_status.rs`, `mod.rs`) carry out.

use ferry_proto::v1;
use serde_json::Value;

use super::failure::ManifestFailure;
use crate::conditions::{
    work_applied_condition, work_available_condition, work_degraded_condition,
    work_progressing_condition, work_rule_conditions,
};
use crate::write_breaker::{Hold, MAX_REWRITES, WINDOW, WriteLoop, other_writers};
use ferry_semantics::ManifestIdentity;
use ferry_semantics::apply_outcome::Writes;
use ferry_semantics::config_match::options_for;
use ferry_semantics::strategy::{Strategy, strategy_of};

/// Whether the record must name an object before it is written, so the
/// work can find (and delete) it even if the agent dies right after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IntentPlan {
    /// The record holds it already, or the strategy never writes.
    Skip,
    /// Recorded only if a read finds it absent: an object CreateOnly
    /// leaves as it is never belongs to the work.
    IfAbsent,
    /// The write may create it: recorded first.
    Record,
}

/// The intent to record before writing an object under a strategy that
/// `writes`, given whether the record already `held` it.
pub(super) fn intent_plan(held: bool, writes: Writes) -> IntentPlan {
    if held {
        return IntentPlan::Skip;
    }
    match writes {
        Writes::Never => IntentPlan::Skip,
        Writes::WhenAbsent => IntentPlan::IfAbsent,
        Writes::Always => IntentPlan::Record,
    }
}

/// The manifest's `ResourceMeta` as its parsed identity gives it (only the
/// ordinal for a manifest that did not parse); the resource and the
/// defaulted namespace are filled in once the kind is resolved.
pub(super) fn manifest_meta(index: usize, identity: Option<&ManifestIdentity>) -> v1::ResourceMeta {
    let mut meta = v1::ResourceMeta {
        ordinal: i32::try_from(index).unwrap_or(i32::MAX),
        ..Default::default()
    };
    if let Some(identity) = identity {
        meta.group = identity.group.clone();
        meta.version = identity.version.clone();
        meta.kind = identity.kind.clone();
        meta.name = identity.name.clone();
        meta.namespace = identity.namespace.clone().unwrap_or_default();
    }
    meta
}

/// Whether a failed manifest is a refused write (not a ReadOnly manifest's
/// check) of an object this work never created: then it is not available
/// to the work, and no read is made (the executor may not be allowed one).
/// `created_before` is what the work's record says of the object, None
/// when the manifest did not parse or the pass has no record.
pub(super) fn refused_before_creating(
    configs: &[v1::ManifestConfig],
    meta: &v1::ResourceMeta,
    failure: &ManifestFailure,
    created_before: Option<bool>,
) -> bool {
    let writes = strategy_of(
        options_for(
            configs,
            &meta.group,
            &meta.resource,
            &meta.namespace,
            &meta.name,
        )
        .as_ref(),
    )
    .is_ok_and(|(s, _)| s.writes() != Writes::Never);
    writes && failure.is_write_refusal() && created_before == Some(false)
}

/// The failure a held object's write is refused with: who else writes it
/// (from the live object's managed fields, else from the hold), and for
/// how much longer (at least a second).
pub(super) fn write_loop(what: String, live: &Value, strategy: &Strategy, hold: Hold) -> WriteLoop {
    WriteLoop {
        what,
        rewrites: MAX_REWRITES,
        window: WINDOW.as_secs(),
        writer: other_writers(live, strategy_manager(strategy))
            .or(hold.writers)
            .unwrap_or_else(|| "no other field manager is recorded on the object".to_string()),
        hold: hold.left.as_secs().max(1),
    }
}

/// The field manager `strategy` writes with.
pub(super) fn strategy_manager(strategy: &Strategy) -> &str {
    match strategy {
        Strategy::ServerSideApply { manager, .. } => manager,
        _ => ferry_semantics::contract::AGENT_FIELD_MANAGER,
    }
}

/// An applied manifest's message with the apply's notes after it.
pub(super) fn with_notes(message: &str, notes: &[String]) -> String {
    if notes.is_empty() {
        message.to_string()
    } else {
        format!("{message}; {}", notes.join("; "))
    }
}

/// The work's own conditions, summed up from its manifests': Applied,
/// Available, Progressing, Degraded, then those of its condition rules.
pub(super) fn work_conditions(
    manifests: &[v1::ManifestStatus],
    generation: i64,
) -> Vec<v1::Condition> {
    let work_applied = work_applied_condition(manifests, generation);
    let work_available = work_available_condition(manifests, generation);
    let work_progressing = work_progressing_condition(manifests, generation);
    let work_degraded = work_degraded_condition(manifests, generation);
    let mut work_conditions = vec![
        work_applied,
        work_available,
        work_progressing,
        work_degraded,
    ];
    work_conditions.extend(work_rule_conditions(manifests, generation));
    work_conditions.extend(crate::sealing::report::work_sealed_condition(
        manifests, generation,
    ));
    work_conditions
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::executor::ExecutorError;

    fn deployment(namespace: Option<&str>) -> ManifestIdentity {
        ManifestIdentity {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            name: "web".into(),
            namespace: namespace.map(str::to_string),
        }
    }

    fn refused() -> ManifestFailure {
        ManifestFailure::Executor(ExecutorError::NotAllowed {
            resource: "deployments.apps".into(),
            object: "shop/web".into(),
            account: "shop/deployer".into(),
            verbs: "create".into(),
        })
    }

    fn strategy_config(kind: &str) -> v1::ManifestConfig {
        v1::ManifestConfig {
            resource_identifier: Some(v1::ResourceIdentifier {
                group: "apps".into(),
                resource: "deployments".into(),
                name: "web".into(),
                namespace: "shop".into(),
            }),
            update_strategy: Some(v1::UpdateStrategy {
                r#type: kind.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn resolved_meta() -> v1::ResourceMeta {
        let mut meta = manifest_meta(0, Some(&deployment(Some("shop"))));
        meta.resource = "deployments".into();
        meta
    }

    #[test]
    fn an_object_is_recorded_before_a_write_only_when_the_write_may_create_it() {
        assert_eq!(intent_plan(false, Writes::Always), IntentPlan::Record);
        assert_eq!(intent_plan(false, Writes::WhenAbsent), IntentPlan::IfAbsent);
        assert_eq!(intent_plan(false, Writes::Never), IntentPlan::Skip);
        assert_eq!(intent_plan(true, Writes::Always), IntentPlan::Skip);
        assert_eq!(intent_plan(true, Writes::WhenAbsent), IntentPlan::Skip);
    }

    #[test]
    fn a_manifests_meta_names_its_object_and_only_the_ordinal_when_it_did_not_parse() {
        let meta = manifest_meta(3, Some(&deployment(Some("shop"))));
        assert_eq!(meta.ordinal, 3);
        assert_eq!(
            (
                meta.group.as_str(),
                meta.version.as_str(),
                meta.kind.as_str()
            ),
            ("apps", "v1", "Deployment")
        );
        assert_eq!(
            (meta.namespace.as_str(), meta.name.as_str()),
            ("shop", "web")
        );
        assert!(meta.resource.is_empty());
        let cluster_wide = manifest_meta(0, Some(&deployment(None)));
        assert_eq!(cluster_wide.namespace, "");
        let unparsed = manifest_meta(7, None);
        assert_eq!(unparsed.ordinal, 7);
        assert!(unparsed.kind.is_empty() && unparsed.name.is_empty());
        let huge = manifest_meta(usize::MAX, None);
        assert_eq!(huge.ordinal, i32::MAX);
    }

    #[test]
    fn a_refused_write_of_an_object_the_work_never_created_is_told_apart() {
        let meta = resolved_meta();
        assert!(refused_before_creating(&[], &meta, &refused(), Some(false)));
        // Created by an earlier pass: its availability is looked up.
        assert!(!refused_before_creating(&[], &meta, &refused(), Some(true)));
        // Unparsed manifest or no record: nothing says it was never created.
        assert!(!refused_before_creating(&[], &meta, &refused(), None));
        // A ReadOnly manifest's refusal is a refused check, not a write.
        let read_only = [strategy_config("ReadOnly")];
        assert!(!refused_before_creating(
            &read_only,
            &meta,
            &refused(),
            Some(false)
        ));
        // A failure other than a refusal.
        let other = ManifestFailure::Record("the API server is away".into());
        assert!(!refused_before_creating(&[], &meta, &other, Some(false)));
    }

    #[test]
    fn a_write_loop_names_the_other_writer_from_the_object_else_from_the_hold() {
        let live = json!({"metadata": {"managedFields": [
            {"manager": "kubectl", "operation": "Update", "time": "2026-01-01T00:00:00Z"},
        ]}});
        let hold = || Hold {
            left: Duration::from_millis(300),
            writers: Some("field manager `helm`".into()),
        };
        let from_live = write_loop(
            "Deployment shop/web".into(),
            &live,
            &Strategy::Update,
            hold(),
        );
        assert!(from_live.writer.contains("kubectl"), "{}", from_live.writer);
        assert_eq!(from_live.hold, 1);
        assert_eq!(from_live.rewrites, MAX_REWRITES);
        assert_eq!(from_live.window, WINDOW.as_secs());
        let from_hold = write_loop("x".into(), &Value::Null, &Strategy::Update, hold());
        assert_eq!(from_hold.writer, "field manager `helm`");
        let unknown = write_loop(
            "x".into(),
            &Value::Null,
            &Strategy::Update,
            Hold {
                left: Duration::from_secs(42),
                writers: None,
            },
        );
        assert_eq!(
            unknown.writer,
            "no other field manager is recorded on the object"
        );
        assert_eq!(unknown.hold, 42);
    }

    #[test]
    fn the_ssa_manager_is_the_configured_one_and_others_write_as_the_agent() {
        let ssa = Strategy::ServerSideApply {
            force: false,
            manager: "team-a".into(),
            rules: Vec::new(),
        };
        assert_eq!(strategy_manager(&ssa), "team-a");
        assert_eq!(
            strategy_manager(&Strategy::Update),
            ferry_semantics::contract::AGENT_FIELD_MANAGER
        );
    }

    #[test]
    fn notes_follow_the_message() {
        assert_eq!(with_notes("Applied", &[]), "Applied");
        assert_eq!(
            with_notes("Applied", &["a".to_string(), "b".to_string()]),
            "Applied; a; b"
        );
    }

    #[test]
    fn the_work_conditions_come_in_their_fixed_order() {
        let types: Vec<String> = work_conditions(&[], 4)
            .into_iter()
            .map(|c| c.r#type)
            .collect();
        assert_eq!(
            &types[..4],
            &["Applied", "Available", "Progressing", "Degraded"]
        );
    }
}
