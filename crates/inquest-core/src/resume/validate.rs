//! The checks a resume passes before anything is touched.

use crate::{IncidentId, Role, Seq, SessionId, Turn};

/// Everything a resume needs, all of it read from the store.
#[derive(Debug, Clone, PartialEq)]
pub struct ResumeRequest {
    /// The session to resume, as named by the caller.
    pub session_id: Option<SessionId>,
    /// The incident the caller says the session belongs to.
    pub incident_id: IncidentId,
    /// The incident the stored session row belongs to.
    pub session_incident_id: IncidentId,
    /// The session's stored turns, ordered by seq, the reopening user
    /// message last.
    pub turns: Vec<Turn>,
}

/// Why a resume was refused. One variant per invariant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    #[error("session_id is required")]
    MissingSessionId,
    #[error("session {session_id} does not belong to incident {incident_id}")]
    WrongIncident {
        session_id: SessionId,
        incident_id: IncidentId,
    },
    #[error("session {session_id} has no stored turns")]
    NoTurns { session_id: SessionId },
    #[error("turn {seq} belongs to session {other}, not to session {session_id}")]
    ForeignTurn {
        session_id: SessionId,
        other: SessionId,
        seq: Seq,
    },
    #[error("turn seq {seq} does not follow seq {previous}")]
    SeqNotIncreasing { seq: Seq, previous: Seq },
    #[error("the last turn (seq {seq}) is {}, not the non-empty user message that reopens the session", found(*role, *empty))]
    LastTurnNotUserMessage { seq: Seq, role: Role, empty: bool },
}

fn found(role: Role, empty: bool) -> String {
    let article = if empty || role == Role::Assistant {
        "an"
    } else {
        "a"
    };
    let empty = if empty { "empty " } else { "" };
    format!("{article} {empty}{role} turn")
}

impl ResumeRequest {
    /// Checks, in order: the session id is set; the session belongs to the
    /// named incident; stored turns exist; all belong to the session; seqs
    /// strictly increase; the last turn is a non-empty user message.
    ///
    /// `notice` turns after the reopening message are ignored by the last
    /// check: they are system records (a recovery notice may land between
    /// the user turn and the resume) and never reach the model.
    pub fn validate(&self) -> Result<SessionId, ResumeError> {
        let session_id = self.validate_history()?;
        let last = self
            .turns
            .iter()
            .rev()
            .find(|t| !t.role.is_record())
            .or(self.turns.last());
        if let Some(last) = last {
            let empty = last.content.trim().is_empty();
            if last.role != Role::User || empty {
                return Err(ResumeError::LastTurnNotUserMessage {
                    seq: last.seq,
                    role: last.role,
                    empty,
                });
            }
        }
        Ok(session_id)
    }

    /// The checks of [`ResumeRequest::validate`] except the last: what a
    /// crash recovery needs, whose tail is wherever the worker died (an
    /// assistant turn, a tool result, a user message).
    pub fn validate_history(&self) -> Result<SessionId, ResumeError> {
        let session_id = self.session_id.ok_or(ResumeError::MissingSessionId)?;
        if self.session_incident_id != self.incident_id {
            return Err(ResumeError::WrongIncident {
                session_id,
                incident_id: self.incident_id,
            });
        }
        if self.turns.is_empty() {
            return Err(ResumeError::NoTurns { session_id });
        }
        if let Some(t) = self.turns.iter().find(|t| t.session_id != session_id) {
            return Err(ResumeError::ForeignTurn {
                session_id,
                other: t.session_id,
                seq: t.seq,
            });
        }
        for pair in self.turns.windows(2) {
            if let [a, b] = pair
                && b.seq <= a.seq
            {
                return Err(ResumeError::SeqNotIncreasing {
                    seq: b.seq,
                    previous: a.seq,
                });
            }
        }
        Ok(session_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resume::testing::*;

    fn request(turns: Vec<Turn>) -> ResumeRequest {
        let incident = IncidentId::new();
        ResumeRequest {
            session_id: Some(session()),
            incident_id: incident,
            session_incident_id: incident,
            turns,
        }
    }

    fn ok_turns() -> Vec<Turn> {
        vec![user(1, "a"), assistant(2, "b", &[]), user(3, "follow up")]
    }

    #[test]
    fn accepts_a_reopened_session() {
        assert_eq!(request(ok_turns()).validate(), Ok(session()));
        let mut t = ok_turns();
        t.push(notice(4, "recovered"));
        assert_eq!(request(t).validate(), Ok(session()));
    }

    #[test]
    fn each_invariant_has_its_error() {
        let mut r = request(ok_turns());
        r.session_id = None;
        assert_eq!(r.validate(), Err(ResumeError::MissingSessionId));

        let mut r = request(ok_turns());
        r.session_incident_id = IncidentId::new();
        assert!(matches!(
            r.validate(),
            Err(ResumeError::WrongIncident { .. })
        ));

        assert!(matches!(
            request(vec![]).validate(),
            Err(ResumeError::NoTurns { .. })
        ));

        let mut t = ok_turns();
        t[1].session_id = SessionId::new();
        assert!(
            matches!(request(t).validate(), Err(ResumeError::ForeignTurn { seq, .. }) if seq.get() == 2)
        );

        let t = vec![user(1, "a"), assistant(3, "b", &[]), user(3, "c")];
        assert!(matches!(
            request(t).validate(),
            Err(ResumeError::SeqNotIncreasing { .. })
        ));

        let t = vec![user(1, "a"), assistant(2, "b", &[])];
        let e = request(t).validate().unwrap_err();
        assert!(matches!(
            e,
            ResumeError::LastTurnNotUserMessage {
                role: Role::Assistant,
                empty: false,
                ..
            }
        ));
        assert!(e.to_string().contains("is an assistant turn"), "{e}");

        let t = vec![user(1, "a"), user(2, " \n")];
        assert!(matches!(
            request(t).validate(),
            Err(ResumeError::LastTurnNotUserMessage { empty: true, .. })
        ));
    }
}
