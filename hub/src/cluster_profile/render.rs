//! The ClusterProfile a ManagedCluster should have: a pure function of the
//! cluster (its labels, acceptance and the liveness the hub records in its
//! status), and the comparisons that decide whether the live profile needs
//! a write. No IO here; [`super::controller`] is the shell that applies it.
//!
//! The types mirror `multicluster.x-k8s.io/v1alpha1` ClusterProfile as
//! shipped by `sigs.k8s.io/cluster-inventory-api` v0.1.0 (the CRD in
//! `deploy/crds/clusterprofiles.yaml`), only the fields ferry writes or
//! reads: others' fields (access providers, a Kubernetes version written by
//! someone else while no agent reported one) are left alone, as
//! server-side apply keeps them.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use kube::CustomResource;
use kube::ResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::conditions::{Truth, condition_at};
use ferry_api::contract::CLUSTER_SET_LABEL;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::Condition;
use ferry_semantics::contract::KUBE_TIME_FORMAT;

/// The cluster manager's name in `spec.clusterManager.name` and in the
/// [`CLUSTER_MANAGER_LABEL`] of every profile ferry publishes.
pub const CLUSTER_MANAGER: &str = "ferry";
/// The upstream label naming the cluster manager of a profile
/// (`LabelClusterManagerKey` of cluster-inventory-api).
pub const CLUSTER_MANAGER_LABEL: &str = "x-k8s.io/cluster-manager";
/// OCM's cluster-set label, which OCM's own ClusterProfile controller puts
/// on profiles: the value of the cluster's exclusive set label
/// ([`CLUSTER_SET_LABEL`]), so consumers written for OCM select alike.
pub const PROFILE_CLUSTER_SET_LABEL: &str = "cluster.open-cluster-management.io/clusterset";
/// Condition type of the upstream API (`ClusterConditionControlPlaneHealthy`):
/// True while the cluster's agent holds a session with the hub.
pub const CONTROL_PLANE_HEALTHY: &str = "ControlPlaneHealthy";
/// Condition type ferry adds: True once the hub accepts the cluster and its
/// agent has connected at least once.
pub const JOINED: &str = "Joined";
/// Property: the version the cluster's agent last reported in its Hello.
pub const AGENT_VERSION_PROPERTY: &str = "agent.ferry.dev/version";
/// Property: the public key (age X25519, `age1…`) Secrets are sealed to
/// for this cluster now (docs/sealed-secrets.md).
pub const SEALING_KEY_PROPERTY: &str = "sealing.ferry.dev/public-key";
/// Property: the id of [`SEALING_KEY_PROPERTY`]'s key.
pub const SEALING_KEY_ID_PROPERTY: &str = "sealing.ferry.dev/key-id";
/// Property: the cluster's exclusive ManagedClusterSet.
pub const CLUSTER_SET_PROPERTY: &str = "clusterset.ferry.dev/name";
/// Longest property value the upstream schema admits.
pub const MAX_PROPERTY_VALUE: usize = 1024;
/// Longest condition message ferry writes (the schema admits 32768): the
/// disconnect reason comes from the ManagedCluster's status and is cut here.
pub const MAX_MESSAGE: usize = 1024;

/// The spec of a `multicluster.x-k8s.io/v1alpha1` ClusterProfile (SIG
/// Multicluster KEP-4322).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "multicluster.x-k8s.io",
    version = "v1alpha1",
    kind = "ClusterProfile",
    namespaced,
    status = "ClusterProfileStatus",
    doc = "A cluster of a multi-cluster inventory (SIG Multicluster's ClusterProfile)."
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileSpec {
    /// A human-readable name of the cluster.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// The cluster manager owning the profile (immutable upstream).
    pub cluster_manager: ClusterManager,
}

/// Which cluster manager owns a profile.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ClusterManager {
    /// The manager's name.
    pub name: String,
}

/// The status fields of a ClusterProfile ferry writes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileStatus {
    /// Conditions, a list map by type.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The cluster's version: the spoke's Kubernetes version its agent
    /// reported; left out while none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<ClusterVersion>,
    /// Properties, a list map by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<Property>,
}

/// The version information of a cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ClusterVersion {
    /// The Kubernetes version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kubernetes: String,
}

/// One named property of a cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Property {
    /// The property's name.
    pub name: String,
    /// Its value, 1 to 1024 characters.
    pub value: String,
    /// When it was observed on the cluster, RFC 3339; empty when unknown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_observed_time: String,
}

