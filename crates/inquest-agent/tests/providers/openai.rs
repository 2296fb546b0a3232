//! The OpenAI-compatible adapter against the fake Chat Completions API.

use inquest_agent::{Provider, ProviderError, StopReason};
use inquest_core::{TokenUsage, ToolArguments};
use inquest_testkit::fake::{Behaviour, FakeProvider, FakeReply, Flavor};
use serde_json::json;

use crate::support::{assistant, openai, rebuilt_transcript, request, result, tools, user};

#[tokio::test]
async fn openai_request_has_system_tool_calls_and_tool_messages() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let tools = tools();
    let transcript = rebuilt_transcript();
    openai(&fake)
        .complete(&request(&transcript, &tools))
        .await
        .unwrap();

    let sent = fake.requests().remove(0);
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test"));
    let body = &sent.body;
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {"name": "read_log",
            "description": "Reads a log file.", "parameters": tools[0].input_schema}}])
    );
    let m = body["messages"].as_array().unwrap();
    assert_eq!(
        m[0],
        json!({"role": "system", "content": "You investigate incidents."})
    );
    assert_eq!(m[1], json!({"role": "user", "content": "checkout is slow"}));
    assert_eq!(m[2]["content"], serde_json::Value::Null);
    // Arguments go back exactly as the model sent them, valid JSON or not.
    assert_eq!(
        m[2]["tool_calls"][1],
        json!({"id": "c2", "type": "function",
               "function": {"name": "read_log", "arguments": "{\"file\": app.log"}})
    );
    assert_eq!(
        m[3],
        json!({"role": "tool", "tool_call_id": "c1", "content": "pool exhausted"})
    );
    assert_eq!(m[4]["tool_call_id"], "c2");
    assert!(
        m[4]["content"]
            .as_str()
            .unwrap()
            .starts_with("[tool error] the run ended")
    );
    let roles: Vec<&str> = m.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
            "user",
            "assistant",
            "tool",
            "user"
        ]
    );
}

#[tokio::test]
async fn openai_invalid_json_arguments_from_the_model_are_kept_verbatim() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(
        FakeReply::default()
            .call("call_a", "read_log", r#"{"file": "app.log""#)
            .call("call_b", "read_log", r#"{"file":"db.log"}"#)
            .usage(1200, 80)
            .cached(1024, 0),
    );
    let transcript = vec![user("q")];
    let tools = tools();
    let c = openai(&fake)
        .complete(&request(&transcript, &tools))
        .await
        .unwrap();
    assert_eq!(c.text, "");
    assert_eq!(
        c.tool_calls[0].arguments,
        ToolArguments::Raw(r#"{"file": "app.log""#.into())
    );
    assert_eq!(c.tool_calls[0].arguments.as_sent(), r#"{"file": "app.log""#);
    assert!(c.tool_calls[1].arguments.is_valid_json());
    // `prompt_tokens_details.cached_tokens` is read as cache reads.
    assert_eq!(
        c.usage,
        TokenUsage {
            cache_read_input_tokens: 1024,
            ..TokenUsage::new(1200, 80)
        }
    );
    assert_eq!(c.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn openai_unanswered_tool_call_is_a_fatal_400_in_openai_shape() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let transcript = vec![
        user("q"),
        assistant("", &[("c1", "{}"), ("c2", "{}")]),
        result("c1", "ok", false),
        user("next"),
    ];
    let err = openai(&fake)
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
        message.contains("did not have response messages: c2"),
        "{message}"
    );
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn openai_tool_message_without_a_call_is_rejected() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let transcript = vec![user("q"), result("c1", "x", false)];
    let err = openai(&fake)
        .complete(&request(&transcript, &[]))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(400));
    assert!(
        err.to_string().contains("role 'tool' must be a response"),
        "{err}"
    );
}

#[tokio::test]
async fn openai_bad_response_shape_is_fatal() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.push(Behaviour::Raw(200, r#"{"choices": []}"#.into()))
        .push(Behaviour::Raw(200, "not json".into()));
    let provider = openai(&fake);
    let transcript = vec![user("q")];
    for _ in 0..2 {
        let err = provider
            .complete(&request(&transcript, &[]))
            .await
            .unwrap_err();
        assert!(matches!(err, ProviderError::BadResponse(_)), "{err:?}");
        assert!(!err.is_retryable());
    }
}

#[tokio::test]
async fn a_stopped_server_is_a_retryable_connection_error() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let provider = openai(&fake);
    fake.stop().await;
    let transcript = vec![user("q")];
    let err = provider
        .complete(&request(&transcript, &[]))
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Connection(_)), "{err:?}");
    assert!(err.is_retryable());
}

#[tokio::test]
async fn a_success_body_over_the_cap_is_a_fatal_too_large_naming_the_limit() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text(&"x".repeat(5000)))
        .reply(FakeReply::text("short"))
        .push(Behaviour::Raw(
            503,
            format!("{{\"error\": \"{}\"}}", "y".repeat(5000)),
        ));
    let provider = openai(&fake).with_max_response_bytes(1000);
    let transcript = vec![user("q")];
    let err = provider
        .complete(&request(&transcript, &[]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::TooLarge { limit: 1000 }),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    assert!(
        err.to_string()
            .contains("limits.max_provider_response_bytes = 1000"),
        "{err}"
    );
    // A body under the cap is read as before.
    let ok = provider.complete(&request(&transcript, &[])).await.unwrap();
    assert_eq!(ok.text, "short");
    // An error body over the cap is cut; its status still decides.
    let err = provider
        .complete(&request(&transcript, &[]))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(503), "{err:?}");
    assert!(err.is_retryable());
}

/// A server that streams a chunked body without end (no content-length):
/// the adapter stops reading at the cap instead of buffering forever.
#[tokio::test]
async fn an_endless_chunked_body_stops_at_the_cap() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = vec![0u8; 64 * 1024];
        let _ = socket.read(&mut request).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
        socket.write_all(head.as_bytes()).await.unwrap();
        let chunk = format!("400\r\n{}\r\n", "z".repeat(0x400));
        // Until the client hangs up.
        while socket.write_all(chunk.as_bytes()).await.is_ok() {}
    });
    let provider = inquest_agent::OpenAiProvider::new(
        &format!("http://{addr}/v1"),
        "gpt-test",
        None,
        crate::support::TIMEOUT,
    )
    .unwrap()
    .with_max_response_bytes(64 * 1024);
    let transcript = vec![user("q")];
    let err = provider
        .complete(&request(&transcript, &[]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::TooLarge { limit: 65536 }),
        "{err:?}"
    );
    drop(provider);
    server.await.unwrap();
}
