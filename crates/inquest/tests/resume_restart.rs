//! Resume after a real process restart: the `inquest` binary
//! runs a session against a fake provider, is stopped with SIGTERM, stays
//! down, and a NEW process on the same database takes the follow-up. The
//! fake (which rejects invalid transcripts like the real API) must receive
//! the whole history, and active time must leave the downtime out.

mod support;

use std::time::{Duration, Instant};

use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use support::{Server, create_incident, settled, start_session};

#[tokio::test]
async fn follow_up_after_a_restart_sends_the_whole_history_and_skips_the_downtime() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("The pool is exhausted.").usage(100, 10));
    fake.reply(FakeReply::text("Report: pool exhaustion."));
    let dir = tempfile::Builder::new()
        .prefix("inquest-restart-")
        .tempdir_in("/tmp")
        .unwrap();
    let config = dir.path().join("inquest.toml");
    std::fs::write(
        &config,
        format!(
            "[[providers]]\nkind = \"openai\"\nmodel = \"fake-model\"\nbase_url = \"{}\"\n\
             max_retries = 0\ntimeout = \"30s\"\n",
            fake.base_url()
        ),
    )
    .unwrap();
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();

    let config = config.to_str().unwrap();
    let first = Server::start(&["--config", config, "--database-url", &url]).await;
    let mut c = first.client().await;
    let incident = create_incident(&mut c, "checkout latency").await;
    let session = start_session(&mut c, &incident.id, "why is checkout slow?")
        .await
        .unwrap();
    let s = settled(&mut c, &session.id).await;
    assert_eq!(s.exit_reason, "completed");
    let before_restart = fake.request_count();
    first.stop().await;

    // Down for a measurable while.
    let down = Instant::now();
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let second = Server::start(&["--config", config, "--database-url", &url]).await;
    let downtime = down.elapsed();
    let mut c = second.client().await;
    fake.reply(FakeReply::text("It recovered after the deploy.").usage(200, 10));
    let seq = c
        .send_message(pb::SendMessageRequest {
            session_id: session.id.clone(),
            message: "is it still slow?".into(),
            idempotency_key: String::new(),
            if_running: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .seq;
    let s = settled(&mut c, &session.id).await;
    assert_eq!(s.exit_reason, "awaiting_user", "{s:?}");

    // The resumed burst's first request: the whole, valid history.
    let requests = fake.requests();
    let resumed = &requests[before_restart];
    let messages = resumed.body["messages"].as_array().unwrap();
    let shown: Vec<(String, String)> = messages
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        vec![
            ("user".to_owned(), "why is checkout slow?".to_owned()),
            ("assistant".to_owned(), "The pool is exhausted.".to_owned()),
            ("user".to_owned(), "is it still slow?".to_owned()),
        ]
    );
    assert_eq!(seq, 3);

    let report = c
        .get_report(pb::GetReportRequest {
            session_id: session.id.clone(),
            burst: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(report.burst, 2);
    let active = Duration::from_millis(u64::try_from(report.active_time_ms).unwrap());
    assert!(
        active < downtime,
        "active time {active:?} must leave out the {downtime:?} the server was down"
    );
    assert!(report.input_tokens >= 300, "{report:?}");
    second.stop().await;
}
