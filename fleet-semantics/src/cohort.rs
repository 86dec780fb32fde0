//! Churn-proof cohorts: a rollout decides its clusters when it starts.
//! A cluster chosen later ("late joiner") gets the revision after the
//! cohort, as the rollout's last stage, so joining never reorders or stalls
//! the stages under way; a cluster that leaves simply drops out. Pure: the
//! hub passes what it knows of each cluster. Times are milliseconds since
//! the Unix epoch.

/// What the hub knows of one chosen cluster, for its cohort membership.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Membership<'a> {
    /// When its generated work was created, if it has one.
    pub work_created_ms: Option<i64>,
    /// The revision hash its work holds (the work's revision annotation).
    pub work_revision: Option<&'a str>,
    /// When its ManagedCluster was created, if known.
    pub cluster_created_ms: Option<i64>,
}

/// Whether a cluster belongs to the cohort of the rollout of `revision`
/// that started at `started_ms`: its work existed before the start, or it
/// already holds the revision, or it was registered before the start (a
/// first rollout has no works yet: every cluster registered then is in).
/// A cluster registered and chosen after the start is a late joiner.
///
/// Kubernetes times have whole seconds: something created in the second
/// the rollout started counts as before it.
pub fn in_cohort(member: &Membership<'_>, revision: &str, started_ms: i64) -> bool {
    member.work_created_ms.is_some_and(|t| t <= started_ms)
        || member.work_revision == Some(revision)
        || member.cluster_created_ms.is_some_and(|t| t <= started_ms)
}

/// Whether a cluster joined after the start: it is outside the cohort by
/// time alone (its work, if any, and its registration are newer than the
/// start). Stays true once it holds the revision, so the status keeps
/// counting it.
pub fn joined_late(member: &Membership<'_>, started_ms: i64) -> bool {
    member.work_created_ms.is_none_or(|t| t > started_ms)
        && member.cluster_created_ms.is_none_or(|t| t > started_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_known_before_the_start_are_the_cohort() {
        let old_work = Membership {
            work_created_ms: Some(5),
            ..Membership::default()
        };
        assert!(in_cohort(&old_work, "r1", 10));
        let registered = Membership {
            cluster_created_ms: Some(1),
            ..Membership::default()
        };
        assert!(in_cohort(&registered, "r1", 10));
        assert!(!joined_late(&registered, 10));
        // Registered in the second the rollout started: in the cohort.
        let same_second = Membership {
            cluster_created_ms: Some(10),
            ..Membership::default()
        };
        assert!(in_cohort(&same_second, "r1", 10));
        assert!(!joined_late(&same_second, 10));
    }

    #[test]
    fn a_cluster_registered_after_the_start_is_a_late_joiner() {
        let new = Membership {
            cluster_created_ms: Some(20),
            ..Membership::default()
        };
        assert!(!in_cohort(&new, "r1", 10));
        assert!(joined_late(&new, 10));
        // Once it holds the revision it counts as rolled out, and is still
        // reported as a late joiner.
        let started = Membership {
            work_created_ms: Some(30),
            work_revision: Some("r1"),
            cluster_created_ms: Some(20),
        };
        assert!(in_cohort(&started, "r1", 10));
        assert!(joined_late(&started, 10));
        // Holding another revision does not make it a member.
        let other = Membership {
            work_revision: Some("r0"),
            ..started
        };
        assert!(!in_cohort(&other, "r1", 10));
    }
}
