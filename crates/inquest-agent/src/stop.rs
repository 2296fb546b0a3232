//! What stops a burst from outside: a cancel, a shutdown and its grace,
//! a lost lease.

use inquest_core::ExitReason;
use tokio_util::sync::CancellationToken;

/// What stops a burst from outside.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    /// `CancelSession`: ends with `cancelled`.
    pub cancel: CancellationToken,
    /// Server shutdown: no new model call or tool starts; a model call in
    /// flight is dropped (it has no side effect); a running tool is left
    /// to finish and its real result is stored. Ends with `interrupted`
    /// (handed over).
    pub shutdown: CancellationToken,
    /// The shutdown grace ran out: a tool still running is dropped and
    /// its call left without a result, so the next replica's recovery plan
    /// sees it dangling (and holds a mutating one for confirmation).
    pub abandon: CancellationToken,
    /// The worker's lease was lost (renewal found another owner): ends
    /// with `lease_lost`, writing nothing more.
    pub lease_lost: CancellationToken,
}

impl Stop {
    pub(crate) fn reason(&self) -> Option<ExitReason> {
        if self.lease_lost.is_cancelled() {
            Some(ExitReason::LeaseLost)
        } else if self.cancel.is_cancelled() {
            Some(ExitReason::Cancelled)
        } else if self.shutdown.is_cancelled() {
            Some(ExitReason::Interrupted)
        } else {
            None
        }
    }

    pub(crate) async fn stopped(&self) -> ExitReason {
        tokio::select! {
            biased;
            () = self.lease_lost.cancelled() => ExitReason::LeaseLost,
            () = self.cancel.cancelled() => ExitReason::Cancelled,
            () = self.shutdown.cancelled() => ExitReason::Interrupted,
        }
    }

    /// What cuts a running tool short: a lost lease, a cancel, or the end
    /// of the shutdown grace (not the shutdown itself).
    pub(crate) async fn tool_cut(&self) -> ExitReason {
        tokio::select! {
            biased;
            () = self.lease_lost.cancelled() => ExitReason::LeaseLost,
            () = self.cancel.cancelled() => ExitReason::Cancelled,
            () = self.abandon.cancelled() => ExitReason::Interrupted,
        }
    }
}
