//! What the hub hears of a sealed Secret: a `Sealed` condition per entry
//! (and one for the work), and a status with nothing of the Secret's data
//! in it: messages scrubbed of its values, feedback values likewise, drift
//! reports showing where the Secret drifted but not what it holds.

use ferry_proto::v1;
use ferry_semantics::contract::SEALED;
use ferry_semantics::sealing::redact::SEALED_VALUE;
use ferry_semantics::sealing::scrub;
use serde_json::Value;

use super::Sealed;
use crate::conditions::condition;

/// The `Sealed` condition of one entry.
pub fn sealed_condition(sealed: &Sealed, generation: i64) -> v1::Condition {
    match sealed {
        Sealed::Opened => condition(
            SEALED,
            true,
            "Opened",
            "opened with this cluster's key",
            generation,
        ),
        Sealed::Refused(error) => {
            condition(SEALED, false, error.reason(), error.to_string(), generation)
        }
    }
}

/// Removes every trace of Secret `secret`'s data from `status`: messages
/// and feedback values scrubbed of its values, drift fields outside
/// `metadata` shown without their values.
pub fn conceal(status: &mut v1::ManifestStatus, secret: &Value) {
    for condition in &mut status.conditions {
        condition.message = scrub(&condition.message, secret);
    }
    for value in &mut status.feedback {
        value.string = scrub(&value.string, secret);
        value.json_raw = scrub(&value.json_raw, secret);
    }
    if let Some(drift) = &mut status.drift {
        let sealed = serde_json::to_string(SEALED_VALUE).unwrap_or_default();
        for field in &mut drift.fields {
            if field.pointer.starts_with("/metadata/") {
                field.hub_json = scrub(&field.hub_json, secret);
                field.spoke_json = field.spoke_json.as_deref().map(|s| scrub(s, secret));
            } else {
                field.hub_json = sealed.clone();
                if field.spoke_json.is_some() {
                    field.spoke_json = Some(sealed.clone());
                }
            }
        }
    }
}

/// The work's `Sealed` condition: None when it holds no sealed entry,
/// else True when every one opened, False naming the first that did not.
pub fn work_sealed_condition(
    manifests: &[v1::ManifestStatus],
    generation: i64,
) -> Option<v1::Condition> {
    let sealed: Vec<(&v1::ManifestStatus, &v1::Condition)> = manifests
        .iter()
        .filter_map(|m| {
            m.conditions
                .iter()
                .find(|c| c.r#type == SEALED)
                .map(|c| (m, c))
        })
        .collect();
    if sealed.is_empty() {
        return None;
    }
    let refused: Vec<_> = sealed.iter().filter(|(_, c)| c.status != "True").collect();
    Some(match refused.first() {
        None => condition(
            SEALED,
            true,
            "Opened",
            format!("{} sealed Secret(s) opened", sealed.len()),
            generation,
        ),
        Some((manifest, first)) => {
            let meta = manifest.resource_meta.clone().unwrap_or_default();
            condition(
                SEALED,
                false,
                &first.reason,
                format!(
                    "{} of {} sealed Secret(s) not opened; manifests[{}] {}/{}: {}",
                    refused.len(),
                    sealed.len(),
                    meta.ordinal,
                    meta.namespace,
                    meta.name,
                    first.message
                ),
                generation,
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_status_keeps_no_value_of_the_secret() {
        let secret = json!({"data": {"password": "aHVudGVyMjI="}});
        let mut status = v1::ManifestStatus {
            conditions: vec![condition(
                "Applied",
                false,
                "Failed",
                "bad value \"hunter22\"",
                1,
            )],
            feedback: vec![v1::FeedbackValue {
                name: "p".into(),
                string: "aHVudGVyMjI=".into(),
                ..Default::default()
            }],
            drift: Some(v1::ManifestDrift {
                fields: vec![v1::DriftedField {
                    pointer: "/data/password".into(),
                    hub_json: "\"aHVudGVyMjI=\"".into(),
                    spoke_json: Some("\"b3RoZXI=\"".into()),
                    ..Default::default()
                }],
                omitted: 0,
            }),
            ..Default::default()
        };
        conceal(&mut status, &secret);
        let text = format!("{status:?}");
        assert!(
            !text.contains("hunter22")
                && !text.contains("aHVudGVyMjI=")
                && !text.contains("b3RoZXI="),
            "{text}"
        );
        assert_eq!(
            status.drift.expect("drift").fields[0].pointer,
            "/data/password"
        );
    }

    #[test]
    fn the_work_condition_names_the_first_entry_not_opened() {
        let mut opened = v1::ManifestStatus::default();
        opened.conditions.push(sealed_condition(&Sealed::Opened, 2));
        assert_eq!(
            work_sealed_condition(std::slice::from_ref(&opened), 2)
                .expect("one")
                .status,
            "True"
        );
        assert!(work_sealed_condition(&[v1::ManifestStatus::default()], 2).is_none());
        let mut refused = v1::ManifestStatus::default();
        refused.conditions.push(sealed_condition(
            &Sealed::Refused(ferry_semantics::sealing::OpenError::NotARecipient {
                sealed_to: vec!["k-a".into()],
                held: vec!["k-b".into()],
            }),
            2,
        ));
        let work = work_sealed_condition(&[opened, refused], 2).expect("one");
        assert_eq!(
            (work.status.as_str(), work.reason.as_str()),
            ("False", "NotARecipient")
        );
        assert!(work.message.contains("k-b"), "{}", work.message);
    }
}
