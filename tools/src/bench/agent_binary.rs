//! The real `ferry-agent` binary in place of a fleet's in-process agent, as
//! every benchmark of the agent runs it.

use std::time::Duration;

use anyhow::Context;

use ferry_e2e::harness::agent_process::{AgentProcess, agent_binary};
use ferry_e2e::harness::fleet::Fleet;

/// Stops `fleet`'s in-process agent of `cluster`, starts the `ferry-agent`
/// binary (`FERRY_AGENT_BIN`, else the one next to the running binary) in
/// its place with `args`, waits until it is ready (it holds a hub session
/// and its spoke answers) and says which binary runs. Fails when it does
/// not start or become ready within a minute.
pub async fn start_agent_binary(
    fleet: &mut Fleet,
    cluster: &str,
    args: &[&str],
) -> anyhow::Result<AgentProcess> {
    fleet.stop_agent(cluster).await;
    let agent = AgentProcess::start(fleet, cluster, None, args)
        .await
        .context("starting ferry-agent")?;
    agent
        .wait_for_answer("/readyz", 200, "", Duration::from_secs(60))
        .await
        .context("ferry-agent did not become ready")?;
    println!("agent: the ferry-agent binary {}", agent_binary().display());
    Ok(agent)
}
