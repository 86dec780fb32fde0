//! The `ferry-agent` binary's command line. Also the reason `cargo test
//! --workspace` builds `target/<profile>/ferry-agent`, which the e2e test
//! `agent_sigterm` runs.

use std::process::Command;

const AGENT: &str = env!("CARGO_BIN_EXE_ferry-agent");

#[test]
fn the_crds_command_writes_the_checked_in_spoke_crds() {
    let out = tempfile::tempdir().expect("tempdir");
    let status = Command::new(AGENT)
        .arg("crds")
        .arg("--out")
        .arg(out.path())
        .status()
        .expect("run ferry-agent crds");
    assert!(status.success(), "ferry-agent crds exits 0, got {status}");
    let written =
        std::fs::read_to_string(out.path().join("appliedmanifestworks.yaml")).expect("written");
    let checked_in = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../deploy/spoke-crds/appliedmanifestworks.yaml"),
    )
    .expect("checked in");
    assert!(
        written == checked_in,
        "the binary writes the checked-in CRD"
    );
}

#[test]
fn the_shutdown_grace_is_a_flag_with_an_environment_variable() {
    let help = Command::new(AGENT)
        .arg("--help")
        .output()
        .expect("run ferry-agent --help");
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        text.contains("--shutdown-grace-seconds") && text.contains("FERRY_SHUTDOWN_GRACE_SECONDS"),
        "--help lists the shutdown grace flag:\n{text}"
    );
}

#[test]
fn running_without_the_required_flags_is_refused_naming_them() {
    let output = Command::new(AGENT)
        .env_remove("FERRY_HUB_URL")
        .env_remove("FERRY_CLUSTER_NAME")
        .env_remove("FERRY_TOKEN_FILE")
        .output()
        .expect("run ferry-agent");
    assert!(!output.status.success(), "refused");
    let stderr = String::from_utf8_lossy(&output.stderr);
    for flag in ["--hub-url", "--cluster-name", "--token-file"] {
        assert!(stderr.contains(flag), "the error names {flag}:\n{stderr}");
    }
}
