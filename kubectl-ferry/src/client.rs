//! A client for the hub cluster from a kubeconfig, found and chosen the way
//! kubectl does (`--kubeconfig`, else `$KUBECONFIG`, else `~/.kube/config`;
//! `--context`, else the current context).

use std::path::Path;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};

use crate::cli::GlobalArgs;
use crate::error::CliError;

/// A client and the namespace its context defaults to.
#[derive(Clone)]
pub struct Connection {
    /// Client for the hub's API server.
    pub client: Client,
    /// The context's namespace (`default` when it names none).
    pub default_namespace: String,
}

/// Reads the kubeconfig and builds a client. Fails with
/// [`CliError::NoKubeconfig`] when there is no kubeconfig where it looks,
/// [`CliError::Kubeconfig`] when it cannot be used (bad YAML, unknown
/// context), and [`CliError::Client`] when no client can be built from it.
pub async fn connect(global: &GlobalArgs) -> Result<Connection, CliError> {
    let kubeconfig = read_kubeconfig(global.kubeconfig.as_deref())?;
    connect_with(kubeconfig, global.context.clone()).await
}

/// Reads the kubeconfig at `path`, else where kubectl looks for one. Fails
/// as [`connect`] does.
pub fn read_kubeconfig(path: Option<&Path>) -> Result<Kubeconfig, CliError> {
    match path {
        Some(path) => Kubeconfig::read_from(path),
        None => Kubeconfig::read(),
    }
    .map_err(kubeconfig_error)
}

/// A client from `kubeconfig` with `context` (None: its current one).
/// Fails as [`connect`] does.
pub async fn connect_with(
    kubeconfig: Kubeconfig,
    context: Option<String>,
) -> Result<Connection, CliError> {
    let options = KubeConfigOptions {
        context,
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(kubeconfig_error)?;
    let default_namespace = config.default_namespace.clone();
    let client = Client::try_from(config).map_err(|e| CliError::Client(e.to_string()))?;
    Ok(Connection {
        client,
        default_namespace,
    })
}

/// A missing file is "no kubeconfig"; anything else is an unusable one.
fn kubeconfig_error(error: KubeconfigError) -> CliError {
    match error {
        KubeconfigError::FindPath => CliError::NoKubeconfig {
            detail:
                "KUBECONFIG is not set and there is no home directory to find ~/.kube/config in"
                    .into(),
        },
        KubeconfigError::ReadConfig(io, path) if io.kind() == std::io::ErrorKind::NotFound => {
            CliError::NoKubeconfig {
                detail: format!("{} does not exist", path.display()),
            }
        }
        KubeconfigError::LoadContext(name) => {
            CliError::Kubeconfig(format!("context {name} is not in the kubeconfig"))
        }
        other => CliError::Kubeconfig(other.to_string()),
    }
}
