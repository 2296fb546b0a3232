//! Both adapters over server-sent events (`"stream": true`): the pieces
//! handed out join to the completion's text, and text, tool calls, usage
//! and stop reasons come out as the non-streamed path gives them; a
//! stream that breaks is a failed call of the right kind.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use inquest_agent::{
    AnthropicProvider, ApiKey, Completion, OpenAiProvider, Provider, ProviderError, StopReason,
    anthropic, openai,
};
use inquest_core::{TokenUsage, ToolArguments};
use inquest_testkit::fake::{Break, FakeProvider, FakeReply, Flavor};

use crate::support::{request, tools, user};

fn provider(fake: &FakeProvider, flavor: Flavor, timeout: Duration) -> Box<dyn Provider> {
    match flavor {
        Flavor::Anthropic => Box::new(
            AnthropicProvider::new(
                &fake.base_url(),
                "claude-test",
                ApiKey::new("k-test"),
                timeout,
            )
            .unwrap(),
        ),
        Flavor::OpenAi => Box::new(
            OpenAiProvider::new(
                &fake.base_url(),
                "gpt-test",
                Some(ApiKey::new("k-test")),
                timeout,
            )
            .unwrap(),
        ),
    }
}

async fn streamed(provider: &dyn Provider) -> (Result<Completion, ProviderError>, Vec<String>) {
    let pieces = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&pieces);
    let on_text = move |p: &str| sink.lock().unwrap().push(p.to_owned());
    let transcript = vec![user("why is checkout slow?")];
    let tools = tools();
    let result = provider
        .complete_streaming(&request(&transcript, &tools), &on_text)
        .await;
    let pieces = pieces.lock().unwrap().clone();
    (result, pieces)
}

const TEXT: &str = "Checkout → p99 grew: the pool «db-main» is exhausted.\nNext: read the log.";

