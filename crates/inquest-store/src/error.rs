use std::time::Duration;

/// Everything that can go wrong in the store, classified so callers can
/// decide without looking at text: [`StoreError::is_unavailable`] means
/// "try again later", [`StoreError::NotFound`] means "no such thing".
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{what} {id} not found")]
    NotFound { what: &'static str, id: String },
    #[error("database unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("database operation {op} timed out after {after:?}")]
    Timeout { op: &'static str, after: Duration },
    /// A write whose answer did not arrive in time: it may have committed
    /// or not. Callers find out (a burst re-sends it under its write id; a
    /// client retries with its idempotency key) rather than assume either.
    #[error("database write {op} did not answer within {after:?}; it may have committed")]
    OutcomeUnknown { op: &'static str, after: Duration },
    #[error("database error")]
    Database(#[source] tokio_postgres::Error),
    #[error("stored data does not decode: {0}")]
    Corrupt(String),
    #[error("invalid database url")]
    InvalidUrl(#[source] tokio_postgres::Error),
    #[error("invalid store configuration: {0}")]
    Config(String),
    #[error("migration failed")]
    Migration(#[source] refinery::Error),
    #[error("the store is shutting down and takes no new writes")]
    ShuttingDown,
    /// A fenced write found a newer lease epoch: another replica claimed
    /// the session, and this worker may not write to it any more.
    #[error("lease of session {session} lost: epoch {held} was replaced by {current}")]
    LeaseLost {
        session: String,
        held: i64,
        current: i64,
    },
    /// A write under a lease found the session's head behind a seq this
    /// burst had committed and published: the database lost committed
    /// turns (a failover to an asynchronous standby that had not received
    /// them). Nothing was written.
    #[error(
        "session {session}: the database's head is seq {head}, but seq {known} was committed before: turns were lost in a failover"
    )]
    HeadBehind {
        session: String,
        head: i64,
        known: i64,
    },
    /// An idempotency key already stands for another request (a different
    /// message, or incident): nothing was written.
    #[error("idempotency key {key:?} was used for a different request")]
    IdempotencyConflict { key: String },
    /// The tenant may not open another burst now (`[tenants]` limits):
    /// nothing was written.
    #[error("{0}")]
    QuotaExceeded(inquest_core::QuotaExceeded),
    #[error("internal store error: {0}")]
    Internal(String),
}

impl StoreError {
    /// The database could not be reached or did not answer in time; the
    /// same call may succeed later.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            StoreError::Unavailable(_)
                | StoreError::Timeout { .. }
                | StoreError::OutcomeUnknown { .. }
                | StoreError::ShuttingDown
        )
    }

    /// A bounded name of this error's kind, for metrics labels.
    pub fn class(&self) -> &'static str {
        match self {
            StoreError::NotFound { .. } => "not_found",
            StoreError::Unavailable(_) => "unavailable",
            StoreError::Timeout { .. } => "timeout",
            StoreError::OutcomeUnknown { .. } => "outcome_unknown",
            StoreError::Database(_) => "database",
            StoreError::Corrupt(_) => "corrupt",
            StoreError::InvalidUrl(_) | StoreError::Config(_) => "config",
            StoreError::Migration(_) => "migration",
            StoreError::ShuttingDown => "shutting_down",
            StoreError::LeaseLost { .. } => "lease_lost",
            StoreError::HeadBehind { .. } => "head_behind",
            StoreError::IdempotencyConflict { .. } => "idempotency_conflict",
            StoreError::QuotaExceeded(_) => "quota_exceeded",
            StoreError::Internal(_) => "internal",
        }
    }

    /// Whether sending the same operation again may succeed: the database
    /// was unreachable, did not answer in time, or aborted the statement
    /// for a reason of the moment (a serialization failure, a deadlock, a
    /// cancelled statement, a lock not available). Not a shutdown of this
    /// process's store, and never a refusal of the content.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Unavailable(_)
            | StoreError::Timeout { .. }
            | StoreError::OutcomeUnknown { .. } => true,
            StoreError::Database(e) => e.code().is_some_and(|c| {
                c.code().starts_with("40") || matches!(c.code(), "57014" | "55P03")
            }),
            _ => false,
        }
    }

    pub(crate) fn from_pool(e: deadpool_postgres::PoolError) -> Self {
        // Whatever stops us from getting a connection (refused, timed out,
        // a database that does not accept connections, failed auth) means
        // the database is not there for this call.
        StoreError::Unavailable(Box::new(e))
    }
}

/// SQLSTATE classes and codes that mean the server is not there for us:
/// connection exceptions (08), shutdown and start-up (57P01..57P03), too
/// many connections (53300), a database that refuses connections
/// (55000 when `ALLOW_CONNECTIONS false` is not reported this way, 3D000
/// when it was dropped), and a node that no longer takes writes (25006,
/// read-only transaction: a primary demoted or fenced by its HA manager,
/// or a standby reached after a failover; the writable primary is
/// elsewhere, and a fresh connection on the multi-host URL finds it).
fn is_unavailable_code(code: &str) -> bool {
    code.starts_with("08")
        || matches!(
            code,
            "57P01" | "57P02" | "57P03" | "53300" | "3D000" | READ_ONLY_SQL_TRANSACTION
        )
}

/// SQLSTATE `read_only_sql_transaction`.
const READ_ONLY_SQL_TRANSACTION: &str = "25006";

impl StoreError {
    /// The node this call ran on refused to write (SQLSTATE 25006): the
    /// connection is to a node that is not the primary any more, and must
    /// not go back to the pool, where every later write would meet the
    /// same refusal.
    pub(crate) fn node_refuses_writes(&self) -> bool {
        let source = match self {
            StoreError::Unavailable(e) => e.downcast_ref::<tokio_postgres::Error>(),
            StoreError::Database(e) => Some(e),
            _ => None,
        };
        source
            .and_then(tokio_postgres::Error::code)
            .is_some_and(|c| c.code() == READ_ONLY_SQL_TRANSACTION)
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        match e.code() {
            Some(code) if is_unavailable_code(code.code()) => StoreError::Unavailable(Box::new(e)),
            Some(_) => StoreError::Database(e),
            // No SQLSTATE: the connection itself failed (I/O, closed, refused).
            None => StoreError::Unavailable(Box::new(e)),
        }
    }
}
