//! The ferry hub: watches ManifestWorks on the management cluster, streams each
//! cluster's works to that cluster's agent over gRPC, and writes the status the
//! agents report back to the ManifestWork status subresource.
#![forbid(unsafe_code)]

/// The ManifestWork admission webhook and policy.
pub mod admission;
/// Client certificates for agents: the hub's agent CA, issuing and revocation.
pub mod agent_certs;
pub mod api_client;
/// Serving certificates that follow their files.
pub mod certs;
/// ClusterProfiles (SIG Multicluster's cluster inventory) of the clusters.
pub mod cluster_profile;
/// Cluster sets and bindings: which clusters a namespace's placements reach.
pub mod cluster_sets;
/// ManagedClusters: liveness, the unreachable taint, labels and claims.
pub mod clusters;
/// Status conditions: built, merged with the current ones, compared.
pub mod conditions;
/// Installing the CRDs and rendering them for `deploy/crds/`.
pub mod crds;
/// Kubernetes Events the hub publishes, through one bounded queue.
pub mod events;
/// The agent port: sessions, their handshake, identity and limits.
pub mod grpc;
/// The composition root: wires every part of a hub replica together.
pub mod hub;
/// Placements' decisions published in the cluster inventory
/// (`multicluster.x-k8s.io` PlacementDecisions, KEP-5313).
pub mod inventory_decisions;
/// Joining a cluster: the hub side, the spoke side, both, and accepting it.
pub mod join;
/// Leader election: the controllers that must run once run in the replica
/// holding a Lease.
pub mod leader;
/// Prometheus metrics of the hub.
pub mod metrics;
/// Placement: choosing clusters and writing PlacementDecisions.
pub mod placement;
/// The `/healthz`, `/readyz` and `/metrics` endpoints.
pub mod probes;
/// ManifestWorkReplicaSet: one template on every placed cluster.
pub mod replica_set;
/// Runs a publisher only while the CRDs it writes are served.
pub mod served_gate;
/// Agents' status reports written to ManifestWork status, in session order.
pub mod status;
/// Readiness of reflector stores that many reconciles await at once.
pub mod store_ready;
/// The one way hub controllers watch, back off and log.
pub mod watch;
/// To and from the `ferry.v1` messages agents speak.
pub mod wire;
/// ManifestWorks on the hub: the index, deletion, TTL and Events.
pub mod works;
