//! The in-process hub's and agents' tracing events in the output of the test
//! that ran them: libtest captures a test's output per thread, and the
//! threads of a test's tokio runtime inherit its capture, so a failing test
//! prints the log of its own fleet and nobody else's.

use std::sync::Once;

/// The environment variable holding an `EnvFilter` for the tests' log
/// (e.g. `FERRY_E2E_LOG=ferry_hub=debug,warn`).
pub const LOG_ENV: &str = "FERRY_E2E_LOG";

/// Without [`LOG_ENV`]: warnings and errors, and what the hub's controllers
/// say they decided, so a test that waited in vain shows why.
const DEFAULT_FILTER: &str = "warn,ferry_hub=info";

/// Installs the process's tracing subscriber once; later calls do nothing.
/// A filter in [`LOG_ENV`] that does not parse falls back to the default
/// and says so on stderr.
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let filter = match std::env::var(LOG_ENV) {
            Ok(directives) => {
                tracing_subscriber::EnvFilter::try_new(&directives).unwrap_or_else(|e| {
                    eprintln!(
                        "{LOG_ENV}={directives:?} does not parse ({e}); using {DEFAULT_FILTER:?}"
                    );
                    tracing_subscriber::EnvFilter::new(DEFAULT_FILTER)
                })
            }
            Err(_) => tracing_subscriber::EnvFilter::new(DEFAULT_FILTER),
        };
        // Another subscriber already installed (a test of its own) wins.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    });
}
