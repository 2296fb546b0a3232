//! The machine-readable reason of every non-OK status Inquest sends: part
//! of the wire contract, so it lives beside the generated types and a
//! client reads it without linking any server code.
//!
//! Each refusal carries a `google.rpc.ErrorInfo` detail (domain
//! [`ERROR_DOMAIN`], reason [`Reason::as_str`], metadata keyed by the
//! constants in [`key`]), so clients branch on the reason and read cursors
//! and limits from the metadata instead of parsing the message. The
//! proto's service comment lists the reasons. [`ErrorReason::of`] reads
//! one back (the CLI and the tests use it); the server builds them.

use std::collections::HashMap;

use tonic::Status;
use tonic_types::StatusExt;

/// `google.rpc.ErrorInfo` domain of Inquest's own reasons.
pub const ERROR_DOMAIN: &str = "inquest.v1";

/// ErrorInfo metadata keys.
pub mod key {
    /// The request field that is wrong (`session_id`, `message`, ...).
    pub const FIELD: &str = "field";
    /// The config key of the limit reached (`limits.max_watch_streams`).
    pub const LIMIT: &str = "limit";
    /// The value of that limit.
    pub const VALUE: &str = "value";
    /// The session's newest seq.
    pub const HEAD_SEQ: &str = "head_seq";
    /// The cursor to reconnect a watch with (every turn up to it was sent).
    pub const AFTER_SEQ: &str = "after_seq";
    /// The session's status when it refused the call.
    pub const STATUS: &str = "status";
    pub const SESSION_ID: &str = "session_id";
    pub const INCIDENT_ID: &str = "incident_id";
    /// A tool call's id (`ToolCall.id`).
    pub const CALL_ID: &str = "call_id";
}

