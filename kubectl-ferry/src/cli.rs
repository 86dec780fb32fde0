//! The command line, kubectl's way: global connection flags (`--kubeconfig`,
//! `--context`, `-n`, `-A`, `-o`) accepted before or after the command.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `kubectl ferry`: ferry's fleet as people read it.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl-ferry",
    bin_name = "kubectl ferry",
    version,
    about = "A fleet view of ferry: clusters, works, and what happened to them",
    after_help = "Installed on PATH as `kubectl-ferry`, it runs as `kubectl ferry ...`."
)]
pub struct Cli {
    /// Where to connect and how to print.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to show.
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command takes, named as kubectl names them.
#[derive(Debug, Args, Clone, Default)]
pub struct GlobalArgs {
    /// Path to the kubeconfig of the hub cluster (default: $KUBECONFIG, then
    /// ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace (= cluster) to read works from (default: the context's).
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Read works from every namespace, i.e. every cluster.
    #[arg(
        short = 'A',
        long,
        global = true,
        conflicts_with = "namespace",
        default_value_t = false
    )]
    pub all_namespaces: bool,
    /// Output format: a table for people, or the underlying records.
    #[arg(
        short = 'o',
        long,
        global = true,
        value_enum,
        default_value_t = OutputFormat::Table
    )]
    pub output: OutputFormat,
    /// Keep metadata.managedFields in -o json|yaml output (hidden by default,
    /// as kubectl does).
    #[arg(long, global = true, default_value_t = false)]
    pub show_managed_fields: bool,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum OutputFormat {
    /// kubectl-style columns.
    #[default]
    Table,
    /// The records as JSON.
    Json,
    /// The records as YAML.
    Yaml,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List clusters or works.
    #[command(subcommand)]
    Get(GetCommand),
    /// Show one object in detail.
    #[command(subcommand)]
    Describe(DescribeCommand),
    /// Serve a live web dashboard of the fleet on 127.0.0.1.
    ///
    /// Fleet (every cluster a tile coloured by connected / failing works /
    /// drift), each cluster's works, manifests, drift and events, and the
    /// rollouts of ManifestWorkReplicaSets with approve, pause and resume.
    /// It reads and acts with this kubeconfig's credentials, updates pages
    /// as the hub changes, and prints a one-time link: the first browser to
    /// open it gets the session (an HttpOnly, SameSite=Strict cookie), and
    /// nothing else is answered (not other local users, not other hosts).
    Dashboard {
        /// Port to listen on (0: any free port).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Open the one-time link in the desktop's browser (the opener's
        /// command line, which other local users can read, holds it).
        #[arg(long, default_value_t = false)]
        open: bool,
    },
    /// Read and steer a ManifestWorkReplicaSet's rollout.
    #[command(subcommand)]
    Rollout(RolloutCommand),
    /// Seal a Secret manifest to clusters' keys, for a work or a replica set.
    ///
    /// Reads the Secret (YAML or JSON; `-f -` for stdin), seals it to the
    /// current key each cluster's agent publishes (ManagedCluster
    /// status.sealingKeys), and prints the sealed manifest entry to put in
    /// spec.workload.manifests (-o json for JSON). With --replica-set, seals
    /// to the clusters its placements chose now and puts the entry into its
    /// template in place of the same Secret's (sealed or plain).
    Seal {
        /// The Secret manifest (`-`: stdin).
        #[arg(short = 'f', long = "filename", value_name = "FILE")]
        file: PathBuf,
        /// A cluster to seal to (repeatable).
        #[arg(long = "cluster", value_name = "NAME")]
        clusters: Vec<String>,
        /// A placement whose current decisions to seal to (`[NS/]NAME`, repeatable).
        #[arg(long = "placement", value_name = "[NS/]NAME")]
        placements: Vec<String>,
        /// A ManagedClusterSet whose clusters to seal to (repeatable).
        #[arg(long = "cluster-set", value_name = "NAME")]
        cluster_sets: Vec<String>,
        /// A replica set (`[NS/]NAME`) whose template gets the entry, sealed
        /// to the clusters its placements chose.
        #[arg(long = "replica-set", value_name = "[NS/]NAME")]
        replica_set: Option<String>,
    },
    /// List the sealed Secrets of works and how each stands against its
    /// cluster's keys: current, retiring (reseal it), not-a-recipient,
    /// no-keys.
    Sealed,
    /// Release the deletions a spoke agent's deletion brake holds.
    ///
    /// Reads what CLUSTER's agent holds from its ManagedCluster on the hub,
    /// then, with credentials for the spoke (its own kubeconfig context),
    /// writes the release on the agent's ledger there, recorded as your
    /// user name on the spoke, the reason and the time, and waits until
    /// the hub shows the hold released. The release is taken only on the
    /// spoke: whoever controls the hub cannot release what the agent holds.
    ReleaseDeletions {
        /// The ManagedCluster whose agent holds deletions.
        #[arg(value_name = "CLUSTER")]
        cluster: String,
        /// Why the held deletions are wanted (recorded with your name).
        #[arg(long)]
        reason: String,
        /// The spoke's kubeconfig (default: the hub's kubeconfig file).
        #[arg(long, value_name = "FILE")]
        spoke_kubeconfig: Option<PathBuf>,
        /// The spoke's context (default: the context named CLUSTER, else the
        /// current context of --spoke-kubeconfig).
        #[arg(long, value_name = "NAME")]
        spoke_context: Option<String>,
    },
}

