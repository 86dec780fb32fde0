//! A loopback port kept for a server the harness stops and starts again.
//! Binding the same port again after a stop raced every other test: the
//! freed port could be handed to another test's listener or outgoing
//! connection in between (the full suite failed once with `AddrInUse` when
//! a chaos test restarted its hub). Here one socket stays bound to the port
//! for the reservation's life without listening, so while the server is
//! down connections are refused as from a dead server, and nothing else can
//! take the port; each listener shares it through `SO_REUSEPORT`.

use std::net::{Ipv4Addr, SocketAddr};

use tokio::net::{TcpListener, TcpSocket};

/// Backlog of each listener made here.
const BACKLOG: u32 = 1024;

/// A port on 127.0.0.1 held for one server across its restarts.
pub struct ReservedPort {
    addr: SocketAddr,
    // Bound, never listening: it holds the port and receives nothing.
    _hold: TcpSocket,
}

/// A socket that may share its port with the others made here (same user,
/// `SO_REUSEPORT`). Only listeners also set `SO_REUSEADDR` (a restarted
/// server binds beside its predecessor's closing connections): the held
/// socket must not, or any other socket setting it could bind the port
/// while nothing listens there.
fn shared_socket(reuse_addr: bool) -> std::io::Result<TcpSocket> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(reuse_addr)?;
    socket.set_reuseport(true)?;
    Ok(socket)
}

impl ReservedPort {
    /// Reserves a free loopback port. Fails when no socket can be bound.
    pub fn new() -> std::io::Result<Self> {
        let hold = shared_socket(false)?;
        hold.bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
        Ok(Self {
            addr: hold.local_addr()?,
            _hold: hold,
        })
    }

    /// The reserved address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A listener on the reserved port (one still open there shares it; the
    /// kernel spreads connections between them). Fails when the socket
    /// cannot be made or bound.
    pub fn listen(&self) -> std::io::Result<TcpListener> {
        let socket = shared_socket(true)?;
        socket.bind(self.addr)?;
        socket.listen(BACKLOG)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_port_refuses_while_nothing_listens_and_serves_each_listener_in_turn() {
        let port = ReservedPort::new().expect("reserve");
        // Nobody else may bind it.
        assert!(std::net::TcpListener::bind(port.addr()).is_err());
        // Down: refused, as from a dead server.
        assert!(tokio::net::TcpStream::connect(port.addr()).await.is_err());
        for _ in 0..2 {
            let listener = port.listen().expect("listen");
            let (accepted, connected) = tokio::join!(
                listener.accept(),
                tokio::net::TcpStream::connect(port.addr())
            );
            accepted.expect("accepted");
            connected.expect("connected");
            drop(listener);
            assert!(tokio::net::TcpStream::connect(port.addr()).await.is_err());
        }
    }
}
