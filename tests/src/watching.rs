//! Client-side helpers for `WatchSession` tests.

use std::time::Duration;

use inquest_proto::v1::{
    self as pb, investigations_client::InvestigationsClient, watch_event::Event,
};
use tonic::{Status, Streaming, transport::Channel};

/// Opens a watch stream.
pub async fn watch(
    client: &mut InvestigationsClient<Channel>,
    session: &str,
    after_seq: i64,
) -> Result<Streaming<pb::WatchEvent>, Status> {
    client
        .watch_session(pb::WatchSessionRequest {
            session_id: session.into(),
            after_seq,
            after_committed_at: None,
        })
        .await
        .map(tonic::Response::into_inner)
}

/// How a stream ended: `Ok` for a clean end, else its status.
pub type Ending = Result<(), Status>;

/// Hang guard for reading a stream that must end. Generous: it only turns
/// a hang into a failure, it asserts nothing about speed.
pub const HANG_GUARD: Duration = Duration::from_secs(30);

/// Reads every event until the stream ends.
pub async fn collect(mut stream: Streaming<pb::WatchEvent>) -> (Vec<Event>, Ending) {
    let mut events = Vec::new();
    let read = async {
        loop {
            match stream.message().await {
                Ok(Some(e)) => events.extend(e.event),
                Ok(None) => return Ok(()),
                Err(status) => return Err(status),
            }
        }
    };
    let ending = tokio::time::timeout(HANG_GUARD, read)
        .await
        .expect("the watch stream did not end");
    (events, ending)
}

/// The next event (skipping nothing); `None` at a clean end.
pub async fn next(stream: &mut Streaming<pb::WatchEvent>) -> Result<Option<Event>, Status> {
    let msg = tokio::time::timeout(HANG_GUARD, stream.message())
        .await
        .expect("no watch event arrived")?;
    Ok(msg.and_then(|e| e.event))
}

/// Seqs of the turn events, in arrival order.
pub fn turn_seqs(events: &[Event]) -> Vec<i64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Turn(t) => Some(t.seq),
            _ => None,
        })
        .collect()
}

/// Waits until `check` holds, polling; panics after the hang guard.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
