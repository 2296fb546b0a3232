//! `inquest watch SESSION` and `inquest send SESSION TEXT`: follow a session
//! live, reconnecting with the last seq received when the stream drops,
//! falls behind (Lagged / ABORTED) or the server goes away (UNAVAILABLE).
//! `inquest watch --follow` goes on across bursts: after one settles it
//! polls `GetSession` (a watch of a settled session ends at once) until the
//! next one starts, and stops when the session is cancelled or on Ctrl-C.
//! A server or store that is down is retried through with backoff for
//! [`RETRY_FOR`](crate::retry::RETRY_FOR) before a command gives up.

use std::{
    io::{IsTerminal, Write},
    time::Duration,
};

use clap::Args;
use inquest_proto::v1::{self as pb, watch_event::Event};
use serde_json::json;

use crate::{
    client::{Failure, Target, idempotency_key, reconnect_after, should_reconnect, status_error},
    retry::{Retry, retrying},
};

const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

#[derive(Args)]
pub struct WatchArgs {
    session_id: String,
    /// Show turns after this seq (0 = from the start).
    #[arg(long, default_value_t = 0)]
    after_seq: i64,
    /// One JSON object per line, for scripts.
    #[arg(long)]
    json: bool,
    /// Keep following after a burst settles: wait for the next burst (a
    /// follow-up sent from anywhere) and show it too. Ends when the session
    /// is cancelled, its only final status (completed, failed and idle
    /// sessions can be reopened by a follow-up, so they are waited on), or
    /// on Ctrl-C; both exit 0. Without it, watch ends when the burst
    /// settles.
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
    /// One JSON object per line, for scripts.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    target: Target,
}

pub async fn watch(args: WatchArgs) -> anyhow::Result<()> {
    let mut client = args.target.connect_retrying().await?;
    if !args.follow {
        return follow(&mut client, &args.session_id, args.after_seq, args.json).await;
    }
    let mut view = View::new(args.json);
    let following = follow_bursts(&mut client, &args.session_id, args.after_seq, &mut view);
    tokio::select! {
        result = following => result,
        // Ctrl-C is how a follow ends: quietly, exit 0.
        _ = tokio::signal::ctrl_c() => {
            view.clear_spinner();
            Ok(())
        }
    }
}

/// Follows burst after burst until the session is cancelled.
async fn follow_bursts(
    client: &mut crate::client::Client,
    session: &str,
    mut after_seq: i64,
    view: &mut View,
) -> anyhow::Result<()> {
    loop {
        let (settled, last) = follow_burst(client, session, after_seq, view).await?;
        after_seq = last;
        if settled.status() == pb::SessionStatus::Cancelled {
            return Ok(());
        }
        view.waiting();
        next_burst(client, session, after_seq).await?;
    }
}

