//! The one place where failures become gRPC statuses.
//!
//! Handlers return [`ApiError`]; its exhaustive `From<ApiError> for Status`
//! decides the code and the `google.rpc.ErrorInfo` reason
//! ([`crate::reason`]). Internal causes are logged here, once, with their
//! cause chain, and never sent to clients.

use inquest_core::{CursorError, IdError, InputError, error_chain};
use inquest_store::StoreError;
use tonic::{Code, Status};

pub use crate::reason::ERROR_DOMAIN;
use crate::reason::{self, Metadata, Reason, key};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Id(#[from] IdError),
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Cursor(#[from] CursorError),
    /// A request that is wrong in a way the core types do not name
    /// (reason `INVALID_INPUT`).
    #[error("{0}")]
    InvalidArgument(String),
    /// A page token this server did not issue.
    #[error("page_token is not one this server issued")]
    InvalidPageToken,
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The session's state does not allow the call (running, held,
    /// cancelled, nothing to confirm): `reason` says which, `metadata`
    /// carries the session's status where it matters.
    #[error("{message}")]
    FailedPrecondition {
        reason: Reason,
        message: String,
        metadata: Metadata,
    },
    /// A watch cursor beyond the session's newest turn.
    #[error("after_seq {after} is beyond the session's head seq {head}")]
    OutOfRange { after: u64, head: u64 },
    /// A fork's `at_seq` beyond its source's newest turn.
    #[error("at_seq {at} is beyond the session's head seq {head}")]
    ForkBeyondHead { at: u64, head: u64 },
    /// A cap is reached (`limit` names its config key); retrying after
    /// `retry_after` may succeed.
    #[error("{what} ({limit} = {value}); retry later")]
    ResourceExhausted {
        what: String,
        limit: &'static str,
        value: usize,
        retry_after: std::time::Duration,
    },
}

impl ApiError {
    /// A FAILED_PRECONDITION refusal for `reason`.
    pub fn precondition(reason: Reason, message: impl Into<String>, metadata: Metadata) -> Self {
        Self::FailedPrecondition {
            reason,
            message: message.into(),
            metadata,
        }
    }
}

/// Trailing metadata key with the retry hint in milliseconds, beside the
/// `google.rpc.RetryInfo` detail, for clients that read no details.
pub const RETRY_AFTER_METADATA: &str = "retry-after-ms";

/// Trailing metadata key carrying the head seq on OUT_OF_RANGE.
pub const HEAD_SEQ_METADATA: &str = "inquest-head-seq";

/// The config key a core input limit is set by, if it is one.
fn input_limit(what: &str) -> &'static str {
    match what {
        "message" | "description" => "limits.max_message_bytes",
        "title" => "limits.MAX_TITLE_BYTES (fixed)",
        "idempotency_key" => "limits.MAX_IDEMPOTENCY_KEY_BYTES (fixed)",
        _ => "unknown",
    }
}

fn input_status(e: InputError) -> Status {
    let message = e.to_string();
    match e {
        InputError::TooLong { what, limit, .. } => reason::status(
            Code::InvalidArgument,
            Reason::LimitExceeded,
            message,
            vec![
                (key::FIELD, what.to_owned()),
                (key::LIMIT, input_limit(what).to_owned()),
                (key::VALUE, limit.to_string()),
            ],
        ),
        InputError::Empty { what } | InputError::Nul { what } => reason::status(
            Code::InvalidArgument,
            Reason::InvalidInput,
            message,
            vec![(key::FIELD, what.to_owned())],
        ),
    }
}

