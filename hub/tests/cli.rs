//! The `ferry-hub` binary's command line. Also the reason `cargo test
//! --workspace` builds `target/<profile>/ferry-hub`, which the e2e test
//! `install` runs as the chart's Deployment would.

use std::process::Command;

const HUB: &str = env!("CARGO_BIN_EXE_ferry-hub");

#[test]
fn the_crds_command_writes_the_checked_in_crds() {
    let out = tempfile::tempdir().expect("tempdir");
    let status = Command::new(HUB)
        .arg("crds")
        .arg("--out")
        .arg(out.path())
        .status()
        .expect("run ferry-hub crds");
    assert!(status.success(), "ferry-hub crds exits 0, got {status}");
    let checked_in = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds");
    for file in ["manifestworks.yaml", "managedclusters.yaml"] {
        let written = std::fs::read_to_string(out.path().join(file)).expect("written");
        let expected = std::fs::read_to_string(checked_in.join(file)).expect("checked in");
        assert!(
            written == expected,
            "the binary writes the checked-in {file}"
        );
    }
}

#[test]
fn a_webhook_address_without_a_target_is_refused_naming_the_missing_flags() {
    let output = Command::new(HUB)
        .args([
            "serve",
            "--insecure-plaintext",
            "--webhook-addr",
            "127.0.0.1:0",
        ])
        .env_remove("FERRY_WEBHOOK_SERVICE")
        .env_remove("FERRY_WEBHOOK_URL")
        .output()
        .expect("run ferry-hub serve");
    assert!(!output.status.success(), "refused");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--webhook-service") || stderr.contains("--webhook-url"),
        "the error names what is missing:\n{stderr}"
    );
}