/// What ferry publishes for one cluster: the profile's name (the
/// cluster's), its labels, spec and the status fields ferry owns.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredProfile {
    /// Name of the profile: the ManagedCluster's name.
    pub name: String,
    /// Labels ferry sets (any others on the live profile are left alone).
    pub labels: BTreeMap<String, String>,
    /// The spec.
    pub spec: ClusterProfileSpec,
    /// The status fields ferry owns.
    pub status: ClusterProfileStatus,
}

/// `text` cut to at most `max` bytes at a character boundary.
fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// `time` in the API server's form, when it is an RFC 3339 time at all: a
/// value the schema's `date-time` would refuse is left out.
fn normalized_time(time: &str) -> Option<String> {
    time.parse::<Timestamp>()
        .ok()
        .map(|t| t.strftime(KUBE_TIME_FORMAT).to_string())
}

/// A profile condition at `now`, its message bounded (profiles have no
/// generation).
fn condition(
    type_: &str,
    status: Truth,
    reason: &str,
    message: String,
    now: Timestamp,
) -> Condition {
    condition_at(
        type_,
        status,
        reason,
        bounded(&message, MAX_MESSAGE),
        0,
        now,
    )
}

/// The profile `cluster` should have, at time `now` (RFC 3339, the
/// transition time of a condition whose status changes). `current` holds
/// the live profile's conditions: one whose status is unchanged keeps its
/// transition time. Only what the hub knows is published: the agent's
/// version, the spoke's Kubernetes version and current sealing key as its
/// agent reported them, and the exclusive cluster set when the cluster has
/// one. Cannot fail: every value
/// taken from the cluster is bounded to the upstream schema's limits.
pub fn render(cluster: &ManagedCluster, current: &[Condition], now: Timestamp) -> DesiredProfile {
    let name = cluster.name_any();
    let status = cluster.status.clone().unwrap_or_default();
    let set = cluster
        .labels()
        .get(CLUSTER_SET_LABEL)
        .filter(|s| !s.is_empty());

    let mut labels = BTreeMap::from([(
        CLUSTER_MANAGER_LABEL.to_string(),
        CLUSTER_MANAGER.to_string(),
    )]);
    if let Some(set) = set {
        // A label value on the cluster is a valid label value here too.
        labels.insert(PROFILE_CLUSTER_SET_LABEL.to_string(), set.clone());
    }

    let seen = normalized_time(&status.last_seen_time);
    let ever_connected = status.connected || !status.agent_version.is_empty();
    let healthy = if status.connected {
        condition(
            CONTROL_PLANE_HEALTHY,
            Truth::True,
            "AgentConnected",
            match status.served_by.as_str() {
                "" => format!("the agent of {name} holds a session with the hub"),
                replica => {
                    format!("the agent of {name} holds a session with hub replica {replica}")
                }
            },
            now,
        )
    } else if ever_connected {
        let since = seen
            .as_deref()
            .map(|t| format!(" since {t}"))
            .unwrap_or_default();
        let why = status
            .disconnect_reason
            .as_deref()
            .filter(|r| !r.is_empty())
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        condition(
            CONTROL_PLANE_HEALTHY,
            Truth::Unknown,
            "AgentDisconnected",
            format!("the agent of {name} is disconnected{since}{why}; the hub cannot tell"),
            now,
        )
    } else {
        condition(
            CONTROL_PLANE_HEALTHY,
            Truth::Unknown,
            "AgentNeverConnected",
            format!("no agent of {name} has connected to the hub yet"),
            now,
        )
    };
    let joined = if !cluster.spec.hub_accepts_client {
        condition(
            JOINED,
            Truth::False,
            "HubDeniedClient",
            format!("the hub does not accept the agent of {name} (spec.hubAcceptsClient is false)"),
            now,
        )
    } else if ever_connected {
        condition(
            JOINED,
            Truth::True,
            "AgentJoined",
            format!("the hub accepts {name} and its agent has connected"),
            now,
        )
    } else {
        condition(
            JOINED,
            Truth::False,
            "AgentNeverConnected",
            format!("the hub accepts {name}; no agent of it has connected yet"),
            now,
        )
    };
    let conditions = crate::conditions::conditions(current, vec![healthy, joined]);

    let mut properties = Vec::new();
    if !status.agent_version.is_empty() {
        properties.push(Property {
            name: AGENT_VERSION_PROPERTY.into(),
            value: bounded(&status.agent_version, MAX_PROPERTY_VALUE),
            last_observed_time: seen.clone().unwrap_or_default(),
        });
    }
    if let Some(key) = status.sealing_keys.iter().find(|k| !k.retiring) {
        properties.push(Property {
            name: SEALING_KEY_PROPERTY.into(),
            value: bounded(&key.public_key, MAX_PROPERTY_VALUE),
            last_observed_time: seen.clone().unwrap_or_default(),
        });
        properties.push(Property {
            name: SEALING_KEY_ID_PROPERTY.into(),
            value: bounded(&key.key_id, MAX_PROPERTY_VALUE),
            last_observed_time: seen.clone().unwrap_or_default(),
        });
    }
    if let Some(set) = set {
        properties.push(Property {
            name: CLUSTER_SET_PROPERTY.into(),
            value: set.clone(),
            last_observed_time: String::new(),
        });
    }

    DesiredProfile {
        name: name.clone(),
        labels,
        spec: ClusterProfileSpec {
            display_name: name,
            cluster_manager: ClusterManager {
                name: CLUSTER_MANAGER.into(),
            },
        },
        status: ClusterProfileStatus {
            conditions,
            version: status
                .version
                .as_ref()
                .filter(|v| !v.kubernetes.is_empty())
                .map(|v| ClusterVersion {
                    kubernetes: bounded(&v.kubernetes, MAX_PROPERTY_VALUE),
                }),
            properties,
        },
    }
}

