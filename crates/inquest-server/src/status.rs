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
}

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
        }
    }
}

fn store_status(e: StoreError) -> Status {
    match e {
        StoreError::NotFound { .. } => Status::not_found(e.to_string()),
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
