//! Bounds on the connections the agent port holds: at most
//! `max_connections` at once, at most `max_per_peer` of them from one peer
//! address (IPv6: its /64), and none unauthenticated for longer than
//! `unauthenticated_idle`. Each accepted connection carries a permit of the
//! port and a slot of its peer for as long as it lives; one accepted while
//! either is exhausted is closed at once, so a peer opening connections it
//! never uses can neither exhaust the hub's descriptors or memory nor take
//! the slots other agents need. The TLS handshake timeout and HTTP/2
//! keepalive make idle holders give their permits back; the unauthenticated
//! deadline closes a connection that completed its handshakes but never
//! carried an authenticated stream (an agent's does so at once).

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tonic::transport::server::{Connected, TcpConnectInfo};
use tracing::debug;

use crate::agent_certs::presented::Presented;
use crate::grpc::peer_budget::peer_key;
use crate::metrics::HubMetrics;

/// `reason` of `ferry_hub_agent_connections_closed_total`: the port held
/// `max_connections`.
pub const CLOSED_MAX_CONNECTIONS: &str = "max_connections";
/// `reason`: the peer's address held `max_per_peer` connections.
pub const CLOSED_MAX_PER_PEER: &str = "max_connections_per_peer";
/// `reason`: no authenticated stream within `unauthenticated_idle`.
pub const CLOSED_UNAUTHENTICATED_IDLE: &str = "unauthenticated_idle";

/// The limits [`limit_connections`] enforces.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Connections held at once, from every peer together.
    pub max_connections: usize,
    /// Connections held at once from one peer address (IPv6: its /64).
    pub max_per_peer: usize,
    /// How long a connection may stay open without carrying a stream whose
    /// token was accepted.
    pub unauthenticated_idle: Duration,
}

/// What the service learns of a connection: the peer's address, and a
/// handle to tell the connection that a stream on it was authenticated
/// (which lifts its unauthenticated deadline).
#[derive(Clone, Debug)]
pub struct AgentConnectInfo {
    tcp: TcpConnectInfo,
    authenticated: Arc<AtomicBool>,
    /// The client certificate presented in the TLS handshake, as judged
    /// after it; None without TLS or without a certificate.
    presented: Option<Arc<Presented>>,
}

impl AgentConnectInfo {
    /// The peer's address, when the socket knew it.
    pub fn remote_addr(&self) -> Option<SocketAddr> {
        self.tcp.remote_addr()
    }

    /// The client certificate the connection presented, as judged.
    pub fn presented(&self) -> Option<Arc<Presented>> {
        self.presented.clone()
    }

    /// This connection's information with the client certificate it
    /// presented in its TLS handshake.
    pub fn with_presented(mut self, presented: Option<Arc<Presented>>) -> Self {
        self.presented = presented;
        self
    }

    /// Records that a stream on this connection presented an accepted
    /// token: the connection is no longer closed for staying
    /// unauthenticated.
    pub fn authenticated(&self) {
        self.authenticated.store(true, Ordering::Release);
    }
}

/// Live connections per peer key. A plain mutex: it is held only for a
/// map update, never across an await, and released from `Drop`, which
/// cannot await. The map holds only keys with a live connection, so it never
/// has more entries than the port has connections.
#[derive(Default)]
struct PeerSlots {
    held: Mutex<HashMap<IpAddr, usize>>,
}

impl PeerSlots {
    fn lock(&self) -> MutexGuard<'_, HashMap<IpAddr, usize>> {
        // A panic elsewhere while holding the lock leaves a consistent map
        // (every update is one statement), so the poison is ignored.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One more connection of `key`, unless it holds `max` already.
    fn take(self: &Arc<Self>, key: IpAddr, max: usize) -> Option<PeerSlot> {
        let mut held = self.lock();
        let count = held.entry(key).or_insert(0);
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(PeerSlot {
            slots: self.clone(),
            key,
        })
    }
}

/// One connection's place in its peer's count, given back when dropped.
struct PeerSlot {
    slots: Arc<PeerSlots>,
    key: IpAddr,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut held = self.slots.lock();
        if let Some(count) = held.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.key);
            }
        }
    }
}

/// An accepted connection holding one of the port's permits and one of its
/// peer's slots, closed (its reads fail) once its unauthenticated deadline
/// passes without an authenticated stream.
pub struct LimitedConnection {
    io: TcpStream,
    info: AgentConnectInfo,
    /// Until an authenticated stream: when the connection is closed.
    deadline: Option<Pin<Box<Sleep>>>,
    /// How long after its start the deadline falls.
    unauthenticated_idle: Duration,
    /// The deadline passed unauthenticated: every read fails from then on.
    timed_out: bool,
    metrics: Arc<HubMetrics>,
    _permit: OwnedSemaphorePermit,
    _peer: Option<PeerSlot>,
}

