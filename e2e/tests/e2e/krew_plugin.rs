//! kubectl-ferry installs through krew (issue 34): the release files
//! ferry-tools writes (an archive per platform and the plugin manifest
//! `ferry.yaml`) pass krew's own manifest validator, which is what krew's
//! plugin index runs on every submission and which installs the plugin
//! with `kubectl krew install --manifest` for each platform; krew installs
//! it from the archives served over HTTP into a fresh `KREW_ROOT`, and the
//! installed `kubectl-ferry` runs. An archive that changed after its
//! manifest was written is refused by both (its SHA-256 no longer
//! matches), and nothing is installed.
//!
//! krew and its validator are built from the krew Go module once and
//! cached (see ferry_e2e::harness::krew), like Helm and promtool.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::routing::get;
use ferry_e2e::harness::image::workspace_dir;
use ferry_e2e::harness::krew::ensure_krew;
use ferry_e2e::helpers::kubectl_ferry::kubectl_ferry_binary;
use ferry_tools::krew::{PLUGIN_NAME, ReleaseInput, write_release};

/// The version the test releases (any version krew accepts).
const VERSION: &str = "v0.9.1";

/// Serves the files of one directory, counting the requests for each.
struct Served {
    dir: PathBuf,
    downloads: AtomicUsize,
}

async fn serve_file(
    State(served): State<Arc<Served>>,
    UrlPath(name): UrlPath<String>,
) -> Result<Vec<u8>, StatusCode> {
    if name.contains('/') || name.starts_with('.') {
        return Err(StatusCode::NOT_FOUND);
    }
    served.downloads.fetch_add(1, Ordering::SeqCst);
    let path = served.dir.join(name);
    tokio::task::spawn_blocking(move || std::fs::read(path))
        .await
        .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?
        .map_err(|_| StatusCode::NOT_FOUND)
}

/// Serves `dir` on a loopback port; returns the base URL and the counter.
async fn serve(dir: &Path) -> (String, Arc<Served>) {
    let served = Arc::new(Served {
        dir: dir.to_path_buf(),
        downloads: AtomicUsize::new(0),
    });
    let app = Router::new()
        .route("/{name}", get(serve_file))
        .with_state(served.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let address = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve the release");
    });
    (format!("http://{address}"), served)
}

/// A directory holding `kubectl`, a script that runs krew as kubectl's
/// `krew` plugin (`kubectl krew …` → `krew …`): the validator shells out to
/// `kubectl krew install`, and no kubectl is needed for that.
fn kubectl_shim(dir: &Path, krew: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let bin = dir.join("shim");
    std::fs::create_dir_all(&bin).expect("shim dir");
    let script = bin.join("kubectl");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n[ \"$1\" = krew ] && shift\nexec '{}' \"$@\"\n",
            krew.display()
        ),
    )
    .expect("write the kubectl shim");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
        .expect("make the shim executable");
    bin
}

/// `PATH` with `shim` first.
fn path_with(shim: &Path) -> String {
    let rest = std::env::var("PATH").unwrap_or_default();
    format!("{}:{rest}", shim.display())
}

/// Runs `program` with `args` and `envs` (and nothing else from this
/// process but PATH and HOME), off the runtime.
async fn run(program: &Path, args: &[&str], envs: &[(&str, String)]) -> Output {
    let mut command = tokio::process::Command::new(program);
    command.args(args).env_clear();
    for key in ["PATH", "HOME"] {
        if let Ok(value) = std::env::var(key) {
            command.env(key, value);
        }
    }
    command.envs(envs.iter().map(|(k, v)| (k, v)));
    command.output().await.unwrap_or_else(|e| {
        panic!("{} runs: {e}", program.display());
    })
}

