//! Turns lost in a failover, through the real server: a database that
//! "forgets" a committed, published turn, as an asynchronous standby
//! promoted without it does (simulated here by removing the turn with
//! triggers off while a tool runs; the real standby pair is in
//! `crates/inquest/tests/failover.rs`). The burst's next write is refused,
//! a tombstone takes the lost seq (never new content), the watcher that
//! saw the lost turn is told (DATA_LOSS with the cursor to read again),
//! and the session is recovered from what the database holds, its next
//! model request accepted by the strict fake.

use std::collections::BTreeMap;
use std::time::Duration;

use inquest_agent::McpSection;
use inquest_proto::v1::{self as pb, watch_event::Event};
use inquest_server::reason::{ErrorReason, Reason};
use inquest_testkit::{
    fake::{FakeProvider, FakeReply, Flavor},
    mcp,
};
use inquest_tests::watching::{next, watch};
use tonic::Code;

use crate::agent_mcp::McpFile;
use crate::agent_support::{app_with_fake, eventually, session, start, turns};

#[tokio::test]
async fn a_turn_lost_in_a_failover_is_tombstoned_told_to_watchers_and_recovered() {
    let python = mcp::python().expect("the MCP SDK (INQUEST_TEST_PYTHON)");
    let tools = McpFile::new(&python);
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Reading the pricing log slowly.").call(
        "r1",
        "slow_read",
        r#"{"service":"pricing","seconds":3}"#,
    ))
    .reply(FakeReply::text("The pricing service is fine."));
    let section = McpSection::new(&tools.file);
    let app = app_with_fake(&fake, |c| {
        c.mcp = Some(section);
        c.approval.mode = inquest_core::approval::Mode::Off;
        // The orphan the loss leaves is claimed at the next reap.
        c.lease.reap_interval = Duration::from_millis(200);
    })
    .await;
    let mut c = app.client().await;
    let id = start(&mut c, "Is pricing healthy?").await;
    let mut stream = watch(&mut c, &id, 0).await.unwrap();
    // What the watcher received, by seq (a later arrival under a seq it
    // already had is recorded too).
    let mut seen: Vec<(i64, String)> = Vec::new();
    loop {
        match next(&mut stream).await.unwrap() {
            Some(Event::Turn(t)) => {
                seen.push((t.seq, t.content.clone()));
                if t.seq == 2 {
                    break;
                }
            }
            Some(_) => {}
            None => panic!("the stream ended before the tool ran"),
        }
    }
    // The slow read runs (3 s). The database forgets seq 2, the assistant
    // turn the watcher holds, as a standby that never received it would.
    let db = inquest_tests::connect(&app.db_url).await;
    db.batch_execute(&format!(
        "BEGIN; SET LOCAL session_replication_role = replica; \
         DELETE FROM turns WHERE session_id = '{id}' AND seq >= 2; \
         UPDATE sessions SET head_seq = 1, turn_count = 1, tool_calls = 0 WHERE id = '{id}'; \
         COMMIT;"
    ))
    .await
    .unwrap();
    // The tool's result is refused (head 1, known 2): the watcher is told.
    let ending = loop {
        match tokio::time::timeout(Duration::from_secs(20), stream.message()).await {
            Ok(Ok(Some(e))) => {
                if let Some(Event::Turn(t)) = e.event {
                    seen.push((t.seq, t.content.clone()));
                }
            }
            Ok(Ok(None)) => panic!("the stream ended OK after a loss: {seen:?}"),
            Ok(Err(status)) => break status,
            Err(_) => panic!("nothing told the watcher: {seen:?}"),
        }
    };
    assert_eq!(ending.code(), Code::DataLoss, "{ending:?}");
    let r = ErrorReason::of(&ending).expect("ErrorInfo");
    assert_eq!(r.reason, Reason::TurnsLost);
    assert_eq!(r.number("after_seq"), Some(1), "{ending:?}");

    // Reconnecting from the cursor reads the tombstone, then the recovered
    // session to its end.
    let mut again = watch(&mut c, &id, 1).await.unwrap();
    loop {
        match tokio::time::timeout(Duration::from_secs(30), again.message()).await {
            Ok(Ok(Some(e))) => {
                if let Some(Event::Turn(t)) = e.event {
                    seen.push((t.seq, t.content.clone()));
                }
            }
            Ok(Ok(None)) => break,
            Ok(Err(status)) => panic!("{status:?} after {seen:?}"),
            Err(_) => panic!("the recovered session did not end: {seen:?}"),
        }
    }
    eventually("the session settles", || true).await;
    let s = session(&mut c, &id).await;
    assert_eq!(s.status(), pb::SessionStatus::Completed, "{s:?}");

    // Stored: seq 2 is the tombstone, saying what was lost; no seq holds
    // new content where the watcher saw other content, but for it.
    let stored = turns(&mut c, &id).await;
    let tomb = stored.iter().find(|t| t.seq == 2).expect("seq 2");
    assert!(
        tomb.content.starts_with(inquest_core::LOST_IN_FAILOVER)
            && tomb
                .content
                .contains("an assistant reply calling slow_read"),
        "{tomb:?}"
    );
    let by_seq: BTreeMap<i64, &str> = stored.iter().map(|t| (t.seq, t.content.as_str())).collect();
    for (seq, content) in &seen {
        let now = by_seq.get(seq).copied().unwrap_or_default();
        assert!(
            now == content || now.starts_with(inquest_core::LOST_IN_FAILOVER),
            "seq {seq} was sent as {content:?}, is stored as {now:?}"
        );
    }
    // The recovered burst's request was accepted by the strict fake, and
    // the final answer stands after the tombstone.
    assert!(
        stored
            .iter()
            .any(|t| t.seq > 2 && t.content.contains("pricing service is fine")),
        "{stored:#?}"
    );
    app.stop().await.unwrap();
}
