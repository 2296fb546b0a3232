//! Row → domain decoding, in one place so every query reads rows the same
//! way and a bad row becomes [`StoreError::Corrupt`] instead of a panic.

use inquest_core::{Cost, ExitReason, Role, Seq, SessionId, SessionStatus, TokenUsage, Turn};
use tokio_postgres::Row;

use crate::{StoreError, text};

/// Columns selected for a turn, in the order [`turn_from_row`] reads them.
///
/// `escaped` (migration V8) says the row's text fields are stored in the
/// encoding of [`crate::text`]; they are decoded here, so no caller sees it.
/// `recovery_plan` (migration V11) is a recovery notice's plan, NULL for
/// any other turn; it follows the flag like `tool_calls`. The cache counts
/// and the cost (`NULL` = unknown) are migration V13.
pub(crate) const TURN_COLUMNS: &str = "session_id, seq, role, content, tool_calls, tool_call_id, \
     tool_name, is_error, input_tokens, output_tokens, created_at, escaped, recovery_plan, \
     cache_read_input_tokens, cache_creation_input_tokens, cost_nano_usd";

pub(crate) fn get<'a, T>(row: &'a Row, idx: usize) -> Result<T, StoreError>
where
    T: tokio_postgres::types::FromSql<'a>,
{
    row.try_get(idx)
        .map_err(|e| StoreError::Corrupt(format!("column {idx}: {e}")))
}

/// A session's `status` column: the state machine's own spelling.
pub(crate) fn status(row: &Row, idx: usize) -> Result<SessionStatus, StoreError> {
    let text: &str = get(row, idx)?;
    SessionStatus::parse(text)
        .ok_or_else(|| StoreError::Corrupt(format!("session status {text:?}")))
}

/// A nullable `exit_reason` column.
pub(crate) fn exit_reason(row: &Row, idx: usize) -> Result<Option<ExitReason>, StoreError> {
    let text: Option<&str> = get(row, idx)?;
    text.map(|text| {
        ExitReason::parse(text).ok_or_else(|| StoreError::Corrupt(format!("exit reason {text:?}")))
    })
    .transpose()
}

pub(crate) fn seq(value: i64) -> Result<Seq, StoreError> {
    Seq::from_stored(value).ok_or_else(|| StoreError::Corrupt(format!("seq {value}")))
}

pub(crate) fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

pub(crate) fn turn_from_row(row: &Row) -> Result<Turn, StoreError> {
    let role: &str = get(row, 2)?;
    let escaped: bool = get(row, 11)?;
    let tool_call_id: Option<String> = get(row, 5)?;
    let tool_name: Option<String> = get(row, 6)?;
    let recovery_plan: Option<serde_json::Value> = get(row, 12)?;
    Ok(Turn {
        session_id: SessionId::from_uuid(get(row, 0)?),
        seq: seq(get(row, 1)?)?,
        role: Role::parse(role).ok_or_else(|| StoreError::Corrupt(format!("role {role:?}")))?,
        content: text::read(get(row, 3)?, escaped, "turn content")?,
        tool_calls_raw: text::read_json(get(row, 4)?, escaped, "turn tool calls")?,
        recovery_plan_raw: recovery_plan
            .map(|plan| text::read_json(plan, escaped, "turn recovery plan"))
            .transpose()?,
        tool_call_id: tool_call_id
            .map(|id| text::read(id, escaped, "turn tool call id"))
            .transpose()?,
        tool_name: tool_name
            .map(|name| text::read(name, escaped, "turn tool name"))
            .transpose()?,
        is_error: get(row, 7)?,
        usage: TokenUsage {
            input_tokens: count(get(row, 8)?),
            output_tokens: count(get(row, 9)?),
            cache_read_input_tokens: count(get(row, 13)?),
            cache_creation_input_tokens: count(get(row, 14)?),
            cost: get::<Option<i64>>(row, 15)?.map(|n| Cost::from_nanos(count(n))),
        },
        created_at: get(row, 10)?,
    })
}
