//! The order in which a placement's PlacementDecision objects are rewritten
//! so that a cluster chosen before and after never disappears from all of
//! them in between (OCM ocm#1203): every object first gains its new
//! clusters (keeping its old ones), then loses the ones it no longer holds.
//! A reader of the decisions between two writes (the replica-set
//! controller) sees each staying cluster in at least one object throughout.

use std::collections::BTreeMap;

/// The status writes, in order, that take the decision objects from
/// `current` (object name to its clusters; `None` for an object without a
/// status yet) to `wanted` (object name to its clusters, in write order).
/// Each write is an object name and the full cluster list to write. First
/// every object whose list grows gets the union of old and new; then every
/// object whose list differs from the wanted one gets the wanted list.
/// Objects of `current` missing from `wanted` are the caller's to delete
/// after the last write.
pub fn decision_writes(
    current: &BTreeMap<String, Option<Vec<String>>>,
    wanted: &[(String, Vec<String>)],
) -> Vec<(String, Vec<String>)> {
    let mut writes = Vec::new();
    // What each object holds after the writes so far.
    let mut now: BTreeMap<&str, Option<Vec<String>>> = current
        .iter()
        .map(|(name, clusters)| (name.as_str(), clusters.clone()))
        .collect();
    for (object, clusters) in wanted {
        let old = now.get(object.as_str()).cloned().flatten();
        let mut bridge = old.clone().unwrap_or_default();
        for cluster in clusters {
            if !bridge.contains(cluster) {
                bridge.push(cluster.clone());
            }
        }
        if old.as_ref() != Some(&bridge) {
            writes.push((object.clone(), bridge.clone()));
            now.insert(object, Some(bridge));
        }
    }
    for (object, clusters) in wanted {
        if now.get(object.as_str()).cloned().flatten().as_ref() != Some(clusters) {
            writes.push((object.clone(), clusters.clone()));
            now.insert(object, Some(clusters.clone()));
        }
    }
    writes
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn owned(list: &[&str]) -> Vec<String> {
        list.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn a_swap_between_groups_adds_before_it_removes() {
        // spoke-a moves from the first object to the second, spoke-b back.
        let current = BTreeMap::from([
            ("p-decision-1".to_string(), Some(owned(&["spoke-a"]))),
            ("p-decision-2".to_string(), Some(owned(&["spoke-b"]))),
        ]);
        let wanted = vec![
            ("p-decision-1".to_string(), owned(&["spoke-b"])),
            ("p-decision-2".to_string(), owned(&["spoke-a"])),
        ];
        assert_eq!(
            decision_writes(&current, &wanted),
            vec![
                ("p-decision-1".to_string(), owned(&["spoke-a", "spoke-b"])),
                ("p-decision-2".to_string(), owned(&["spoke-b", "spoke-a"])),
                ("p-decision-1".to_string(), owned(&["spoke-b"])),
                ("p-decision-2".to_string(), owned(&["spoke-a"])),
            ]
        );
    }

    #[test]
    fn unchanged_objects_are_not_written_and_new_ones_are() {
        let current = BTreeMap::from([
            ("p-decision-1".to_string(), Some(owned(&["a"]))),
            ("p-decision-2".to_string(), None),
        ]);
        let wanted = vec![
            ("p-decision-1".to_string(), owned(&["a"])),
            ("p-decision-2".to_string(), vec![]),
            ("p-decision-3".to_string(), owned(&["b"])),
        ];
        assert_eq!(
            decision_writes(&current, &wanted),
            vec![
                ("p-decision-2".to_string(), vec![]),
                ("p-decision-3".to_string(), owned(&["b"])),
            ]
        );
    }

    fn objects() -> impl Strategy<Value = Vec<Vec<u8>>> {
        prop::collection::vec(prop::collection::vec(0u8..8, 0..5), 0..4)
    }

    fn named(objects: &[Vec<u8>]) -> Vec<(String, Vec<String>)> {
        objects
            .iter()
            .enumerate()
            .map(|(i, cs)| {
                let mut seen = BTreeSet::new();
                let list = cs
                    .iter()
                    .filter(|c| seen.insert(**c))
                    .map(|c| format!("c{c}"))
                    .collect();
                (format!("d-{i}"), list)
            })
            .collect()
    }

    proptest! {
        #[test]
        fn a_cluster_chosen_before_and_after_is_never_absent(old in objects(), new in objects()) {
            let old = named(&old);
            let new = named(&new);
            let current: BTreeMap<String, Option<Vec<String>>> =
                old.iter().map(|(n, c)| (n.clone(), Some(c.clone()))).collect();
            let before: BTreeSet<&String> = old.iter().flat_map(|(_, c)| c).collect();
            let after: BTreeSet<&String> = new.iter().flat_map(|(_, c)| c).collect();
            let staying: Vec<&&String> = before.intersection(&after).collect();
            let mut state = current.clone();
            for (object, clusters) in decision_writes(&current, &new) {
                state.insert(object, Some(clusters));
                let present: BTreeSet<&String> =
                    state.values().flatten().flatten().collect();
                for cluster in &staying {
                    prop_assert!(present.contains(**cluster), "{cluster} absent");
                }
            }
            // Then the obsolete objects go: the result is exactly `new`.
            state.retain(|name, _| new.iter().any(|(n, _)| n == name));
            let wanted: BTreeMap<String, Option<Vec<String>>> =
                new.iter().map(|(n, c)| (n.clone(), Some(c.clone()))).collect();
            prop_assert_eq!(state, wanted);
        }
    }
}
