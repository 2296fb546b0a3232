//! `inquest watch SESSION` and `inquest send SESSION TEXT`: follow a session
//! live, reconnecting with the last seq received when the stream drops,
//! falls behind (Lagged / ABORTED) or the server goes away (UNAVAILABLE).
//! `inquest watch --follow` goes on across bursts: after one settles it
//! polls `GetSession` (a watch of a settled session ends at once) until the
//! next one starts, and stops when the session is cancelled or on Ctrl-C.
//! A server or store that is down is retried through with backoff for
//! [`RETRY_FOR`](crate::retry::RETRY_FOR) before a command gives up, each
//! of `--server`'s addresses in turn. What is shown is `view.rs`'s.

use std::{future::Future, time::Duration};

use clap::Args;
use inquest_proto::v1::{self as pb, watch_event::Event};

use crate::{
    client::{
        Client, Failure, Target, idempotency_key, reconnect_after, should_reconnect, status_error,
    },
    retry::{Retry, retrying},
    view::View,
};

#[derive(Args)]
pub struct WatchArgs {
    session_id: String,
    /// Show turns after this seq (0 = from the start).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    after_seq: i64,
    /// One JSON object per line, for scripts.
    #[arg(long)]
    json: bool,
    /// Keep following after a burst settles: wait for the next burst (a
    /// follow-up sent from anywhere) and show it too. Ends when the session
    /// is cancelled (`inquest session cancel`, also of an idle session),
    /// its only final status, or on Ctrl-C; both exit 0. Without it, watch
    /// ends when the burst settles.
    #[arg(long)]
    follow: bool,
    #[command(flatten)]
    target: Target,
}

#[derive(Args)]
pub struct SendArgs {
    session_id: String,
    message: String,
    /// Makes the call safe to retry: the same key stores one message.
    /// Without one a fresh key is made, so that this command's own
    /// retries (while the server is unavailable) store it once.
    #[arg(long, default_value = "")]
    idempotency_key: String,
    /// What the server does when a burst is pending or running: `reject`
    /// refuses the message; `enqueue` stores it at once and runs it after
    /// the current burst (the command prints its place and exits);
    /// `interrupt` stores it at once, stops the running burst at its next
    /// safe point and runs it next (the command follows that burst).
    #[arg(long, value_enum, default_value_t = IfRunning::Reject)]
    if_running: IfRunning,
    /// Short for `--if-running enqueue`.
    #[arg(long, conflicts_with_all = ["if_running", "interrupt"])]
    queue: bool,
    /// Short for `--if-running interrupt`.
    #[arg(long, conflicts_with_all = ["if_running", "queue"])]
    interrupt: bool,
    /// One JSON object per line, for scripts.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    target: Target,
}

/// `--if-running`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IfRunning {
    Reject,
    Enqueue,
    Interrupt,
}

impl IfRunning {
    fn wire(self) -> pb::IfRunning {
        match self {
            IfRunning::Reject => pb::IfRunning::Reject,
            IfRunning::Enqueue => pb::IfRunning::Enqueue,
            IfRunning::Interrupt => pb::IfRunning::Interrupt,
        }
    }
}

impl SendArgs {
    /// `--if-running`, or the short flag that stands for it.
    fn if_running(&self) -> IfRunning {
        if self.queue {
            IfRunning::Enqueue
        } else if self.interrupt {
            IfRunning::Interrupt
        } else {
            self.if_running
        }
    }
}

pub async fn watch(args: WatchArgs) -> anyhow::Result<()> {
    let mut client = args.target.connect_retrying().await?;
    let mut view = View::new(args.json);
    let watching = async {
        if args.follow {
            follow_bursts(
                &mut client,
                &args.target,
                &args.session_id,
                args.after_seq,
                &mut view,
            )
            .await
        } else {
            follow_burst(
                &mut client,
                &args.target,
                &args.session_id,
                args.after_seq,
                &mut view,
            )
            .await
            .map(|_| ())
        }
    };
    tokio::select! {
        result = watching => result,
        // Ctrl-C is how a follow ends: quietly, exit 0.
        _ = tokio::signal::ctrl_c(), if args.follow => {
            View::new(args.json).clear_line();
            Ok(())
        }
    }
}

