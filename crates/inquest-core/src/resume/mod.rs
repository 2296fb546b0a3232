//! Resuming a session from the store: the pure part.
//!
//! - [`ResumeRequest::validate`]: the checks before anything is touched.
//! - [`restore`]: session-scoped state recomputed from stored turns.
//! - [`rebuild_messages`]: the provider-valid transcript, with repairs.
//! - [`active_time`]: working time summed over bursts.
//! - [`plan_recovery`]: classification, repairs and notice for a session
//!   whose worker died.
//! - [`fork_cut_calls`], [`fork_turns`]: what a fork stores after the
//!   turns it copies, so its history stays provider-valid.
//! - [`plan_resume`]: the plan a resume acts on (follow-up aware), and
//!   [`notice_plan`], the plan as the notice turn recording it carries it;
//!   [`plan_resume_rebuilt`] also hands back the transcript the plan was
//!   computed with, so a resume rebuilds once.
//!
//! Everything takes stored [`crate::Turn`]s in seq order and never panics.

mod active_time;
mod call_index;
mod follow_up;
mod fork;
mod id_hash;
mod message;
mod message_calls;
mod rebuild;
mod recovery;
mod restore;
mod validate;

pub use active_time::active_time;
pub use follow_up::{is_follow_up, notice_plan, plan_resume, plan_resume_rebuilt};
pub use fork::{FORKED_TOOL_RESULT, fork_cut_calls, fork_turns};
pub use message::{
    EMPTY_USER_MESSAGE, INTERRUPTED_TOOL_RESULT, MISSING_OPENING_MESSAGE, Message, Repair,
};
pub use message_calls::{CallArguments, MessageCall, MessageCalls};
pub(crate) use rebuild::decoded_calls;
pub use rebuild::{
    Rebuilt, rebuild_messages, stored_calls, undecodable_turn_text, usable_tool_calls,
};
pub use recovery::{
    InterruptedCall, RecoveryKind, RecoveryPlan, Tail, plan_recovery, plan_recovery_rebuilt,
};
pub use restore::{AuditCounters, Restored, restore};
pub use validate::{ResumeError, ResumeRequest};

#[cfg(test)]
pub(crate) mod testing {
    //! Turn builders for unit tests.
    use time::OffsetDateTime;

    use crate::{Role, Seq, SessionId, TokenUsage, ToolArguments, ToolCall, Turn};

    pub fn session() -> SessionId {
        SessionId::from_uuid(uuid::Uuid::from_u128(0x5e55))
    }

    fn base(seq: u64, role: Role, content: &str) -> Turn {
        Turn {
            session_id: session(),
            seq: Seq::from_stored(i64::try_from(seq).unwrap_or(i64::MAX)).unwrap_or(Seq::FIRST),
            role,
            content: content.to_owned(),
            tool_calls_raw: serde_json::json!([]),
            recovery_plan_raw: None,
            tool_call_id: None,
            tool_name: None,
            is_error: false,
            usage: TokenUsage::default(),
            created_at: OffsetDateTime::UNIX_EPOCH,
        }
    }

    pub fn user(seq: u64, text: &str) -> Turn {
        base(seq, Role::User, text)
    }

    pub fn notice(seq: u64, text: &str) -> Turn {
        base(seq, Role::Notice, text)
    }

    pub fn compaction(seq: u64, summary: &str, first_retained_seq: u64) -> Turn {
        let mut t = base(seq, Role::Compaction, summary);
        t.tool_calls_raw = serde_json::json!({
            "first_retained_seq": first_retained_seq, "tokens_before": 100, "tokens_after": 10});
        t
    }

    pub fn assistant(seq: u64, text: &str, calls: &[(&str, &str)]) -> Turn {
        let mut t = base(seq, Role::Assistant, text);
        let calls: Vec<ToolCall> = calls
            .iter()
            .map(|(id, name)| ToolCall {
                id: (*id).to_owned(),
                name: (*name).to_owned(),
                arguments: ToolArguments::from_model("{}"),
            })
            .collect();
        t.tool_calls_raw = ToolCall::encode_all(&calls);
        t
    }

    pub fn tool(seq: u64, call_id: &str, name: &str, content: &str) -> Turn {
        let mut t = base(seq, Role::Tool, content);
        t.tool_call_id = Some(call_id.to_owned());
        t.tool_name = Some(name.to_owned());
        t
    }

    /// Sets the turn's time to `secs` after the epoch.
    pub fn at(mut t: Turn, secs: i64) -> Turn {
        t.created_at = OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(secs);
        t
    }
}
