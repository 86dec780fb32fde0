//! Joining a cluster to the hub (OCM's `clusteradm join` and `accept`).

/// The accept gate: setting `spec.hubAcceptsClient`.
pub mod accept;
/// Both halves in one command, or the hub half and a bundle for GitOps.
pub mod both;
/// What joining puts on a spoke, as objects or files.
pub mod bundle;
/// The hub half: namespace, ServiceAccount, ManagedCluster and token.
pub mod hub_side;
/// Secret files: 0600, never through a symlink.
pub mod private_file;
/// The spoke half: applying the bundle's objects with the spoke's credentials.
pub mod spoke_side;