/// Whether `profile` is ferry's: labelled for ferry and managed by it. A
/// profile of the same name from another cluster manager is never touched.
pub fn is_ferrys(profile: &ClusterProfile) -> bool {
    profile.spec.cluster_manager.name == CLUSTER_MANAGER
        && profile
            .labels()
            .get(CLUSTER_MANAGER_LABEL)
            .map(String::as_str)
            == Some(CLUSTER_MANAGER)
}

/// Whether the live profile (None: there is none) differs from `desired`
/// in the labels or spec ferry sets, so the spec must be applied.
pub fn spec_differs(desired: &DesiredProfile, live: Option<&ClusterProfile>) -> bool {
    let Some(live) = live else { return true };
    if live.spec != desired.spec {
        return true;
    }
    let labels = live.labels();
    // The set label must also go when the cluster lost its set.
    desired.labels.iter().any(|(k, v)| labels.get(k) != Some(v))
        || (!desired.labels.contains_key(PROFILE_CLUSTER_SET_LABEL)
            && labels.contains_key(PROFILE_CLUSTER_SET_LABEL))
}

/// Whether the status ferry owns on the live profile differs from
/// `desired` (transition times aside, which the API server rounds);
/// conditions and properties others own are not compared.
pub fn status_differs(desired: &DesiredProfile, live: Option<&ClusterProfile>) -> bool {
    let Some(live) = live else { return true };
    let status = live.status.clone().unwrap_or_default();
    let ours_conditions: Vec<Condition> = status
        .conditions
        .into_iter()
        .filter(|c| c.type_ == CONTROL_PLANE_HEALTHY || c.type_ == JOINED)
        .collect();
    let ours_properties: Vec<Property> = status
        .properties
        .into_iter()
        .filter(|p| OURS.contains(&p.name.as_str()))
        .collect();
    // A version someone else wrote is theirs while ferry knows none.
    let version_differs =
        desired.status.version.is_some() && status.version != desired.status.version;
    let by_type = |list: &[Condition]| {
        let mut list = list.to_vec();
        list.sort_by(|a, b| a.type_.cmp(&b.type_));
        list
    };
    let by_name = |list: &[Property]| {
        let mut list = list.to_vec();
        list.sort_by(|a, b| a.name.cmp(&b.name));
        list
    };
    !crate::conditions::same_conditions(
        &by_type(&ours_conditions),
        &by_type(&desired.status.conditions),
    ) || by_name(&ours_properties) != by_name(&desired.status.properties)
        || version_differs
}

