//! The response stream of a watch: the watcher's future, polled by tonic,
//! handing its events out one at a time (see the parent module).

use std::{
    collections::VecDeque,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
};

use inquest_proto::EncodedWatchEvent;
use tokio_stream::Stream;
use tonic::Status;

pub(super) type Item = Result<EncodedWatchEvent, Status>;

/// A watch stream as tonic sees it: each `poll_next` first hands out the
/// next event the watcher left in the outbox, and otherwise polls the
/// watcher on, until it fills the outbox or waits (for the broadcaster,
/// the database, a timer). Dropping it drops the watcher: that is how a
/// client's leaving ends the watch. Each event is encoded before it is
/// handed over: a live turn once for all its watchers
/// (`PublishedTurn::into_wire`), everything else per stream.
pub struct WatchStream {
    /// The watcher; `None` once it has ended.
    pub(super) run: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    pub(super) out: Outbox,
}

impl Stream for WatchStream {
    type Item = Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let this = self.get_mut();
        if let Some(item) = this.out.take() {
            return Poll::Ready(Some(item));
        }
        let Some(run) = this.run.as_mut() else {
            return Poll::Ready(None);
        };
        // The outbox is empty here, so the watcher's sends go through
        // until it holds a batch; the next one waits (returns Pending with
        // the outbox full, answered below without a wake-up).
        let finished = run.as_mut().poll(cx).is_ready();
        if finished {
            this.run = None;
        }
        match this.out.take() {
            Some(item) => Poll::Ready(Some(item)),
            None if finished => Poll::Ready(None),
            None => Poll::Pending,
        }
    }
}

/// The most events a watcher leaves in its outbox before it waits for its
/// stream to hand them out. A watcher woken with a backlog moves up to this
/// many events per poll instead of one, so the per-poll work (the watcher's
/// shutdown check and its `select!`) is paid once per batch; tonic encodes
/// a ready batch into one HTTP/2 write. Small, so the backlog of a slow
/// client still sits in its broadcaster channel, where lag is measured.
pub(super) const BATCH: usize = 16;

/// An event as it waits in the outbox: a status is boxed, so a slot is
/// the size of an encoded event (a `Bytes`), not of a `Status`.
type Slot = Result<EncodedWatchEvent, Box<Status>>;

/// The hand-off between a watcher and its [`WatchStream`]: at most
/// [`BATCH`] events, in order. A std mutex, only ever taken by the task
/// polling the stream (so never contended) and never across an await.
#[derive(Clone, Default)]
pub(super) struct Outbox {
    slots: Arc<Mutex<VecDeque<Slot>>>,
}

impl Outbox {
    fn slots(&self) -> std::sync::MutexGuard<'_, VecDeque<Slot>> {
        // Nothing panics while holding it.
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn take(&self) -> Option<Item> {
        self.slots().pop_front().map(|slot| slot.map_err(|e| *e))
    }

    /// Leaves `item` for the stream to hand out: at once if the outbox has
    /// room (the event counts as sent, as with a channel send that found
    /// room), otherwise once the stream has handed out the batch before
    /// it. Waiting registers no waker: the outbox is full, so the stream
    /// returns its items and is polled again for the next ones.
    pub(super) async fn send(&self, item: Item) {
        let mut item = Some(item.map_err(Box::new));
        std::future::poll_fn(|_| {
            let mut slots = self.slots();
            if slots.len() >= BATCH {
                return Poll::Pending;
            }
            if let Some(item) = item.take() {
                slots.push_back(item);
            }
            Poll::Ready(())
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::atomic::{AtomicBool, Ordering},
        time::Duration,
    };

    use tokio_stream::StreamExt;

    use tonic::Code;

    use super::*;

    fn event(n: u8) -> Item {
        Ok(EncodedWatchEvent::from_encoded(bytes::Bytes::from(vec![n])))
    }

    fn byte(item: Item) -> u8 {
        item.ok()
            .map(EncodedWatchEvent::into_bytes)
            .and_then(|b| b.first().copied())
            .unwrap_or(0)
    }

    fn stream_of(out: Outbox, run: impl Future<Output = ()> + Send + 'static) -> WatchStream {
        WatchStream {
            run: Some(Box::pin(run)),
            out,
        }
    }

    #[tokio::test]
    async fn events_sent_in_one_poll_come_out_in_order_then_the_end() {
        let out = Outbox::default();
        let sender = out.clone();
        let mut stream = stream_of(out, async move {
            for n in 1..=3 {
                sender.send(event(n)).await;
            }
            sender.send(Err(Status::aborted("last words"))).await;
        });
        let mut got = Vec::new();
        while let Some(item) = stream.next().await {
            match item {
                Ok(_) => got.push(byte(item)),
                Err(status) => {
                    assert_eq!(status.code(), Code::Aborted);
                    got.push(0);
                }
            }
        }
        assert_eq!(got, [1, 2, 3, 0]);
        assert!(stream.next().await.is_none(), "ended stays ended");
    }

    #[tokio::test]
    async fn more_events_than_a_batch_come_out_in_order_each_poll_moving_at_most_a_batch() {
        let total = BATCH * 3 + 5;
        let out = Outbox::default();
        let sender = out.clone();
        let probe = out.clone();
        let mut stream = stream_of(out, async move {
            for n in 0..total {
                sender.send(event(n as u8)).await;
            }
        });
        let mut got = Vec::new();
        let mut most_queued = 0;
        while let Some(item) = stream.next().await {
            most_queued = most_queued.max(probe.slots().len() + 1);
            got.push(byte(item));
        }
        assert_eq!(got, (0..total).map(|n| n as u8).collect::<Vec<_>>());
        assert_eq!(most_queued, BATCH, "a poll moves a whole batch, never more");
    }

    #[tokio::test]
    async fn events_between_waits_arrive_as_they_are_sent() {
        let out = Outbox::default();
        let sender = out.clone();
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u8>(4);
        let mut stream = stream_of(out, async move {
            while let Some(n) = rx.recv().await {
                sender.send(event(n)).await;
            }
        });
        for n in [7, 8, 9] {
            tx.send(n).await.unwrap();
            let item = tokio::time::timeout(Duration::from_secs(5), stream.next())
                .await
                .expect("the stream was woken")
                .expect("an item");
            assert_eq!(byte(item), n);
        }
        drop(tx);
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn dropping_the_stream_drops_the_watcher() {
        struct Guard(Arc<AtomicBool>);
        impl Drop for Guard {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let guard = Guard(Arc::clone(&dropped));
        let out = Outbox::default();
        let sender = out.clone();
        let mut stream = stream_of(out, async move {
            let _guard = guard;
            sender.send(event(1)).await;
            std::future::pending::<()>().await;
        });
        assert_eq!(byte(stream.next().await.expect("an item")), 1);
        assert!(!dropped.load(Ordering::SeqCst));
        drop(stream);
        assert!(
            dropped.load(Ordering::SeqCst),
            "the watcher outlived its stream"
        );
    }
}