/// Runs `work` while the view's spinner (or its quiet notices) tick.
async fn ticking<F: Future>(view: &mut View, work: F) -> F::Output {
    tokio::pin!(work);
    loop {
        tokio::select! {
            out = &mut work => return out,
            () = view.tick(), if view.ticking() => {}
        }
    }
}

/// Follows burst after burst until the session is cancelled.
async fn follow_bursts(
    client: &mut Client,
    target: &Target,
    session: &str,
    mut after_seq: i64,
    view: &mut View,
) -> anyhow::Result<()> {
    loop {
        let (settled, last) = follow_burst(client, target, session, after_seq, view).await?;
        after_seq = last;
        if settled.status() == pb::SessionStatus::Cancelled {
            return Ok(());
        }
        view.waiting();
        next_burst(client, target, session, after_seq, view).await?;
    }
}

/// Polls the session (backing off to every 2 s) until there is something
/// to watch: a turn after `after_seq`, or a burst pending or running, or a
/// cancel. An outage is shown and polled through, like a watch's.
async fn next_burst(
    client: &mut Client,
    target: &Target,
    session: &str,
    after_seq: i64,
    view: &mut View,
) -> anyhow::Result<()> {
    let mut backoff =
        inquest_core::Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
    let mut retry = Retry::quiet();
    loop {
        ticking(view, tokio::time::sleep(backoff.next_delay())).await;
        let request = pb::GetSessionRequest {
            session_id: session.into(),
        };
        let s = match ticking(view, client.get_session(request)).await {
            Ok(s) => s.into_inner(),
            Err(status) if should_reconnect(&status) => {
                view.interrupted(after_seq, &status);
                ticking(view, retry.pause(&Failure(&status))).await?;
                if target.has_alternatives() {
                    *client = ticking(view, target.connect_through(&mut retry)).await?;
                }
                continue;
            }
            Err(status) => return Err(status_error(status)),
        };
        retry.reset();
        view.reconnected();
        if s.head_seq > after_seq
            || matches!(
                s.status(),
                pb::SessionStatus::Pending
                    | pb::SessionStatus::Running
                    | pb::SessionStatus::Cancelled
            )
        {
            return Ok(());
        }
    }
}

/// Sends the message, then watches from it on (the new burst).
pub async fn send(args: SendArgs) -> anyhow::Result<()> {
    let mut client = args.target.connect_retrying().await?;
    let if_running = args.if_running();
    let request = pb::SendMessageRequest {
        session_id: args.session_id.clone(),
        message: args.message,
        idempotency_key: idempotency_key(args.idempotency_key),
        if_running: if_running.wire().into(),
    };
    let sent = retrying(|| {
        let (mut client, request) = (client.clone(), request.clone());
        async move { client.send_message(request).await }
    })
    .await?;
    if sent.queued && if_running == IfRunning::Interrupt {
        // The running burst stops at its next safe point and its close
        // opens the message's burst: follow the session into it.
        if !args.json {
            println!(
                "interrupting the running burst of session {}; the message runs next",
                args.session_id
            );
        }
        return interrupted(&mut client, &args.target, &args.session_id, args.json).await;
    }
    if sent.queued {
        // Nothing to follow yet: the message opens a burst once the
        // current one ends (`inquest watch --follow` shows it).
        if args.json {
            println!(
                "{}",
                serde_json::json!({
                    "type": "queued",
                    "session_id": args.session_id,
                    "position": sent.queue_position,
                })
            );
        } else {
            println!(
                "queued at position {} behind the running burst of session {}",
                sent.queue_position, args.session_id
            );
        }
        return Ok(());
    }
    let seq = sent.seq;
    follow(
        &mut client,
        &args.target,
        &args.session_id,
        seq - 1,
        args.json,
    )
    .await
    .map(|_| ())
}

