//! Inquest's pure domain.
//!
//! Everything here is plain data and functions over it: no tokio, no
//! database, no network. The store and the agent meet these types through
//! narrow conversions, so the hard rules (what a valid turn is, how seqs and
//! cursors behave, how a transcript is rebuilt) are tested with plain data.

pub mod auth;
mod backoff;
pub mod call_ids;
pub mod cap;
pub mod compaction;
pub mod cost;
mod error_chain;
pub mod exit;
pub mod idempotency;
pub mod ids;
pub mod input;
pub mod jwt;
pub mod redact;
pub mod resume;
pub mod seq;
pub mod session;
pub mod streamed;
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
    AuditCounters, CallArguments, InterruptedCall, Message, MessageCall, MessageCalls, Rebuilt,
    RecoveryKind, RecoveryPlan, Repair, Restored, ResumeError, ResumeRequest, Tail, active_time,
    is_follow_up, notice_plan, plan_recovery, plan_recovery_rebuilt, plan_resume,
    plan_resume_rebuilt, rebuild_messages, restore,
};
pub use seq::{AfterSeq, CursorError, Seq};
pub use session::{Ending, Event, Refused, SessionStatus};
pub use streamed::StreamedText;
pub use tenant::{InvalidTenant, QuotaExceeded, Tenant, TenantQuota};
pub use tools::{
    SideEffect, ToolCatalog, ToolClassOverrides, ToolClasses, ToolInfo, ToolServers,
    tool_idempotency_key,
};
pub use turn::{
    Carried, CompactionInfo, MAX_TOKENS_PER_CALL, NewTurn, Role, TokenUsage, ToolArguments,
    ToolCall, Turn,
};
