//! Storing one turn of a burst: through the sink, then into the state.

use inquest_core::{ExitReason, NewTurn, Seq};

use crate::{
    sink::{SinkError, TurnSink},
    state::{BurstState, SessionState},
};

/// Persists one turn through the sink and records it in the state (moved
/// there, not copied), returning its seq. On a failed write, the reason
/// the burst ends with: `store_failed`, or `lease_lost` when the fenced
/// store refused a worker that lost its lease.
pub(crate) async fn persist(
    sink: &dyn TurnSink,
    state: &mut SessionState,
    burst: &mut BurstState,
    turn: NewTurn,
) -> Result<Seq, ExitReason> {
    match sink.append(state.session_id, turn).await {
        Ok(stored) => {
            burst.turns += 1;
            let seq = stored.seq;
            state.turns.push(stored);
            Ok(seq)
        }
        Err(e) => Err(ending_for(e)),
    }
}

/// The reason a burst ends with after a write through the sink failed.
pub(crate) fn ending_for(e: SinkError) -> ExitReason {
    match e {
        e @ SinkError::LeaseLost(_) => {
            tracing::warn!(error = %inquest_core::error_chain(&e), "lease lost; abandoning the burst");
            ExitReason::LeaseLost
        }
        e @ SinkError::Unavailable(_) => {
            tracing::warn!(error = %inquest_core::error_chain(&e), "store unavailable past the lease deadline; handing the session over");
            ExitReason::StoreUnavailable
        }
        e @ SinkError::NotPersisted(_) => {
            tracing::error!(error = %inquest_core::error_chain(&e), "write refused; ending the burst");
            ExitReason::StoreFailed
        }
    }
}