impl From<ApiError> for Status {
    fn from(e: ApiError) -> Self {
        match e {
            ApiError::Id(e) => {
                let field = match &e {
                    IdError::Missing { what } | IdError::Malformed { what, .. } => *what,
                };
                reason::status(
                    Code::InvalidArgument,
                    Reason::InvalidId,
                    e.to_string(),
                    vec![(key::FIELD, field.to_owned())],
                )
            }
            ApiError::Input(e) => input_status(e),
            ApiError::Cursor(e) => reason::status(
                Code::InvalidArgument,
                Reason::InvalidCursor,
                e.to_string(),
                vec![(key::FIELD, "after_seq".to_owned())],
            ),
            ApiError::InvalidArgument(message) => reason::status(
                Code::InvalidArgument,
                Reason::InvalidInput,
                message,
                Vec::new(),
            ),
            ApiError::InvalidPageToken => reason::status(
                Code::InvalidArgument,
                Reason::InvalidPageToken,
                e.to_string(),
                vec![(key::FIELD, "page_token".to_owned())],
            ),
            ApiError::Store(e) => store_status(e),
            ApiError::FailedPrecondition {
                reason,
                message,
                metadata,
            } => reason::status(Code::FailedPrecondition, reason, message, metadata),
            ApiError::ResourceExhausted {
                limit,
                value,
                retry_after,
                ..
            } => {
                let message = e.to_string();
                let details = tonic_types::ErrorDetails::with_retry_info(Some(retry_after));
                let mut trailers = tonic::metadata::MetadataMap::new();
                let millis = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
                trailers.insert(
                    RETRY_AFTER_METADATA,
                    tonic::metadata::MetadataValue::from(millis),
                );
                reason::status_with(
                    Code::ResourceExhausted,
                    Reason::LimitExceeded,
                    message,
                    vec![
                        (key::LIMIT, limit.to_owned()),
                        (key::VALUE, value.to_string()),
                    ],
                    details,
                    trailers,
                )
            }
            ApiError::ForkBeyondHead { at, head } => reason::status(
                Code::OutOfRange,
                Reason::CursorBeyondHead,
                format!(
                    "at_seq {at} is beyond the session's head seq {head}; fork with \
                     1 <= at_seq <= {head}"
                ),
                vec![(key::HEAD_SEQ, head.to_string())],
            ),
            ApiError::OutOfRange { after, head } => {
                let mut trailers = tonic::metadata::MetadataMap::new();
                trailers.insert(
                    HEAD_SEQ_METADATA,
                    tonic::metadata::MetadataValue::from(head),
                );
                reason::status_with(
                    Code::OutOfRange,
                    Reason::CursorBeyondHead,
                    format!(
                        "after_seq {after} is beyond the session's head seq {head}; \
                         watch with after_seq <= {head} (a cursor this stream gave you that is \
                         now beyond the head means a database failover lost those turns: read \
                         again from {head})"
                    ),
                    vec![
                        (key::HEAD_SEQ, head.to_string()),
                        (key::AFTER_SEQ, after.to_string()),
                    ],
                    tonic_types::ErrorDetails::new(),
                    trailers,
                )
            }
        }
    }
}

/// The UNAVAILABLE a failed store call answers with; `after_seq` is a
/// watch's cursor to reconnect with.
pub fn store_unavailable(message: impl Into<String>, after_seq: Option<u64>) -> Status {
    reason::status(
        Code::Unavailable,
        Reason::StoreUnavailable,
        message,
        after_seq
            .map(|a| vec![(key::AFTER_SEQ, a.to_string())])
            .unwrap_or_default(),
    )
}

