//! `ferry-hub crds`: the hub's CRDs and admission policy as YAML, written
//! into a directory (how `deploy/crds/` is made) or printed.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use ferry_api::crds::hub_crds;
use ferry_hub::crds::{POLICY_FILE, render_policy_yaml, render_yaml};

/// Arguments of `ferry-hub crds`.
#[derive(Args)]
pub struct CrdsArgs {
    /// Directory to write into; prints to stdout when absent.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Writes or prints every CRD and the policy. Fails when a file cannot be
/// written.
pub fn run(args: CrdsArgs) -> anyhow::Result<()> {
    let CrdsArgs { out } = args;
    let mut documents = Vec::new();
    for (file, crd) in hub_crds() {
        documents.push((file, render_yaml(&crd)?));
    }
    documents.push((POLICY_FILE, render_policy_yaml()?));
    for (file, yaml) in documents {
        match &out {
            Some(dir) => std::fs::write(dir.join(file), yaml)
                .with_context(|| format!("writing {}", dir.join(file).display()))?,
            None => print!("---\n{yaml}"),
        }
    }
    Ok(())
}
