//! A network link between an agent and the hub that a test can freeze (bytes
//! stop moving, connections stay open: a stuck peer or a black-holed route)
//! or cut (every connection drops and new ones are refused), and restore.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the link does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Bytes flow.
    Up,
    /// Bytes wait; connections stay open.
    Frozen,
    /// Connections are closed and new ones refused.
    Cut,
}

/// A running link: agents dial `addr()`, the link dials its target.
pub struct Link {
    addr: SocketAddr,
    state: watch::Sender<LinkState>,
    target: watch::Sender<SocketAddr>,
    task: JoinHandle<()>,
}

impl Link {
    /// Listens on a free loopback port and forwards to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = watch::Sender::new(LinkState::Up);
        let target = watch::Sender::new(target);
        let task = tokio::spawn(accept(listener, target.subscribe(), state.subscribe()));
        Ok(Self {
            addr,
            state,
            target,
            task,
        })
    }

    /// The address an agent dials to go through this link.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sends new connections to `target` from now on (a load balancer
    /// moving an agent to another hub replica); open connections stay.
    pub fn retarget(&self, target: SocketAddr) {
        self.target.send_replace(target);
    }

    /// Sets what the link does from now on.
    pub fn set(&self, state: LinkState) {
        self.state.send_replace(state);
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.state.send_replace(LinkState::Cut);
        self.task.abort();
    }
}

async fn accept(
    listener: TcpListener,
    target: watch::Receiver<SocketAddr>,
    state: watch::Receiver<LinkState>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        if *state.borrow() == LinkState::Cut {
            drop(client);
            continue;
        }
        let state = state.clone();
        let target = *target.borrow();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(target).await else {
                return;
            };
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            tokio::join!(
                pump(client_read, server_write, state.clone()),
                pump(server_read, client_write, state)
            );
        });
    }
}

async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut state: watch::Receiver<LinkState>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = tokio::select! {
            read = from.read(&mut buffer) => read,
            _ = state.wait_for(|s| *s == LinkState::Cut) => return,
        };
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        match state.wait_for(|s| *s != LinkState::Frozen).await {
            Ok(s) if *s == LinkState::Up => {}
            _ => return,
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
