//! How `watch`, `send` and `investigate` show a session live: committed
//! turns one line each, and what is going on between them (a tool running,
//! the model thinking or writing the report, an outage being ridden out)
//! as one spinner line on a terminal, or as a single line now and then
//! when the output is a pipe or a file (never escape codes there). JSON
//! output is one object per event.

use std::{
    io::{IsTerminal, Write},
    time::{Duration, Instant},
};

use inquest_proto::v1::{self as pb, watch_event::Event};
use serde_json::json;

use crate::client::Failure;

const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// Quiet this long, a piped view says once what it waits for.
const QUIET_NOTICE_AFTER: Duration = Duration::from_secs(5);
/// How often a piped view says that an outage goes on.
const OUTAGE_PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// What the session is doing between committed turns, as far as the view
/// can tell.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Activity {
    /// Not watching a burst (before, between or after bursts).
    Idle,
    /// A burst is on and the model has the turn; `report`: its last answer
    /// called no tool, so the report is being written.
    Model { since: Instant, report: bool },
}

/// Renders events as text (with a spinner on a terminal) or JSON lines.
pub struct View {
    json: bool,
    tty: bool,
    /// Tool calls started and not yet answered: (call id, tool name).
    pub(crate) running: Vec<(String, String)>,
    frame: usize,
    /// Whether the last thing printed is a spinner line to overwrite.
    spinner_shown: bool,
    /// The assistant text being printed as it streams (terminal only).
    streamed: Option<Streamed>,
    activity: Activity,
    /// Since when the stream has been down, while it is.
    outage: Option<Instant>,
    /// When a piped view last said the outage goes on.
    outage_said: Option<Instant>,
    /// Whether a piped view said what this quiet stretch waits for.
    quiet_said: bool,
}

/// Streamed (not stored) assistant text open on the terminal.
struct Streamed {
    seq: i64,
    attempt: u32,
    /// Everything printed for it, head included.
    printed: String,
}

/// The head of a streamed answer: no seq (it has none until it is
/// stored; the stored turn replaces this line).
const STREAM_HEAD: &str = "…     assistant ";

impl View {
    pub fn new(json: bool) -> Self {
        Self::with_terminal(json, std::io::stdout().is_terminal())
    }

    fn with_terminal(json: bool, tty: bool) -> Self {
        Self {
            json,
            tty,
            running: Vec::new(),
            frame: 0,
            spinner_shown: false,
            streamed: None,
            activity: Activity::Idle,
            outage: None,
            outage_said: None,
            quiet_said: false,
        }
    }

    /// Whether [`View::tick`] has anything to do.
    pub fn ticking(&self) -> bool {
        !self.json && (self.activity != Activity::Idle || self.outage.is_some()) || self.spinning()
    }

    fn spinning(&self) -> bool {
        // Never over a streamed line: the spinner would erase it.
        !self.json
            && self.tty
            && self.streamed.is_none()
            && (!self.running.is_empty()
                || self.outage.is_some()
                || self.activity != Activity::Idle)
    }

    /// Redraws the spinner (terminal) or says what a long quiet waits for
    /// (pipe); returns after a short sleep, for a `select!` beside the
    /// stream.
    pub async fn tick(&mut self) {
        let period = if self.tty { 100 } else { 1000 };
        tokio::time::sleep(Duration::from_millis(period)).await;
        self.frame = self.frame.wrapping_add(1);
        if self.tty {
            self.draw_spinner();
            return;
        }
        if self.json {
            return;
        }
        if let Some(since) = self.outage {
            let last = self.outage_said.unwrap_or(since);
            if last.elapsed() >= OUTAGE_PROGRESS_EVERY {
                self.outage_said = Some(Instant::now());
                let text = format!("(still reconnecting: {} s)", since.elapsed().as_secs());
                self.line(&text);
            }
            return;
        }
        if let Activity::Model { since, report } = self.activity
            && !self.quiet_said
            && self.running.is_empty()
            && since.elapsed() >= QUIET_NOTICE_AFTER
        {
            self.quiet_said = true;
            self.line(if report {
                "(the model is writing the report…)"
            } else {
                "(waiting for the model…)"
            });
        }
    }