fn store_status(e: StoreError) -> Status {
    match e {
        StoreError::NotFound { what, ref id } => {
            let (reason, key) = match what {
                "incident" => (Reason::IncidentNotFound, key::INCIDENT_ID),
                "session" => (Reason::SessionNotFound, key::SESSION_ID),
                _ => (Reason::ReportNotFound, key::SESSION_ID),
            };
            let id = id.clone();
            reason::status(Code::NotFound, reason, e.to_string(), vec![(key, id)])
        }
        // Another replica took the session over; the caller's view is stale.
        StoreError::LeaseLost { ref session, .. } => {
            let session = session.clone();
            reason::status(
                Code::Aborted,
                Reason::LeaseLost,
                e.to_string(),
                vec![(key::SESSION_ID, session)],
            )
        }
        // Only a burst's own writes carry a known head; no API call does.
        StoreError::HeadBehind {
            ref session, head, ..
        } => {
            let session = session.clone();
            reason::status(
                Code::DataLoss,
                Reason::TurnsLost,
                e.to_string(),
                vec![
                    (key::SESSION_ID, session),
                    (key::HEAD_SEQ, head.to_string()),
                ],
            )
        }
        // The key is the client's: it reused one for another request.
        StoreError::IdempotencyConflict { key } => reason::status(
            Code::AlreadyExists,
            Reason::IdempotencyKeyReused,
            format!(
                "idempotency key {key:?} was used for a different request; use a new key for a \
                 new request"
            ),
            Vec::new(),
        ),
        // The tenant's own limits: retrying later may succeed (a burst
        // ends, the day turns), so RESOURCE_EXHAUSTED with RetryInfo.
        StoreError::QuotaExceeded(q) => {
            let (reason, metadata, retry) = match q {
                inquest_core::QuotaExceeded::RunningBursts { limit } => (
                    Reason::TenantBurstLimit,
                    vec![
                        (key::LIMIT, "tenants.max_running_bursts".to_owned()),
                        (key::VALUE, limit.to_string()),
                    ],
                    std::time::Duration::from_secs(5),
                ),
                inquest_core::QuotaExceeded::TokenBudget { budget, spent } => (
                    Reason::TokenBudgetExhausted,
                    vec![
                        (key::LIMIT, "tenants.daily_token_budget".to_owned()),
                        (key::VALUE, budget.to_string()),
                        ("spent", spent.to_string()),
                    ],
                    until_utc_midnight(),
                ),
            };
            reason::status_with(
                Code::ResourceExhausted,
                reason,
                q.to_string(),
                metadata,
                tonic_types::ErrorDetails::with_retry_info(Some(retry)),
                tonic::metadata::MetadataMap::new(),
            )
        }
        StoreError::OutcomeUnknown { .. } => {
            tracing::warn!(error = %error_chain(&e), "write outcome unknown");
            reason::status(
                Code::DeadlineExceeded,
                Reason::WriteOutcomeUnknown,
                "the write did not answer in time and may have committed; retry with the same \
                 idempotency key",
                Vec::new(),
            )
        }
        StoreError::ShuttingDown => {
            tracing::warn!(error = %error_chain(&e), "store shutting down");
            reason::status(
                Code::Unavailable,
                Reason::ShuttingDown,
                "server shutting down; retry against another replica",
                Vec::new(),
            )
        }
        StoreError::Unavailable(_) | StoreError::Timeout { .. } => {
            tracing::warn!(error = %error_chain(&e), "database unavailable");
            store_unavailable("database unavailable; retry later", None)
        }
        StoreError::Database(_)
        | StoreError::Corrupt(_)
        | StoreError::InvalidUrl(_)
        | StoreError::Config(_)
        | StoreError::Migration(_)
        | StoreError::Internal(_) => {
            tracing::error!(error = %error_chain(&e), "internal store error");
            internal()
        }
    }
}

/// Time left until the next 00:00 UTC, when daily budgets reset.
fn until_utc_midnight() -> std::time::Duration {
    let now = time::OffsetDateTime::now_utc();
    let since =
        u64::from(now.hour()) * 3600 + u64::from(now.minute()) * 60 + u64::from(now.second());
    std::time::Duration::from_secs(86_400u64.saturating_sub(since).max(1))
}

/// INTERNAL, saying nothing of the cause (log it before).
pub fn internal() -> Status {
    reason::status(
        Code::Internal,
        Reason::Internal,
        "internal error",
        Vec::new(),
    )
}