/// The properties ferry writes.
const OURS: [&str; 4] = [
    AGENT_VERSION_PROPERTY,
    SEALING_KEY_PROPERTY,
    SEALING_KEY_ID_PROPERTY,
    CLUSTER_SET_PROPERTY,
];

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::managed_cluster::{ManagedClusterSpec, ManagedClusterStatus};

    const NOW: &str = "2026-11-28T10:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().expect("time")
    }

    fn cluster(status: Option<ManagedClusterStatus>, set: Option<&str>) -> ManagedCluster {
        let mut cluster = ManagedCluster::new("east-1", ManagedClusterSpec::default());
        if let Some(set) = set {
            cluster
                .labels_mut()
                .insert(CLUSTER_SET_LABEL.into(), set.into());
        }
        cluster.status = status;
        cluster
    }

    fn connected() -> ManagedClusterStatus {
        ManagedClusterStatus {
            connected: true,
            agent_version: "0.1.0".into(),
            last_seen_time: "2026-11-28T09:00:00.123Z".into(),
            served_by: "hub-0".into(),
            ..Default::default()
        }
    }

    fn find<'a>(profile: &'a DesiredProfile, type_: &str) -> &'a Condition {
        profile
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap_or_else(|| panic!("no {type_} condition"))
    }

    fn live(desired: &DesiredProfile) -> ClusterProfile {
        let mut live = ClusterProfile::new(&desired.name, desired.spec.clone());
        live.metadata.labels = Some(desired.labels.clone());
        live.status = Some(desired.status.clone());
        live
    }

    #[test]
    fn a_connected_cluster_in_a_set_is_healthy_joined_and_labelled() {
        let profile = render(&cluster(Some(connected()), Some("team-a")), &[], now());
        assert_eq!(profile.name, "east-1");
        assert_eq!(profile.spec.display_name, "east-1");
        assert_eq!(profile.spec.cluster_manager.name, "ferry");
        assert_eq!(
            profile.labels,
            BTreeMap::from([
                ("x-k8s.io/cluster-manager".to_string(), "ferry".to_string()),
                (
                    "cluster.open-cluster-management.io/clusterset".to_string(),
                    "team-a".to_string()
                ),
            ])
        );
        let healthy = find(&profile, CONTROL_PLANE_HEALTHY);
        assert_eq!(
            (healthy.status.as_str(), healthy.reason.as_str()),
            ("True", "AgentConnected")
        );
        assert!(healthy.message.contains("hub-0"), "{}", healthy.message);
        let joined = find(&profile, JOINED);
        assert_eq!(
            (joined.status.as_str(), joined.reason.as_str()),
            ("True", "AgentJoined")
        );
        assert_eq!(
            profile.status.properties,
            vec![
                Property {
                    name: AGENT_VERSION_PROPERTY.into(),
                    value: "0.1.0".into(),
                    // Normalized to the form the API server gives back.
                    last_observed_time: "2026-11-28T09:00:00Z".into(),
                },
                Property {
                    name: CLUSTER_SET_PROPERTY.into(),
                    value: "team-a".into(),
                    last_observed_time: String::new(),
                },
            ]
        );
        assert_eq!(profile.status.version, None, "the agent reported none");
    }

    #[test]
    fn the_spokes_version_and_current_sealing_key_are_published() {
        use ferry_api::managed_cluster::{ManagedClusterVersion, SealingKey};
        let key = |id: &str, retiring| SealingKey {
            key_id: id.into(),
            public_key: format!("age1{id}"),
            retiring,
        };
        let status = ManagedClusterStatus {
            version: Some(ManagedClusterVersion {
                kubernetes: "v1.33.1".into(),
            }),
            sealing_keys: vec![key("k-old", true), key("k-new", false)],
            ..connected()
        };
        let profile = render(&cluster(Some(status), None), &[], now());
        assert_eq!(
            profile.status.version,
            Some(ClusterVersion {
                kubernetes: "v1.33.1".into()
            })
        );
        let value = |name: &str| {
            profile
                .status
                .properties
                .iter()
                .find(|p| p.name == name)
                .map(|p| p.value.clone())
        };
        assert_eq!(value(SEALING_KEY_PROPERTY).as_deref(), Some("age1k-new"));
        assert_eq!(value(SEALING_KEY_ID_PROPERTY).as_deref(), Some("k-new"));
        let mut live = ClusterProfile::new("east-1", profile.spec.clone());
        live.status = Some(profile.status.clone());
        assert!(!status_differs(&profile, Some(&live)));
        live.status.as_mut().expect("status").version = None;
        assert!(
            status_differs(&profile, Some(&live)),
            "the version is written"
        );
    }

    #[test]
    fn a_disconnected_cluster_is_unknown_with_the_reason_and_stays_joined() {
        let status = ManagedClusterStatus {
            connected: false,
            served_by: String::new(),
            disconnect_reason: Some("no heartbeat for 15s".into()),
            ..connected()
        };
        let profile = render(&cluster(Some(status), None), &[], now());
        let healthy = find(&profile, CONTROL_PLANE_HEALTHY);
        assert_eq!(healthy.status, "Unknown");
        assert_eq!(healthy.reason, "AgentDisconnected");
        assert!(
            healthy.message.contains("since 2026-11-28T09:00:00Z")
                && healthy.message.contains("no heartbeat for 15s"),
            "{}",
            healthy.message
        );
        assert_eq!(find(&profile, JOINED).status, "True");
        assert!(!profile.labels.contains_key(PROFILE_CLUSTER_SET_LABEL));
        assert!(
            profile
                .status
                .properties
                .iter()
                .all(|p| p.name != CLUSTER_SET_PROPERTY)
        );
    }

    #[test]
    fn a_cluster_never_connected_or_denied_is_not_joined_and_publishes_no_version() {
        let profile = render(&cluster(None, None), &[], now());
        assert_eq!(
            find(&profile, CONTROL_PLANE_HEALTHY).reason,
            "AgentNeverConnected"
        );
        let joined = find(&profile, JOINED);
        assert_eq!(
            (joined.status.as_str(), joined.reason.as_str()),
            ("False", "AgentNeverConnected")
        );
        assert!(profile.status.properties.is_empty());

        let mut denied = cluster(Some(connected()), None);
        denied.spec.hub_accepts_client = false;
        let joined = find(&render(&denied, &[], now()), JOINED).clone();
        assert_eq!(
            (joined.status.as_str(), joined.reason.as_str()),
            ("False", "HubDeniedClient")
        );
    }

    #[test]
    fn unchanged_conditions_keep_their_transition_time_and_changed_ones_take_now() {
        let before = render(
            &cluster(Some(connected()), None),
            &[],
            "2026-01-01T00:00:00Z".parse().expect("time"),
        );
        let again = render(
            &cluster(Some(connected()), None),
            &before.status.conditions,
            now(),
        );
        assert_eq!(
            find(&again, CONTROL_PLANE_HEALTHY).last_transition_time,
            "2026-01-01T00:00:00Z"
        );
        let gone = ManagedClusterStatus {
            connected: false,
            ..connected()
        };
        let after = render(&cluster(Some(gone), None), &before.status.conditions, now());
        assert_eq!(
            find(&after, CONTROL_PLANE_HEALTHY).last_transition_time,
            NOW
        );
        assert_eq!(
            find(&after, JOINED).last_transition_time,
            "2026-01-01T00:00:00Z"
        );
    }

    #[test]
    fn values_from_the_cluster_are_bounded_and_bad_times_left_out() {
        let status = ManagedClusterStatus {
            connected: false,
            agent_version: "é".repeat(2000),
            last_seen_time: "yesterday".into(),
            disconnect_reason: Some("x".repeat(100_000)),
            ..connected()
        };
        let profile = render(&cluster(Some(status), None), &[], now());
        let version = &profile.status.properties[0];
        assert!(version.value.len() <= MAX_PROPERTY_VALUE && !version.value.is_empty());
        assert!(version.last_observed_time.is_empty());
        assert!(find(&profile, CONTROL_PLANE_HEALTHY).message.len() <= MAX_MESSAGE);
    }

    #[test]
    fn writes_are_needed_only_for_what_differs_in_ferrys_part() {
        let desired = render(&cluster(Some(connected()), Some("team-a")), &[], now());
        assert!(spec_differs(&desired, None) && status_differs(&desired, None));
        let mut same = live(&desired);
        // Others' labels, conditions and properties are not ferry's to compare.
        same.labels_mut().insert("team".into(), "x".into());
        let status = same.status.get_or_insert_with(Default::default);
        status
            .conditions
            .push(condition("Other", Truth::True, "Why", String::new(), now()));
        status.properties.push(Property {
            name: "other".into(),
            value: "1".into(),
            last_observed_time: String::new(),
        });
        status.conditions[0].last_transition_time = "2020-01-01T00:00:00Z".into();
        assert!(!spec_differs(&desired, Some(&same)));
        assert!(!status_differs(&desired, Some(&same)));
        assert!(is_ferrys(&same));

        // The cluster left its set: the label and the property must go.
        let unset = render(&cluster(Some(connected()), None), &[], now());
        assert!(spec_differs(&unset, Some(&same)));
        assert!(status_differs(&unset, Some(&same)));

        let mut foreign = live(&desired);
        foreign.spec.cluster_manager.name = "open-cluster-management".into();
        assert!(!is_ferrys(&foreign));
    }
}