/// Polls the session (backing off to every 2 s) until there is something
/// to watch: a turn after `after_seq`, or a burst pending or running, or a
/// cancel. Transient errors are polled through.
async fn next_burst(
    client: &mut crate::client::Client,
    session: &str,
    after_seq: i64,
) -> anyhow::Result<()> {
    let mut backoff =
        inquest_core::Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
    loop {
        tokio::time::sleep(backoff.next_delay()).await;
        let s = match client
            .get_session(pb::GetSessionRequest {
                session_id: session.into(),
            })
            .await
        {
            Ok(s) => s.into_inner(),
            Err(status) if should_reconnect(&status) => continue,
            Err(status) => return Err(status_error(status)),
        };
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
    let request = pb::SendMessageRequest {
        session_id: args.session_id.clone(),
        message: args.message,
        idempotency_key: idempotency_key(args.idempotency_key),
    };
    let seq = retrying(|| {
        let (mut client, request) = (client.clone(), request.clone());
        async move { client.send_message(request).await }
    })
    .await?
    .seq;
    follow(&mut client, &args.session_id, seq - 1, args.json).await
}

/// The session, read through an outage of the server or its store.
pub(crate) async fn get_session(
    client: &mut crate::client::Client,
    session: &str,
) -> anyhow::Result<pb::Session> {
    retrying(|| {
        let mut client = client.clone();
        let request = pb::GetSessionRequest {
            session_id: session.into(),
        };
        async move { client.get_session(request).await }
    })
    .await
}

/// Follows one burst until it settles.
pub(crate) async fn follow(
    client: &mut crate::client::Client,
    session: &str,
    after_seq: i64,
    json: bool,
) -> anyhow::Result<()> {
    let mut view = View::new(json);
    follow_burst(client, session, after_seq, &mut view)
        .await
        .map(|_| ())
}

/// Watches until the stream ends OK (the burst settled); returns the
/// settled session and the last seq received.
async fn follow_burst(
    client: &mut crate::client::Client,
    session: &str,
    mut after_seq: i64,
    view: &mut View,
) -> anyhow::Result<(pb::Session, i64)> {
    // Reconnects in a row without receiving anything are one outage (the
    // view shows each one).
    let mut retry = Retry::quiet();
    loop {
        let reason = match client
            .watch_session(pb::WatchSessionRequest {
                session_id: session.into(),
                after_seq,
            })
            .await
        {
            Ok(response) => {
                let mut stream = response.into_inner();
                loop {
                    let message = tokio::select! {
                        m = stream.message() => m,
                        () = view.tick(), if view.spinning() => continue,
                    };
                    match message {
                        Ok(Some(event)) => {
                            retry.reset();
                            if let Some(event) = event.event {
                                if let Event::Turn(t) = &event {
                                    after_seq = after_seq.max(t.seq);
                                }
                                view.event(&event);
                            }
                        }
                        Ok(None) => {
                            // The burst settled; its status is read
                            // through a store outage that began since.
                            let s = get_session(client, session).await?;
                            view.end(&s);
                            return Ok((s, after_seq));
                        }
                        Err(status) if should_reconnect(&status) => break status,
                        Err(status) => return Err(status_error(status)),
                    }
                }
            }
            Err(status) if should_reconnect(&status) => status,
            Err(status) => return Err(status_error(status)),
        };
        after_seq = reconnect_after(&reason, after_seq);
        view.reconnect(after_seq, &reason);
        retry.pause(&Failure(&reason)).await?;
    }
}

fn rfc3339(t: &Option<prost_types::Timestamp>) -> String {
    t.as_ref()
        .and_then(|t| {
            let ns = i128::from(t.seconds) * 1_000_000_000 + i128::from(t.nanos);
            time::OffsetDateTime::from_unix_timestamp_nanos(ns).ok()
        })
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

fn lower(name: &str, prefix: &str) -> String {
    name.trim_start_matches(prefix).to_lowercase()
}

/// Renders events as text (with a spinner on a terminal) or JSON lines.
struct View {
    json: bool,
    tty: bool,
    /// Tool calls started and not yet answered: (call id, tool name).
    running: Vec<(String, String)>,
    frame: usize,
    /// Whether the last thing printed is a spinner line to overwrite.
    spinner_shown: bool,
    tokens: (i64, i64),
    /// The assistant text being printed as it streams (terminal only).
    streamed: Option<Streamed>,
}

/// A streamed assistant turn whose line is open on the terminal.
struct Streamed {
    seq: i64,
    attempt: u32,
    /// The text printed so far (after the turn's `#seq assistant` head).
    text: String,
}

/// The head `render_turn` gives an assistant turn's line.
fn assistant_head(seq: i64, text: &str) -> String {
    format!("#{seq:<4} {:<9} {text}", "assistant")
}

/// What is left to print of a committed turn's `rendered` line when its
/// text was printed already as it streamed (`None`: the stored text
/// differs, the turn must be printed whole).
fn rest_after_stream<'a>(
    t: &pb::SessionTurn,
    rendered: &'a str,
    streamed: &str,
) -> Option<&'a str> {
    if t.content != streamed || t.role() != pb::TurnRole::Assistant {
        return None;
    }
    rendered.strip_prefix(&assistant_head(t.seq, streamed))
}

