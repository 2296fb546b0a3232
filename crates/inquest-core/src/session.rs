//! Session lifecycle states as stored in `sessions.status`.

use std::fmt;

/// Where a session stands. Stored as text; the store maps it both ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionStatus {
    /// The latest user turn is stored and waits for the agent.
    Pending,
    /// A burst is running.
    Running,
    /// The last burst ended without a terminal reason; a follow-up may
    /// reopen the session.
    Idle,
    Completed,
    Failed,
    Cancelled,
    /// A follow-up found a recovery plan that needs a human's go-ahead
    /// (`ContinueSession`) before a burst runs: an interrupted turn whose
    /// dangling tools may change things, or a degraded history. The user
    /// turn and the recovery notice are stored; no burst is running.
    AwaitingConfirmation,
}

impl SessionStatus {
    pub const ALL: [SessionStatus; 7] = [
        SessionStatus::Pending,
        SessionStatus::Running,
        SessionStatus::Idle,
        SessionStatus::Completed,
        SessionStatus::Failed,
        SessionStatus::Cancelled,
        SessionStatus::AwaitingConfirmation,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Pending => "pending",
            SessionStatus::Running => "running",
            SessionStatus::Idle => "idle",
            SessionStatus::Completed => "completed",
            SessionStatus::Failed => "failed",
            SessionStatus::Cancelled => "cancelled",
            SessionStatus::AwaitingConfirmation => "awaiting_confirmation",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

impl fmt::Display for SessionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_text_round_trips() {
        for s in SessionStatus::ALL {
            assert_eq!(SessionStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(SessionStatus::parse("bogus"), None);
    }
}