impl LimitedConnection {
    /// Starts the unauthenticated deadline again from now: for a connection
    /// the hub held before serving it (its TLS handshake waits while a
    /// starting replica lists its caches, and for its turn), the time to
    /// authenticate counts from when the hub begins to serve it. A
    /// connection already closed for its deadline stays so.
    pub fn restart_unauthenticated_deadline(&mut self) {
        if let Some(deadline) = self.deadline.as_mut() {
            deadline
                .as_mut()
                .reset(tokio::time::Instant::now() + self.unauthenticated_idle);
        }
    }

    /// Whether the connection outlived its unauthenticated deadline; polls
    /// the deadline so that the task reading the connection wakes when it
    /// passes.
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        if self.timed_out {
            return true;
        }
        let Some(deadline) = self.deadline.as_mut() else {
            return false;
        };
        if deadline.as_mut().poll(cx).is_pending() {
            return false;
        }
        self.deadline = None;
        if self.info.authenticated.load(Ordering::Acquire) {
            return false;
        }
        debug!(peer = ?self.info.remote_addr(), "connection closed: no authenticated stream in time");
        self.metrics.connection_closed(CLOSED_UNAUTHENTICATED_IDLE);
        self.timed_out = true;
        true
    }
}

impl Connected for LimitedConnection {
    type ConnectInfo = AgentConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.info.clone()
    }
}

impl AsyncRead for LimitedConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.expired(cx) {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no authenticated stream before the deadline",
            )));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for LimitedConnection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// Passes on the connections of `incoming` within `limits`; closes the
