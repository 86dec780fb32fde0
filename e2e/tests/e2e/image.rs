//! ferry's container image works as shipped: its config names a non-root
//! numeric user, the hub entrypoint and the OCI labels; its root filesystem
//! holds the binaries, their libraries and CA certificates and nothing else;
//! and ferry-hub and ferry-agent run from it, as the image's user on a
//! read-only root, apply a work end to end on real control planes.
//!
//! The image is the one named by `FERRY_IMAGE_OCI`, or one written here by
//! ferry-tools' image writer (what `ferry-tools image` and
//! `deploy/image/build.sh` run) from the workspace's binaries: no container
//! tool is needed. Running it needs root on the host and util-linux's
//! `unshare` and `mount` and coreutils' `chroot` (a private mount namespace,
//! bind mounts and `chroot --userspec`): this machine cannot run containers,
//! so this is how the image's filesystem and user are used.

use ferry_e2e::harness::local_pod::free_port;
use ferry_e2e::harness::scratch::process_scratch;
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::harness::image::{
    IMAGE_ENV, Image, RuntimeConfig, build_binaries, named_image, root_files, unpack,
};
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work, wait_applied};
use ferry_hub::admission::webhook::wait_until_enforced;
use ferry_hub::certs::tls::ServingCert;
use ferry_hub::crds::install_crds;
use ferry_hub::join::hub_side::join_cluster;
use kube::Api;
use serde_json::json;

/// Where the test's configuration (kubeconfigs, certificates, token) is
/// mounted, read-only, inside the image's root.
/// Where the binaries in the image listen.
const LOOPBACK: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
const CONFIG_MOUNT: &str = "/config";

/// The image, unpacked once for every test of this file.
struct Unpacked {
    _image: Image,
    root: tempfile::TempDir,
    config: RuntimeConfig,
}

/// The image named by `FERRY_IMAGE_OCI`, or else one written now by
/// ferry-tools' image writer from the debug binaries `cargo test
/// --workspace` builds anyway (`build_binaries` only asks cargo for them).
/// Blocking.
fn image() -> Image {
    if let Some(image) = named_image() {
        return image;
    }
    let binaries = build_binaries().unwrap_or_else(|e| panic!("building ferry's binaries: {e}"));
    let dir = process_scratch("ferry-image-").expect("image directory");
    let layout = dir.path().join("oci");
    let started = std::time::Instant::now();
    let written = ferry_tools::image::write_image(
        &layout,
        &binaries,
        &ferry_tools::image::ImageMeta::default(),
    )
    .unwrap_or_else(|e| panic!("writing ferry's image (or set {IMAGE_ENV} to an OCI layout): {e}"));
    let origin = format!(
        "written by ferry-tools' image writer from {} in {:.1} s: {} bytes in its layer, {} uncompressed (set {IMAGE_ENV} to test another image)",
        binaries[0].display(),
        started.elapsed().as_secs_f64(),
        written.layer.size,
        written.layer.tar_size,
    );
    Image::built(dir, layout, origin)
}

fn unpacked() -> &'static Unpacked {
    static UNPACKED: OnceLock<Unpacked> = OnceLock::new();
    UNPACKED.get_or_init(|| {
        let image = image();
        eprintln!("image: {}", image.origin);
        // In this process's scratch directory: the static is never
        // dropped, so the next run removes it.
        let root = process_scratch("ferry-rootfs-").expect("rootfs directory");
        let config = unpack(&image.layout, root.path()).expect("unpack the image");
        // The image's `/` must be traversable by its user, as a runtime makes it.
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod rootfs");
        Unpacked {
            _image: image,
            root,
            config,
        }
    })
}

