//! What replicas tell each other through PostgreSQL `NOTIFY`.
//!
//! Every committed turn, every status change and every tool-call start is
//! announced on one channel, [`CHANNEL`]. Turns and status changes are
//! announced by the very statement that writes them, so the notification
//! is delivered exactly when (and only if) the write commits, and in
//! commit order. A turn too large for a notification (PostgreSQL caps a
//! payload at 8000 bytes) is announced by seq only; the receiver fetches
//! it. Each payload names its origin replica, which skips its own (it
//! published them locally already).
//!
//! The payload is compact JSON, versioned by `"v"`:
//!
//! | `k` | fields |
//! |---|---|
//! | `turn` | `s` session, `q` seq, `turn` (absent when too large): `r` role, `c` content, `tc` tool calls, `ci` call id, `tn` tool name, `e` is_error, `it`/`ot` tokens, `at` created at, `x` escaped (absent: false), `rp` a recovery notice's plan (absent or null: none) |
//! | `status` | `s` session, `st` the new status |
//! | `tool_call_start` | `s` session, `a` assistant seq, `id` call id, `n` tool name, `at` started at |
//! | `queued` | `s` session, `qi` the `queued_messages` row, `p` its queue position, `t` its text (absent when too large: fetch it by `qi`) |
//! | `interrupt` | `s` session, `e` the lease epoch of the burst an interrupting message stops (sent to every replica, watched or not) |
//! | `deleted` | `s` session: erased (sent to every replica; its watchers end NOT_FOUND, its burst stops) |
//!
//! A turn's text travels as it is stored: when `x` is true, `c`, `ci`, `tn`
//! and every string and key in `tc` and `rp` are in the encoding of [`crate::text`]
//! (the row held U+0000) and are decoded here. A tool-call start is built
//! in Rust, where JSON's own `\u0000` escape carries a NUL losslessly.

use inquest_core::{Role, Seq, SessionId, SessionStatus, TokenUsage, Turn};
use serde::Deserialize;
use serde_json::Value;
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

use crate::text;

/// The one channel every replica listens on.
pub const CHANNEL: &str = "inquest_events";

/// Payloads at most this long carry the whole turn (PostgreSQL refuses
/// payloads of 8000 bytes or more).
pub const MAX_INLINE_PAYLOAD: i32 = 7900;

/// One decoded notification.
#[derive(Debug, Clone, PartialEq)]
pub enum Notification {
    /// A turn committed. `turn` is `None` when it was too large to inline:
    /// fetch it by `seq`.
    Turn {
        origin: String,
        session: SessionId,
        seq: Seq,
        turn: Option<Turn>,
    },
    /// A session's status changed (committed).
    Status {
        origin: String,
        session: SessionId,
        status: SessionStatus,
    },
    /// A message was queued behind the running burst (committed). `text`
    /// is `None` when it was too large to inline: fetch it by `id` (gone
    /// once the queue drained: its turn is announced then).
    MessageQueued {
        origin: String,
        session: SessionId,
        id: i64,
        position: u32,
        text: Option<String>,
    },
    /// A message sent with `if_running = INTERRUPT` was queued
    /// (committed): the burst of `session` at lease `epoch` stops at its
    /// next safe point, wherever it runs.
    Interrupt {
        origin: String,
        session: SessionId,
        epoch: i64,
    },
    /// A session was erased (committed).
    Deleted { origin: String, session: SessionId },
    /// A tool call is about to run (not persisted).
    ToolCallStart {
        origin: String,
        session: SessionId,
        assistant_seq: Seq,
        call_id: String,
        tool_name: String,
        started_at: OffsetDateTime,
    },
}

impl Notification {
    /// The replica whose write this announces.
    pub fn origin(&self) -> &str {
        match self {
            Notification::Turn { origin, .. }
            | Notification::Status { origin, .. }
            | Notification::MessageQueued { origin, .. }
            | Notification::Interrupt { origin, .. }
            | Notification::Deleted { origin, .. }
            | Notification::ToolCallStart { origin, .. } => origin,
        }
    }

    pub fn session(&self) -> SessionId {
        match self {
            Notification::Turn { session, .. }
            | Notification::Status { session, .. }
            | Notification::MessageQueued { session, .. }
            | Notification::Interrupt { session, .. }
            | Notification::Deleted { session, .. }
            | Notification::ToolCallStart { session, .. } => *session,
        }
    }

