//! The provider side of the real loop: failover and its reset at the next
//! burst, a follow-up sending a transcript the provider accepts, tool
//! schemas on the wire, and token usage in the session counters and the
//! report.

use inquest_agent::Skill;
use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use inquest_tests::spawn_app_with;
use serde_json::Value;

use crate::agent_support::{
    assert_ended, assistant, evidence_tools, finished, provider, send, session, shapes, start,
    tool_result_of, turns, user,
};

const ASK: &str = "why is checkout slow?";

/// Roles of a recorded request's messages.
fn roles(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test]
async fn failover_answers_from_the_second_provider_and_the_next_burst_asks_the_first_again() {
    let first = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let second = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    // The first provider is down for the whole first burst: one try and
    // one retry, then failover (sticky for the rest of the burst).
    first.fail(2, 500);
    second
        .reply(FakeReply::text("Listing.").call("c1", "list_files", "{}"))
        .reply(FakeReply::text("Found it."))
        .reply(FakeReply::text("S1 by the second"));
    let mut primary = provider(&first, Flavor::OpenAi, "primary");
    primary.max_retries = Some(1);
    let secondary = provider(&second, Flavor::OpenAi, "secondary");
    let app = spawn_app_with(|c| {
        c.providers = vec![primary, secondary];
        evidence_tools(c);
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;

    let (report1, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report1.exit_reason, "completed");
    assert_eq!(report1.summary, "S1 by the second");
    assert_ended(&s, pb::SessionStatus::Completed, "completed");
    // Sticky: after failing over, the burst's later calls (the author's
    // too) went straight to the second provider.
    assert_eq!(first.request_count(), 2);
    assert_eq!(second.request_count(), 3);

    // A new burst starts from the first provider again, which is back.
    first
        .reply(FakeReply::text("The first provider answers."))
        .reply(FakeReply::text("S2 by the first"));
    send(&mut client, &id, "anything else?").await;
    let (report2, s) = finished(&mut client, &id, 2).await;
    assert_eq!(report2.exit_reason, "awaiting_user");
    assert_eq!(report2.summary, "S2 by the first");
    assert_ended(&s, pb::SessionStatus::Idle, "awaiting_user");
    assert_eq!(first.request_count(), 4);
    assert_eq!(second.request_count(), 3);
    // The first provider got the whole transcript the second one built.
    let resumed = &first.requests()[2].body;
    assert_eq!(
        roles(resumed),
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    let stored = turns(&mut client, &id).await;
    let got = shapes(&stored);
    assert_eq!(got.len(), 6);
    assert_eq!(got[1], assistant("Listing.", &[("c1", "list_files", "{}")]));
    assert_eq!(
        tool_result_of(&stored[2]),
        ("c1".into(), "list_files".into(), false)
    );
    assert_eq!(got[3], assistant("Found it.", &[]));
    assert_eq!(got[4], user("anything else?"));
    assert_eq!(got[5], assistant("The first provider answers.", &[]));
    app.stop().await.unwrap();
}

#[tokio::test]
async fn every_provider_failing_ends_with_provider_failed() {
    let first = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let second = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    first.fail(2, 500);
    second.fail(2, 529);
    let mut a = provider(&first, Flavor::OpenAi, "a");
    a.max_retries = Some(1);
    let mut b = provider(&second, Flavor::Anthropic, "b");
    b.max_retries = Some(1);
    let app = spawn_app_with(|c| {
        c.providers = vec![a, b];
        evidence_tools(c);
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "provider_failed");
    assert!(report.exit_is_terminal);
    assert_ended(&s, pb::SessionStatus::Idle, "provider_failed");
    assert_eq!(shapes(&turns(&mut client, &id).await), [user(ASK)]);
    // Each provider: one try and one retry; no author call.
    assert_eq!((first.request_count(), second.request_count()), (2, 2));
    app.stop().await.unwrap();
}

/// Anthropic wire format: the follow-up burst replays a transcript with a
/// tool_use/tool_result pair, which the fake (like the real API) rejects
/// with a 400 unless it is well formed; the burst succeeding is the proof.
#[tokio::test]
async fn a_follow_up_sends_a_valid_transcript_tool_schemas_and_counts_tokens() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    fake.reply(
        FakeReply::text("Checking the deploys.")
            .call(
                "toolu_1",
                "search",
                r#"{"pattern": "checkout-api", "path": "deploys/deploys.log"}"#,
            )
            .usage(100, 10),
    )
    .reply(FakeReply::text("A deploy shrank the pool.").usage(200, 20))
    .reply(FakeReply::text("S1").usage(50, 5))
    .reply(FakeReply::text("Roll back the deploy.").usage(300, 30))
    .reply(FakeReply::text("S2").usage(60, 6));
    let entry = provider(&fake, Flavor::Anthropic, "claude");
    let app = spawn_app_with(|c| {
        c.providers = vec![entry];
        evidence_tools(c);
        c.skills = vec![
            Skill {
                name: "log-forensics".into(),
                server: "evidence".into(),
                prompt: "Start from the deploy log.".into(),
            },
            Skill {
                name: "k8s".into(),
                server: "kubernetes".into(),
                prompt: "Look at the pods.".into(),
            },
        ];
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    let (report1, _) = finished(&mut client, &id, 1).await;
    assert_eq!(report1.exit_reason, "completed");
    send(&mut client, &id, "what should we do?").await;
    let (report2, s) = finished(&mut client, &id, 2).await;
    assert_eq!(report2.exit_reason, "awaiting_user");
    assert_eq!(report2.summary, "S2");
    assert_eq!(fake.request_count(), 5);
    let requests = fake.requests();

    // Tool schemas went out with the loop's calls, not the author's.
    let tools = requests[0].body["tools"].as_array().expect("tools sent");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["list_files", "read_file", "search"]);
    for tool in tools {
        assert_eq!(tool["input_schema"]["type"], "object", "{tool}");
        assert!(tool["description"].as_str().is_some_and(|d| !d.is_empty()));
    }
    assert!(
        requests[2].body["tools"]
            .as_array()
            .is_none_or(Vec::is_empty)
    );
    // The loaded skill is in the system prompt; the one for a server that
    // is not configured is not.
    let system = requests[0].body["system"].to_string();
    assert!(system.contains("Start from the deploy log."), "{system}");
    assert!(!system.contains("Look at the pods."), "{system}");

    // The follow-up's first call: the whole history, tool_use answered by
    // its tool_result, the new question last.
    let follow_up = &requests[3].body;
    let messages = follow_up["messages"].as_array().unwrap();
    assert_eq!(
        roles(follow_up),
        ["user", "assistant", "user", "assistant", "user"]
    );
    let blocks = |i: usize| {
        messages[i]["content"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let tool_use = blocks(1)
        .into_iter()
        .find(|b| b["type"] == "tool_use")
        .expect("tool_use block");
    assert_eq!(tool_use["id"], "toolu_1");
    assert_eq!(tool_use["input"]["pattern"], "checkout-api");
    let result = blocks(2)
        .into_iter()
        .find(|b| b["type"] == "tool_result")
        .expect("tool_result block");
    assert_eq!(result["tool_use_id"], "toolu_1");
    assert!(follow_up.to_string().contains("what should we do?"));

    // Tokens: per turn, in the session's counters (the loop's turns), in
    // each report's session figures (the same, as of that burst's end),
    // and in each report's burst figures (its turns and author call).
    let stored = turns(&mut client, &id).await;
    assert_eq!(
        tool_result_of(&stored[2]),
        ("toolu_1".into(), "search".into(), false)
    );
    let usage: Vec<(i64, i64)> = stored
        .iter()
        .filter(|t| t.role() == pb::TurnRole::Assistant)
        .map(|t| (t.input_tokens, t.output_tokens))
        .collect();
    assert_eq!(usage, [(100, 10), (200, 20), (300, 30)]);
    assert_eq!((s.input_tokens, s.output_tokens), (600, 60));
    assert_eq!(s.tool_calls, 1);
    assert_eq!((report1.input_tokens, report1.output_tokens), (300, 30));
    assert_eq!((report2.input_tokens, report2.output_tokens), (600, 60));
    assert_eq!(
        (report1.burst_input_tokens, report1.burst_output_tokens),
        (350, 35)
    );
    assert_eq!(
        (report2.burst_input_tokens, report2.burst_output_tokens),
        (360, 36)
    );
    assert_eq!(report2.tool_calls, 1);
    assert_eq!(report2.skills_loaded, ["log-forensics"]);
    assert_eq!(report2.skills_used, ["log-forensics"]);
    assert_eq!(report2.servers_used, ["evidence"]);
    let again = session(&mut client, &id).await;
    assert_eq!(again.turn_count, 6);
    app.stop().await.unwrap();
}