    /// The spinner line's text, if one is shown now.
    fn spinner_text(&self) -> Option<String> {
        let secs = |since: Instant| since.elapsed().as_secs();
        if let Some(since) = self.outage {
            return Some(format!("reconnecting… {} s", secs(since)));
        }
        if !self.running.is_empty() {
            let names: Vec<&str> = self.running.iter().map(|(_, n)| n.as_str()).collect();
            return Some(format!("running {}", names.join(", ")));
        }
        match self.activity {
            Activity::Idle => None,
            Activity::Model { since, report } => Some(format!(
                "{}… {} s",
                if report {
                    "writing the report"
                } else {
                    "waiting for the model"
                },
                secs(since)
            )),
        }
    }

    fn draw_spinner(&mut self) {
        if !self.spinning() {
            return;
        }
        let Some(text) = self.spinner_text() else {
            return;
        };
        print!("\r\x1b[2K{} {text}", SPINNER[self.frame % SPINNER.len()]);
        let _ = std::io::stdout().flush();
        self.spinner_shown = true;
    }

    /// Clears the terminal's current line (what a spinner left there),
    /// for a view that did not draw it (Ctrl-C).
    pub fn clear_line(&mut self) {
        if self.tty && !self.json {
            print!("\r\x1b[2K");
            let _ = std::io::stdout().flush();
        }
    }

    pub fn clear_spinner(&mut self) {
        if self.spinner_shown {
            print!("\r\x1b[2K");
            let _ = std::io::stdout().flush();
            self.spinner_shown = false;
        }
    }

    /// A burst is being watched: the model has the turn until an event
    /// says otherwise.
    pub fn burst_started(&mut self) {
        self.activity = Activity::Model {
            since: Instant::now(),
            report: false,
        };
        self.quiet_said = false;
    }

    /// Between bursts of `watch --follow` (text only: JSON readers see the
    /// next burst's turns after the `end` object).
    pub fn waiting(&mut self) {
        self.activity = Activity::Idle;
        if !self.json {
            self.line("(waiting for the next burst; Ctrl-C to stop)");
        }
    }

    /// Prints a line, clearing the spinner first and redrawing it after.
    pub fn line(&mut self, text: &str) {
        self.erase_streamed();
        self.clear_spinner();
        println!("{text}");
        self.draw_spinner();
    }

    pub fn event(&mut self, event: &Event) {
        self.note(event);
        if self.json {
            println!("{}", json_event(event));
            return;
        }
        match event {
            Event::Turn(t) => {
                self.erase_streamed();
                let rendered = crate::client::render_turn(t);
                self.line(&rendered);
            }
            // A terminal shows running tools on the spinner line; a pipe
            // or a log gets the result turn, not a progress line.
            Event::ToolCallStart(_) => self.draw_spinner(),
            Event::Lagged(l) => {
                let text = format!(
                    "(fell behind at seq {} of {}; catching up)",
                    l.last_delivered_seq, l.head_seq
                );
                self.line(&text);
            }
            Event::Heartbeat(_) => {}
            Event::TextDelta(d) => self.text_delta(d),
            Event::ApprovalRequested(a) => {
                self.erase_streamed();
                let text = approval_text(a);
                self.line(&text);
            }
            Event::MessageQueued(q) => {
                self.erase_streamed();
                let text = format!("(queued #{}: {})", q.position, q.text);
                self.line(&text);
            }
        }
    }

    /// The session waits for a human to decide its held calls: how to.
    pub fn held(&mut self, s: &pb::Session) {
        let pending: Vec<&str> = s
            .approvals
            .iter()
            .filter(|a| a.state() == pb::ApprovalState::Pending)
            .map(|a| a.call_id.as_str())
            .collect();
        if self.json {
            println!(
                "{}",
                json!({"type": "awaiting_approval", "session_id": s.id, "pending": pending})
            );
            return;
        }
        self.erase_streamed();
        self.line(&format!(
            "-- waiting for approval of {} call(s); approve: inquest approve {id} {calls}  \
             deny: inquest deny {id} {calls} --comment '…'",
            pending.len(),
            id = s.id,
            calls = pending.join(" "),
        ));
    }