#[tokio::test]
async fn both_flavours_stream_text_calls_usage_and_stop_reason_as_the_json_path() {
    for flavor in [Flavor::Anthropic, Flavor::OpenAi] {
        let fake = FakeProvider::start(flavor).await.unwrap();
        fake.set_streaming(Duration::ZERO, 3);
        let cached = if flavor == Flavor::Anthropic {
            (30, 12)
        } else {
            (30, 0)
        };
        fake.reply(
            FakeReply::text(TEXT)
                .call("call_1", "read_log", r#"{"file": "app.log", "n": 20}"#)
                .call("call_2", "read_log", "{not json")
                .usage(100, 17)
                .cached(cached.0, cached.1),
        );
        let provider = provider(&fake, flavor, Duration::from_secs(20));
        let (completion, pieces) = streamed(provider.as_ref()).await;
        let completion = completion.unwrap();
        assert!(
            pieces.len() > 10,
            "{flavor:?}: text came in pieces: {pieces:?}"
        );
        assert_eq!(pieces.concat(), TEXT, "{flavor:?}");
        assert_eq!(completion.text, TEXT);
        assert_eq!(completion.tool_calls.len(), 2);
        assert_eq!(completion.tool_calls[0].id, "call_1");
        assert_eq!(
            completion.tool_calls[0].arguments,
            ToolArguments::from_model(r#"{"file": "app.log", "n": 20}"#)
        );
        assert_eq!(
            completion.tool_calls[1].arguments,
            ToolArguments::Raw("{not json".into()),
            "{flavor:?}: arguments that are not an object are kept as sent"
        );
        assert_eq!(completion.stop_reason, StopReason::ToolUse);
        assert_eq!(
            completion.usage,
            TokenUsage {
                cache_read_input_tokens: cached.0,
                cache_creation_input_tokens: cached.1,
                ..TokenUsage::new(100, 17)
            },
            "{flavor:?}"
        );
        let body = &fake.requests()[0].body;
        assert_eq!(body["stream"], true);
        if flavor == Flavor::OpenAi {
            assert_eq!(body["stream_options"]["include_usage"], true);
        }
    }
}

#[tokio::test]
async fn a_text_only_answer_ends_the_turn() {
    for flavor in [Flavor::Anthropic, Flavor::OpenAi] {
        let fake = FakeProvider::start(flavor).await.unwrap();
        fake.reply(FakeReply::text("done.").usage(5, 2));
        let provider = provider(&fake, flavor, Duration::from_secs(20));
        let (completion, pieces) = streamed(provider.as_ref()).await;
        let completion = completion.unwrap();
        assert_eq!(pieces.concat(), "done.");
        assert_eq!(completion.stop_reason, StopReason::EndTurn);
        assert!(completion.tool_calls.is_empty());
        assert_eq!(completion.usage, TokenUsage::new(5, 2));
    }
}

#[tokio::test]
async fn a_broken_stream_is_a_retryable_failure_of_its_kind() {
    for flavor in [Flavor::Anthropic, Flavor::OpenAi] {
        let fake = FakeProvider::start(flavor).await.unwrap();
        fake.broken(FakeReply::text(TEXT), 3, Break::Close)
            .broken(FakeReply::text(TEXT), 2, Break::Error)
            .broken(FakeReply::text(TEXT), 1, Break::Stall);
        let provider = provider(&fake, flavor, Duration::from_millis(500));

        let (closed, pieces) = streamed(provider.as_ref()).await;
        assert_eq!(
            pieces.len(),
            3,
            "{flavor:?}: the part before the break was streamed"
        );
        let closed = closed.unwrap_err();
        assert!(
            matches!(closed, ProviderError::Connection(_)),
            "{flavor:?}: {closed:?}"
        );
        assert!(closed.is_retryable());

        let (errored, _) = streamed(provider.as_ref()).await;
        let errored = errored.unwrap_err();
        let want = if flavor == Flavor::Anthropic {
            529
        } else {
            500
        };
        assert_eq!(errored.status(), Some(want), "{flavor:?}: {errored:?}");
        assert!(errored.is_retryable());

        let (stalled, pieces) = streamed(provider.as_ref()).await;
        assert_eq!(pieces.len(), 1);
        let stalled = stalled.unwrap_err();
        assert!(
            matches!(stalled, ProviderError::Timeout(_)),
            "{flavor:?}: {stalled:?}"
        );
        assert!(stalled.is_retryable());
    }
}

#[tokio::test]
async fn a_stream_over_the_body_cap_is_too_large() {
    for (flavor, limit) in [(Flavor::Anthropic, 2_000), (Flavor::OpenAi, 2_000)] {
        let fake = FakeProvider::start(flavor).await.unwrap();
        fake.set_streaming(Duration::ZERO, 4);
        fake.reply(FakeReply::text(&"word ".repeat(200)));
        let provider: Box<dyn Provider> = match flavor {
            Flavor::Anthropic => Box::new(
                AnthropicProvider::new(
                    &fake.base_url(),
                    "m",
                    ApiKey::new("k-test"),
                    Duration::from_secs(20),
                )
                .unwrap()
                .with_max_response_bytes(limit),
            ),
            Flavor::OpenAi => Box::new(
                OpenAiProvider::new(&fake.base_url(), "m", None, Duration::from_secs(20))
                    .unwrap()
                    .with_max_response_bytes(limit),
            ),
        };
        let (result, _) = streamed(provider.as_ref()).await;
        assert!(
            matches!(result, Err(ProviderError::TooLarge { limit: l }) if l == limit),
            "{flavor:?}: {result:?}"
        );
    }
}

#[test]
fn a_streamed_answer_assembles_the_json_answer() {
    use inquest_agent::sse::SseParser;
    let events = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n\
        event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n\
        event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hm\"}}\n\n\
        event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"text_delta\",\"text\":\"b\"}}\n\n\
        event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":9}}\n\n\
        event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let mut parser = SseParser::new();
    let mut answer = anthropic::StreamedAnswer::default();
    let pieces = Mutex::new(String::new());
    let on_text = |p: &str| pieces.lock().unwrap().push_str(p);
    let mut done = false;
    for event in parser.push(events.as_bytes()) {
        done = answer.event(&event, &on_text).unwrap();
    }
    assert!(done);
    let completion = anthropic::parse_response(&answer.into_response()).unwrap();
    assert_eq!(completion.text, "a\n\nb");
    assert_eq!(*pieces.lock().unwrap(), "a\n\nb");
    assert_eq!(completion.stop_reason, StopReason::MaxTokens);
    assert_eq!(completion.usage, TokenUsage::new(3, 9));

    let chunks = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"g\",\"arguments\":\"{\\\"a\"}}]}}]}\n\n\
        data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\": 1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n\
        data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}\n\n\
        data: [DONE]\n\n";
    let mut parser = SseParser::new();
    let mut answer = openai::StreamedAnswer::default();
    let mut done = false;
    for event in parser.push(chunks.as_bytes()) {
        done = answer.event(&event, &on_text).unwrap();
    }
    assert!(done);
    let completion = openai::parse_response(&answer.into_response()).unwrap();
    assert_eq!(completion.text, "");
    assert_eq!(
        completion.tool_calls[0].id, "",
        "a missing id is left to the loop"
    );
    assert_eq!(
        completion.tool_calls[0].arguments,
        ToolArguments::from_model(r#"{"a": 1}"#)
    );
    assert_eq!(completion.usage, TokenUsage::new(4, 2));
}