/// Follows a session whose running burst an interrupting message stops:
/// from its head now, through the end of that burst (its close opens the
/// message's burst, which the watch follows), until the message's burst
/// settles.
async fn interrupted(
    client: &mut Client,
    target: &Target,
    session: &str,
    json: bool,
) -> anyhow::Result<()> {
    let head = get_session(client, session).await?.head_seq;
    follow(client, target, session, head, json)
        .await
        .map(|_| ())
}

/// The session, read through an outage of the server or its store.
pub(crate) async fn get_session(client: &mut Client, session: &str) -> anyhow::Result<pb::Session> {
    retrying(|| {
        let mut client = client.clone();
        let request = pb::GetSessionRequest {
            session_id: session.into(),
        };
        async move { client.get_session(request).await }
    })
    .await
}

/// Follows one burst until it settles; returns the settled session.
pub(crate) async fn follow(
    client: &mut Client,
    target: &Target,
    session: &str,
    after_seq: i64,
    json: bool,
) -> anyhow::Result<pb::Session> {
    let mut view = View::new(json);
    follow_burst(client, target, session, after_seq, &mut view)
        .await
        .map(|(s, _)| s)
}

/// Watches until the stream ends OK (the burst settled); returns the
/// settled session and the last seq received.
async fn follow_burst(
    client: &mut Client,
    target: &Target,
    session: &str,
    mut after_seq: i64,
    view: &mut View,
) -> anyhow::Result<(pb::Session, i64)> {
    // Reconnects in a row without receiving anything are one outage (the
    // view says so once, then shows it going on).
    let mut retry = Retry::quiet();
    // When the turn at `after_seq` was committed, as received: a reconnect
    // sends it, so a failover that replaced it is told, not passed over.
    let mut committed_at: Option<(i64, prost_types::Timestamp)> = None;
    view.burst_started();
    loop {
        let request = pb::WatchSessionRequest {
            session_id: session.into(),
            after_seq,
            after_committed_at: committed_at
                .as_ref()
                .filter(|(seq, _)| *seq == after_seq)
                .map(|(_, at)| *at),
        };
        let reason = match ticking(view, client.watch_session(request)).await {
            Ok(response) => {
                let mut stream = response.into_inner();
                loop {
                    let message = tokio::select! {
                        m = stream.message() => m,
                        () = view.tick(), if view.ticking() => continue,
                    };
                    match message {
                        Ok(Some(event)) => {
                            retry.reset();
                            view.reconnected();
                            if let Some(event) = event.event {
                                if let Event::Turn(t) = &event
                                    && t.seq >= after_seq
                                {
                                    after_seq = t.seq;
                                    committed_at = t.created_at.map(|at| (t.seq, at));
                                }
                                view.event(&event);
                            }
                        }
                        Ok(None) => {
                            view.reconnected();
                            // The burst settled; its status is read
                            // through a store outage that began since.
                            let s = ticking(view, get_session(client, session)).await?;
                            if s.status() == pb::SessionStatus::AwaitingApproval {
                                // Not over: a human decides, from here or
                                // anywhere, and the burst goes on.
                                view.held(&s);
                                next_burst(client, target, session, after_seq, view).await?;
                                view.burst_started();
                                break None;
                            }
                            view.end(&s);
                            return Ok((s, after_seq));
                        }
                        Err(status) if should_reconnect(&status) => break Some(status),
                        Err(status) => return Err(status_error(status)),
                    }
                }
            }
            Err(status) if should_reconnect(&status) => Some(status),
            Err(status) => return Err(status_error(status)),
        };
        // A hold was decided: watch again from the last turn seen.
        let Some(reason) = reason else {
            continue;
        };
        after_seq = reconnect_after(&reason, after_seq);
        view.interrupted(after_seq, &reason);
        ticking(view, retry.pause(&Failure(&reason))).await?;
        if target.has_alternatives() {
            *client = ticking(view, target.connect_through(&mut retry)).await?;
        }
    }
}