fn text(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Writes a release of the test's kubectl-ferry for linux/amd64 into
/// `dir`, served at `base`; returns the manifest's path.
fn release(dir: &Path, base: &str) -> PathBuf {
    let input = ReleaseInput {
        binaries: vec![("linux/amd64".into(), kubectl_ferry_binary())],
        license: workspace_dir().join("LICENSE"),
        version: VERSION.into(),
        homepage: "https://github.com/ferry-rs/ferry".into(),
        uri_base: base.into(),
    };
    let manifest = write_release(&input, dir).expect("ferry-tools writes the krew release");
    assert_eq!(
        manifest.file_name().and_then(|n| n.to_str()),
        Some(format!("{PLUGIN_NAME}.yaml").as_str()),
        "krew's index names a manifest after its plugin"
    );
    manifest
}

/// What both tests start from: krew and its validator built, a release
/// written into `out` and served, and a `PATH` with the kubectl shim.
struct Setup {
    krew: PathBuf,
    validator: PathBuf,
    /// Holds every file of the test; removed when dropped.
    work: tempfile::TempDir,
    out: PathBuf,
    served: Arc<Served>,
    manifest: PathBuf,
    path: String,
}

async fn setup() -> Setup {
    let (krew, validator) = tokio::task::spawn_blocking(ensure_krew)
        .await
        .expect("build task")
        .expect("krew and validate-krew-manifest build from their Go module");
    let work = tempfile::tempdir().expect("temp dir");
    let out = work.path().join("release");
    std::fs::create_dir_all(&out).expect("release dir");
    let (base, served) = serve(&out).await;
    let manifest = release(&out, &base);
    let path = path_with(&kubectl_shim(work.path(), &krew));
    Setup {
        krew,
        validator,
        work,
        out,
        served,
        manifest,
        path,
    }
}

#[tokio::test]
async fn krew_validates_and_installs_the_plugin_ferry_tools_writes() {
    let Setup {
        krew,
        validator,
        work,
        out: _,
        served,
        manifest,
        path,
    } = setup().await;

    // krew's validator: structure, platforms, and an install per platform.
    let validated = run(
        &validator,
        &["-manifest", manifest.to_str().expect("utf-8 path")],
        &[("PATH", path.clone())],
    )
    .await;
    assert!(
        validated.status.success(),
        "validate-krew-manifest accepts the manifest\n{}",
        text(&validated)
    );
    assert!(
        served.downloads.load(Ordering::SeqCst) >= 1,
        "the validator's install downloaded the archive"
    );

    // A user's install into a fresh KREW_ROOT, then the plugin runs.
    let root = work.path().join("krew-root");
    let installed = run(
        &krew,
        &["install", "--manifest", manifest.to_str().expect("utf-8")],
        &[("KREW_ROOT", root.display().to_string()), ("PATH", path)],
    )
    .await;
    assert!(
        installed.status.success(),
        "krew install --manifest\n{}",
        text(&installed)
    );
    let plugin = root.join("bin").join("kubectl-ferry");
    let version = run(&plugin, &["--version"], &[]).await;
    assert!(
        version.status.success(),
        "the installed plugin runs\n{}",
        text(&version)
    );
    let printed = String::from_utf8_lossy(&version.stdout);
    assert!(
        printed.contains(env!("CARGO_PKG_VERSION")),
        "the installed plugin is this build: {printed}"
    );
    let license = root
        .join("store")
        .join(PLUGIN_NAME)
        .join(VERSION)
        .join("LICENSE");
    assert_eq!(
        std::fs::read(&license).expect("krew extracted the license"),
        std::fs::read(workspace_dir().join("LICENSE")).expect("the repository's license"),
    );
    // krew's record of the install (what `krew list` and `krew upgrade`
    // read; `list` itself wants krew's index, which a test has no network
    // for): the manifest it installed, at this version.
    let receipt =
        std::fs::read_to_string(root.join("receipts").join(format!("{PLUGIN_NAME}.yaml")))
            .expect("krew wrote its install receipt");
    assert!(
        receipt.contains(&format!("version: {VERSION}")),
        "the receipt names the installed version\n{receipt}"
    );
}

#[tokio::test]
async fn an_archive_changed_after_its_manifest_is_refused_and_nothing_installed() {
    let Setup {
        krew,
        validator,
        work,
        out,
        served,
        manifest,
        path,
    } = setup().await;
    let archive = out.join("kubectl-ferry_linux_amd64.tar.gz");
    let mut bytes = std::fs::read(&archive).expect("the archive");
    // One flipped byte inside the compressed stream: still served, not
    // what the manifest's SHA-256 names.
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&archive, bytes).expect("tamper with the archive");

    let validated = run(
        &validator,
        &["-manifest", manifest.to_str().expect("utf-8 path")],
        &[("PATH", path.clone())],
    )
    .await;
    assert!(
        !validated.status.success(),
        "the validator refuses a tampered archive\n{}",
        text(&validated)
    );
    let root = work.path().join("krew-root");
    let installed = run(
        &krew,
        &["install", "--manifest", manifest.to_str().expect("utf-8")],
        &[("KREW_ROOT", root.display().to_string()), ("PATH", path)],
    )
    .await;
    assert!(
        !installed.status.success(),
        "krew refuses a tampered archive\n{}",
        text(&installed)
    );
    let said = text(&installed).to_lowercase();
    assert!(
        said.contains("sha256") || said.contains("checksum"),
        "krew says why: the checksum\n{said}"
    );
    assert!(
        served.downloads.load(Ordering::SeqCst) >= 2,
        "both downloaded the archive before refusing it"
    );
    assert!(
        !root.join("bin").join("kubectl-ferry").exists(),
        "nothing installed"
    );
}