    /// Decodes a payload. An error names what was wrong; the payload came
    /// from the database, so it is reported, never trusted.
    pub fn parse(payload: &str) -> Result<Self, String> {
        let raw: Raw = serde_json::from_str(payload).map_err(|e| format!("not JSON: {e}"))?;
        if raw.v != 1 {
            return Err(format!("unknown payload version {}", raw.v));
        }
        let session = SessionId::from_uuid(raw.s);
        let seq = |n: Option<i64>, what: &str| {
            n.and_then(Seq::from_stored)
                .ok_or_else(|| format!("{what} missing or not a seq"))
        };
        match raw.k.as_str() {
            "turn" => {
                let seq = seq(raw.q, "q")?;
                let turn = raw.turn.map(|t| t.into_turn(session, seq)).transpose()?;
                Ok(Notification::Turn {
                    origin: raw.o,
                    session,
                    seq,
                    turn,
                })
            }
            "status" => {
                let text = raw.st.ok_or("st missing")?;
                let status = SessionStatus::parse(&text)
                    .ok_or_else(|| format!("unknown status {text:?}"))?;
                Ok(Notification::Status {
                    origin: raw.o,
                    session,
                    status,
                })
            }
            "tool_call_start" => Ok(Notification::ToolCallStart {
                origin: raw.o,
                session,
                assistant_seq: seq(raw.a, "a")?,
                call_id: raw.id.ok_or("id missing")?,
                tool_name: raw.n.ok_or("n missing")?,
                started_at: parse_time(raw.at.as_deref().ok_or("at missing")?)?,
            }),
            "queued" => Ok(Notification::MessageQueued {
                origin: raw.o,
                session,
                id: raw.qi.ok_or("qi missing")?,
                position: raw
                    .p
                    .and_then(|p| u32::try_from(p).ok())
                    .ok_or("p missing or out of range")?,
                text: raw.t,
            }),
            "interrupt" => Ok(Notification::Interrupt {
                origin: raw.o,
                session,
                epoch: raw.e.ok_or("e missing")?,
            }),
            "deleted" => Ok(Notification::Deleted {
                origin: raw.o,
                session,
            }),
            other => Err(format!("unknown kind {other:?}")),
        }
    }
}

/// The payload announcing a tool call start.
pub(crate) fn tool_call_start_payload(
    origin: &str,
    session: SessionId,
    assistant_seq: Seq,
    call_id: &str,
    tool_name: &str,
    started_at: OffsetDateTime,
) -> String {
    serde_json::json!({
        "v": 1,
        "o": origin,
        "k": "tool_call_start",
        "s": session.as_uuid(),
        "a": assistant_seq.as_i64(),
        "id": call_id,
        "n": tool_name,
        "at": started_at.format(&Rfc3339).unwrap_or_default(),
    })
    .to_string()
}

/// The payload announcing a queued message: with its text when the whole
/// fits in a notification, else without (the receiver fetches it).
pub(crate) fn message_queued_payload(
    origin: &str,
    session: SessionId,
    id: i64,
    position: u32,
    text: &str,
) -> String {
    let mut payload = serde_json::json!({
        "v": 1,
        "o": origin,
        "k": "queued",
        "s": session.as_uuid(),
        "qi": id,
        "p": position,
        "t": text,
    });
    let whole = payload.to_string();
    if whole.len() <= MAX_INLINE_PAYLOAD as usize {
        return whole;
    }
    if let Some(fields) = payload.as_object_mut() {
        fields.remove("t");
    }
    payload.to_string()
}

/// The payload asking the holder of `session`'s burst at lease `epoch` to
/// stop it (an interrupting message was queued).
pub(crate) fn interrupt_payload(origin: &str, session: SessionId, epoch: i64) -> String {
    serde_json::json!({
        "v": 1,
        "o": origin,
        "k": "interrupt",
        "s": session.as_uuid(),
        "e": epoch,
    })
    .to_string()
}

/// SQL for the payload announcing a status change, given the SQL
/// expressions of the origin, the session id and the new status.
pub(crate) fn status_payload_sql(origin: &str, session: &str, status: &str) -> String {
    format!(
        "json_build_object('v', 1, 'o', {origin}, 'k', 'status', 's', {session}, \
         'st', {status})::text"
    )
}

fn parse_time(text: &str) -> Result<OffsetDateTime, String> {
    OffsetDateTime::parse(text, &Rfc3339).map_err(|e| format!("bad time {text:?}: {e}"))
}

#[derive(Deserialize)]
struct Raw {
    v: u32,
    o: String,
    k: String,
    s: uuid::Uuid,
    q: Option<i64>,
    st: Option<String>,
    a: Option<i64>,
    id: Option<String>,
    n: Option<String>,
    at: Option<String>,
    turn: Option<RawTurn>,
    qi: Option<i64>,
    p: Option<i64>,
    t: Option<String>,
    e: Option<i64>,
}

