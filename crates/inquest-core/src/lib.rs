//! Inquest's pure domain: ids and seqs, turns and validated input, the
//! session state machine ([`session`]: statuses and the events that move
//! them), exit reasons, tools' side-effect classes, cost, caps, the
//! transcript rebuild and the recovery plan ([`resume`]), compaction, and
//! the small pure helpers every crate shares ([`Backoff`], [`error_chain`]).
//!
//! Plain data and functions over it: no tokio, no I/O, no global state, so
//! the hard rules are tested with plain data and property tests. Must not
//! depend on any other Inquest crate. Start reading at [`session`] and
//! [`turn`], then [`resume`].

pub mod approval;
mod backoff;
pub mod call_ids;
pub mod cap;
pub mod compaction;
pub mod cost;
pub mod duration_text;
mod error_chain;
pub mod exit;
pub mod idempotency;
pub mod ids;
pub mod input;
pub mod resume;
pub mod seq;
pub mod session;
pub mod tenant;
pub mod tools;
pub mod turn;

pub use backoff::Backoff;
pub use call_ids::{is_valid_call_id, session_unique_call_ids, used_call_ids};
pub use cost::{Cost, CostTotal, Price, UsageTotals};
pub use error_chain::error_chain;
pub use exit::ExitReason;
pub use idempotency::RequestFingerprint;
pub use ids::{IdError, IncidentId, SessionId};
pub use input::{IdempotencyKey, IncidentText, InputError, Limits, UserMessage};
pub use resume::{
    AuditCounters, CallArguments, FORKED_TOOL_RESULT, InterruptedCall, Message, MessageCall,
    MessageCalls, Rebuilt, RecoveryKind, RecoveryPlan, Repair, Restored, ResumeError,
    ResumeRequest, Tail, active_time, fork_cut_calls, fork_turns, is_follow_up, notice_plan,
    plan_recovery, plan_recovery_rebuilt, plan_resume, plan_resume_rebuilt, rebuild_messages,
    restore,
};
pub use seq::{AfterSeq, CursorError, Seq};
pub use session::{Ending, Event, Refused, SessionStatus};
pub use tenant::{InvalidTenant, QuotaExceeded, Tenant, TenantQuota};
pub use tools::{
    SideEffect, ToolCatalog, ToolClassOverrides, ToolClasses, ToolInfo, ToolServers,
    tool_idempotency_key,
};
pub use turn::{
    Carried, CompactionInfo, LOST_IN_FAILOVER, MAX_TOKENS_PER_CALL, NewTurn, Role, TokenUsage,
    ToolArguments, ToolCall, Turn,
};
