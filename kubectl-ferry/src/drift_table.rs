//! The drift of one manifest as `describe work` shows it: one row per
//! drifted field (pointer, hub and spoke values, the manager that wrote the
//! spoke value, how long ago it was seen and corrected), and a line counting
//! the fields the agent found but did not list.

use ferry_api::manifest_work::ManifestDrift;
use k8s_openapi::jiff::Timestamp;

use crate::age::age_of_text;
use crate::table::render;

/// The drift table of a manifest at `now`; `<none>` when nothing differs.
pub fn drift_table(drift: Option<&ManifestDrift>, now: Timestamp) -> String {
    let Some(drift) = drift.filter(|d| !d.fields.is_empty() || d.omitted > 0) else {
        return "<none>".into();
    };
    let mut out = render(
        &["pointer", "hub", "spoke", "manager", "seen", "corrected"],
        drift
            .fields
            .iter()
            .map(|f| {
                vec![
                    f.pointer.clone(),
                    f.hub_value.clone(),
                    f.spoke_value.clone().unwrap_or_else(|| "<absent>".into()),
                    f.manager.clone().unwrap_or_else(|| "<unknown>".into()),
                    age_of_text(now, &f.first_seen_time),
                    f.corrected_time
                        .as_deref()
                        .map_or_else(|| "-".into(), |t| age_of_text(now, t)),
                ]
            })
            .collect(),
    );
    if drift.omitted > 0 {
        out.push_str(&format!(
            "\n… and {} more drifted fields not listed",
            drift.omitted
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::manifest_work::DriftedField;

    fn now() -> Timestamp {
        "2026-11-23T18:00:00Z".parse().expect("now")
    }

    #[test]
    fn each_field_shows_values_manager_and_ages() {
        let drift = ManifestDrift {
            fields: vec![
                DriftedField {
                    pointer: "/spec/replicas".into(),
                    hub_value: "2".into(),
                    spoke_value: Some("5".into()),
                    manager: Some("kubectl-edit".into()),
                    first_seen_time: "2026-11-23T17:59:00Z".into(),
                    corrected_time: None,
                },
                DriftedField {
                    pointer: "/data/a".into(),
                    hub_value: "\"x\"".into(),
                    spoke_value: None,
                    manager: None,
                    first_seen_time: "2026-11-23T17:00:00Z".into(),
                    corrected_time: Some("2026-11-23T17:00:00Z".into()),
                },
            ],
            omitted: 3,
        };
        let text = drift_table(Some(&drift), now());
        for expected in [
            "POINTER",
            "/spec/replicas   2     5          kubectl-edit   60s    -",
            "/data/a          \"x\"   <absent>   <unknown>      60m    60m",
            "… and 3 more drifted fields not listed",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
    }

    #[test]
    fn no_drift_is_none() {
        assert_eq!(drift_table(None, now()), "<none>");
        assert_eq!(
            drift_table(Some(&ManifestDrift::default()), now()),
            "<none>"
        );
    }
}