    /// What an event says about the session's activity.
    fn note(&mut self, event: &Event) {
        let now = Instant::now();
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
        match event {
            Event::Turn(t) if self.activity != Activity::Idle => {
                let answered = t.role() == pb::TurnRole::Assistant && t.tool_calls.is_empty();
                self.activity = Activity::Model {
                    since: now,
                    report: answered,
                };
                self.quiet_said = false;
            }
            Event::TextDelta(_) | Event::ToolCallStart(_) if self.activity != Activity::Idle => {
                self.activity = Activity::Model {
                    since: now,
                    report: false,
                };
                self.quiet_said = false;
            }
            _ => {}
        }
    }

    /// Erases streamed text still on the terminal: it was never stored,
    /// and the stored turn (or nothing, after a cancel or a recovery)
    /// replaces it.
    fn erase_streamed(&mut self) {
        let Some(open) = self.streamed.take() else {
            return;
        };
        let rows = rows_of(&open.printed, terminal_columns());
        print!("\r\x1b[2K");
        for _ in 1..rows {
            print!("\x1b[1A\x1b[2K");
        }
        let _ = std::io::stdout().flush();
    }

    /// Prints streamed text on a terminal under a head with no seq; the
    /// next pieces continue it. Elsewhere (a pipe, a log) only committed
    /// turns are printed, once each.
    fn text_delta(&mut self, d: &pb::TextDelta) {
        if !self.tty {
            return;
        }
        let offset = usize::try_from(d.offset).unwrap_or(usize::MAX);
        if let Some(open) = &mut self.streamed
            && open.seq == d.turn_seq
            && open.attempt == d.attempt
        {
            // A gap (a delta this stream missed) prints nothing more: the
            // stored turn will be printed whole.
            let shown = open.printed.len() - STREAM_HEAD.len();
            if offset == shown {
                print!("{}", d.text);
                open.printed.push_str(&d.text);
                let _ = std::io::stdout().flush();
            }
            return;
        }
        // Another turn or a restarted answer replaces what was shown.
        self.erase_streamed();
        if offset != 0 {
            return;
        }
        self.clear_spinner();
        let printed = format!("{STREAM_HEAD}{}", d.text);
        print!("{printed}");
        let _ = std::io::stdout().flush();
        self.streamed = Some(Streamed {
            seq: d.turn_seq,
            attempt: d.attempt,
            printed,
        });
    }

    /// The stream broke (`reason`); it will be reopened after `after_seq`.
    /// Said once per outage; the spinner (terminal) or a line every
    /// [`OUTAGE_PROGRESS_EVERY`] (pipe) shows that it goes on.
    pub fn interrupted(&mut self, after_seq: i64, reason: &tonic::Status) {
        // Calls still running will be announced again after the reconnect.
        self.running.clear();
        self.erase_streamed();
        if self.outage.is_some() {
            return;
        }
        self.outage = Some(Instant::now());
        self.outage_said = None;
        if self.json {
            println!(
                "{}",
                json!({"type": "reconnect", "after_seq": after_seq,
                       "code": format!("{:?}", reason.code()), "message": reason.message()})
            );
        } else {
            let text = format!(
                "(stream interrupted: {}; reconnecting after seq {after_seq})",
                Failure(reason)
            );
            self.line(&text);
        }
    }

    /// Something arrived again after [`View::interrupted`]: says so, once.
    pub fn reconnected(&mut self) {
        let Some(since) = self.outage.take() else {
            return;
        };
        let secs = since.elapsed().as_secs_f64();
        if self.json {
            println!("{}", json!({"type": "reconnected", "after_s": secs}));
        } else {
            self.line(&format!("(reconnected after {secs:.1} s)"));
        }
    }

    /// The burst settled; `s` is the session as stored now.
    pub fn end(&mut self, s: &pb::Session) {
        self.activity = Activity::Idle;
        self.running.clear();
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
        self.erase_streamed();
        let reason = if s.exit_reason.is_empty() {
            String::new()
        } else {
            format!(", exit reason {}", s.exit_reason)
        };
        self.line(&format!(
            "-- session {status}{reason}; head seq {}; {}",
            s.head_seq,
            crate::client::session_tokens_text(s)
        ));
    }
}

