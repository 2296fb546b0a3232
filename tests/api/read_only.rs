//! A database node that stops taking writes under a running burst, as a
//! primary demoted by its HA manager does while its clients still hold
//! connections to it: every write there is refused with SQLSTATE 25006
//! (read-only transaction). The refusal is transient (the writable primary
//! is elsewhere, or will be), and a connection that got it is closed rather
//! than pooled again, so once writes are taken again the burst's retry
//! lands on a fresh connection and the session completes.
//!
//! Made here with `default_transaction_read_only` on the test's database
//! and its connections ended, so the pool reopens them read-only; then the
//! setting is reset, which only new connections see.

use std::time::Duration;

use inquest_agent::McpSection;
use inquest_proto::v1 as pb;
use inquest_testkit::{
    fake::{FakeProvider, FakeReply, Flavor},
    mcp,
};

use crate::agent_mcp::McpFile;
use crate::agent_support::{app_with_fake, session, start, turns};

#[tokio::test]
async fn a_node_that_turns_read_only_under_a_burst_is_waited_out_and_its_connections_dropped() {
    let python = mcp::python().expect("the MCP SDK (INQUEST_TEST_PYTHON)");
    let tools = McpFile::new(&python);
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Reading the pricing status slowly.").call(
        "r1",
        "slow_read",
        r#"{"service":"pricing","seconds":2}"#,
    ))
    .reply(FakeReply::text("The pricing service is fine."));
    let section = McpSection::new(&tools.file);
    let app = app_with_fake(&fake, |c| {
        c.mcp = Some(section);
        c.approval.mode = inquest_core::approval::Mode::Off;
    })
    .await;
    let mut c = app.client().await;
    let id = start(&mut c, "Is pricing healthy?").await;
    let db = inquest_tests::connect(&app.db_url).await;
    let head = async |db: &inquest_tests::tokio_postgres::Client| -> i64 {
        db.query_one(
            "SELECT head_seq FROM sessions WHERE id = $1::text::uuid",
            &[&id],
        )
        .await
        .unwrap()
        .get(0)
    };
    // The assistant turn calling the slow read is committed: the tool runs.
    for _ in 0..600 {
        if head(&db).await >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(head(&db).await, 2, "the burst did not reach its tool call");
    db.batch_execute(&format!(
        "ALTER DATABASE {name} SET default_transaction_read_only = on; \
         SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = '{name}' AND pid <> pg_backend_pid();",
        name = app.db_name
    ))
    .await
    .unwrap();
    // The tool ends within 2 s; its result's write meets the read-only
    // node and is held back, not refused for good.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(head(&db).await, 2, "a write landed on a read-only node");
    let s = session(&mut c, &id).await;
    assert_eq!(s.status(), pb::SessionStatus::Running, "{s:?}");
    // Writable again, for new connections only: the pooled ones that were
    // refused must have been dropped for the burst to go on.
    db.batch_execute(&format!(
        "ALTER DATABASE {} RESET default_transaction_read_only",
        app.db_name
    ))
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let s = loop {
        let s = session(&mut c, &id).await;
        if !matches!(
            s.status(),
            pb::SessionStatus::Pending | pb::SessionStatus::Running
        ) {
            break s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the burst never went on after the node took writes again: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(s.status(), pb::SessionStatus::Completed, "{s:?}");
    let stored = turns(&mut c, &id).await;
    let results = stored
        .iter()
        .filter(|t| t.role() == pb::TurnRole::Tool)
        .count();
    assert_eq!(results, 1, "{stored:#?}");
    assert!(
        stored
            .iter()
            .all(|t| !t.content.starts_with(inquest_core::LOST_IN_FAILOVER)),
        "{stored:#?}"
    );
    app.stop().await.unwrap();
}
