//! Headless Chromium driven over WebDriver, for tests of web pages (the
//! `kubectl ferry dashboard`). Uses Debian's `chromium` and
//! `chromium-driver`; when chromedriver is missing (a fresh CI machine) it
//! installs both with apt-get, serialised across test processes by a file
//! lock, and fails with a clear error when that is not possible.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

use crate::harness::local_pod::free_port;

/// Where Debian's chromium-driver installs chromedriver.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Where Debian's chromium installs the browser.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Serialises apt-get between test processes.
const APT_LOCK: &str = "/tmp/ferry-e2e-apt.lock";
/// How long chromedriver may take to accept a session.
const DRIVER_START: Duration = Duration::from_secs(30);

/// Why no browser could be started.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    /// chromedriver is missing and could not be installed.
    #[error(
        "{CHROMEDRIVER} is missing and `apt-get install -y chromium chromium-driver` failed ({0}); install Debian's chromium and chromium-driver (as root) and run again"
    )]
    Install(String),
    /// chromedriver would not start.
    #[error("cannot start {CHROMEDRIVER}: {0}")]
    Driver(#[source] std::io::Error),
    /// No WebDriver session could be opened in time.
    #[error("chromedriver did not open a headless Chromium session within {DRIVER_START:?}: {0}")]
    Session(String),
}

/// Makes sure chromedriver and chromium are installed, installing Debian's
/// packages with apt-get when they are not (one process at a time).
pub async fn ensure_installed() -> Result<(), BrowserError> {
    if Path::new(CHROMEDRIVER).exists() && Path::new(CHROMIUM).exists() {
        return Ok(());
    }
    tokio::task::spawn_blocking(install_blocking)
        .await
        .map_err(|e| BrowserError::Install(e.to_string()))?
}

fn install_blocking() -> Result<(), BrowserError> {
    let lock = std::fs::File::create(APT_LOCK)
        .map_err(|e| BrowserError::Install(format!("cannot create {APT_LOCK}: {e}")))?;
    // Another test process may be installing: wait for it, then look again.
    lock.lock()
        .map_err(|e| BrowserError::Install(format!("cannot lock {APT_LOCK}: {e}")))?;
    if Path::new(CHROMEDRIVER).exists() && Path::new(CHROMIUM).exists() {
        return Ok(());
    }
    let run = |args: &[&str]| -> Result<(), BrowserError> {
        let output = std::process::Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| BrowserError::Install(format!("cannot run apt-get: {e}")))?;
        if output.status.success() {
            Ok(())
        } else {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
            Err(BrowserError::Install(format!(
                "apt-get {} exited with {}: {}",
                args.join(" "),
                output.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
            )))
        }
    };
    run(&["update"])?;
    run(&[
        "install",
        "-y",
        "--no-install-recommends",
        "chromium",
        "chromium-driver",
    ])?;
    if Path::new(CHROMEDRIVER).exists() {
        Ok(())
    } else {
        Err(BrowserError::Install(format!(
            "apt-get succeeded but {CHROMEDRIVER} is still missing"
        )))
    }
}

/// A headless Chromium session and the chromedriver serving it; both end
/// when this is dropped (the driver is killed with the test).
pub struct Browser {
    /// The WebDriver client.
    pub client: Client,
    _driver: tokio::process::Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Installs the browser if needed, starts chromedriver on a free port
    /// and opens a headless session with a `width`×`height` window. Fails
    /// with [`BrowserError`].
    pub async fn start(width: u32, height: u32) -> Result<Self, BrowserError> {
        ensure_installed().await?;
        let port = free_port(std::net::Ipv4Addr::LOCALHOST.into());
        let driver = tokio::process::Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(BrowserError::Driver)?;
        let profile = tempfile::tempdir().map_err(BrowserError::Driver)?;
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless=new",
                    // CI runs as root, where Chromium's sandbox cannot start.
                    "--no-sandbox",
                    "--disable-dev-shm-usage",
                    "--disable-gpu",
                    "--no-first-run",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + DRIVER_START;
        let client = loop {
            let attempt = ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await;
            match attempt {
                Ok(client) => break client,
                Err(error) if Instant::now() >= deadline => {
                    return Err(BrowserError::Session(error.to_string()));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        Ok(Browser {
            client,
            _driver: driver,
            _profile: profile,
        })
    }

    /// Saves a PNG screenshot of the current page as `dir/name.png` and
    /// returns its path. Fails with the WebDriver or file error as text.
    pub async fn screenshot(&self, dir: &Path, name: &str) -> Result<PathBuf, String> {
        let png = self.client.screenshot().await.map_err(|e| e.to_string())?;
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).map_err(|e| e.to_string())?;
        Ok(path)
    }

    /// Ends the session (chromedriver is killed on drop).
    pub async fn close(self) {
        let _ = self.client.close().await;
    }
}

/// The build's target directory (from the test binary's path,
/// `target/<profile>/deps/e2e-…`): where screenshots go as CI artifacts.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its own path");
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir)
}
