//! What stops a burst from outside: a cancel, an interrupt, a shutdown
//! and its grace, a lost lease.

use std::time::Duration;

use inquest_core::ExitReason;
use tokio_util::sync::CancellationToken;

/// What stops a burst from outside.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    /// `CancelSession`: ends with `cancelled`.
    pub cancel: CancellationToken,
    /// A message sent with `if_running = INTERRUPT`: no new model call or
    /// tool starts; a model call in flight is dropped (nothing of it is
    /// stored); a running read-only tool is cut off; any other running
    /// tool gets `interrupt_grace` to finish (a side effect is never cut
    /// short while it may still land). Ends with `interrupted_by_user`.
    pub interrupt: CancellationToken,
    /// How long a running tool that is not read-only may go on after an
    /// interrupt (the shutdown grace).
    pub interrupt_grace: Duration,
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
    /// Why the burst must stop now, if it must. A cancel wins over an
    /// interrupt (the session ends for good), an interrupt over a
    /// shutdown (the close drains the interrupting message into the next
    /// burst, which any replica runs).
    pub(crate) fn reason(&self) -> Option<ExitReason> {
        if self.lease_lost.is_cancelled() {
            Some(ExitReason::LeaseLost)
        } else if self.cancel.is_cancelled() {
            Some(ExitReason::Cancelled)
        } else if self.interrupt.is_cancelled() {
            Some(ExitReason::InterruptedByUser)
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
            () = self.interrupt.cancelled() => ExitReason::InterruptedByUser,
            () = self.shutdown.cancelled() => ExitReason::Interrupted,
        }
    }

    /// What cuts a running tool short: a lost lease, a cancel, the end of
    /// the shutdown grace (not the shutdown itself), or an interrupt —
    /// at once for a read-only tool (`read_only`), else after
    /// `interrupt_grace`.
    pub(crate) async fn tool_cut(&self, read_only: bool) -> ExitReason {
        let interrupted = async {
            self.interrupt.cancelled().await;
            if !read_only {
                tokio::time::sleep(self.interrupt_grace).await;
            }
        };
        tokio::select! {
            biased;
            () = self.lease_lost.cancelled() => ExitReason::LeaseLost,
            () = self.cancel.cancelled() => ExitReason::Cancelled,
            () = self.abandon.cancelled() => ExitReason::Interrupted,
            () = interrupted => ExitReason::InterruptedByUser,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_interrupt_cuts_a_read_only_tool_at_once_and_any_other_after_the_grace() {
        let stop = Stop {
            interrupt_grace: Duration::from_secs(10),
            ..Stop::default()
        };
        stop.interrupt.cancel();
        assert_eq!(stop.reason(), Some(ExitReason::InterruptedByUser));
        let start = tokio::time::Instant::now();
        assert_eq!(stop.tool_cut(true).await, ExitReason::InterruptedByUser);
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert_eq!(stop.tool_cut(false).await, ExitReason::InterruptedByUser);
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        // A cancel wins over the interrupt.
        stop.cancel.cancel();
        assert_eq!(stop.reason(), Some(ExitReason::Cancelled));
        assert_eq!(stop.tool_cut(false).await, ExitReason::Cancelled);
    }
}
