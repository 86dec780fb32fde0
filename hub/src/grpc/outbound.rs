//! The stream of messages the hub sends one agent: the end of the session,
//! when the hub decides it, before anything still queued, then the queued
//! messages in order, until the pusher is done.

use std::pin::Pin;
use std::task::{Context, Poll};

use ferry_proto::v1;
use futures::Stream;
use tokio::sync::{mpsc, oneshot};
use tonic::Status;

/// A message queued for one agent. Boxed because the queue's storage is
/// allocated in blocks of 32 slots when the session opens: slots of a
/// pointer instead of a whole message keep an idle session's queue at a
/// quarter of a KiB instead of several KiB.
pub type Queued = Box<v1::HubMessage>;

/// One agent's outbound stream. Every connected agent holds one for its
/// whole session, so it is a plain struct of two receivers (a few dozen
/// bytes) rather than a chain of stream combinators, each of which would
/// hold a message-sized slot of its own.
pub struct Outbound {
    /// The status the hub ends the session with; `None` once it was sent
    /// or its sender was dropped without one.
    end: Option<oneshot::Receiver<Status>>,
    /// Messages queued by the session's pusher.
    queued: mpsc::Receiver<Queued>,
    /// The stream has ended: the end went out or the pusher is done.
    done: bool,
}

impl Outbound {
    /// The stream of `queued` messages, preceded by the status `end` carries
    /// if the hub ends the session. It ends as soon as the pusher drops its
    /// sender (the hub stopping, the agent gone) whether or not `end` is
    /// still open: only the agent's side ends that, so waiting for it would
    /// leave the agents of a stopping hub to learn of it from its silence.
    pub fn new(end: oneshot::Receiver<Status>, queued: mpsc::Receiver<Queued>) -> Self {
        Self {
            end: Some(end),
            queued,
            done: false,
        }
    }
}

impl Stream for Outbound {
    type Item = Result<v1::HubMessage, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Some(end) = self.end.as_mut() {
            match Pin::new(end).poll(cx) {
                Poll::Ready(Ok(status)) => {
                    // A status ends the gRPC response: nothing after it
                    // would reach the agent.
                    self.end = None;
                    self.done = true;
                    return Poll::Ready(Some(Err(status)));
                }
                Poll::Ready(Err(_)) => self.end = None,
                Poll::Pending => {}
            }
        }
        match self.queued.poll_recv(cx) {
            Poll::Ready(Some(message)) => Poll::Ready(Some(Ok(*message))),
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use futures::future::FutureExt;

    fn heartbeat() -> Box<v1::HubMessage> {
        Box::new(v1::HubMessage {
            body: Some(v1::hub_message::Body::Heartbeat(v1::Heartbeat {
                sent_unix_millis: 7,
                deletion_brake: None,
            })),
        })
    }

    #[tokio::test]
    async fn the_end_goes_out_before_anything_queued_and_closes_the_stream() {
        let (end_tx, end_rx) = oneshot::channel();
        let (tx, rx) = mpsc::channel(4);
        tx.send(heartbeat()).await.expect("queued");
        end_tx
            .send(Status::unauthenticated("revoked"))
            .expect("end");
        let mut stream = Outbound::new(end_rx, rx);
        let first = stream.next().await.expect("an item");
        assert_eq!(
            first.expect_err("the end").code(),
            tonic::Code::Unauthenticated
        );
        assert!(stream.next().await.is_none(), "nothing after the end");
        drop(tx);
    }

    #[tokio::test]
    async fn queued_messages_go_out_in_order_and_the_stream_ends_with_the_pusher() {
        let (_end_tx, end_rx) = oneshot::channel::<Status>();
        let (tx, rx) = mpsc::channel(4);
        let mut stream = Outbound::new(end_rx, rx);
        for millis in [1, 2] {
            let mut message = heartbeat();
            message.body = Some(v1::hub_message::Body::Heartbeat(v1::Heartbeat {
                sent_unix_millis: millis,
                deletion_brake: None,
            }));
            tx.send(message).await.expect("queued");
        }
        assert!(
            stream.next().now_or_never().is_some(),
            "a queued message is ready"
        );
        let second = stream.next().await.expect("an item").expect("a message");
        assert_eq!(
            second.body,
            Some(v1::hub_message::Body::Heartbeat(v1::Heartbeat {
                sent_unix_millis: 2,
                deletion_brake: None,
            }))
        );
        assert!(
            stream.next().now_or_never().is_none(),
            "waits while the pusher lives"
        );
        // The end's sender is still held: the stream ends anyway.
        drop(tx);
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn an_end_dropped_unsent_leaves_the_messages_flowing() {
        let (end_tx, end_rx) = oneshot::channel::<Status>();
        let (tx, rx) = mpsc::channel(4);
        let mut stream = Outbound::new(end_rx, rx);
        drop(end_tx);
        tx.send(heartbeat()).await.expect("queued");
        assert!(stream.next().await.expect("an item").is_ok());
        drop(tx);
        assert!(stream.next().await.is_none());
    }
}
