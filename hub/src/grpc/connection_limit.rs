//! A bound on the connections the agent port holds at once. Each accepted
//! connection carries a semaphore permit for as long as it lives; one
//! accepted while every permit is taken is closed at once, so a peer opening
//! connections it never uses cannot exhaust the hub's descriptors or memory.
//! The TLS handshake timeout and HTTP/2 keepalive make idle holders give
//! their permits back.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::transport::server::{Connected, TcpConnectInfo};
use tracing::debug;

/// An accepted connection holding one of the port's permits.
pub struct LimitedConnection {
    io: TcpStream,
    _permit: OwnedSemaphorePermit,
}

impl Connected for LimitedConnection {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

impl AsyncRead for LimitedConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
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

/// Passes on the connections of `incoming` while fewer than `limit` of them
/// are open; closes the others as soon as they are accepted. Accept errors
/// are passed on as they are.
pub fn limit_connections<S>(
    incoming: S,
    limit: usize,
) -> impl Stream<Item = io::Result<LimitedConnection>>
where
    S: Stream<Item = io::Result<TcpStream>>,
{
    let permits = Arc::new(Semaphore::new(limit));
    incoming.filter_map(move |accepted| {
        let permits = permits.clone();
        async move {
            let io = match accepted {
                Ok(io) => io,
                Err(error) => return Some(Err(error)),
            };
            match permits.try_acquire_owned() {
                Ok(permit) => Some(Ok(LimitedConnection {
                    io,
                    _permit: permit,
                })),
                Err(_) => {
                    debug!(peer = ?io.peer_addr().ok(), limit, "connection refused: the agent port holds its limit");
                    None
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;
    use tokio_stream::wrappers::TcpListenerStream;

    #[tokio::test]
    async fn connections_over_the_limit_are_closed_and_a_freed_permit_is_reused() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut accepted = Box::pin(limit_connections(TcpListenerStream::new(listener), 2));

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

        // Once one ends, the next connection is served.
        drop(held_first);
        let _fourth = TcpStream::connect(addr).await.expect("connect");
        assert!(next.await.expect("fourth").is_ok());
        drop(held_second);
    }
}