macro_rules! reasons {
    ($($(#[$doc:meta])* $name:ident => $text:literal,)*) => {
        /// Why a call failed; one code each, except `LIMIT_EXCEEDED`
        /// (RESOURCE_EXHAUSTED for caps worth retrying, INVALID_ARGUMENT
        /// for a request over a size limit).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Reason {
            $($(#[$doc])* $name,)*
        }

        impl Reason {
            /// Every reason, for the docs test and the uniqueness check.
            pub const ALL: &'static [Reason] = &[$(Reason::$name,)*];

            /// The ErrorInfo `reason` string.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$name => $text,)*
                }
            }
        }
    };
}

reasons! {
    /// INVALID_ARGUMENT: an id is missing or not a UUID (`field`).
    InvalidId => "INVALID_ID",
    /// INVALID_ARGUMENT: a text field is empty or holds NUL (`field`).
    InvalidInput => "INVALID_INPUT",
    /// INVALID_ARGUMENT: a negative `after_seq`.
    InvalidCursor => "INVALID_CURSOR",
    /// INVALID_ARGUMENT: a page token this server did not issue.
    InvalidPageToken => "INVALID_PAGE_TOKEN",
    /// INVALID_ARGUMENT: the request does not decode as this API's message.
    MalformedRequest => "MALFORMED_REQUEST",
    /// RESOURCE_EXHAUSTED (a cap; retry after RetryInfo) or
    /// INVALID_ARGUMENT (a field or request over a size limit): `limit`,
    /// `value`, and `field` for a field.
    LimitExceeded => "LIMIT_EXCEEDED",
    /// NOT_FOUND: `session_id`.
    SessionNotFound => "SESSION_NOT_FOUND",
    /// NOT_FOUND: `incident_id`.
    IncidentNotFound => "INCIDENT_NOT_FOUND",
    /// NOT_FOUND: the session has no report (of that burst): `session_id`.
    ReportNotFound => "REPORT_NOT_FOUND",
    /// FAILED_PRECONDITION: a burst is pending or running (`status`).
    SessionRunning => "SESSION_RUNNING",
    /// FAILED_PRECONDITION: held for confirmation of its recovery plan;
    /// ContinueSession or CancelSession.
    AwaitingConfirmation => "AWAITING_CONFIRMATION",
    /// FAILED_PRECONDITION: tool calls wait for a human's approval;
    /// DecideToolCalls, SendMessage or CancelSession (`status`).
    AwaitingApproval => "AWAITING_APPROVAL",
    /// FAILED_PRECONDITION: DecideToolCalls named a call that is not
    /// pending approval in this session (`call_id`, `status`).
    ApprovalNotPending => "APPROVAL_NOT_PENDING",
    /// FAILED_PRECONDITION: the session is cancelled (final) and takes no
    /// more messages (`status`).
    SessionCancelled => "SESSION_CANCELLED",
    /// FAILED_PRECONDITION: CancelSession of a completed or failed
    /// session, whose outcome stays (`status`).
    NotCancellable => "NOT_CANCELLABLE",
    /// FAILED_PRECONDITION: StartSession, SendMessage or ContinueSession
    /// on a server with no model provider (`[[providers]]`): the burst
    /// would never run. Nothing is written.
    NoModelProvider => "NO_MODEL_PROVIDER",
    /// FAILED_PRECONDITION: ContinueSession of a session not awaiting
    /// confirmation (`status`), or whose plan needs none.
    NothingToConfirm => "NOTHING_TO_CONFIRM",
    /// FAILED_PRECONDITION: ContinueSession of a history that cannot be
    /// resumed.
    HistoryNotResumable => "HISTORY_NOT_RESUMABLE",
    /// FAILED_PRECONDITION: the session changed concurrently (confirmed or
    /// cancelled by another call): `status`.
    SessionStateChanged => "SESSION_STATE_CHANGED",
    /// OUT_OF_RANGE: the watch cursor is beyond the head: `head_seq`,
    /// `after_seq` (the cursor sent); or a fork's `at_seq` is: `head_seq`
    /// only.
    CursorBeyondHead => "CURSOR_BEYOND_HEAD",
    /// ABORTED: the watcher fell behind the live stream; reconnect with
    /// `after_seq` (`head_seq` too).
    WatcherLagged => "WATCHER_LAGGED",
    /// ABORTED: another replica took the session over.
    LeaseLost => "LEASE_LOST",
    /// DATA_LOSS: turns this watcher received were lost in a database
    /// failover (an asynchronous standby promoted without them); their
    /// seqs now hold tombstones. Reconnect with `after_seq` to read them.
    TurnsLost => "TURNS_LOST",
    /// UNAVAILABLE: this server is shutting down; a watch carries
    /// `after_seq` to reconnect (to another replica) with.
    ShuttingDown => "SHUTTING_DOWN",
    /// UNAVAILABLE: the database did not answer; retry (a watch carries
    /// `after_seq`).
    StoreUnavailable => "STORE_UNAVAILABLE",
    /// DEADLINE_EXCEEDED: a write did not answer in time and may have
    /// committed; retry with the same idempotency key.
    WriteOutcomeUnknown => "WRITE_OUTCOME_UNKNOWN",
    /// ALREADY_EXISTS: the idempotency key was used for another request.
    IdempotencyKeyReused => "IDEMPOTENCY_KEY_REUSED",
    /// UNAUTHENTICATED: no `authorization: Bearer …`, or a token that is
    /// malformed, unknown, expired, revoked or badly signed.
    Unauthenticated => "UNAUTHENTICATED",
    /// PERMISSION_DENIED: a valid token whose role may not call this
    /// method: `role` (the token's), `required`.
    PermissionDenied => "PERMISSION_DENIED",
    /// PERMISSION_DENIED: a loopback server without authentication answers
    /// only to loopback names and `[http] allowed_hosts`.
    HostNotAllowed => "HOST_NOT_ALLOWED",
    /// RESOURCE_EXHAUSTED: the tenant has `[tenants] max_running_bursts`
    /// bursts pending or running (`limit`, `value`); nothing written.
    TenantBurstLimit => "TENANT_BURST_LIMIT",
    /// RESOURCE_EXHAUSTED: the tenant spent its `[tenants]
    /// daily_token_budget` for today, UTC (`limit`, `value`, `spent`);
    /// nothing written.
    TokenBudgetExhausted => "TOKEN_BUDGET_EXHAUSTED",
    /// NOT_FOUND: an API token id this tenant has no token of (`token_id`).
    TokenNotFound => "TOKEN_NOT_FOUND",
    /// NOT_FOUND: a webhook id this tenant has no webhook of
    /// (`webhook_id`), or RedeliverEvent of an event it has not
    /// (`event_id`).
    WebhookNotFound => "WEBHOOK_NOT_FOUND",
    /// NOT_FOUND from the health service: a service name it does not know.
    UnknownService => "UNKNOWN_SERVICE",
    /// INTERNAL: a fault of the server (logged there, never described).
    Internal => "INTERNAL",
}

impl Reason {
    /// The reason a string names, if any.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|r| r.as_str() == text)
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The reason and metadata a status carries, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorReason {
    pub reason: Reason,
    pub metadata: HashMap<String, String>,
}

impl ErrorReason {
    /// The Inquest ErrorInfo of `status`; `None` when it has none (a
    /// transport error, another domain, a reason this build does not know).
    pub fn of(status: &Status) -> Option<Self> {
        let info = status.get_details_error_info()?;
        if info.domain != ERROR_DOMAIN {
            return None;
        }
        Some(Self {
            reason: Reason::parse(&info.reason)?,
            metadata: info.metadata,
        })
    }

    /// A metadata value parsed as a number.
    pub fn number(&self, key: &str) -> Option<i64> {
        self.metadata.get(key)?.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_unique_and_screaming_snake() {
        let mut seen = std::collections::HashSet::new();
        for r in Reason::ALL {
            let s = r.as_str();
            assert!(seen.insert(s), "{s} is spelled twice");
            assert!(
                !s.is_empty()
                    && !s.starts_with('_')
                    && !s.ends_with('_')
                    && !s.contains("__")
                    && s.chars().all(|c| c.is_ascii_uppercase() || c == '_'),
                "{s} is not SCREAMING_SNAKE"
            );
            assert_eq!(Reason::parse(s), Some(*r));
        }
        assert_eq!(Reason::parse("NO_SUCH_REASON"), None);
    }
}

#[cfg(test)]
mod proto_docs {
    use super::Reason;

    /// The proto's service comment is the contract clients read: every
    /// reason is listed there.
    #[test]
    fn the_proto_documents_every_reason() {
        let proto = include_str!("../../../proto/inquest/v1/investigations.proto");
        for r in Reason::ALL {
            assert!(
                proto.contains(&format!("//   {} ", r.as_str())),
                "{r} is not in the proto's error table"
            );
        }
        assert!(proto.contains(super::ERROR_DOMAIN));
    }
}
