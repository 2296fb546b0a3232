//! The Anthropic adapter against the fake Messages API.

use inquest_agent::{Provider, ProviderError, StopReason};
use inquest_core::{TokenUsage, ToolArguments};
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use serde_json::json;

use crate::support::{anthropic, assistant, rebuilt_transcript, request, result, tools, user};

#[tokio::test]
async fn anthropic_request_has_headers_tools_and_folded_blocks() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let provider = anthropic(&fake);
    let tools = tools();
    let transcript = rebuilt_transcript();
    provider
        .complete(&request(&transcript, &tools))
        .await
        .unwrap();

    let sent = fake.requests().remove(0);
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    let body = &sent.body;
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["max_tokens"], 1024);
    // The system prompt is one text block, so it can carry a cache
    // breakpoint; so do the last tool and the newest message's last block.
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "You investigate incidents.",
                "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(
        body["tools"],
        json!([{"name": "read_log", "description": "Reads a log file.",
                "input_schema": tools[0].input_schema, "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(
        sent.cache_breakpoints,
        ["tools.0", "system.0", "messages.6.content.1"]
    );
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "user"
        ]
    );
    let m = &body["messages"];
    // Blank assistant text is not sent; the two calls are two blocks.
    assert_eq!(
        m[1]["content"],
        json!([
            {"type": "tool_use", "id": "c1", "name": "read_log", "input": {"file": "app.log"}},
            {"type": "tool_use", "id": "c2", "name": "read_log",
             "input": {"_raw_arguments": "{\"file\": app.log"}}
        ])
    );
    // Both results in one user message; the synthetic one is an error.
    assert_eq!(m[2]["content"][0]["tool_use_id"], "c1");
    assert_eq!(m[2]["content"][0]["content"], "pool exhausted");
    assert_eq!(m[2]["content"][1]["tool_use_id"], "c2");
    assert_eq!(m[2]["content"][1]["is_error"], true);
    // The follow-up text joins the result it follows, after it.
    assert_eq!(m[6]["content"][0]["type"], "tool_result");
    assert_eq!(
        m[6]["content"][1],
        json!({"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}})
    );
}

#[tokio::test]
async fn anthropic_consecutive_same_role_messages_are_merged() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let transcript = vec![
        user("a"),
        user("b"),
        assistant("one", &[]),
        assistant("two", &[("c1", "{}")]),
        result("c1", "", false),
        user(" "),
    ];
    anthropic(&fake)
        .complete(&request(&transcript, &[]))
        .await
        .unwrap();
    let body = fake.requests().remove(0).body;
    assert!(body.get("tools").is_none());
    let m = body["messages"].as_array().unwrap();
    assert_eq!(m.len(), 3);
    assert_eq!(m[0]["content"].as_array().unwrap().len(), 2);
    assert_eq!(m[1]["content"].as_array().unwrap().len(), 3);
    // Empty result content is left out; the blank user text is not sent.
    assert_eq!(
        m[2]["content"],
        json!([{"type": "tool_result", "tool_use_id": "c1",
                "cache_control": {"type": "ephemeral"}}])
    );
}

#[tokio::test]
async fn anthropic_reply_text_tool_calls_and_usage_are_read() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    fake.reply(
        FakeReply::text("Reading the log.")
            .call("toolu_1", "read_log", r#"{"file": "app.log"}"#)
            .usage(321, 45)
            .cached(200, 100),
    );
    let transcript = vec![user("checkout is slow")];
    let tools = tools();
    let c = anthropic(&fake)
        .complete(&request(&transcript, &tools))
        .await
        .unwrap();
    assert_eq!(c.text, "Reading the log.");
    assert_eq!(c.tool_calls.len(), 1);
    assert_eq!(c.tool_calls[0].id, "toolu_1");
    assert_eq!(
        c.tool_calls[0].arguments,
        ToolArguments::from_model(r#"{"file":"app.log"}"#)
    );
    // The wire splits input into uncached, read and written; the usage
    // counts the whole prompt with the cached parts on their own too.
    let reply = &fake.requests()[0];
    assert_eq!(reply.usage.map(|u| u.cache_read_input_tokens), Some(200));
    assert_eq!(
        c.usage,
        TokenUsage {
            cache_read_input_tokens: 200,
            cache_creation_input_tokens: 100,
            ..TokenUsage::new(321, 45)
        }
    );
    assert_eq!(c.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn anthropic_unanswered_tool_use_is_a_fatal_400() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let transcript = vec![user("q"), assistant("", &[("c1", "{}")]), user("next")];
    let err = anthropic(&fake)
        .complete(&request(&transcript, &[]))
        .await
        .unwrap_err();
    let ProviderError::Status {
        status,
        kind,
        message,
        ..
    } = &err
    else {
        panic!("expected a status error, got {err:?}");
    };
    assert_eq!(*status, 400);
    assert_eq!(kind.as_deref(), Some("invalid_request_error"));
    assert!(
        message.contains("`tool_use` ids were found without `tool_result`"),
        "{message}"
    );
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn anthropic_orphan_tool_result_and_assistant_first_are_rejected() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let provider = anthropic(&fake);
    let orphan = vec![user("q"), assistant("hi", &[]), result("c9", "x", false)];
    let err = provider.complete(&request(&orphan, &[])).await.unwrap_err();
    assert_eq!(err.status(), Some(400));
    assert!(
        err.to_string().contains("unexpected `tool_use_id`"),
        "{err}"
    );

    let assistant_first = vec![assistant("hi", &[]), user("q")];
    let err = provider
        .complete(&request(&assistant_first, &[]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("first message"), "{err}");
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn anthropic_overloaded_and_rate_limited_are_retryable() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    fake.fail(1, 529).fail(1, 429);
    let provider = anthropic(&fake);
    let transcript = vec![user("q")];
    for expected in [529, 429] {
        let err = provider
            .complete(&request(&transcript, &[]))
            .await
            .unwrap_err();
        assert_eq!(err.status(), Some(expected));
        assert!(err.is_retryable());
    }
}
