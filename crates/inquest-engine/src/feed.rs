//! The cross-replica feed: what other replicas announce (turns, statuses,
//! running tool calls, streamed text) applied to this replica's live view,
//! so a watcher on any replica sees every turn in order.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use inquest_broadcast::ToolCallStart;
use inquest_core::{SessionStatus, error_chain};
use inquest_store::{
    listen::{ListenEvent, ListenerConfig, run_listener},
    notify::Notification,
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::turn_log::TurnLog;

/// Feeds what other replicas announce into this replica's turn log: one
/// dedicated, reconnecting LISTEN connection, and one task applying its
/// notifications in order (fetching turns too large to travel inline).
/// Whenever the connection is lost or comes back, every watcher here is
/// told to reconnect from its last seq, so none is left with a silent gap.
/// The queue between the two holds at most `capacity` events: when the
/// applier falls that far behind, what does not fit is dropped and every
/// watcher here is lagged the same way (it rereads the store from its
/// cursor), so a slow applier costs latency, never memory or a turn.
/// The returned `Notify` fires (a permit is stored) at the first LISTEN.
pub fn spawn(
    database_url: &str,
    log: &TurnLog,
    tasks: &TaskTracker,
    shutdown: &CancellationToken,
    serving: Arc<AtomicBool>,
    capacity: usize,
) -> Arc<tokio::sync::Notify> {
    let first_listen = Arc::new(tokio::sync::Notify::new());
    let signal = Arc::clone(&first_listen);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<ListenEvent>(capacity.max(1));
    let overflowed = Arc::new(AtomicBool::new(false));
    let dropped = Arc::clone(&overflowed);
    let mut config = ListenerConfig::new(database_url, inquest_store::notify::CHANNEL);
    config.application_name = format!("inquest-listen {}", log.store().replica_id());
    tasks.spawn(run_listener(config, shutdown.clone(), move |event| {
        match tx.try_send(event) {
            Ok(()) => {}
            Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {
                dropped.store(true, Ordering::SeqCst);
            }
            // The receiver lives as long as the listener (same shutdown).
            Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => {}
        }
    }));
    let log = log.clone();
    tasks.spawn(async move {
        let mut first = true;
        while let Some(event) = rx.recv().await {
            if overflowed.swap(false, Ordering::SeqCst) {
                // Everything dropped committed before it was announced, so
                // a watcher rereading the store from its cursor sees it.
                let lagged = log.live().lag_all_watchers();
                metrics::counter!("inquest_feed_resyncs_total", "cause" => "queue_full").increment(1);
                tracing::warn!(
                    watchers = lagged,
                    capacity,
                    "cross-replica feed queue full; dropped notifications, watchers reconnect from their last seq"
                );
            }
            if first && event == ListenEvent::Listening {
                first = false;
                signal.notify_one();
                if !serving.load(Ordering::SeqCst) {
                    // Startup waited for this: no watcher exists yet.
                    continue;
                }
            }
            first = false;
            on_event(&log, event).await;
        }
    });
    first_listen
}

/// One event of the LISTEN connection: a notification is applied; the
/// connection lost or (re)established lags every watcher here, since
/// anything announced meanwhile was missed.
async fn on_event(log: &TurnLog, event: ListenEvent) {
    match event {
        ListenEvent::Notification(payload) => {
            metrics::counter!("inquest_feed_notifications_total").increment(1);
            match Notification::parse(&payload) {
                Ok(n) => {
                    // Commit (the database's clock) to here, for inlined
                    // turns: the cross-replica feed's delay.
                    if let Notification::Turn { turn: Some(t), .. } = &n {
                        let delay = time::OffsetDateTime::now_utc() - t.created_at;
                        if delay.is_positive() {
                            metrics::histogram!("inquest_feed_delay_seconds")
                                .record(delay.as_seconds_f64());
                        }
                    }
                    apply(log, n).await
                }
                Err(e) => tracing::warn!(error = %e, "ignoring an undecodable notification"),
            }
        }
        ListenEvent::Listening | ListenEvent::Lost => {
            let cause = if event == ListenEvent::Lost {
                "lost"
            } else {
                "listening"
            };
            metrics::counter!("inquest_feed_resyncs_total", "cause" => cause).increment(1);
            let lagged = log.live().lag_all_watchers();
            if lagged > 0 {
                tracing::warn!(
                    watchers = lagged,
                    ?event,
                    "cross-replica feed interrupted; watchers reconnect from their last seq"
                );
            }
        }
    }
}

/// Applies what another replica announced (see [`inquest_store::notify`]):
/// its committed turns and tool-call starts reach this replica's watchers,
/// its status changes close or reopen them, and a cancel or an interrupt
/// made there stops a burst running here. Our own announcements are skipped: they were
/// published locally already.
pub async fn apply(log: &TurnLog, notification: Notification) {
    let (store, live) = (log.store(), log.live());
    if notification.origin() == store.replica_id().as_str() {
        return;
    }
    match notification {
        Notification::Turn {
            turn: Some(turn), ..
        } => {
            live.publish_committed(turn);
        }
        Notification::Turn {
            session,
            seq,
            turn: None,
            ..
        } => {
            // Too large to travel inline: fetch it, but only when someone
            // here follows the session. Its seq counts either way.
            live.announced_seq(session, seq);
            if !live.follows(session) {
                return;
            }
            match store.get_turn(session, seq).await {
                Ok(Some(turn)) => {
                    live.publish_committed(turn);
                }
                Ok(None) => {
                    tracing::warn!(%session, %seq, "announced turn not found");
                }
                Err(e) => {
                    // Watchers would miss it: make them reconnect, the
                    // drain reads it from the table.
                    tracing::warn!(%session, %seq, error = %error_chain(&e), "cannot fetch an announced turn; lagging its watchers");
                    live.broadcaster().lag_session(session);
                }
            }
        }
        Notification::ToolCallStart {
            session,
            assistant_seq,
            call_id,
            tool_name,
            started_at,
            ..
        } => live.publish_tool_call_start(ToolCallStart {
            session_id: session,
            assistant_seq,
            call_id,
            tool_name,
            started_at,
        }),
        Notification::MessageQueued {
            session,
            id,
            position,
            text,
            ..
        } => {
            let text = match text {
                Some(text) => text,
                None if live.follows(session) => match store.queued_message_text(session, id).await
                {
                    Ok(Some(text)) => text,
                    // Drained already: its user turn is announced instead.
                    Ok(None) => return,
                    Err(e) => {
                        tracing::warn!(%session, error = %error_chain(&e), "cannot fetch an announced queued message; its turn will show it");
                        return;
                    }
                },
                None => return,
            };
            live.publish_message_queued(inquest_broadcast::MessageQueued {
                session_id: session,
                text: text.into(),
                position,
            });
        }
        Notification::Interrupt { session, epoch, .. } => {
            if live.interrupt_burst(session, epoch, false) {
                metrics::counter!("inquest_interrupts_total", "via" => "feed").increment(1);
                tracing::info!(%session, epoch, "interrupting the burst: asked on another replica");
            }
        }
        Notification::Deleted { session, .. } => {
            tracing::debug!(%session, "session erased on another replica; its watchers and burst here end");
            live.session_settled(session, true);
        }
        Notification::Status {
            session, status, ..
        } => match status {
            SessionStatus::Pending => live.reopen(session),
            SessionStatus::Running => {}
            _ => live.session_settled(session, status == SessionStatus::Cancelled),
        },
    }
}
