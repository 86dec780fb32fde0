//! The kube client of the subcommands that talk to a hub or a spoke as an
//! operator: from a kubeconfig file and context, or the default one.

use anyhow::Context;

/// A client from `kubeconfig` (and `context`), or the default one.
///
/// Fails when the kubeconfig cannot be read or used.
pub async fn client_from(
    kubeconfig: Option<&std::path::Path>,
    context: Option<String>,
) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
            let options = kube::config::KubeConfigOptions {
                context,
                ..Default::default()
            };
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .with_context(|| format!("using the kubeconfig {}", path.display()))?
        }
        None if context.is_some() => {
            let options = kube::config::KubeConfigOptions {
                context,
                ..Default::default()
            };
            kube::Config::from_kubeconfig(&options)
                .await
                .context("using the default kubeconfig")?
        }
        None => kube::Config::infer()
            .await
            .context("finding a kubeconfig or in-cluster config")?,
    };
    ferry_hub::api_client::api_client(config, None, None).context("building a Kubernetes client")
}
