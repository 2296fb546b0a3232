//! The session's life: every status, every event that moves it, and the
//! one table of allowed transitions.
//!
//! ```text
//!  StartSession ─▶ pending ──Claim──▶ running ──Recover / HandOver / LeaseLost──▶ running
//!                    ▲  ▲                │
//!                    │  │                └─Close(reason)─▶ idle | completed | failed
//!                    │  │                                  | cancelled | awaiting_confirmation
//!                    │  │                                  | awaiting_approval
//!                    │  ├──Confirm── awaiting_confirmation
//!                    │  └──Decide─── awaiting_approval
//!                    └─────Send───── idle | completed | failed | awaiting_approval
//!  pending | running | idle | awaiting_confirmation | awaiting_approval ──Cancel──▶ cancelled (final)
//! ```
//!
//! The store's conditional `UPDATE`s take their `WHERE status = ANY(...)`
//! sets from [`Event::sources`] and their new status from
//! [`Event::target`], so the SQL cannot drift from this table. A status
//! added later is one edit here that the compiler leads through the rest
//! (every `match` below is exhaustive).

use std::fmt;

use crate::ExitReason;

/// Where a session stands. Stored as text; the store maps it both ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionStatus {
    /// The latest user turn is stored and waits for the agent.
    Pending,
    /// A burst is running (or its worker died and the lease will expire:
    /// the reaper recovers it).
    Running,
    /// The last burst ended without a terminal reason, or with a failure a
    /// retry can get past; a follow-up may reopen the session.
    Idle,
    Completed,
    /// A burst ended on a cause a retry of the same burst cannot fix. A
    /// follow-up message still reopens the session (its recovery plan
    /// repairs the transcript); nothing else does.
    Failed,
    Cancelled,
    /// A follow-up found a recovery plan that needs a human's go-ahead
    /// (`ContinueSession`) before a burst runs: an interrupted turn whose
    /// dangling tools may change things, or a degraded history. The user
    /// turn and the recovery notice are stored; no burst is running.
    AwaitingConfirmation,
    /// The model asked for tool calls that `[approval]` holds for a human.
    /// The assistant turn is stored and the held calls are durable
    /// approval requests; no burst runs and no lease is held. Deciding
    /// every pending call (`DecideToolCalls`, or the expiry) starts the
    /// burst again; a follow-up message supersedes what is pending.
    AwaitingApproval,
}

impl SessionStatus {
    pub const ALL: [SessionStatus; 8] = [
        SessionStatus::Pending,
        SessionStatus::Running,
        SessionStatus::Idle,
        SessionStatus::Completed,
        SessionStatus::Failed,
        SessionStatus::Cancelled,
        SessionStatus::AwaitingConfirmation,
        SessionStatus::AwaitingApproval,
    ];

    /// The status a new session is created in (`StartSession`).
    pub const INITIAL: SessionStatus = SessionStatus::Pending;

    /// Statuses of a session whose burst waits to start or runs: a watcher
    /// of such a session keeps its stream open.
    pub const ACTIVE: [SessionStatus; 2] = [SessionStatus::Pending, SessionStatus::Running];

    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Pending => "pending",
            SessionStatus::Running => "running",
            SessionStatus::Idle => "idle",
            SessionStatus::Completed => "completed",
            SessionStatus::Failed => "failed",
            SessionStatus::Cancelled => "cancelled",
            SessionStatus::AwaitingConfirmation => "awaiting_confirmation",
            SessionStatus::AwaitingApproval => "awaiting_approval",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// A burst waits to start or runs (see [`SessionStatus::ACTIVE`]).
    pub fn is_active(self) -> bool {
        match self {
            SessionStatus::Pending | SessionStatus::Running => true,
            SessionStatus::Idle
            | SessionStatus::Completed
            | SessionStatus::Failed
            | SessionStatus::Cancelled
            | SessionStatus::AwaitingConfirmation
            | SessionStatus::AwaitingApproval => false,
        }
    }