/// What `rollout` does.
#[derive(Debug, Subcommand)]
pub enum RolloutCommand {
    /// A replica set's revisions: number, hash, created, clusters holding it.
    ///
    /// One row per revision kept (a ControllerRevision named
    /// `<replica set>-<hash>`), newest first: its number, its hash, its
    /// age, how many clusters' works hold it, and whether it is the current
    /// revision (the spec's) or the stable one (the last that rolled out
    /// everywhere). `-o json|yaml` prints the rows as records.
    History {
        /// `NAMESPACE/NAME` of the ManifestWorkReplicaSet, or `NAME` with `-n`.
        #[arg(value_name = "NS/NAME")]
        replica_set: String,
    },
    /// Roll a replica set back to an earlier revision.
    ///
    /// Writes revision N's manifestWorkTemplate and overrides (from its
    /// ControllerRevision) into the replica set's spec, as `kubectl rollout
    /// undo` does for a Deployment: the revision becomes the newest and
    /// rolls out with the replica set's strategy. Fails, naming the
    /// revisions there are, when N is not kept.
    Undo {
        /// `NAMESPACE/NAME` of the ManifestWorkReplicaSet, or `NAME` with `-n`.
        #[arg(value_name = "NS/NAME")]
        replica_set: String,
        /// The revision number to go back to (see `rollout history`).
        #[arg(long, value_name = "N")]
        to_revision: i64,
    },
    /// Per placement: the waves, which one moves, each gate, churn.
    ///
    /// The replica set's revision and PlacementRolledOut condition; per
    /// placement, each decision group with its cluster count and how many
    /// hold the current revision, are applied, available, degraded, and
    /// whether it is rolled out, moving, waiting or held by a gate; each
    /// gate's state, opening time, approver and message; the late joiners
    /// and unreachable clusters. `-o json|yaml` prints the replica set.
    Status {
        /// `NAMESPACE/NAME`, or `NAME` with `-n NAMESPACE`.
        #[arg(value_name = "NS/NAME")]
        replica_set: String,
    },
    /// Approve the gate awaiting approval (creates a RolloutApproval).
    ///
    /// Creates a RolloutApproval for the current revision of the gate that
    /// awaits approval (naming its whole digest, so it approves that
    /// revision's rollout under way and nothing else), recorded as approved
    /// by you (your user name, from a SelfSubjectReview). With several gates
    /// awaiting, name one with --placement and --group.
    Approve {
        /// `NAMESPACE/NAME`, or `NAME` with `-n NAMESPACE`.
        #[arg(value_name = "NS/NAME")]
        replica_set: String,
        /// The placement whose gate to approve.
        #[arg(long)]
        placement: Option<String>,
        /// The decision group the gate follows.
        #[arg(long)]
        group: Option<String>,
        /// Why, for the record.
        #[arg(long, default_value = "")]
        comment: String,
    },
    /// Hold the rollout (sets spec.paused).
    Pause {
        /// `NAMESPACE/NAME`, or `NAME` with `-n NAMESPACE`.
        #[arg(value_name = "NS/NAME")]
        replica_set: String,
    },
    /// Let the rollout go on (clears spec.paused).
    Resume {
        /// `NAMESPACE/NAME`, or `NAME` with `-n NAMESPACE`.
        #[arg(value_name = "NS/NAME")]
        replica_set: String,
    },
}

