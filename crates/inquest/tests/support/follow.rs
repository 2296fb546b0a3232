//! A watcher that follows one session to its end across failovers and
//! replica faults, recording what it received (`failover.rs`, `ha.rs`).

use std::time::Duration;

use inquest_proto::v1::{self as pb, watch_event::Event};

/// A watcher that follows `session` on `port`, reconnecting from the
/// cursor an ending names (or its last seq), recording every turn it
/// receives and every status it ends with, until the session's stream
/// ends OK.
pub async fn follow(port: u16, session: String) -> (Vec<(i64, String)>, Vec<tonic::Status>) {
    let (mut seen, mut endings) = (Vec::new(), Vec::new());
    let mut after = 0i64;
    // When the turn at `after` was committed, as received.
    let mut committed: Option<prost_types::Timestamp> = None;
    for _ in 0..200 {
        let Ok(mut c) = inquest_proto::v1::investigations_client::InvestigationsClient::connect(
            format!("http://127.0.0.1:{port}"),
        )
        .await
        else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let stream = c
            .watch_session(pb::WatchSessionRequest {
                session_id: session.clone(),
                after_seq: after,
                after_committed_at: committed,
            })
            .await;
        let mut stream = match stream {
            Ok(s) => s.into_inner(),
            Err(status) => {
                // Beyond the head, or replaced: read again from where the
                // answer says.
                let reason = inquest_server::reason::ErrorReason::of(&status);
                let again = match reason.as_ref().map(|r| r.reason) {
                    Some(inquest_server::reason::Reason::CursorBeyondHead) => {
                        reason.and_then(|r| r.number("head_seq"))
                    }
                    Some(inquest_server::reason::Reason::TurnsLost) => {
                        reason.and_then(|r| r.number("after_seq"))
                    }
                    _ => None,
                };
                if let Some(again) = again {
                    after = again;
                    committed = None;
                }
                endings.push(status);
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        loop {
            match stream.message().await {
                Ok(Some(e)) => {
                    if let Some(Event::Turn(t)) = e.event {
                        after = t.seq;
                        committed = t.created_at;
                        seen.push((t.seq, t.content));
                    }
                }
                Ok(None) => return (seen, endings),
                Err(status) => {
                    if let Some(a) = inquest_server::reason::ErrorReason::of(&status)
                        .and_then(|r| r.number("after_seq"))
                        && a != after
                    {
                        after = a;
                        committed = None;
                    }
                    endings.push(status);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    break;
                }
            }
        }
    }
    panic!("the watcher never saw the session end: {seen:?} {endings:?}");
}