    /// Applies `event`: the status it leaves, or [`Refused`] when the
    /// table does not allow it from here.
    pub fn on(self, event: Event) -> Result<SessionStatus, Refused> {
        if event.sources().contains(&self) {
            Ok(event.target())
        } else {
            Err(Refused { from: self, event })
        }
    }
}

impl fmt::Display for SessionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What can happen to a session. Each names the statuses it applies to
/// ([`Event::sources`]) and the one it leaves ([`Event::target`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A follow-up user turn is stored (`SendMessage`).
    Send,
    /// A replica claims the pending burst under a fresh lease.
    Claim,
    /// A replica claims an orphan (running, lease expired): epoch + 1, the
    /// status stays.
    Recover,
    /// The burst holding the lease ends with `reason`. Only reasons whose
    /// [`ExitReason::ending`] is [`Ending::Close`] close a burst.
    Close(ExitReason),
    /// The burst's worker hands it over (shutdown, an unavailable store):
    /// still running, lease expired now, so another claim recovers it.
    HandOver,
    /// The worker lost its lease; it writes nothing, the status stays for
    /// the new owner.
    LeaseLost,
    /// `ContinueSession` confirms the held recovery plan.
    Confirm,
    /// The last pending approval of the hold is decided (by a human, or
    /// denied by the expiry): the burst continues.
    Decide,
    /// `CancelSession`: ends a session that waits or works. `idle` is
    /// among its sources because an idle session is one a human still owes
    /// an answer (the model asked, or a retryable failure stopped it);
    /// cancelling it is how an operator closes the investigation for good.
    /// `completed` and `failed` are not: their outcome would be
    /// overwritten by `cancelled`.
    Cancel,
}

/// What a burst's end leaves in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The burst writes its report and this status (fenced by its epoch).
    Close(SessionStatus),
    /// The session stays `running` with its lease expired: the next claim
    /// recovers it from the stored turns.
    HandOver,
    /// Nothing: the session belongs to another lease now.
    Abandon,
}

impl Event {
    /// Every event, for table tests (`Close` once per exit reason).
    pub fn all() -> Vec<Event> {
        let mut all = vec![
            Event::Send,
            Event::Claim,
            Event::Recover,
            Event::HandOver,
            Event::LeaseLost,
            Event::Confirm,
            Event::Decide,
            Event::Cancel,
        ];
        all.extend(ExitReason::ALL.into_iter().map(Event::Close));
        all
    }

    /// The statuses this event applies to. The store's SQL uses exactly
    /// these sets.
    pub fn sources(self) -> &'static [SessionStatus] {
        use SessionStatus as S;
        match self {
            Event::Send => &[S::Idle, S::Completed, S::Failed, S::AwaitingApproval],
            Event::Claim => &[S::Pending],
            Event::Recover | Event::HandOver | Event::LeaseLost => &[S::Running],
            Event::Close(reason) => match reason.ending() {
                Ending::Close(_) => &[S::Running],
                Ending::HandOver | Ending::Abandon => &[],
            },
            Event::Confirm => &[S::AwaitingConfirmation],
            Event::Decide => &[S::AwaitingApproval],
            Event::Cancel => &[
                S::Pending,
                S::Running,
                S::Idle,
                S::AwaitingConfirmation,
                S::AwaitingApproval,
            ],
        }
    }

    /// The status the event leaves.
    pub fn target(self) -> SessionStatus {
        match self {
            Event::Send | Event::Confirm | Event::Decide => SessionStatus::Pending,
            Event::Claim | Event::Recover | Event::HandOver | Event::LeaseLost => {
                SessionStatus::Running
            }
            Event::Close(reason) => match reason.ending() {
                Ending::Close(status) => status,
                Ending::HandOver | Ending::Abandon => SessionStatus::Running,
            },
            Event::Cancel => SessionStatus::Cancelled,
        }
    }

    /// [`Event::sources`] as stored text, for `status = ANY($n)`.
    pub fn source_texts(self) -> Vec<&'static str> {
        self.sources().iter().map(|s| s.as_str()).collect()
    }
}

