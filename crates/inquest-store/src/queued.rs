//! Reading the queue of `queued_messages` (V27, V29) for the API: what
//! GetSession and ListSessions show of the messages waiting behind a
//! running burst. Writing and draining the queue is `bursts.rs`.

use inquest_core::SessionId;
use time::OffsetDateTime;

use crate::{Store, StoreError, rows::get};

/// One queued message, as stored.
#[derive(Debug, Clone)]
pub struct QueuedMessage {
    pub session: SessionId,
    pub text: String,
    pub position: u32,
    pub interrupt: bool,
    pub queued_at: OffsetDateTime,
}

impl Store {
    /// The queued messages of `sessions`, oldest first per session, in one
    /// read of `queued_messages_session`.
    pub async fn queued_messages(
        &self,
        sessions: &[SessionId],
    ) -> Result<Vec<QueuedMessage>, StoreError> {
        if sessions.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<uuid::Uuid> = sessions.iter().map(|s| *s.as_uuid()).collect();
        let rows = self
            .run("queued_messages", async |c| {
                Ok(c.query(
                    "SELECT session_id, text, position, interrupt, created_at \
                     FROM queued_messages WHERE session_id = ANY($1) ORDER BY session_id, id",
                    &[&ids],
                )
                .await?)
            })
            .await?;
        rows.iter()
            .map(|row| {
                let session = SessionId::from_uuid(get(row, 0)?);
                let bytes: Vec<u8> = get(row, 1)?;
                let text = String::from_utf8(bytes).map_err(|e| {
                    StoreError::Corrupt(format!("queued message of session {session}: {e}"))
                })?;
                let position: i32 = get(row, 2)?;
                Ok(QueuedMessage {
                    session,
                    text,
                    position: u32::try_from(position).unwrap_or(0),
                    interrupt: get(row, 3)?,
                    queued_at: get(row, 4)?,
                })
            })
            .collect()
    }
}