#[derive(Deserialize)]
struct RawTurn {
    r: String,
    c: String,
    tc: Value,
    ci: Option<String>,
    tn: Option<String>,
    e: bool,
    it: i64,
    ot: i64,
    at: String,
    /// The text fields are escaped (`crate::text`); absent in payloads
    /// from before migration V8.
    #[serde(default)]
    x: bool,
    /// A recovery notice's plan (migration V11); absent in payloads from
    /// before it, null for other turns.
    #[serde(default)]
    rp: Option<Value>,
    /// Cache read and write tokens and the cost in nano-dollars (`null` =
    /// unknown); absent in payloads from before migration V13.
    #[serde(default)]
    cr: i64,
    #[serde(default)]
    cw: i64,
    #[serde(default)]
    cu: Option<i64>,
}

impl RawTurn {
    fn into_turn(self, session: SessionId, seq: Seq) -> Result<Turn, String> {
        let x = self.x;
        let read = |text: String, what: &str| text::read(text, x, what).map_err(|e| e.to_string());
        Ok(Turn {
            session_id: session,
            seq,
            role: Role::parse(&self.r).ok_or_else(|| format!("unknown role {:?}", self.r))?,
            content: read(self.c, "c")?,
            tool_calls_raw: text::read_json(self.tc, x, "tc").map_err(|e| e.to_string())?,
            recovery_plan_raw: self
                .rp
                .map(|plan| text::read_json(plan, x, "rp").map_err(|e| e.to_string()))
                .transpose()?,
            tool_call_id: self.ci.map(|id| read(id, "ci")).transpose()?,
            tool_name: self.tn.map(|name| read(name, "tn")).transpose()?,
            is_error: self.e,
            usage: TokenUsage {
                input_tokens: u64::try_from(self.it).unwrap_or(0),
                output_tokens: u64::try_from(self.ot).unwrap_or(0),
                cache_read_input_tokens: u64::try_from(self.cr).unwrap_or(0),
                cache_creation_input_tokens: u64::try_from(self.cw).unwrap_or(0),
                cost: self
                    .cu
                    .map(|n| inquest_core::Cost::from_nanos(u64::try_from(n).unwrap_or(0))),
            },
            created_at: parse_time(&self.at)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queued_message_round_trips_and_a_large_one_travels_without_its_text() {
        let session = SessionId::new();
        let small = message_queued_payload("r1", session, 7, 2, "look at pricing\u{0}");
        assert_eq!(
            Notification::parse(&small).unwrap(),
            Notification::MessageQueued {
                origin: "r1".into(),
                session,
                id: 7,
                position: 2,
                text: Some("look at pricing\u{0}".into()),
            }
        );
        let large = message_queued_payload("r1", session, 8, 3, &"x".repeat(9000));
        assert!(large.len() < 8000);
        assert!(matches!(
            Notification::parse(&large).unwrap(),
            Notification::MessageQueued {
                id: 8,
                position: 3,
                text: None,
                ..
            }
        ));
    }

    #[test]
    fn an_interrupt_round_trips_and_needs_its_epoch() {
        let session = SessionId::new();
        let payload = interrupt_payload("r1", session, 4);
        assert_eq!(
            Notification::parse(&payload).unwrap(),
            Notification::Interrupt {
                origin: "r1".into(),
                session,
                epoch: 4,
            }
        );
        let mut without: Value = serde_json::from_str(&payload).unwrap();
        assert!(without.as_object_mut().unwrap().remove("e").is_some());
        assert!(Notification::parse(&without.to_string()).is_err());
    }

    #[test]
    fn tool_call_start_round_trips() {
        let session = SessionId::new();
        let at = OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap();
        let seq = Seq::from_stored(7).unwrap();
        let payload = tool_call_start_payload("r1", session, seq, "call_1", "read_log", at);
        assert_eq!(
            Notification::parse(&payload).unwrap(),
            Notification::ToolCallStart {
                origin: "r1".into(),
                session,
                assistant_seq: seq,
                call_id: "call_1".into(),
                tool_name: "read_log".into(),
                started_at: at,
            }
        );
    }

    #[test]
    fn a_turn_carries_its_cache_counts_and_cost_and_older_payloads_have_none() {
        let session = SessionId::new();
        let payload = |usage: &str| {
            format!(
                r#"{{"v": 1, "o": "r1", "k": "turn", "s": "{}", "q": 2, "turn": {{
                "r": "assistant", "c": "x", "tc": [], "ci": null, "tn": null, "e": false,
                "it": 100, "ot": 5, "at": "2024-01-01T00:00:00Z", "x": false{usage}}}}}"#,
                session.as_uuid()
            )
        };
        let usage_of = |text: &str| match Notification::parse(text).unwrap() {
            Notification::Turn { turn: Some(t), .. } => t.usage,
            other => panic!("not a whole turn: {other:?}"),
        };
        let priced = usage_of(&payload(r#", "cr": 60, "cw": 30, "cu": 1234"#));
        assert_eq!(
            (
                priced.cache_read_input_tokens,
                priced.cache_creation_input_tokens
            ),
            (60, 30)
        );
        assert_eq!(priced.cost, Some(inquest_core::Cost::from_nanos(1234)));
        // `null` is unknown, and so is a payload from before migration V13.
        assert_eq!(
            usage_of(&payload(r#", "cr": 0, "cw": 0, "cu": null"#)).cost,
            None
        );
        let old = usage_of(&payload(""));
        assert_eq!((old.cache_read_input_tokens, old.cost), (0, None));
    }

    #[test]
    fn an_escaped_turn_is_decoded_and_a_nul_in_a_tool_start_survives() {
        let session = SessionId::new();
        // As APPEND_SQL builds it for a row that held U+0000.
        let payload = serde_json::json!({
            "v": 1, "o": "r1", "k": "turn", "s": session.as_uuid(), "q": 3,
            "turn": {
                "r": "tool", "c": "a\u{E000}0b\u{E000}\u{E000}",
                "tc": [{"k\u{E000}0": "v\u{E000}0"}],
                "ci": "c\u{E000}0", "tn": "t\u{E000}0", "e": false, "it": 0, "ot": 0,
                "at": "2024-01-01T00:00:00Z", "x": true,
                "rp": {"repaired_call_ids": ["c\u{E000}0"]},
            },
        })
        .to_string();
        let Notification::Turn { turn: Some(t), .. } = Notification::parse(&payload).unwrap()
        else {
            panic!("not a whole turn");
        };
        assert_eq!(t.content, "a\0b\u{E000}");
        assert_eq!(t.tool_calls_raw, serde_json::json!([{"k\0": "v\0"}]));
        assert_eq!(t.tool_call_id.as_deref(), Some("c\0"));
        assert_eq!(t.tool_name.as_deref(), Some("t\0"));
        assert_eq!(
            t.recovery_plan_raw,
            Some(serde_json::json!({"repaired_call_ids": ["c\0"]}))
        );
        // Without the flag (older payloads too) nothing is decoded.
        let plain = payload.replace(r#""x":true"#, r#""x":false"#);
        let Notification::Turn { turn: Some(t), .. } = Notification::parse(&plain).unwrap() else {
            panic!("not a whole turn");
        };
        assert_eq!(t.content, "a\u{E000}0b\u{E000}\u{E000}");
        let old = payload.replace(r#","x":true"#, "");
        assert!(Notification::parse(&old).is_ok());
        // Before V11 there was no `rp`; a turn without a plan has null.
        let mut value: Value = serde_json::from_str(&payload).unwrap();
        for rp in [None, Some(Value::Null)] {
            match rp {
                None => value["turn"].as_object_mut().unwrap().remove("rp"),
                Some(null) => value["turn"]
                    .as_object_mut()
                    .unwrap()
                    .insert("rp".into(), null),
            };
            let Notification::Turn { turn: Some(t), .. } =
                Notification::parse(&value.to_string()).unwrap()
            else {
                panic!("not a whole turn");
            };
            assert_eq!(t.recovery_plan_raw, None);
        }

        // A tool-call start carries NUL as JSON's own escape: the payload
        // holds no NUL byte, and decodes to the original.
        let at = OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap();
        let seq = Seq::from_stored(2).unwrap();
        let payload = tool_call_start_payload("r1", session, seq, "id\0", "n\0", at);
        assert!(!payload.contains('\0'));
        let Notification::ToolCallStart {
            call_id, tool_name, ..
        } = Notification::parse(&payload).unwrap()
        else {
            panic!("not a tool start");
        };
        assert_eq!((call_id.as_str(), tool_name.as_str()), ("id\0", "n\0"));
    }

    #[test]
    fn bad_payloads_are_errors_not_panics() {
        for bad in [
            "",
            "{}",
            "[1]",
            r#"{"v":2,"o":"r","k":"turn","s":"00000000-0000-0000-0000-000000000000","q":1}"#,
            r#"{"v":1,"o":"r","k":"turn","s":"00000000-0000-0000-0000-000000000000","q":0}"#,
            r#"{"v":1,"o":"r","k":"status","s":"00000000-0000-0000-0000-000000000000","st":"nope"}"#,
            r#"{"v":1,"o":"r","k":"what","s":"00000000-0000-0000-0000-000000000000"}"#,
        ] {
            assert!(Notification::parse(bad).is_err(), "{bad}");
        }
    }
}