/// An event the table does not allow from the session's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a session that is {from} does not accept {event:?}")]
pub struct Refused {
    pub from: SessionStatus,
    pub event: Event,
}

#[cfg(test)]
mod tests {
    use super::*;
    use SessionStatus as S;

    #[test]
    fn status_text_round_trips() {
        for s in SessionStatus::ALL {
            assert_eq!(SessionStatus::parse(s.as_str()), Some(s));
            assert_eq!(s.is_active(), SessionStatus::ACTIVE.contains(&s));
        }
        assert_eq!(SessionStatus::parse("bogus"), None);
    }

    /// The whole table, written out once more by hand: every (status,
    /// event) pair either moves to the expected status or is refused.
    fn expected(from: S, event: Event) -> Option<S> {
        match (from, event) {
            (S::Idle | S::Completed | S::Failed | S::AwaitingApproval, Event::Send) => {
                Some(S::Pending)
            }
            (S::Pending, Event::Claim) => Some(S::Running),
            (S::Running, Event::Recover | Event::HandOver | Event::LeaseLost) => Some(S::Running),
            (S::Running, Event::Close(reason)) => match reason {
                ExitReason::Completed
                | ExitReason::IterationBudgetExhausted
                | ExitReason::BurstLimitReached => Some(S::Completed),
                ExitReason::AwaitingUser
                | ExitReason::NoProgress
                | ExitReason::ProviderFailed
                | ExitReason::ToolServersUnavailable
                | ExitReason::ReportAuthorFailed
                | ExitReason::ResumeRefused
                | ExitReason::InterruptedByUser
                | ExitReason::DegradedHistory => Some(S::Idle),
                ExitReason::AwaitingConfirmation => Some(S::AwaitingConfirmation),
                ExitReason::AwaitingApproval => Some(S::AwaitingApproval),
                ExitReason::Cancelled => Some(S::Cancelled),
                ExitReason::StoreFailed => Some(S::Failed),
                ExitReason::Interrupted | ExitReason::StoreUnavailable | ExitReason::LeaseLost => {
                    None
                }
            },
            (S::AwaitingConfirmation, Event::Confirm) => Some(S::Pending),
            (S::AwaitingApproval, Event::Decide) => Some(S::Pending),
            (
                S::Pending | S::Running | S::Idle | S::AwaitingConfirmation | S::AwaitingApproval,
                Event::Cancel,
            ) => Some(S::Cancelled),
            _ => None,
        }
    }

    #[test]
    fn every_status_event_pair_follows_the_table() {
        for from in SessionStatus::ALL {
            for event in Event::all() {
                let got = from.on(event).ok();
                assert_eq!(got, expected(from, event), "{from} on {event:?}");
            }
        }
    }

    #[test]
    fn only_closing_reasons_close_and_nothing_leaves_a_final_status_but_a_follow_up() {
        for reason in ExitReason::ALL {
            let closes = matches!(reason.ending(), Ending::Close(_));
            assert_eq!(
                !Event::Close(reason).sources().is_empty(),
                closes,
                "{reason}"
            );
        }
        for event in Event::all() {
            assert!(
                S::Cancelled.on(event).is_err(),
                "cancelled is final: {event:?}"
            );
            let reopened = S::Failed.on(event).is_ok();
            assert_eq!(reopened, event == Event::Send, "failed: {event:?}");
        }
    }

    #[test]
    fn a_closed_burst_never_leaves_its_session_active() {
        for reason in ExitReason::ALL {
            if let Ending::Close(status) = reason.ending() {
                assert!(!status.is_active(), "{reason} leaves {status}");
            }
        }
    }
}
