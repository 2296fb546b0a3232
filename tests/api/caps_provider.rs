//! The model-side caps of `[limits]`: provider response bodies, the text of
//! an assistant turn, a tool call's arguments. Every cut leaves a marker
//! saying what was cut and how much; a body over the cap fails that
//! provider (no retry) and the chain fails over.

use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use inquest_tests::spawn_app_with;

use crate::agent_support::{
    CapturedLog, app_with_fake, assert_ended, evidence_tools, finished, provider, start, turns,
};

const ASK: &str = "why is checkout slow?";

#[tokio::test]
async fn model_text_over_the_cap_is_stored_cut_with_a_marker() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    // 600 bytes of two-byte chars: a cap of 101 falls inside one.
    fake.reply(FakeReply::text(&"é".repeat(300)))
        .reply(FakeReply::text("S"));
    let app = app_with_fake(&fake, |c| c.limits.max_model_text_bytes = 101).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    assert_ended(&s, pb::SessionStatus::Completed, "completed");
    let stored = turns(&mut client, &id).await;
    assert_eq!(stored.len(), 2);
    let want = format!(
        "{}…[cut by inquest: 500 more bytes of model text over limits.max_model_text_bytes = 101]",
        "é".repeat(50)
    );
    assert_eq!(stored[1].content, want);
    // The model is shown the cut text, too (the author's call).
    let author = &fake.requests()[1].body["messages"];
    assert_eq!(author[2]["content"], want.as_str(), "{author}");
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_call_with_arguments_over_the_cap_is_stored_cut_and_not_run() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let path = "p".repeat(200);
    // Compact, as the loop measures it (JSON arguments are re-serialized).
    let arguments = format!(r#"{{"path":"{path}"}}"#);
    fake.reply(FakeReply::text("Reading.").call("big", "read_file", &arguments))
        .reply(FakeReply::text("Gave up on that file."))
        .reply(FakeReply::text("S"));
    let app = app_with_fake(&fake, |c| c.limits.max_tool_arguments_bytes = 64).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    assert_ended(&s, pb::SessionStatus::Completed, "completed");
    let stored = turns(&mut client, &id).await;
    assert_eq!(stored.len(), 4);
    let sent = &stored[1].tool_calls[0].arguments_json;
    let dropped = arguments.len() - 64;
    assert_eq!(
        *sent,
        format!(
            "{}…[cut by inquest: {dropped} more bytes of tool-call arguments over \
             limits.max_tool_arguments_bytes = 64]",
            &arguments[..64]
        )
    );
    // Not run: the result says why, as an error.
    assert_eq!(stored[2].tool_call_id, "big");
    assert!(stored[2].is_error);
    assert!(
        stored[2].content.starts_with(&format!(
            "not run: the arguments of this call were {} bytes, over limits.max_tool_arguments_bytes = 64",
            arguments.len()
        )),
        "{}",
        stored[2].content
    );
    // The model was shown its cut call and the refusal.
    let second = &fake.requests()[1].body["messages"];
    assert_eq!(
        second[2]["tool_calls"][0]["function"]["arguments"],
        sent.as_str()
    );
    assert_eq!(second[3]["tool_call_id"], "big");
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_provider_body_over_the_cap_is_not_retried_and_the_chain_fails_over() {
    let first = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let second = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    first
        .reply(FakeReply::text(&"x".repeat(10_000)))
        .reply(FakeReply::text("never asked"));
    second
        .reply(FakeReply::text("The answer."))
        .reply(FakeReply::text("S by the second"));
    let mut primary = provider(&first, Flavor::OpenAi, "primary");
    // Retries are allowed, but a body over the cap is not retried.
    primary.max_retries = Some(2);
    let secondary = provider(&second, Flavor::OpenAi, "secondary");
    let app = spawn_app_with(|c| {
        c.providers = vec![primary, secondary];
        evidence_tools(c);
        c.limits.max_provider_response_bytes = 4096;
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    assert_eq!(report.summary, "S by the second");
    assert_ended(&s, pb::SessionStatus::Completed, "completed");
    assert_eq!(first.request_count(), 1);
    assert_eq!(second.request_count(), 2);
    let stored = turns(&mut client, &id).await;
    assert_eq!(stored[1].content, "The answer.");
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_body_over_the_cap_from_the_only_provider_ends_with_provider_failed_naming_the_limit() {
    let log = CapturedLog::default();
    let _guard = log.install();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text(&"x".repeat(10_000)));
    let app = app_with_fake(&fake, |c| c.limits.max_provider_response_bytes = 4096).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "provider_failed");
    assert_ended(&s, pb::SessionStatus::Idle, "provider_failed");
    assert_eq!(fake.request_count(), 1, "not retried");
    assert_eq!(turns(&mut client, &id).await.len(), 1);
    let text = log.text();
    assert!(
        text.contains("response body is over limits.max_provider_response_bytes = 4096 bytes"),
        "{text}"
    );
    app.stop().await.unwrap();
}
