//! The secrets the real `ferry-hub join` writes to disk (issue 20, items 6
//! and 8): the hub-only token file (`--out`) and the bundle's Secret
//! (`--output`) are 0600 on the first run and stay 0600 on a second run even
//! when someone widened them in between, and a symlink planted at either
//! path is refused, its target untouched.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_hub::join::bundle::BUNDLE_SECRET_FILE;

const CLUSTER: &str = "cluster-files";

/// Runs the real `ferry-hub join` with `args`.
async fn join(binary: &Path, args: &[String]) -> Output {
    tokio::process::Command::new(binary)
        .arg("join")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("ferry-hub runs")
}

fn succeeded(output: &Output) {
    assert!(
        output.status.success(),
        "ferry-hub join failed: {}\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

/// Runs `args` twice, widening the secret at `secret` to 0644 in between,
/// then once more with a symlink at `secret`: 0600 both times, the symlink
/// refused and its target untouched.
async fn private_on_every_run_and_never_through_a_symlink(
    binary: &Path,
    args: &[String],
    secret: &Path,
    decoy: &Path,
) {
    succeeded(&join(binary, args).await);
    assert_eq!(mode(secret), 0o600, "{} on the first run", secret.display());
    let first = std::fs::read(secret).expect("read");
    assert!(!first.is_empty());

    std::fs::set_permissions(secret, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    succeeded(&join(binary, args).await);
    assert_eq!(
        mode(secret),
        0o600,
        "{} narrowed again on the second run",
        secret.display()
    );

    std::fs::write(decoy, "not a secret\n").expect("decoy");
    std::fs::set_permissions(decoy, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    std::fs::remove_file(secret).expect("remove");
    std::os::unix::fs::symlink(decoy, secret).expect("symlink");
    let refused = join(binary, args).await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("symlink"),
        "a symlink at {} is refused: {}\n{stderr}",
        secret.display(),
        refused.status
    );
    println!(
        "symlink refused: {}",
        stderr
            .lines()
            .find(|l| l.contains("symlink"))
            .unwrap_or_default()
    );
    assert_eq!(
        std::fs::read_to_string(decoy).expect("read decoy"),
        "not a secret\n",
        "the symlink's target is untouched"
    );
    assert_eq!(mode(decoy), 0o644, "and keeps its mode");
    assert!(
        std::fs::symlink_metadata(secret)
            .expect("metadata")
            .file_type()
            .is_symlink(),
        "the symlink was neither followed nor replaced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_writes_its_token_file_and_bundle_secret_0600_on_every_run_and_refuses_symlinks() {
    let [binary, _] = tokio::task::spawn_blocking(ferry_e2e::harness::image::build_binaries)
        .await
        .expect("build task")
        .expect("ferry-hub builds");
    let fleet = Fleet::start(FleetOptions::with_spokes(&[]))
        .await
        .expect("hub starts");
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, &fleet.hub_ca_pem).expect("CA file");
    let base: Vec<String> = [
        "--cluster",
        CLUSTER,
        "--hub-url",
        &fleet.hub_url,
        "--ca",
        &ca.display().to_string(),
        "--hub-kubeconfig",
        &fleet.hub.info.kubeconfig.display().to_string(),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let with = |flag: &str, path: &PathBuf| {
        let mut args = base.clone();
        args.extend([flag.to_string(), path.display().to_string()]);
        args
    };

    // The hub half only: the token file.
    let out = dir.path().join("out");
    private_on_every_run_and_never_through_a_symlink(
        &binary,
        &with("--out", &out),
        &out.join(format!("{CLUSTER}.token")),
        &dir.path().join("decoy-token"),
    )
    .await;

    // The spoke's bundle: its Secret.
    let bundle = dir.path().join("bundle");
    private_on_every_run_and_never_through_a_symlink(
        &binary,
        &with("--output", &bundle),
        &bundle.join(BUNDLE_SECRET_FILE),
        &dir.path().join("decoy-secret"),
    )
    .await;
    fleet.stop().await;
}
