//! `kubectl ferry dashboard`: a local web page of the fleet, live. A server
//! on 127.0.0.1 reads the hub with the user's kubeconfig (so it sees and
//! does exactly what the user's RBAC allows), keeps watches on clusters,
//! works and replica sets, and pushes "changed" notices to the pages over
//! server-sent events; pages are rendered on the server with a little plain
//! JavaScript, assets embedded.
//!
//! One job per file: [`live`] watches, [`server`] serves, the `*_page`
//! modules render (pure, unit-tested), [`actions`] acts, [`escape`] and
//! [`selector`] are the small pure helpers; [`serve_error`] says why serving
//! stopped.

pub mod actions;
pub mod cluster_page;
pub mod escape;
pub mod fleet_page;
pub mod layout;
pub mod live;
pub mod rollouts_page;
pub mod selector;
pub mod serve_error;
pub mod server;
pub mod tile;

use std::io::Write;
use std::sync::Arc;

use rand::RngCore;

use crate::client::Connection;
use serve_error::ServeError;
use server::{App, bind, serve};

/// Starts the dashboard on 127.0.0.1:`port` (0: a free port), prints its
/// one-time URL on stdout (the first visit exchanges its secret for an
/// HttpOnly session cookie), opens it in the browser with `open`, and
/// serves until the process is stopped. Fails with [`ServeError`] when the port cannot be
/// bound or serving fails; hub errors are shown on the pages instead.
pub async fn run_dashboard(
    connection: Connection,
    port: u16,
    open: bool,
) -> Result<(), ServeError> {
    let (listener, addr) = bind(port).await?;
    let token = random_hex();
    let secret = random_hex();
    let live = live::Live::start(&connection.client);
    let app = Arc::new(App {
        live,
        client: connection.client,
        token,
        access: server::Access::new(secret.clone(), random_hex(), addr.port()),
        port: addr.port(),
        streams: Arc::new(tokio::sync::Semaphore::new(server::MAX_STREAMS)),
    });
    let url = format!("http://{addr}{}{secret}", server::SESSION_PATH);
    {
        let mut stdout = std::io::stdout().lock();
        // The URL is the one thing a caller (or a test) waits for.
        let _ = writeln!(
            stdout,
            "ferry dashboard: {url} (a one-time link: the first browser to open it gets the session; Ctrl-C to stop)"
        );
        let _ = stdout.flush();
    }
    if open {
        open_browser(&url);
    }
    serve(listener, app).await
}

/// 128 random bits as 32 hex digits.
fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Opens `url` with the desktop's opener; a failure is a note on stderr,
/// the URL is printed anyway.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    if let Err(error) = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        eprintln!("note: cannot open a browser with {opener}: {error}; open {url} yourself");
    }
}
