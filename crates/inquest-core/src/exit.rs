//! Why a burst ended. Exactly one value per burst, on every path; it lands
//! in the report row, the session row, the final log line and a span
//! attribute.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::SessionStatus;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    /// The model stopped calling tools and answered (first burst).
    Completed,
    /// A follow-up burst whose model stopped calling tools: the session is
    /// open for the next message. The one non-terminal reason.
    AwaitingUser,
    /// The session-wide budget of model calls is used up.
    IterationBudgetExhausted,
    /// This burst made its maximum number of model calls.
    BurstLimitReached,
    /// Empty replies or bad tool calls beyond their rails.
    NoProgress,
    /// Every provider in the chain failed.
    ProviderFailed,
    /// No configured tool server could be reached.
    ToolServersUnavailable,
    /// `CancelSession` stopped the burst.
    Cancelled,
    /// A turn could not be written; the transcript cannot go on.
    StoreFailed,
    /// The investigation ended well but its report summary could not be
    /// written. Only ever the reason when nothing else went wrong first.
    ReportAuthorFailed,
    /// The server shut down mid-burst; a follow-up resumes the session.
    Interrupted,
    /// This worker lost the session's lease (it stalled past the lease's
    /// expiry and another replica claimed the session). The fenced store
    /// refuses its writes; the session belongs to the new owner, so this
    /// burst records nothing more: no report, no status.
    LeaseLost,
}

impl ExitReason {
    pub const ALL: [ExitReason; 12] = [
        ExitReason::Completed,
        ExitReason::AwaitingUser,
        ExitReason::IterationBudgetExhausted,
        ExitReason::BurstLimitReached,
        ExitReason::NoProgress,
        ExitReason::ProviderFailed,
        ExitReason::ToolServersUnavailable,
        ExitReason::Cancelled,
        ExitReason::StoreFailed,
        ExitReason::ReportAuthorFailed,
        ExitReason::Interrupted,
        ExitReason::LeaseLost,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ExitReason::Completed => "completed",
            ExitReason::AwaitingUser => "awaiting_user",
            ExitReason::IterationBudgetExhausted => "iteration_budget_exhausted",
            ExitReason::BurstLimitReached => "burst_limit_reached",
            ExitReason::NoProgress => "no_progress",
            ExitReason::ProviderFailed => "provider_failed",
            ExitReason::ToolServersUnavailable => "tool_servers_unavailable",
            ExitReason::Cancelled => "cancelled",
            ExitReason::StoreFailed => "store_failed",
            ExitReason::ReportAuthorFailed => "report_author_failed",
            ExitReason::Interrupted => "interrupted",
            ExitReason::LeaseLost => "lease_lost",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == text)
    }

    /// Whether the session's current conversation is over. Only
    /// `awaiting_user` is not: callers branch on this, never on "the burst
    /// returned".
    pub fn is_terminal(self) -> bool {
        !matches!(self, ExitReason::AwaitingUser)
    }

    /// The session status a burst ending this way leaves behind.
    ///
    /// Failures that a later attempt can get past (a provider or tool
    /// server down, a shutdown, a missing summary) leave the session `idle`:
    /// resumable by a follow-up, not failed. Only a store failure is
    /// `failed`, a cancel is `cancelled`, and a lost lease leaves the
    /// session `running` under its new owner.
    pub fn session_status(self) -> SessionStatus {
        match self {
            ExitReason::Completed
            | ExitReason::IterationBudgetExhausted
            | ExitReason::BurstLimitReached => SessionStatus::Completed,
            ExitReason::AwaitingUser
            | ExitReason::NoProgress
            | ExitReason::ProviderFailed
            | ExitReason::ToolServersUnavailable
            | ExitReason::ReportAuthorFailed
            | ExitReason::Interrupted => SessionStatus::Idle,
            ExitReason::Cancelled => SessionStatus::Cancelled,
            ExitReason::StoreFailed => SessionStatus::Failed,
            // Not this worker's to set: the new lease owner runs it.
            ExitReason::LeaseLost => SessionStatus::Running,
        }
    }
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_and_only_awaiting_user_is_open() {
        for r in ExitReason::ALL {
            assert_eq!(ExitReason::parse(r.as_str()), Some(r));
            assert_eq!(r.is_terminal(), r != ExitReason::AwaitingUser);
        }
    }

    #[test]
    fn failures_a_retry_can_fix_stay_resumable() {
        for r in [
            ExitReason::ProviderFailed,
            ExitReason::ToolServersUnavailable,
            ExitReason::Interrupted,
        ] {
            assert_eq!(r.session_status(), SessionStatus::Idle);
        }
        assert_eq!(
            ExitReason::StoreFailed.session_status(),
            SessionStatus::Failed
        );
        assert_eq!(
            ExitReason::Cancelled.session_status(),
            SessionStatus::Cancelled
        );
    }
}
