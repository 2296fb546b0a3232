//! The one place where failures become gRPC statuses.
//!
//! Handlers return [`ApiError`]; its exhaustive `From<ApiError> for Status`
//! decides the code. Internal causes are logged here, once, with their
//! cause chain, and never sent to clients.

use inquest_core::{CursorError, IdError, InputError};
use inquest_store::StoreError;
use tonic::{Code, Status};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Id(#[from] IdError),
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Cursor(#[from] CursorError),
    #[error("{0}")]
    InvalidArgument(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The session's state does not allow the call (running, ended).
    #[error("{0}")]
    FailedPrecondition(String),
    /// A watch cursor beyond the session's newest turn.
    #[error("after_seq {after} is beyond the session's head seq {head}")]
    OutOfRange { after: u64, head: u64 },
    /// A cap is reached (`limit` names its config key); retrying after
    /// `retry_after` may succeed.
    #[error("{what} (limits.{limit} = {value}); retry later")]
    ResourceExhausted {
        what: String,
        limit: &'static str,
        value: usize,
        retry_after: std::time::Duration,
    },
}

/// `google.rpc.ErrorInfo` domain of Inquest's own reasons.
pub const ERROR_DOMAIN: &str = "inquest.v1";
/// Trailing metadata key with the retry hint in milliseconds, beside the
/// `google.rpc.RetryInfo` detail, for clients that read no details.
pub const RETRY_AFTER_METADATA: &str = "retry-after-ms";

/// Trailing metadata key carrying the head seq on OUT_OF_RANGE.
pub const HEAD_SEQ_METADATA: &str = "inquest-head-seq";

/// Renders an error with its whole `source()` chain, for logs.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cur = e.source();
    while let Some(cause) = cur {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        cur = cause.source();
    }
    text
}

impl From<ApiError> for Status {
    fn from(e: ApiError) -> Self {
        match e {
            ApiError::Id(e) => Status::invalid_argument(e.to_string()),
            ApiError::Input(e) => Status::invalid_argument(e.to_string()),
            ApiError::Cursor(e) => Status::invalid_argument(e.to_string()),
            ApiError::InvalidArgument(m) => Status::invalid_argument(m),
            ApiError::Store(e) => store_status(e),
            ApiError::FailedPrecondition(m) => Status::failed_precondition(m),
            ApiError::ResourceExhausted {
                ref limit,
                value,
                retry_after,
                ..
            } => {
                let message = e.to_string();
                let mut details = tonic_types::ErrorDetails::with_retry_info(Some(retry_after));
                details.set_error_info(
                    "CAP_REACHED",
                    ERROR_DOMAIN,
                    [
                        ("limit".to_owned(), format!("limits.{limit}")),
                        ("value".to_owned(), value.to_string()),
                    ],
                );
                let mut metadata = tonic::metadata::MetadataMap::new();
                let millis = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
                metadata.insert(
                    RETRY_AFTER_METADATA,
                    tonic::metadata::MetadataValue::from(millis),
                );
                <Status as tonic_types::StatusExt>::with_error_details_and_metadata(
                    Code::ResourceExhausted,
                    message,
                    details,
                    metadata,
                )
            }
            ApiError::OutOfRange { after, head } => {
                let mut metadata = tonic::metadata::MetadataMap::new();
                metadata.insert(
                    HEAD_SEQ_METADATA,
                    tonic::metadata::MetadataValue::from(head),
                );
                Status::with_metadata(
                    Code::OutOfRange,
                    format!(
                        "after_seq {after} is beyond the session's head seq {head}; \
                         watch with after_seq <= {head}"
                    ),
                    metadata,
                )
            }
        }
    }
}

fn store_status(e: StoreError) -> Status {
    match e {
        StoreError::NotFound { .. } => Status::not_found(e.to_string()),
        // Another replica took the session over; the caller's view is stale.
        StoreError::LeaseLost { .. } => Status::aborted(e.to_string()),
        // The key is the client's: it reused one for another request.
        StoreError::IdempotencyConflict { key } => Status::already_exists(format!(
            "idempotency key {key:?} was used for a different request; use a new key for a new \
             request"
        )),
        StoreError::OutcomeUnknown { .. } => {
            tracing::warn!(error = %chain(&e), "write outcome unknown");
            Status::deadline_exceeded(
                "the write did not answer in time and may have committed; retry with the same \
                 idempotency key",
            )
        }
        StoreError::Unavailable(_) | StoreError::Timeout { .. } | StoreError::ShuttingDown => {
            tracing::warn!(error = %chain(&e), "database unavailable");
            Status::new(Code::Unavailable, "database unavailable; retry later")
        }
        StoreError::Database(_)
        | StoreError::Corrupt(_)
        | StoreError::InvalidUrl(_)
        | StoreError::Config(_)
        | StoreError::Migration(_)
        | StoreError::Internal(_) => {
            tracing::error!(error = %chain(&e), "internal store error");
            Status::internal("internal error")
        }
    }
}
