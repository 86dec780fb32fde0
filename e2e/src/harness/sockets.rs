//! The TCP connections another process holds, with their socket options as
//! the kernel has them: each socket in `/proc/PID/fd` is duplicated into
//! this process with `pidfd_getfd(2)` (same user, or root; Linux 5.6+) and
//! read with `getsockopt(2)`. `ss -i` shows no TCP_NODELAY (it is no field
//! of `tcp_info`), so this is how a test sees whether a process turned
//! Nagle's algorithm off on the connections it opened and accepted.

use std::net::SocketAddr;

use rustix::net::sockopt;
use rustix::process::{Pid, PidfdFlags, PidfdGetfdFlags, pidfd_getfd, pidfd_open};

/// The sockets could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SocketsError {
    /// The process id is no process id.
    #[error("{0} is no process id")]
    NoPid(u32),
    /// Opening the process, listing its files or copying one failed.
    #[error("{action} of process {pid}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// The process.
        pid: u32,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// One connected TCP socket of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpConnection {
    /// Its descriptor number in the process.
    pub fd: i32,
    /// Its local address.
    pub local: SocketAddr,
    /// The address of its peer.
    pub peer: SocketAddr,
    /// Whether TCP_NODELAY is set (Nagle's algorithm off).
    pub nodelay: bool,
}

/// The connected TCP sockets (IPv4 and IPv6) process `pid` holds now;
/// listening and unconnected sockets are left out, as are descriptors
/// closed while they are read. Fails when the process cannot be opened or
/// its descriptors listed.
pub fn tcp_connections(pid: u32) -> Result<Vec<TcpConnection>, SocketsError> {
    let io = |action: &str| {
        let action = action.to_string();
        move |source: std::io::Error| SocketsError::Io {
            action,
            pid,
            source,
        }
    };
    let raw = i32::try_from(pid).map_err(|_| SocketsError::NoPid(pid))?;
    let process = Pid::from_raw(raw).ok_or(SocketsError::NoPid(pid))?;
    let pidfd = pidfd_open(process, PidfdFlags::empty()).map_err(|e| io("pidfd_open")(e.into()))?;
    let mut connections = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).map_err(io("listing the files"))? {
        let Ok(entry) = entry else { continue };
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|target| target.to_string_lossy().starts_with("socket:["));
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
        else {
            continue;
        };
        if !is_socket {
            continue;
        }
        // Closed since it was listed: nothing to check.
        let Ok(copy) = pidfd_getfd(&pidfd, fd, PidfdGetfdFlags::empty()) else {
            continue;
        };
        if sockopt::socket_type(&copy).ok() != Some(rustix::net::SocketType::STREAM)
            || sockopt::socket_acceptconn(&copy).unwrap_or(true)
        {
            continue;
        }
        let Some(local) = rustix::net::getsockname(&copy)
            .ok()
            .and_then(|a| SocketAddr::try_from(a).ok())
        else {
            continue; // a Unix socket
        };
        let Some(peer) = rustix::net::getpeername(&copy)
            .ok()
            .flatten()
            .and_then(|a| SocketAddr::try_from(a).ok())
        else {
            continue; // not connected
        };
        let nodelay =
            sockopt::tcp_nodelay(&copy).map_err(|e| io("reading TCP_NODELAY")(e.into()))?;
        connections.push(TcpConnection {
            fd,
            local,
            peer,
            nodelay,
        });
    }
    Ok(connections)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_nagle_setting_of_each_connection_as_the_kernel_has_it() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let with =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (accepted, _) = listener.accept().expect("accept");
        with.set_nodelay(true).expect("nodelay");
        let mine = tcp_connections(std::process::id()).expect("own sockets");
        let find = |local: SocketAddr| {
            mine.iter()
                .find(|c| c.local == local)
                .unwrap_or_else(|| panic!("{local} among {mine:?}"))
                .clone()
        };
        let client = find(with.local_addr().expect("addr"));
        let server = find(accepted.local_addr().expect("addr"));
        assert!(client.nodelay, "set on the client end: {client:?}");
        assert!(!server.nodelay, "left on the accepted end: {server:?}");
        assert_eq!(client.peer, server.local);
        assert_eq!(server.peer, client.local);
        let on_the_port = mine
            .iter()
            .filter(|c| c.local == listener.local_addr().expect("addr"))
            .count();
        assert_eq!(on_the_port, 1, "the listening socket is no connection");
    }
}
