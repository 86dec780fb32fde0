//! Why the dashboard could not serve: its own type, so the CLI's error can
//! carry it without depending on the server.

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The port could not be bound.
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind {
        /// The port asked for.
        port: u16,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Serving stopped with an error.
    #[error("the dashboard server stopped: {0}")]
    Serve(#[source] std::io::Error),
}
