//! Inquest's pure domain.
//!
//! Everything here is plain data and functions over it: no tokio, no
//! database, no network. The store and the agent meet these types through
//! narrow conversions, so the hard rules (what a valid turn is, how seqs and
//! cursors behave, how a transcript is rebuilt) are tested with plain data.

pub mod ids;
pub mod input;
pub mod seq;
pub mod session;
pub mod turn;

pub use ids::{IdError, IncidentId, SessionId};
pub use input::{IdempotencyKey, IncidentText, InputError, Limits, UserMessage};
pub use seq::{AfterSeq, CursorError, Seq};
pub use session::SessionStatus;
pub use turn::{NewTurn, Role, ToolArguments, ToolCall, TokenUsage, Turn};
