//! ferry's release artifacts can be published and verified as platform
//! teams verify what they run (issue 34): the container image (with its
//! SBOM) and both Helm charts are pushed to a real OCI registry (the CNCF
//! `distribution` registry, built from its Go module), signed with cosign's
//! key-based formats (no transparency log: this machine has none), the SBOM
//! attached as a signed CycloneDX attestation, and cosign verifies every one
//! of them back. A tampered tag, a digest nobody signed and the wrong public
//! key are refused. crane (go-containerregistry) pushes the image's OCI
//! layout as ferry-tools' image writer wrote it; Helm pushes the charts as
//! OCI artifacts. Nothing here is vendored: the tools come from their Go
//! modules and are cached.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;
use ferry_e2e::harness::helm::{charts_dir, ensure_helm};
use ferry_e2e::harness::image::build_binaries;
use ferry_e2e::harness::oci_registry::{Registry, ensure_cosign, ensure_crane};
use serde_json::Value;

/// The password cosign encrypts the test's private keys with.
const KEY_PASSWORD: &str = "ferry-test-only";

/// What a command printed.
struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs `binary args` with `home` as its home (no user configuration or
/// credentials leak in) and the key password set. Blocking.
fn run(binary: &Path, args: &[&str], home: &Path) -> Output {
    let output = Command::new(binary)
        .args(args)
        .current_dir(home)
        .env("HOME", home)
        .env("DOCKER_CONFIG", home.join(".docker"))
        .env("HELM_CONFIG_HOME", home.join("helm-config"))
        .env("HELM_CACHE_HOME", home.join("helm-cache"))
        .env("HELM_DATA_HOME", home.join("helm-data"))
        .env("COSIGN_PASSWORD", KEY_PASSWORD)
        // Never ask the public Sigstore infrastructure (none is reachable).
        .env("TUF_ROOT", home.join("tuf"))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {} {args:?}: {e}", binary.display()));
    Output {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs a command that must succeed and returns its stdout.
fn must(binary: &Path, args: &[&str], home: &Path) -> String {
    let out = run(binary, args, home);
    assert!(
        out.ok,
        "{} {args:?} failed:\n{}{}",
        binary.display(),
        out.stdout,
        out.stderr
    );
    out.stdout
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

fn blob(layout: &Path, digest: &str) -> PathBuf {
    let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
    layout.join("blobs/sha256").join(hex)
}

/// The `sha256:` digest Helm printed for a pushed chart.
fn pushed_digest(output: &Output) -> String {
    format!("{}{}", output.stdout, output.stderr)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Digest: ").map(str::to_string))
        .unwrap_or_else(|| {
            panic!(
                "helm push printed no digest:\n{}{}",
                output.stdout, output.stderr
            )
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_its_sbom_and_both_charts_are_pushed_signed_and_verified_with_cosign() {
    let registry = Registry::start().await.expect("the registry starts");
    let host = registry.host.clone();
    let checked = tokio::task::spawn_blocking(move || sign_and_verify(&host)).await;
    if let Err(error) = checked {
        panic!("{error}; registry log:\n{}", registry.log());
    }
}

fn sign_and_verify(host: &str) {
    let crane = ensure_crane().expect("crane builds");
    let cosign = ensure_cosign().expect("cosign builds");
    let helm = ensure_helm().expect("helm builds");
    let home = tempfile::Builder::new()
        .prefix("ferry-signing-")
        .tempdir()
        .expect("home");
    let home = home.path();

    // The image as the release writes it: ferry-tools' writer, SBOM included.
    let binaries = build_binaries().expect("ferry's binaries");
    let layout = home.join("oci");
    let written = ferry_tools::image::write_image(
        &layout,
        &binaries,
        &ferry_tools::image::ImageMeta::default(),
    )
    .expect("write the image");
    let repo = format!("{host}/ferry");
    let tag = format!("{repo}:test");
    let pushed = must(
        &crane,
        &[
            "push",
            "--insecure",
            "--index",
            layout.to_str().expect("path"),
            &tag,
        ],
        home,
    );
    let index = format!(
        "{repo}@{}",
        pushed.trim().rsplit('@').next().expect("digest")
    );
    let image = format!("{repo}@{}", written.manifest_digest);
    // The registry holds the image and its SBOM, the SBOM naming the image.
    let sbom_manifest: Value = serde_json::from_str(&must(
        &crane,
        &[
            "manifest",
            "--insecure",
            &format!("{repo}@{}", written.sbom_digest),
        ],
        home,
    ))
    .expect("SBOM manifest JSON");
    assert_eq!(sbom_manifest["subject"]["digest"], written.manifest_digest);
    assert_eq!(
        sbom_manifest["artifactType"],
        "application/vnd.cyclonedx+json"
    );

    // Keys: the release's pair, and a stranger's.
    let release = home.join("release");
    let stranger = home.join("stranger");
    for dir in [&release, &stranger] {
        std::fs::create_dir_all(dir).expect("key dir");
        must(&cosign, &["generate-key-pair"], dir);
    }
    let key = release.join("cosign.key");
    let public = release.join("cosign.pub");
    let (key, public) = (key.to_str().expect("path"), public.to_str().expect("path"));
    let sign = |what: &[&str]| {
        let mut args = vec![
            "sign",
            "--key",
            key,
            "--tlog-upload=false",
            "--allow-http-registry",
            "--yes",
        ];
        args.extend_from_slice(what);
        must(&cosign, &args, home)
    };
    let verify = |reference: &str, public: &str| {
        run(
            &cosign,
            &[
                "verify",
                "--key",
                public,
                "--insecure-ignore-tlog=true",
                "--allow-http-registry",
                reference,
            ],
            home,
        )
    };

    // The index the tag names and every manifest in it.
    sign(&["--recursive", &index]);
    let index_digest = index.rsplit('@').next().expect("digest").to_string();
    for (reference, digest) in [
        (&tag, &index_digest),
        (&index, &index_digest),
        (&image, &written.manifest_digest),
    ] {
        let out = verify(reference, public);
        assert!(
            out.ok,
            "cosign verifies {reference}:\n{}{}",
            out.stdout, out.stderr
        );
        // cosign prints the verified claims as one JSON array on stdout.
        let claims: Value = out
            .stdout
            .lines()
            .find_map(|l| serde_json::from_str(l).ok())
            .unwrap_or_else(|| {
                panic!(
                    "cosign printed no claims for {reference}:\n{}{}",
                    out.stdout, out.stderr
                )
            });
        assert_eq!(
            claims[0]["critical"]["image"]["docker-manifest-digest"], **digest,
            "the signature names the digest verified for {reference}"
        );
    }
    // The wrong key is refused.
    let wrong = stranger.join("cosign.pub");
    let out = verify(&image, wrong.to_str().expect("path"));
    assert!(
        !out.ok,
        "a stranger's key verifies nothing:\n{}",
        out.stdout
    );

    // The SBOM as a signed CycloneDX attestation of the image.
    let sbom_blob = blob(
        &layout,
        sbom_manifest["layers"][0]["digest"]
            .as_str()
            .expect("SBOM layer"),
    );
    let predicate = sbom_blob.to_str().expect("path");
    must(
        &cosign,
        &[
            "attest",
            "--key",
            key,
            "--type",
            "cyclonedx",
            "--predicate",
            predicate,
            "--tlog-upload=false",
            "--allow-http-registry",
            "--yes",
            &image,
        ],
        home,
    );
    let attested = must(
        &cosign,
        &[
            "verify-attestation",
            "--key",
            public,
            "--type",
            "cyclonedx",
            "--insecure-ignore-tlog=true",
            "--allow-http-registry",
            &image,
        ],
        home,
    );
    let envelope: Value = attested
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("cosign printed no attestation:\n{attested}"));
    let statement: Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(envelope["payload"].as_str().expect("payload"))
            .expect("base64 payload"),
    )
    .expect("in-toto statement");
    assert_eq!(
        statement["subject"][0]["digest"]["sha256"],
        written.manifest_digest.trim_start_matches("sha256:")
    );
    let sbom = read_json(&sbom_blob);
    assert_eq!(
        statement["predicate"], sbom,
        "the attested SBOM is the image's"
    );
    assert!(
        statement["predicate"]["components"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["name"] == "ferry-agent")),
        "the SBOM lists the agent binary"
    );

    // Both charts, pushed as OCI artifacts, signed and verified.
    let charts = home.join("charts");
    for chart in ["ferry-hub", "ferry-agent"] {
        let dir = charts_dir().join(chart);
        let packaged = must(
            &helm,
            &[
                "package",
                dir.to_str().expect("path"),
                "-d",
                charts.to_str().expect("path"),
            ],
            home,
        );
        let archive = packaged
            .trim()
            .rsplit(": ")
            .next()
            .expect("helm names the archive")
            .to_string();
        let out = run(
            &helm,
            &[
                "push",
                &archive,
                &format!("oci://{host}/charts"),
                "--plain-http",
            ],
            home,
        );
        assert!(out.ok, "helm push {chart}:\n{}{}", out.stdout, out.stderr);
        let reference = format!("{host}/charts/{chart}@{}", pushed_digest(&out));
        sign(&[&reference]);
        let out = verify(&reference, public);
        assert!(
            out.ok,
            "cosign verifies chart {chart}:\n{}{}",
            out.stdout, out.stderr
        );
    }

    // Someone replaces what the tag names: the tag no longer verifies, and
    // a digest nobody signed never did.
    let tampered = must(
        &crane,
        &[
            "mutate",
            "--insecure",
            "--label",
            "tampered=yes",
            "-t",
            &tag,
            &image,
        ],
        home,
    );
    let out = verify(&tag, public);
    assert!(
        !out.ok,
        "a tag moved to an unsigned image ({}) is refused:\n{}",
        tampered.trim(),
        out.stdout
    );
    let out = verify(tampered.trim(), public);
    assert!(!out.ok, "an unsigned digest is refused:\n{}", out.stdout);
}