impl View {
    fn new(json: bool) -> Self {
        Self {
            json,
            tty: std::io::stdout().is_terminal(),
            running: Vec::new(),
            frame: 0,
            spinner_shown: false,
            tokens: (0, 0),
            streamed: None,
        }
    }

    fn spinning(&self) -> bool {
        // Never over a streamed line: the spinner would erase it.
        !self.json && self.tty && !self.running.is_empty() && self.streamed.is_none()
    }

    async fn tick(&mut self) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.frame = self.frame.wrapping_add(1);
        self.draw_spinner();
    }

    fn draw_spinner(&mut self) {
        if !self.spinning() {
            return;
        }
        let names: Vec<&str> = self.running.iter().map(|(_, n)| n.as_str()).collect();
        print!(
            "\r\x1b[2K{} running {}",
            SPINNER[self.frame % SPINNER.len()],
            names.join(", ")
        );
        let _ = std::io::stdout().flush();
        self.spinner_shown = true;
    }

    fn clear_spinner(&mut self) {
        if self.spinner_shown {
            print!("\r\x1b[2K");
            let _ = std::io::stdout().flush();
            self.spinner_shown = false;
        }
    }

    /// Between bursts of `watch --follow` (text only: JSON readers see the
    /// next burst's turns after the `end` object).
    fn waiting(&mut self) {
        if !self.json {
            self.line("(waiting for the next burst; Ctrl-C to stop)");
        }
    }

    /// Prints a line, clearing the spinner first and redrawing it after.
    fn line(&mut self, text: &str) {
        self.end_streamed_line();
        if self.spinner_shown {
            print!("\r\x1b[2K");
            self.spinner_shown = false;
        }
        println!("{text}");
        self.draw_spinner();
    }

    fn event(&mut self, event: &Event) {
        if let Event::Turn(t) = event {
            self.tokens.0 += t.input_tokens;
            self.tokens.1 += t.output_tokens;
        }
        match event {
            Event::ToolCallStart(s) => {
                self.running.push((s.call_id.clone(), s.tool_name.clone()));
            }
            Event::Turn(t) if !t.tool_call_id.is_empty() => {
                self.running.retain(|(id, _)| *id != t.tool_call_id);
            }
            Event::Turn(t) => {
                // A recovery notice settles the calls its plan repaired:
                // their worker died, no result will come.
                if let Some(plan) = &t.recovery_plan {
                    self.running
                        .retain(|(id, _)| !plan.repaired_call_ids.contains(id));
                }
            }
            _ => {}
        }
        if self.json {
            println!("{}", json_event(event));
            return;
        }
        match event {
            Event::Turn(t) => self.turn(t),
            Event::ToolCallStart(s) => {
                if self.tty {
                    self.draw_spinner();
                } else {
                    let text = format!("      .. running {} [{}]", s.tool_name, s.call_id);
                    self.line(&text);
                }
            }
            Event::Lagged(l) => {
                let text = format!(
                    "(fell behind at seq {} of {}; catching up)",
                    l.last_delivered_seq, l.head_seq
                );
                self.line(&text);
            }
            Event::Heartbeat(_) => {}
            Event::TextDelta(d) => self.text_delta(d),
        }
    }

    /// Ends an open streamed line (something else is printed under it; the
    /// committed turn will then be printed whole).
    fn end_streamed_line(&mut self) {
        if self.streamed.take().is_some() {
            println!();
        }
    }

    /// Prints streamed text on a terminal: a new turn or attempt opens a
    /// line with the turn's head, the next pieces continue it. Elsewhere
    /// (a pipe, a log) only committed turns are printed, once each.
    fn text_delta(&mut self, d: &pb::TextDelta) {
        if !self.tty {
            return;
        }
        self.clear_spinner();
        let offset = usize::try_from(d.offset).unwrap_or(usize::MAX);
        match &mut self.streamed {
            Some(open) if open.seq == d.turn_seq && open.attempt == d.attempt => {
                // A gap (a delta this stream missed) prints nothing more:
                // the committed turn will be printed whole.
                if offset == open.text.len() {
                    print!("{}", d.text);
                    open.text.push_str(&d.text);
                }
            }
            _ if offset != 0 => return,
            other => {
                if let Some(open) = other.take() {
                    println!();
                    if open.seq == d.turn_seq {
                        println!("      (answer restarted: attempt {})", d.attempt);
                    }
                }
                print!("{}", assistant_head(d.turn_seq, &d.text));
                *other = Some(Streamed {
                    seq: d.turn_seq,
                    attempt: d.attempt,
                    text: d.text.clone(),
                });
            }
        }
        let _ = std::io::stdout().flush();
    }

    /// Prints a committed turn; an assistant turn whose text just streamed
    /// on this line is finished rather than printed again.
    fn turn(&mut self, t: &pb::SessionTurn) {
        let rendered = crate::client::render_turn(t);
        if let Some(open) = self.streamed.take() {
            if open.seq == t.seq
                && let Some(rest) = rest_after_stream(t, &rendered, &open.text)
            {
                println!("{rest}");
                self.draw_spinner();
                return;
            }
            println!();
        }
        self.line(&rendered);
    }

    fn reconnect(&mut self, after_seq: i64, reason: &tonic::Status) {
        // Calls still running will be announced again after the reconnect.
        self.running.clear();
        if self.json {
            println!(
                "{}",
                json!({"type": "reconnect", "after_seq": after_seq,
                       "code": format!("{:?}", reason.code()), "message": reason.message()})
            );
        } else {
            self.line(&format!(
                "(stream interrupted: {}; reconnecting after seq {after_seq})",
                reason.message()
            ));
        }
    }

    fn end(&mut self, s: &pb::Session) {
        let status = lower(s.status().as_str_name(), "SESSION_STATUS_");
        if self.json {
            println!(
                "{}",
                json!({"type": "end", "status": status, "exit_reason": s.exit_reason,
                       "head_seq": s.head_seq, "input_tokens": s.input_tokens,
                       "output_tokens": s.output_tokens})
            );
            return;
        }
        self.running.clear();
        let reason = if s.exit_reason.is_empty() {
            String::new()
        } else {
            format!(", exit reason {}", s.exit_reason)
        };
        self.line(&format!(
            "-- session {status}{reason}; head seq {}; tokens {} in / {} out (this view: {} / {})",
            s.head_seq, s.input_tokens, s.output_tokens, self.tokens.0, self.tokens.1
        ));
    }
}

