//! Why a burst ended. Exactly one value per burst, on every path; it lands
//! in the report row, the session row, the final log line and a span
//! attribute.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{SessionStatus, session::Ending};

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
    /// The store refused a write for a cause a retry cannot fix (not an
    /// outage: those are `store_unavailable`). A follow-up reopens it.
    StoreFailed,
    /// The store stayed unreachable past what the lease allows. The burst
    /// stops starting tools and hands the session over: it stays
    /// `running` with its lease left to expire, and the next claim (any
    /// replica's reaper, or a call touching it) recovers it from the stored
    /// turns. Never `failed`.
    StoreUnavailable,
    /// The investigation ended well but its report summary could not be
    /// written. Only ever the reason when nothing else went wrong first.
    ReportAuthorFailed,
    /// The server shut down mid-burst; a follow-up resumes the session.
    Interrupted,
    /// A message sent with `if_running = INTERRUPT` stopped the burst at
    /// its next safe point: no model call or tool start after it, the
    /// model call in flight abandoned (nothing of it stored), every call
    /// of the reply answered (a read-only one cut, a mutating one let
    /// finish within the shutdown grace). The session is `idle` and the
    /// close opens the interrupting message's burst at once.
    InterruptedByUser,
    /// This worker lost the session's lease (it stalled past the lease's
    /// expiry and another replica claimed the session). The fenced store
    /// refuses its writes; the session belongs to the new owner, so this
    /// burst records nothing more: no report, no status.
    LeaseLost,
    /// A follow-up whose stored transcript failed validation: no burst ran,
    /// a notice says why, the session is `idle`.
    ResumeRefused,
    /// The recovery plan needs a human's go-ahead (`ContinueSession`): a
    /// dangling call that may have changed something, or a degraded
    /// history that still owes an answer.
    AwaitingConfirmation,
    /// The model asked for tool calls that `[approval]` holds for a human:
    /// the session waits in `awaiting_approval`, holding nothing.
    AwaitingApproval,
    /// A recovered session whose stored history is degraded and owes the
    /// model nothing: left `idle` for a human, never continued.
    DegradedHistory,
}

impl ExitReason {
    pub const ALL: [ExitReason; 18] = [
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
        ExitReason::InterruptedByUser,
        ExitReason::LeaseLost,
        ExitReason::StoreUnavailable,
        ExitReason::ResumeRefused,
        ExitReason::AwaitingConfirmation,
        ExitReason::AwaitingApproval,
        ExitReason::DegradedHistory,
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
            ExitReason::InterruptedByUser => "interrupted_by_user",
            ExitReason::LeaseLost => "lease_lost",
            ExitReason::StoreUnavailable => "store_unavailable",
            ExitReason::ResumeRefused => "resume_refused",
            ExitReason::AwaitingConfirmation => "awaiting_confirmation",
            ExitReason::AwaitingApproval => "awaiting_approval",
            ExitReason::DegradedHistory => "degraded_history",
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

    /// What a burst ending this way leaves in the store: the status it
    /// closes the session with, or a hand-over, or nothing.
    ///
    /// Failures that a later attempt can get past (a provider or tool
    /// server down, a missing summary) leave the session `idle`: resumable
    /// by a follow-up, not failed. A shutdown or a store that stayed
    /// unreachable hands the session over to recovery (still `running`);
    /// a lost lease leaves it to its new owner.
    pub fn ending(self) -> Ending {
        match self {
            ExitReason::Completed
            | ExitReason::IterationBudgetExhausted
            | ExitReason::BurstLimitReached => Ending::Close(SessionStatus::Completed),
            ExitReason::AwaitingUser
            | ExitReason::NoProgress
            | ExitReason::ProviderFailed
            | ExitReason::ToolServersUnavailable
            | ExitReason::ReportAuthorFailed
            | ExitReason::ResumeRefused
            | ExitReason::InterruptedByUser
            | ExitReason::DegradedHistory => Ending::Close(SessionStatus::Idle),
            ExitReason::AwaitingConfirmation => Ending::Close(SessionStatus::AwaitingConfirmation),
            ExitReason::AwaitingApproval => Ending::Close(SessionStatus::AwaitingApproval),
            ExitReason::Cancelled => Ending::Close(SessionStatus::Cancelled),
            ExitReason::StoreFailed => Ending::Close(SessionStatus::Failed),
            ExitReason::Interrupted | ExitReason::StoreUnavailable => Ending::HandOver,
            ExitReason::LeaseLost => Ending::Abandon,
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
        ] {
            assert_eq!(r.ending(), Ending::Close(SessionStatus::Idle));
        }
        for r in [ExitReason::Interrupted, ExitReason::StoreUnavailable] {
            assert_eq!(r.ending(), Ending::HandOver);
        }
        assert_eq!(
            ExitReason::StoreFailed.ending(),
            Ending::Close(SessionStatus::Failed)
        );
        assert_eq!(ExitReason::LeaseLost.ending(), Ending::Abandon);
        // An interrupt closes into a status whose close drains the queue
        // (the interrupting message opens the next burst), unlike a
        // shutdown, which hands the burst over.
        assert_eq!(
            ExitReason::InterruptedByUser.ending(),
            Ending::Close(SessionStatus::Idle)
        );
    }
}