/// The terminal's width in columns (80 when it cannot be read).
fn terminal_columns() -> usize {
    #[repr(C)]
    struct WinSize {
        rows: u16,
        cols: u16,
        x_pixels: u16,
        y_pixels: u16,
    }
    unsafe extern "C" {
        fn ioctl(fd: i32, request: u64, ...) -> i32;
    }
    const TIOCGWINSZ: u64 = 0x5413;
    let mut size = WinSize {
        rows: 0,
        cols: 0,
        x_pixels: 0,
        y_pixels: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `struct winsize` (four u16s, the
    // layout above) into the pointer given, and nothing else.
    let ok = unsafe { ioctl(1, TIOCGWINSZ, &mut size as *mut WinSize) } == 0;
    if ok && size.cols > 0 {
        usize::from(size.cols)
    } else {
        80
    }
}

/// The terminal rows `text` takes at `columns` wide (wrapped lines count
/// for each row they fill).
fn rows_of(text: &str, columns: usize) -> usize {
    let columns = columns.max(1);
    text.split('\n')
        .map(|line| line.chars().count().div_ceil(columns).max(1))
        .sum()
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

/// One held call: what it would do and why it waits.
pub fn approval_text(a: &pb::Approval) -> String {
    let server = if a.server.is_empty() { "?" } else { &a.server };
    let state = lower(a.state().as_str_name(), "APPROVAL_STATE_");
    let decided = if a.decided_by.is_empty() {
        String::new()
    } else if a.comment.is_empty() {
        format!(" by {}", a.decided_by)
    } else {
        format!(" by {}: {}", a.decided_by, a.comment)
    };
    format!(
        "[approval {state}{decided}] call {} {}.{} {} ({}; {}; expires {})",
        a.call_id,
        server,
        a.tool,
        a.arguments_json,
        a.side_effect,
        a.rule,
        rfc3339(&a.expires_at),
    )
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
        Event::ApprovalRequested(a) => json!({
            "type": "approval_requested",
            "call_id": a.call_id,
            "assistant_seq": a.assistant_seq,
            "tool": a.tool,
            "server": a.server,
            "arguments_json": a.arguments_json,
            "side_effect": a.side_effect,
            "rule": a.rule,
            "expires_at": rfc3339(&a.expires_at),
        }),
        Event::MessageQueued(q) => json!({
            "type": "message_queued",
            "session_id": q.session_id,
            "text": q.text,
            "position": q.position,
        }),
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
    fn streamed_text_has_no_seq_and_its_rows_are_counted_for_erasing() {
        assert!(!STREAM_HEAD.contains('#'));
        assert_eq!(rows_of("", 80), 1);
        assert_eq!(rows_of(&"x".repeat(80), 80), 1);
        assert_eq!(rows_of(&"x".repeat(81), 80), 2);
        assert_eq!(rows_of("a\nb\n", 80), 3);
    }

    #[test]
    fn the_view_knows_when_the_model_writes_the_report() {
        let mut view = View::with_terminal(false, false);
        assert!(!view.ticking(), "nothing to show before a burst");
        view.burst_started();
        assert!(view.ticking());
        view.note(&Event::Turn(pb::SessionTurn {
            seq: 2,
            role: pb::TurnRole::Assistant.into(),
            content: "The pool is exhausted.".into(),
            ..pb::SessionTurn::default()
        }));
        assert!(matches!(
            view.activity,
            Activity::Model { report: true, .. }
        ));
        view.end(&pb::Session::default());
        assert_eq!(view.activity, Activity::Idle);
    }

    #[test]
    fn an_outage_is_announced_once_and_its_end_said() {
        let mut view = View::with_terminal(true, false);
        let down = tonic::Status::unavailable("connection refused");
        view.interrupted(3, &down);
        let since = view.outage;
        assert!(since.is_some());
        view.interrupted(3, &down);
        assert_eq!(view.outage, since, "one outage, however many attempts");
        view.reconnected();
        assert!(view.outage.is_none());
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