async fn unpacked_async() -> &'static Unpacked {
    tokio::task::spawn_blocking(unpacked)
        .await
        .expect("unpacking task")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_config_names_a_numeric_non_root_user_the_hub_entrypoint_and_oci_labels() {
    let config = &unpacked_async().await.config;
    let (uid, gid) = config
        .user
        .split_once(':')
        .unwrap_or((config.user.as_str(), config.user.as_str()));
    let uid: u32 = uid
        .parse()
        .unwrap_or_else(|_| panic!("user {:?} is not numeric", config.user));
    let _: u32 = gid
        .parse()
        .unwrap_or_else(|_| panic!("group of {:?} is not numeric", config.user));
    assert_ne!(uid, 0, "the image runs as root");
    assert_eq!(config.entrypoint, ["/usr/local/bin/ferry-hub"]);
    assert_eq!(config.cmd, ["serve"]);
    for label in ["source", "version", "licenses"] {
        let key = format!("org.opencontainers.image.{label}");
        assert!(
            config.labels.get(&key).is_some_and(|v| !v.is_empty()),
            "label {key} missing: {:?}",
            config.labels
        );
    }
    assert_eq!(
        config.labels["org.opencontainers.image.licenses"],
        "Apache-2.0"
    );
    assert_eq!(
        config.labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_holds_the_two_binaries_their_libraries_and_ca_certificates_and_no_shell() {
    let root = unpacked_async().await.root.path();
    let files: Vec<String> = root_files(root).into_keys().collect();
    for required in [
        "/usr/local/bin/ferry-hub",
        "/usr/local/bin/ferry-agent",
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/passwd",
        "/etc/group",
    ] {
        assert!(files.iter().any(|f| f == required), "{required} missing");
    }
    let unexpected: Vec<&String> = files
        .iter()
        .filter(|f| {
            !(f.starts_with("/usr/local/bin/ferry-")
                || f.starts_with("/lib/")
                || f.starts_with("/lib64/")
                || f.starts_with("/usr/lib/")
                || *f == "/etc/ssl/certs/ca-certificates.crt"
                || *f == "/etc/passwd"
                || *f == "/etc/group")
        })
        .collect();
    assert!(unexpected.is_empty(), "unexpected files: {unexpected:?}");
    let libraries: Vec<&String> = files
        .iter()
        .filter(|f| f.starts_with("/lib") || f.starts_with("/usr/lib/"))
        .collect();
    assert!(
        libraries.iter().all(|f| f.contains(".so")),
        "only shared libraries belong under /lib: {libraries:?}"
    );
    assert!(
        libraries.iter().any(|f| f.contains("libc.so")),
        "the loader's libc is missing: {libraries:?}"
    );
    for shell in ["/bin/sh", "/usr/bin/sh", "/bin/bash"] {
        assert!(!root.join(&shell[1..]).exists(), "{shell} is in the image");
    }
}

/// Fails at once, naming what is missing and how to get it, unless this
/// process is root and util-linux's `unshare` and `mount` and coreutils'
/// `chroot` are on the PATH.
fn can_run_the_image() {
    let uid = std::fs::metadata("/proc/self").expect("/proc/self").uid();
    assert_eq!(
        uid, 0,
        "this test runs the image's binaries with unshare --mount and chroot --userspec, which need root; \
         run the tests as root (CI does)"
    );
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = |tool: &str| {
        std::env::split_paths(&path)
            .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
            .any(|dir| dir.join(tool).is_file())
    };
    let missing: Vec<&str> = [
        (
            "unshare",
            "unshare (util-linux: apt-get install util-linux)",
        ),
        ("mount", "mount (apt-get install mount)"),
        ("chroot", "chroot (coreutils: apt-get install coreutils)"),
    ]
    .into_iter()
    .filter(|(tool, _)| !found(tool))
    .map(|(_, hint)| hint)
    .collect();
    assert!(
        missing.is_empty(),
        "this test runs the image's binaries under unshare, mount and chroot; missing: {}",
        missing.join(", ")
    );
}

/// A kubeconfig for `plane`'s API server with its admin token, naming the CA
/// by its path inside the image root.
fn kubeconfig(plane: &ControlPlane, ca_inside: &str) -> String {
    plane
        .info
        .token_kubeconfig("u", &plane.info.token, ca_inside)
}

fn write(dir: &Path, name: &str, content: &str) {
    let path = dir.join(name);
    std::fs::write(&path, content).expect("write config file");
    // Readable by the image's user, which does not own it.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
}

/// A binary of the image running under chroot as the image's user, killed
/// when dropped; its output goes to a log file.
struct InImage {
    child: tokio::process::Child,
    log: PathBuf,
}

impl InImage {
    /// Starts `/usr/local/bin/{binary} args` from the image root: in a private
    /// mount namespace the root is bind-mounted onto itself read-only, the
    /// config directory is mounted read-only at /config, and chroot switches
    /// to the image's user. Only the image's environment and `env` are set.
    fn start(
        image: &Unpacked,
        config_dir: &Path,
        log: PathBuf,
        binary: &str,
        env: &[(&str, String)],
        args: &[String],
    ) -> Self {
        const SCRIPT: &str = r#"set -eu
root=$1; config=$2; user=$3; shift 3
mount --make-rprivate /
mount --bind "$root" "$root"
mount --bind "$config" "$root/config"
mount -o remount,bind,ro "$root/config"
mount -o remount,bind,ro "$root"
exec chroot --userspec="$user" "$root" "$@"
"#;
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let mut command = tokio::process::Command::new("unshare");
        command
            .args(["--mount", "sh", "-c", SCRIPT, "sh"])
            .arg(image.root.path())
            .arg(config_dir)
            .arg(&image.config.user)
            .arg(format!("/usr/local/bin/{binary}"))
            .args(args)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true);
        for entry in &image.config.env {
            if let Some((name, value)) = entry.split_once('=') {
                command.env(name, value);
            }
        }
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("starting unshare (util-linux) for {binary}: {e}"));
        Self { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The uid the process runs as and whether its `/` is mounted read-only,
    /// from /proc once it runs the binary (after unshare and chroot exec'd).
    async fn identity(&mut self, binary: &str) -> (u32, bool) {
        let pid = self.child.id().expect("process running");
        let proc = PathBuf::from(format!("/proc/{pid}"));
        // unshare and chroot exec into the binary; wait for that exec, by
        // watching the process's executable name (a signal, not a delay).
        let mut interval = tokio::time::interval(Duration::from_millis(50));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            interval.tick().await;
            let comm = std::fs::read_to_string(proc.join("comm")).unwrap_or_default();
            if comm.trim() == binary {
                break;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{binary} exited with {status}:\n{}", self.log());
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{binary} not started within 30 s:\n{}",
                self.log()
            );
        }
        let status = std::fs::read_to_string(proc.join("status")).expect("proc status");
        let uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|u| u.parse().ok())
            .expect("effective uid");
        let mountinfo = std::fs::read_to_string(proc.join("mountinfo")).expect("mountinfo");
        // Fields: id parent major:minor root mount-point options ...; the
        // process's root is the mount whose mount point is "/".
        let root_read_only = mountinfo
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .rfind(|f| f.get(4) == Some(&"/"))
            .is_some_and(|f| f[5].split(',').any(|o| o == "ro"));
        (uid, root_read_only)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_and_agent_from_the_image_run_as_its_user_on_a_read_only_root_and_apply_a_work() {
    can_run_the_image();
    let image = unpacked_async().await;
    let image_uid: u32 = image
        .config
        .user
        .split(':')
        .next()
        .and_then(|u| u.parse().ok())
        .expect("numeric user");
    let mount_point = image.root.path().join(&CONFIG_MOUNT[1..]);
    if !mount_point.exists() {
        // The image has no /config; the mount needs a directory to cover.
        std::fs::create_dir(&mount_point).expect("mount point");
    }

    let (hub, spoke) = tokio::try_join!(
        ControlPlane::start("hub", ControlPlaneOptions::default()),
        ControlPlane::start("spoke-image", ControlPlaneOptions::default()),
    )
    .expect("control planes start");
    let hub_client = hub.client().await.expect("hub client");
    install_crds(&hub_client).await.expect("hub CRDs");
    let token = join_cluster(&hub_client, "spoke-image", 3600)
        .await
        .expect("join");

    let config = tempfile::Builder::new()
        .prefix("ferry-image-config-")
        .tempdir()
        .expect("config dir");
    std::fs::set_permissions(config.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod config");
    let serving = ServingCert::generate(&["127.0.0.1".into()]).expect("hub certificate");
    let hub_ca = std::fs::read_to_string(&hub.info.ca_file).expect("hub API CA");
    let spoke_ca = std::fs::read_to_string(&spoke.info.ca_file).expect("spoke API CA");
    write(config.path(), "hub-api-ca.crt", &hub_ca);
    write(config.path(), "spoke-api-ca.crt", &spoke_ca);
    write(
        config.path(),
        "hub.kubeconfig",
        &kubeconfig(&hub, "/config/hub-api-ca.crt"),
    );
    write(
        config.path(),
        "spoke.kubeconfig",
        &kubeconfig(&spoke, "/config/spoke-api-ca.crt"),
    );
    write(config.path(), "grpc.crt", &serving.chain_pem);
    write(config.path(), "grpc.key", &serving.key_pem);
    write(config.path(), "grpc-ca.crt", &serving.ca_pem);
    write(config.path(), "agent.token", &token);

    let grpc: SocketAddr = format!("127.0.0.1:{}", free_port(LOOPBACK))
        .parse()
        .expect("addr");
    let webhook: SocketAddr = format!("127.0.0.1:{}", free_port(LOOPBACK))
        .parse()
        .expect("addr");
    let logs = tempfile::tempdir().expect("log dir");
    let mut hub_process = InImage::start(
        image,
        config.path(),
        logs.path().join("hub.log"),
        "ferry-hub",
        &[("KUBECONFIG", "/config/hub.kubeconfig".into())],
        &[
            "serve".into(),
            "--install-crds".into(),
            format!("--grpc-addr={grpc}"),
            format!("--probe-addr=127.0.0.1:{}", free_port(LOOPBACK)),
            "--tls-cert=/config/grpc.crt".into(),
            "--tls-key=/config/grpc.key".into(),
            format!("--webhook-addr={webhook}"),
            format!("--webhook-url=https://{webhook}"),
        ],
    );
    let mut agent_process = InImage::start(
        image,
        config.path(),
        logs.path().join("agent.log"),
        "ferry-agent",
        &[("KUBECONFIG", "/config/spoke.kubeconfig".into())],
        &[
            format!("--hub-url=https://{grpc}"),
            "--cluster-name=spoke-image".into(),
            "--token-file=/config/agent.token".into(),
            "--hub-ca=/config/grpc-ca.crt".into(),
            format!("--probe-addr=127.0.0.1:{}", free_port(LOOPBACK)),
        ],
    );

    for (process, binary) in [
        (&mut hub_process, "ferry-hub"),
        (&mut agent_process, "ferry-agent"),
    ] {
        let (uid, read_only) = process.identity(binary).await;
        assert_eq!(uid, image_uid, "{binary} runs as uid {uid}");
        assert!(read_only, "{binary}'s root is writable");
    }

    // The image's hub registers its webhook: the hub API server refuses an
    // invalid work through it.
    assert!(
        wait_until_enforced(&hub_client, "default", Duration::from_secs(60)).await,
        "the hub from the image did not register its webhook:\n{}",
        hub_process.log()
    );

    let work = manifest_work(
        "spoke-image",
        "from-the-image",
        vec![config_map("default", "from-the-image", json!({"a": "1"}))],
    );
    let works: Api<ferry_api::manifest_work::ManifestWork> =
        Api::namespaced(hub_client.clone(), "spoke-image");
    works
        .create(&Default::default(), &work)
        .await
        .expect("create work");
    if let Err(e) = wait_applied(&works, "from-the-image").await {
        panic!(
            "{e}\nhub log:\n{}\nagent log:\n{}",
            hub_process.log(),
            agent_process.log()
        );
    }
    let spoke_client = spoke.client().await.expect("spoke client");
    let applied: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(spoke_client, "default");
    let cm = applied
        .get("from-the-image")
        .await
        .expect("configmap on the spoke");
    assert_eq!(
        cm.data.unwrap_or_default().get("a").map(String::as_str),
        Some("1")
    );

    drop(agent_process);
    drop(hub_process);
    spoke.stop().await;
    hub.stop().await;
}
