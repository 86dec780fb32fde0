//! The binary's failures that need no cluster: each exits non-zero with a
//! message saying what is wrong, and none panics.

use std::process::{Command, Output};

fn kubectl_ferry(args: &[&str], kubeconfig: Option<&std::path::Path>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kubectl-ferry"));
    command.args(args).env_remove("KUBECONFIG");
    if let Some(path) = kubeconfig {
        command.env("KUBECONFIG", path);
    }
    // No ~/.kube/config either: HOME points at an empty directory.
    let home = tempfile::tempdir().expect("tempdir");
    command.env("HOME", home.path());
    command.output().expect("runs")
}

fn failure(output: &Output) -> String {
    assert!(!output.status.success(), "exit status {}", output.status);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(output.stdout.is_empty(), "nothing on stdout");
    stderr
}

#[test]
fn without_a_kubeconfig_it_says_where_it_looked() {
    let missing = std::env::temp_dir().join("kubectl-ferry-no-such-kubeconfig");
    let stderr = failure(&kubectl_ferry(&["get", "clusters"], Some(&missing)));
    assert!(stderr.starts_with("error: no kubeconfig: "), "{stderr}");
    assert!(
        stderr.contains("kubectl-ferry-no-such-kubeconfig does not exist"),
        "{stderr}"
    );
    let stderr = failure(&kubectl_ferry(&["get", "works", "-A"], None));
    assert!(stderr.contains("no kubeconfig"), "{stderr}");
    assert!(stderr.contains("--kubeconfig"), "{stderr}");
}

#[test]
fn a_malformed_work_reference_is_refused_before_connecting() {
    for (arg, expected) in [
        ("a/b/c", "'a/b/c' is not NAMESPACE/NAME"),
        ("web", "'web' names no namespace"),
        (
            "Cluster_A/web",
            "namespace 'Cluster_A' is not a cluster name",
        ),
    ] {
        let stderr = failure(&kubectl_ferry(&["describe", "work", arg], None));
        assert!(stderr.contains(expected), "{arg}: {stderr}");
    }
}

#[test]
fn an_unknown_context_and_an_unreachable_server_are_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config");
    // Port 1 on loopback: nothing listens, the connection is refused at once.
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\ncurrent-context: hub\n\
         clusters: [{name: hub, cluster: {server: 'https://127.0.0.1:1'}}]\n\
         users: [{name: admin, user: {token: t}}]\n\
         contexts: [{name: hub, context: {cluster: hub, user: admin}}]\n",
    )
    .expect("write kubeconfig");
    let path_arg = path.to_str().expect("utf-8 path");
    let stderr = failure(&kubectl_ferry(
        &[
            "--kubeconfig",
            path_arg,
            "--context",
            "nope",
            "get",
            "clusters",
        ],
        None,
    ));
    assert!(stderr.contains("the kubeconfig cannot be used"), "{stderr}");
    let stderr = failure(&kubectl_ferry(
        &["get", "works", "-n", "cluster-a", "--kubeconfig", path_arg],
        None,
    ));
    assert!(
        stderr.contains("cannot list manifestworks in namespace cluster-a"),
        "{stderr}"
    );
}

#[test]
fn a_bad_output_format_is_a_usage_error() {
    let output = kubectl_ferry(&["get", "works", "-o", "xml"], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("invalid value 'xml'"));
}