fn json_event(event: &Event) -> serde_json::Value {
    match event {
        Event::Turn(t) => json!({
            "type": "turn",
            "session_id": t.session_id,
            "seq": t.seq,
            "role": lower(t.role().as_str_name(), "TURN_ROLE_"),
            "content": t.content,
            "tool_calls": t.tool_calls.iter().map(|c| json!({
                "id": c.id, "name": c.name, "arguments_json": c.arguments_json,
            })).collect::<Vec<_>>(),
            "tool_call_id": t.tool_call_id,
            "tool_name": t.tool_name,
            "is_error": t.is_error,
            "input_tokens": t.input_tokens,
            "output_tokens": t.output_tokens,
            "created_at": rfc3339(&t.created_at),
            // A recovery notice's plan (the human text is `content`).
            "recovery_plan": t.recovery_plan.as_ref().map(|p| json!({
                "kind": p.kind,
                "repaired_call_ids": p.repaired_call_ids,
                "interrupted_calls": p.interrupted_calls.iter().map(|c| json!({
                    "call_id": c.call_id, "name": c.name,
                    "assistant_seq": c.assistant_seq, "side_effect": c.side_effect,
                })).collect::<Vec<_>>(),
                "repairs": p.repairs.iter().map(|r| &r.description).collect::<Vec<_>>(),
                "can_continue": p.can_continue,
                "can_auto_continue": p.can_auto_continue,
                "requires_confirmation": p.requires_confirmation,
            })),
        }),
        Event::ToolCallStart(s) => json!({
            "type": "tool_call_start",
            "session_id": s.session_id,
            "assistant_seq": s.assistant_seq,
            "call_id": s.call_id,
            "tool_name": s.tool_name,
            "started_at": rfc3339(&s.started_at),
        }),
        Event::Lagged(l) => json!({
            "type": "lagged",
            "last_delivered_seq": l.last_delivered_seq,
            "head_seq": l.head_seq,
        }),
        Event::Heartbeat(h) => json!({"type": "heartbeat", "head_seq": h.head_seq}),
        Event::TextDelta(d) => json!({
            "type": "text_delta",
            "session_id": d.session_id,
            "turn_seq": d.turn_seq,
            "offset": d.offset,
            "text": d.text,
            "attempt": d.attempt,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(plan: Option<pb::RecoveryPlan>) -> Event {
        Event::Turn(pb::SessionTurn {
            seq: 4,
            role: pb::TurnRole::Notice.into(),
            content: "Recovery: interrupted_turn.".into(),
            recovery_plan: plan,
            ..pb::SessionTurn::default()
        })
    }

    #[test]
    fn a_recovery_notice_settles_the_calls_its_plan_repaired() {
        let mut view = View::new(true);
        for id in ["c1", "c2"] {
            view.running.push((id.into(), "restart_service".into()));
        }
        view.event(&notice(None));
        assert_eq!(
            view.running.len(),
            2,
            "a notice without a plan settles nothing"
        );
        let plan = pb::RecoveryPlan {
            kind: "interrupted_turn".into(),
            repaired_call_ids: vec!["c1".into()],
            ..pb::RecoveryPlan::default()
        };
        view.event(&notice(Some(plan)));
        assert_eq!(
            view.running,
            [("c2".to_owned(), "restart_service".to_owned())]
        );
    }

    #[test]
    fn a_streamed_turn_is_finished_not_printed_again() {
        let turn = pb::SessionTurn {
            seq: 7,
            role: pb::TurnRole::Assistant.into(),
            content: "The pool is exhausted.".into(),
            tool_calls: vec![pb::ToolCall {
                id: "c1".into(),
                name: "read_log".into(),
                arguments_json: "{}".into(),
            }],
            ..pb::SessionTurn::default()
        };
        let rendered = crate::client::render_turn(&turn);
        assert_eq!(
            rest_after_stream(&turn, &rendered, "The pool is exhausted."),
            Some("\n      -> read_log({}) [c1]")
        );
        assert!(
            rendered.starts_with(&assistant_head(7, "")),
            "the streamed head is the committed line's"
        );
        assert_eq!(rest_after_stream(&turn, &rendered, "The pool is"), None);
    }

    #[test]
    fn json_shows_the_typed_plan_beside_the_text() {
        let plan = pb::RecoveryPlan {
            kind: "interrupted_turn".into(),
            repaired_call_ids: vec!["c1".into()],
            requires_confirmation: true,
            ..pb::RecoveryPlan::default()
        };
        let v = json_event(&notice(Some(plan)));
        assert_eq!(v["content"], "Recovery: interrupted_turn.");
        assert_eq!(v["recovery_plan"]["repaired_call_ids"], json!(["c1"]));
        assert_eq!(v["recovery_plan"]["requires_confirmation"], true);
        assert!(json_event(&notice(None))["recovery_plan"].is_null());
    }
}