/// What `get` lists.
#[derive(Debug, Subcommand)]
pub enum GetCommand {
    /// One row per cluster: connected, agent, last seen, works, failing works.
    ///
    /// One row per ManagedCluster: whether its agent is connected, the agent's
    /// version, when the hub last heard from it, why it is disconnected, and
    /// the number of ManifestWorks in its namespace and of those failing
    /// (Applied or Available False on the work or a manifest). An ACCEPTED
    /// column appears when the hub's ManagedClusters carry the accept gate.
    /// `-o json|yaml` prints records with those fields and the ManagedCluster.
    #[command(visible_aliases = ["cluster", "managedclusters", "managedcluster", "mcl"])]
    Clusters,
    /// One row per cluster set: selector, cluster count, empty.
    ///
    /// One row per ManagedClusterSet: how it selects clusters
    /// (ExclusiveClusterSetLabel: the label cluster.ferry.dev/clusterset, or a
    /// LabelSelector), how many clusters the hub counted in it, and its
    /// ClusterSetEmpty condition. `-o json|yaml` prints a List of the sets as
    /// stored.
    #[command(visible_aliases = ["clusterset", "managedclustersets", "managedclusterset", "mclset"])]
    Clustersets,
    /// One row per work: manifests, Applied, Available, failing manifests, age.
    ///
    /// One row per ManifestWork of the namespace (-n, or the context's) or of
    /// every namespace (-A): its manifest count, its Applied and Available
    /// conditions ("(stale)" when they describe an older generation), how many
    /// manifests fail and why, and its age. `-o json|yaml` prints a List of the
    /// ManifestWorks as stored.
    #[command(visible_aliases = ["work", "manifestworks", "manifestwork", "mw"])]
    Works,
    /// One row per replica set: placements, works by state, rollout, revision.
    ///
    /// One row per ManifestWorkReplicaSet of the namespace (-n, or the
    /// context's) or of every namespace (-A): the placements it refers to, its
    /// generated works counted as total, holding the current template
    /// (UPDATED), Applied, Available and Degraded, where its rollout stands
    /// (the PlacementRolledOut reason, or Paused), the revision it rolls out,
    /// and its age. `-o json|yaml` prints a List of the replica sets as stored.
    #[command(visible_aliases = [
        "replicaset", "manifestworkreplicasets", "manifestworkreplicaset", "mwrs"
    ])]
    Replicasets,
    /// One row per placement: clusters chosen, decision groups, satisfied.
    ///
    /// One row per Placement of the namespace (-n, or the context's) or of
    /// every namespace (-A): how many clusters it chose, in how many decision
    /// groups, its PlacementSatisfied condition with the reason, and its age.
    /// `-o json|yaml` prints a List of the placements as stored.
    #[command(visible_aliases = ["placement"])]
    Placements,
}

/// What `describe` shows.
#[derive(Debug, Subcommand)]
pub enum DescribeCommand {
    /// A work's conditions, every manifest's conditions and feedback, events.
    ///
    /// The work's conditions; every manifest's identity, conditions (type,
    /// status, reason, message) and status feedback values; and the recent
    /// Kubernetes Events about the work. `-o json|yaml` prints the work and
    /// its events.
    #[command(visible_aliases = ["manifestwork", "mw"])]
    Work {
        /// `NAMESPACE/NAME`, or `NAME` with `-n NAMESPACE`.
        #[arg(value_name = "NS/NAME")]
        work: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_come_after_the_command_as_in_kubectl() {
        let cli = Cli::try_parse_from(["kubectl-ferry", "get", "works", "-A", "-o", "yaml"])
            .expect("parses");
        assert!(cli.global.all_namespaces);
        assert_eq!(cli.global.output, OutputFormat::Yaml);
        assert!(matches!(cli.command, Command::Get(GetCommand::Works)));
    }

    #[test]
    fn namespace_and_all_namespaces_exclude_each_other() {
        let parsed = Cli::try_parse_from(["kubectl-ferry", "get", "works", "-A", "-n", "x"]);
        assert!(parsed.is_err());
    }

    #[test]
    fn rollout_undo_takes_the_replica_set_and_the_revision() {
        let cli = Cli::try_parse_from([
            "kubectl-ferry",
            "rollout",
            "undo",
            "default/app",
            "--to-revision",
            "3",
        ])
        .expect("parses");
        match cli.command {
            Command::Rollout(RolloutCommand::Undo {
                replica_set,
                to_revision,
            }) => assert_eq!((replica_set.as_str(), to_revision), ("default/app", 3)),
            other => panic!("unexpected {other:?}"),
        }
        assert!(Cli::try_parse_from(["kubectl-ferry", "rollout", "undo", "default/app"]).is_err());
    }

    #[test]
    fn rollout_approve_takes_the_gate_filters() {
        let cli = Cli::try_parse_from([
            "kubectl-ferry",
            "rollout",
            "approve",
            "ns/app",
            "--group",
            "canary",
            "--comment",
            "looks good",
        ])
        .expect("parses");
        match cli.command {
            Command::Rollout(RolloutCommand::Approve {
                replica_set,
                placement,
                group,
                comment,
            }) => {
                assert_eq!(replica_set, "ns/app");
                assert_eq!(placement, None);
                assert_eq!(group.as_deref(), Some("canary"));
                assert_eq!(comment, "looks good");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn describe_takes_the_work() {
        let cli = Cli::try_parse_from([
            "kubectl-ferry",
            "--context",
            "hub",
            "describe",
            "work",
            "cluster-a/web",
        ])
        .expect("parses");
        assert_eq!(cli.global.context.as_deref(), Some("hub"));
        match cli.command {
            Command::Describe(DescribeCommand::Work { work }) => assert_eq!(work, "cluster-a/web"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn dashboard_takes_a_port_and_open() {
        let cli = Cli::try_parse_from(["kubectl-ferry", "dashboard", "--port", "8080", "--open"])
            .expect("parses");
        assert!(matches!(
            cli.command,
            Command::Dashboard {
                port: 8080,
                open: true
            }
        ));
    }
}