/// others as soon as they are accepted, counting each in `metrics`. Accept
/// errors are passed on as they are.
pub fn limit_connections<S>(
    incoming: S,
    limits: ConnectionLimits,
    metrics: Arc<HubMetrics>,
) -> impl Stream<Item = io::Result<LimitedConnection>>
where
    S: Stream<Item = io::Result<TcpStream>>,
{
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let peers = Arc::new(PeerSlots::default());
    incoming.filter_map(move |accepted| {
        let permits = permits.clone();
        let peers = peers.clone();
        let metrics = metrics.clone();
        async move {
            let io = match accepted {
                Ok(io) => io,
                Err(error) => return Some(Err(error)),
            };
            let peer = io.peer_addr().ok();
            let Ok(permit) = permits.try_acquire_owned() else {
                debug!(
                    ?peer,
                    limit = limits.max_connections,
                    "connection refused: the agent port holds its limit"
                );
                metrics.connection_closed(CLOSED_MAX_CONNECTIONS);
                return None;
            };
            // The port's permit is taken first, so the map never holds more
            // peers than the port holds connections.
            let slot = match peer {
                Some(addr) => match peers.take(peer_key(addr.ip()), limits.max_per_peer) {
                    Some(slot) => Some(slot),
                    None => {
                        debug!(
                            ?peer,
                            limit = limits.max_per_peer,
                            "connection refused: its address holds its share of the agent port"
                        );
                        metrics.connection_closed(CLOSED_MAX_PER_PEER);
                        return None;
                    }
                },
                None => None,
            };
            let info = AgentConnectInfo {
                tcp: io.connect_info(),
                authenticated: Arc::default(),
                presented: None,
            };
            Some(Ok(LimitedConnection {
                io,
                info,
                deadline: Some(Box::pin(tokio::time::sleep(limits.unauthenticated_idle))),
                unauthenticated_idle: limits.unauthenticated_idle,
                timed_out: false,
                metrics,
                _permit: permit,
                _peer: slot,
            }))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;
    use tokio_stream::wrappers::TcpListenerStream;

    fn limits(max_connections: usize, max_per_peer: usize) -> ConnectionLimits {
        ConnectionLimits {
            max_connections,
            max_per_peer,
            unauthenticated_idle: Duration::from_secs(3600),
        }
    }

    /// Whether the hub side closed `client`, waiting at most a second.
    async fn closed(client: &mut TcpStream) -> bool {
        let mut buf = [0u8; 1];
        matches!(
            tokio::time::timeout(Duration::from_secs(1), client.read(&mut buf)).await,
            Ok(Ok(0) | Err(_))
        )
    }

    #[tokio::test]
    async fn connections_over_the_limit_are_closed_and_a_freed_permit_is_reused() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let metrics = Arc::new(HubMetrics::default());
        let mut accepted = Box::pin(limit_connections(
            TcpListenerStream::new(listener),
            limits(2, 100),
            metrics.clone(),
        ));

        let _first = TcpStream::connect(addr).await.expect("connect");
        let held_first = accepted.next().await.expect("first").expect("ok");
        let _second = TcpStream::connect(addr).await.expect("connect");
        let held_second = accepted.next().await.expect("second").expect("ok");
        assert_eq!(
            held_second.connect_info().remote_addr(),
            _second.local_addr().ok(),
            "the peer address is kept for the service"
        );

        // The third is accepted by the kernel and closed by the hub.
        let mut third = TcpStream::connect(addr).await.expect("connect");
        let next = accepted.next();
        tokio::pin!(next);
        let mut buf = [0u8; 1];
        tokio::select! {
            _ = &mut next => panic!("a third connection was passed on"),
            read = third.read(&mut buf) => assert_eq!(read.expect("read"), 0, "closed"),
        }
        let refused = metrics
            .connections_closed
            .get_or_create(&crate::metrics::ConnectionClosedLabel {
                reason: CLOSED_MAX_CONNECTIONS,
            })
            .get();
        assert_eq!(refused, 1);

        // Once one ends, the next connection is served.
        drop(held_first);
        let _fourth = TcpStream::connect(addr).await.expect("connect");
        assert!(next.await.expect("fourth").is_ok());
        drop(held_second);
    }

    #[tokio::test]
    async fn one_address_holds_at_most_its_share_and_gets_a_slot_back_when_one_ends() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let metrics = Arc::new(HubMetrics::default());
        let mut accepted = Box::pin(limit_connections(
            TcpListenerStream::new(listener),
            limits(10, 2),
            metrics.clone(),
        ));
        let _a = TcpStream::connect(addr).await.expect("connect");
        let held_a = accepted.next().await.expect("a").expect("ok");
        let _b = TcpStream::connect(addr).await.expect("connect");
        let _held_b = accepted.next().await.expect("b").expect("ok");
        let mut c = TcpStream::connect(addr).await.expect("connect");
        let next = accepted.next();
        tokio::pin!(next);
        tokio::select! {
            _ = &mut next => panic!("a third connection of one address was passed on"),
            gone = closed(&mut c) => assert!(gone, "the third is closed"),
        }
        let per_peer = metrics
            .connections_closed
            .get_or_create(&crate::metrics::ConnectionClosedLabel {
                reason: CLOSED_MAX_PER_PEER,
            })
            .get();
        assert_eq!(per_peer, 1);
        drop(held_a);
        let _d = TcpStream::connect(addr).await.expect("connect");
        assert!(next.await.expect("d").is_ok(), "a freed slot is reused");
    }

    #[tokio::test]
    async fn an_unauthenticated_connection_is_closed_at_its_deadline_an_authenticated_one_is_not() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let metrics = Arc::new(HubMetrics::default());
        let mut accepted = Box::pin(limit_connections(
            TcpListenerStream::new(listener),
            ConnectionLimits {
                max_connections: 10,
                max_per_peer: 10,
                unauthenticated_idle: Duration::from_millis(200),
            },
            metrics.clone(),
        ));
        let _idle = TcpStream::connect(addr).await.expect("connect");
        let mut idle = accepted.next().await.expect("idle").expect("ok");
        let _agent = TcpStream::connect(addr).await.expect("connect");
        let mut agent = accepted.next().await.expect("agent").expect("ok");
        agent.connect_info().authenticated();

        let mut buf = [0u8; 8];
        let read = tokio::time::timeout(Duration::from_secs(5), idle.read(&mut buf))
            .await
            .expect("the deadline ends the read");
        assert_eq!(read.expect_err("closed").kind(), io::ErrorKind::TimedOut);
        assert!(idle.read(&mut buf).await.is_err(), "and every later read");
        let still = tokio::time::timeout(Duration::from_millis(600), agent.read(&mut buf)).await;
        assert!(
            still.is_err(),
            "the authenticated connection keeps waiting for data"
        );
        let idled = metrics
            .connections_closed
            .get_or_create(&crate::metrics::ConnectionClosedLabel {
                reason: CLOSED_UNAUTHENTICATED_IDLE,
            })
            .get();
        assert_eq!(idled, 1);
    }

    #[tokio::test]
    async fn a_held_connection_gets_its_whole_deadline_from_when_it_is_served() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let idle = Duration::from_secs(1);
        let mut accepted = Box::pin(limit_connections(
            TcpListenerStream::new(listener),
            ConnectionLimits {
                max_connections: 10,
                max_per_peer: 10,
                unauthenticated_idle: idle,
            },
            Arc::new(HubMetrics::default()),
        ));
        let _client = TcpStream::connect(addr).await.expect("connect");
        let mut held = accepted.next().await.expect("held").expect("ok");
        // Held, unread, past the deadline it was accepted with.
        tokio::time::sleep(idle + Duration::from_millis(200)).await;
        held.restart_unauthenticated_deadline();
        let mut buf = [0u8; 8];
        let early = tokio::time::timeout(Duration::from_millis(300), held.read(&mut buf)).await;
        assert!(
            early.is_err(),
            "still open: its deadline runs from when it was served"
        );
        let read = tokio::time::timeout(Duration::from_secs(5), held.read(&mut buf))
            .await
            .expect("the restarted deadline ends the read");
        assert_eq!(read.expect_err("closed").kind(), io::ErrorKind::TimedOut);
    }
}
