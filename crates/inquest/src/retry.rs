//! Riding out an outage: which failed calls may be sent again, and the
//! pace and deadline of those retries ([`Retry`], [`RETRY_FOR`]).

use std::time::{Duration, Instant};

use inquest_core::Backoff;
use inquest_proto::reason::{ErrorReason, Reason};

use crate::client::{Failure, status_error};

/// Whether a unary call that failed with `status` may be sent again: the
/// server or its store is down or restarting, or the write's outcome is
/// unknown. Only for reads and for writes that carry an idempotency key,
/// which makes a second send store nothing twice.
pub fn should_retry_call(status: &tonic::Status) -> bool {
    match ErrorReason::of(status) {
        Some(r) => matches!(
            r.reason,
            Reason::StoreUnavailable | Reason::ShuttingDown | Reason::WriteOutcomeUnknown
        ),
        None => matches!(
            status.code(),
            tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
        ),
    }
}

/// How long a command goes on retrying a server or store that is down (a
/// restart, a PostgreSQL failover) before it gives up with the last error.
pub const RETRY_FOR: Duration = Duration::from_secs(120);

/// Paces the retries of one outage: backoff from 400 ms to 3.2 s, and a
/// deadline [`RETRY_FOR`] after its first failure. Anything that gets
/// through ends the outage ([`Retry::reset`]).
pub struct Retry {
    since: Option<Instant>,
    attempt: u32,
    backoff: Backoff,
    budget: Duration,
    /// Say on stderr when an outage begins (not where the output shows
    /// the reconnects itself, as a watch does).
    announce: bool,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            since: None,
            attempt: 0,
            backoff: Backoff::new(Duration::from_millis(400), Duration::from_millis(3_200)),
            budget: RETRY_FOR,
            announce: true,
        }
    }
}

impl Retry {
    /// A retry that says nothing on stderr.
    pub fn quiet() -> Self {
        Retry {
            announce: false,
            ..Retry::default()
        }
    }

    /// Something got through: the next failure starts a new outage.
    pub fn reset(&mut self) {
        self.since = None;
        self.attempt = 0;
        self.backoff.reset();
    }

    /// After a failure worth retrying: sleeps the next backoff, or fails
    /// with `last` once the outage has lasted the budget. The first pause
    /// of an outage says so on stderr (stdout stays the command's output).
    pub async fn pause(&mut self, last: &dyn std::fmt::Display) -> anyhow::Result<()> {
        let since = *self.since.get_or_insert_with(Instant::now);
        if since.elapsed() >= self.budget {
            anyhow::bail!(
                "gave up after {} s of retrying; last error: {last}",
                self.budget.as_secs(),
            );
        }
        if self.attempt == 0 && self.announce {
            eprintln!(
                "inquest: {last}; retrying for up to {} s",
                self.budget.as_secs()
            );
        }
        self.attempt += 1;
        tokio::time::sleep(self.backoff.next_delay()).await;
        Ok(())
    }
}

/// Sends a unary call made by `call` until it answers, retrying through an
/// outage (see [`should_retry_call`]) within [`RETRY_FOR`]; other errors
/// end it at once. For reads and keyed writes only.
pub async fn retrying<T, F, Fut>(mut call: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let mut retry = Retry::default();
    loop {
        match call().await {
            Ok(response) => return Ok(response.into_inner()),
            Err(status) if should_retry_call(&status) => retry.pause(&Failure(&status)).await?,
            Err(status) => return Err(status_error(status)),
        }
    }
}
