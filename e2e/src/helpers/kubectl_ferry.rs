//! Running the `kubectl-ferry` binary as `kubectl ferry` would, with a
//! given kubeconfig.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use crate::harness::local_pod::workspace_binary;

/// The kubectl-ferry binary: `KUBECTL_FERRY_BIN`, or the one `cargo build`
/// put beside the test executable.
pub fn kubectl_ferry_binary() -> PathBuf {
    workspace_binary("kubectl-ferry", "KUBECTL_FERRY_BIN")
}

/// Runs the plugin with `kubeconfig` and `args`; panics when it cannot be
/// started (the binary is missing: build it first).
pub async fn kubectl_ferry(kubeconfig: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(kubectl_ferry_binary())
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("kubectl-ferry runs")
}

/// The run's stdout, after checking that `what` exited 0 (its stderr is in
/// the panic message otherwise) and printed UTF-8.
pub fn succeeded(output: &Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} exits 0, got {}; stderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("utf-8 output")
}
