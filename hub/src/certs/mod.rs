//! Serving certificates: given as files and followed as they rotate, or
//! generated at start.

/// Certificates and client CAs that are re-read when their files change.
pub mod reload;
/// The webhook's serving certificate and its TLS listener.
pub mod tls;
