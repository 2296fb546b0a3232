//! OpenAI-compatible Chat Completions adapter
//! (`POST {base_url}/chat/completions`): OpenAI itself, Ollama, vLLM,
//! LiteLLM and the like.
//!
//! Mapping of the neutral transcript:
//! - the system prompt → a first `system` message (left out when blank);
//! - a user message → `{"role": "user", "content": text}`;
//! - an assistant message → `{"role": "assistant", "content": text or null,
//!   "tool_calls": [{"id", "type": "function", "function": {"name",
//!   "arguments"}}]}`, where `arguments` is the text exactly as the model
//!   sent it (`ToolArguments::as_sent`), valid JSON or not;
//! - a tool result → `{"role": "tool", "tool_call_id", "content"}`. The
//!   format has no error flag, so a failed result's content is prefixed
//!   with [`TOOL_ERROR_PREFIX`].
//!
//! No folding is needed: the format accepts same-role neighbours, and the
//! rebuilt transcript already puts every result right after its call.
//! The cap is sent as `max_tokens`, which every compatible server reads
//! (OpenAI's newer `max_completion_tokens` is not understood by all).

use std::time::Duration;

use inquest_core::{Message, TokenUsage, ToolArguments, ToolCall};
use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value, json};

use crate::{
    ApiKey, Completion, CompletionRequest, ConfigError, OnText, Provider, ProviderError,
    ProviderFuture, StopReason, http, sse::SseEvent,
};

/// Used when no `base_url` is configured.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Marks a failed tool result's content.
pub const TOOL_ERROR_PREFIX: &str = "[tool error] ";

/// Talks to an OpenAI-compatible Chat Completions endpoint.
pub struct OpenAiProvider {
    client: reqwest::Client,
    url: String,
    model: String,
    /// `None` for servers that need no key (a local Ollama, say).
    api_key: Option<ApiKey>,
    timeout: Duration,
    /// The longest response body read (`limits.max_provider_response_bytes`).
    max_response_bytes: usize,
}

impl OpenAiProvider {
    /// `base_url` includes any version prefix (`…/v1`).
    pub fn new(
        base_url: &str,
        model: &str,
        api_key: Option<ApiKey>,
        timeout: Duration,
    ) -> Result<Self, ConfigError> {
        Ok(Self {
            client: http::client(timeout).map_err(ConfigError::HttpClient)?,
            url: http::join(base_url, "/chat/completions"),
            model: model.to_owned(),
            api_key,
            timeout,
            max_response_bytes: http::DEFAULT_MAX_RESPONSE_BYTES,
        })
    }

    /// Caps the response body read (default
    /// [`crate::DEFAULT_MAX_RESPONSE_BYTES`]); a longer one is
    /// [`ProviderError::TooLarge`].
    pub fn with_max_response_bytes(mut self, max_response_bytes: usize) -> Self {
        self.max_response_bytes = max_response_bytes;
        self
    }

    fn headers(&self) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.api_key {
            headers.insert(
                AUTHORIZATION,
                http::secret_header(&format!("Bearer {}", key.expose()))?,
            );
        }
        Ok(headers)
    }
}

impl Provider for OpenAiProvider {
    fn complete<'a>(&'a self, request: &'a CompletionRequest<'a>) -> ProviderFuture<'a> {
        self.complete_streaming(request, &crate::provider::ignore_text)
    }

    /// Asks for a stream (`"stream": true` with `stream_options:
    /// {"include_usage": true}`, so the last chunk carries the usage) and
    /// reads its chunks ([`StreamedAnswer`]); content deltas go to
    /// `on_text` as they come.
    fn complete_streaming<'a>(
        &'a self,
        request: &'a CompletionRequest<'a>,
        on_text: OnText<'a>,
    ) -> ProviderFuture<'a> {
        Box::pin(async move {
            // Written straight from the transcript, the bytes
            // `request_body` with the stream fields would give.
            let body = StreamedBody {
                model: &self.model,
                request,
            };
            let headers = self.headers()?;
            let mut answer = StreamedAnswer::default();
            let streamed = http::post_sse(
                &self.client,
                &self.url,
                headers,
                &body,
                self.timeout,
                self.max_response_bytes,
                |event| answer.event(&event, on_text),
            )
            .await?;
            match streamed {
                http::Streamed::Done => parse_response(&answer.into_response()),
                http::Streamed::Json(answer) => {
                    let completion = parse_response(&answer)?;
                    if !completion.text.is_empty() {
                        on_text(&completion.text);
                    }
                    Ok(completion)
                }
            }
        })
    }
}

/// A streamed Chat Completions answer being put together, chunk by chunk
/// (`data: {...}` with `choices[0].delta.content` and
/// `choices[0].delta.tool_calls` pieces by `index`, `finish_reason`, a
/// final chunk with `usage`, then `data: [DONE]`; a chunk with `error`
/// fails the call). Once complete it is the very response body a
/// non-streamed call gets ([`StreamedAnswer::into_response`]), read by the
/// same [`parse_response`].
#[derive(Debug, Default)]
pub struct StreamedAnswer {
    /// `None` until some content came (a reply with none has `null`).
    content: Option<String>,
    /// Tool calls by their `index`: id, name and arguments so far.
    calls: std::collections::BTreeMap<u64, StreamedCall>,
    finish_reason: Value,
    usage: Value,
}

#[derive(Debug, Default)]
struct StreamedCall {
    id: Option<String>,
    name: String,
    /// Arguments text so far, or the object a server sent whole.
    arguments: Option<Value>,
}

impl StreamedAnswer {
    /// Takes one event; `Ok(true)` at `[DONE]`.
    pub fn event(&mut self, event: &SseEvent, on_text: OnText<'_>) -> Result<bool, ProviderError> {
        if event.data.trim() == "[DONE]" {
            return Ok(true);
        }
        if event.event == "error" {
            return Err(http::stream_error(&event.data));
        }
        let chunk: Value = serde_json::from_str(&event.data)
            .map_err(|e| ProviderError::BadResponse(format!("stream chunk is not JSON: {e}")))?;
        if !chunk["error"].is_null() {
            return Err(http::stream_error(&event.data));
        }
        if chunk["usage"].is_object() {
            self.usage = chunk["usage"].clone();
        }
        let Some(choice) = chunk["choices"].get(0) else {
            return Ok(false);
        };
        if !choice["finish_reason"].is_null() {
            self.finish_reason = choice["finish_reason"].clone();
        }
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str() {
            let content = self.content.get_or_insert_with(String::new);
            if !text.is_empty() {
                content.push_str(text);
                on_text(text);
            }
        }
        if let Some(calls) = delta["tool_calls"].as_array() {
            for (position, piece) in calls.iter().enumerate() {
                let index = piece["index"].as_u64().unwrap_or(position as u64);
                let call = self.calls.entry(index).or_default();
                if let Some(id) = piece["id"].as_str().filter(|id| !id.is_empty()) {
                    call.id = Some(id.to_owned());
                }
                let function = &piece["function"];
                if let Some(name) = function["name"].as_str() {
                    call.name.push_str(name);
                }
                match (&mut call.arguments, &function["arguments"]) {
                    (_, Value::Null) => {}
                    (Some(Value::String(so_far)), Value::String(more)) => so_far.push_str(more),
                    (slot, more) => *slot = Some(more.clone()),
                }
            }
        }
        Ok(false)
    }

    /// The response body a non-streamed call would have got.
    pub fn into_response(self) -> Value {
        let mut message = json!({"role": "assistant", "content": self.content});
        if !self.calls.is_empty() {
            let calls: Vec<Value> = self
                .calls
                .into_values()
                .map(|c| {
                    let mut call = json!({"type": "function", "function": {
                        "name": c.name, "arguments": c.arguments.unwrap_or(Value::Null)}});
                    if let Some(id) = c.id {
                        call["id"] = json!(id);
                    }
                    call
                })
                .collect();
            message["tool_calls"] = Value::Array(calls);
        }
        json!({"choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
               "usage": self.usage})
    }
}

/// The JSON body for one request.
pub fn request_body(model: &str, request: &CompletionRequest<'_>) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.trim().is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    messages.extend(request.messages.iter().filter_map(message));
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(request.max_tokens));
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema}})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(body)
}

/// The streamed request's body ([`request_body`] plus `"stream": true` and
/// `"stream_options": {"include_usage": true}`), written straight from the
/// transcript: the same bytes as serializing that `Value` (keys in sorted
/// order, as `serde_json::Map` keeps them), without first copying every
/// message into one. Checked by `the_wire_body_is_the_value_body_byte_for_byte`.
pub struct StreamedBody<'r> {
    pub model: &'r str,
    pub request: &'r CompletionRequest<'r>,
}

impl Serialize for StreamedBody<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let request = self.request;
        let mut body = s.serialize_map(None)?;
        body.serialize_entry("max_tokens", &request.max_tokens)?;
        body.serialize_entry("messages", &WireMessages(request))?;
        body.serialize_entry("model", self.model)?;
        body.serialize_entry("stream", &true)?;
        body.serialize_entry("stream_options", &IncludeUsage)?;
        if !request.tools.is_empty() {
            body.serialize_entry("tools", &WireTools(request.tools))?;
        }
        body.end()
    }
}

struct IncludeUsage;

impl Serialize for IncludeUsage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("include_usage", &true)?;
        m.end()
    }
}

struct WireTools<'r>(&'r [crate::ToolSpec]);

impl Serialize for WireTools<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Function<'t>(&'t crate::ToolSpec);
        impl Serialize for Function<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("description", &self.0.description)?;
                m.serialize_entry("name", &self.0.name)?;
                m.serialize_entry("parameters", &self.0.input_schema)?;
                m.end()
            }
        }
        struct Tool<'t>(&'t crate::ToolSpec);
        impl Serialize for Tool<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("function", &Function(self.0))?;
                m.serialize_entry("type", "function")?;
                m.end()
            }
        }
        s.collect_seq(self.0.iter().map(Tool))
    }
}

struct WireMessages<'r>(&'r CompletionRequest<'r>);

impl Serialize for WireMessages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let request = self.0;
        let mut seq = s.serialize_seq(None)?;
        if !request.system.trim().is_empty() {
            seq.serialize_element(&Plain {
                role: "system",
                content: request.system,
            })?;
        }
        for m in request.messages {
            match m {
                Message::User { text } => seq.serialize_element(&Plain {
                    role: "user",
                    content: text,
                })?,
                Message::Assistant { text, tool_calls } if tool_calls.is_empty() => {
                    // An empty assistant message says nothing; rebuild drops them.
                    if !text.is_empty() {
                        seq.serialize_element(&Plain {
                            role: "assistant",
                            content: text,
                        })?;
                    }
                }
                Message::Assistant { text, tool_calls } => {
                    seq.serialize_element(&WithCalls { text, tool_calls })?;
                }
                Message::ToolResult {
                    call_id,
                    content,
                    is_error,
                    ..
                } => seq.serialize_element(&ToolResultMsg {
                    call_id,
                    content,
                    is_error: *is_error,
                })?,
            }
        }
        seq.end()
    }
}

/// A message of only a role and text content.
struct Plain<'m> {
    role: &'static str,
    content: &'m str,
}

impl Serialize for Plain<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("content", self.content)?;
        m.serialize_entry("role", self.role)?;
        m.end()
    }
}

/// An assistant message with tool calls (`content` null when its text is
/// blank).
struct WithCalls<'m> {
    text: &'m str,
    tool_calls: &'m [inquest_core::MessageCall<'m>],
}

impl Serialize for WithCalls<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        let content = (!self.text.trim().is_empty()).then_some(self.text);
        m.serialize_entry("content", &content)?;
        m.serialize_entry("role", "assistant")?;
        m.serialize_entry("tool_calls", &Calls(self.tool_calls))?;
        m.end()
    }
}

struct Calls<'m>(&'m [inquest_core::MessageCall<'m>]);

impl Serialize for Calls<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(Call))
    }
}

struct Call<'m>(&'m inquest_core::MessageCall<'m>);

impl Serialize for Call<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("function", &CallFunction(self.0))?;
        m.serialize_entry("id", &self.0.id)?;
        m.serialize_entry("type", "function")?;
        m.end()
    }
}

struct CallFunction<'m>(&'m inquest_core::MessageCall<'m>);

impl Serialize for CallFunction<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("arguments", &self.0.arguments.as_sent())?;
        m.serialize_entry("name", &self.0.name)?;
        m.end()
    }
}

/// A tool result; an error's content carries [`TOOL_ERROR_PREFIX`].
struct ToolResultMsg<'m> {
    call_id: &'m str,
    content: &'m str,
    is_error: bool,
}

impl Serialize for ToolResultMsg<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        if self.is_error {
            m.serialize_entry("content", &format!("{TOOL_ERROR_PREFIX}{}", self.content))?;
        } else {
            m.serialize_entry("content", self.content)?;
        }
        m.serialize_entry("role", "tool")?;
        m.serialize_entry("tool_call_id", self.call_id)?;
        m.end()
    }
}

fn message(message: &Message<'_>) -> Option<Value> {
    Some(match message {
        Message::User { text } => json!({"role": "user", "content": text}),
        Message::Assistant { text, tool_calls } if tool_calls.is_empty() => {
            // An empty assistant message says nothing; rebuild drops them.
            if text.is_empty() {
                return None;
            }
            json!({"role": "assistant", "content": text})
        }
        Message::Assistant { text, tool_calls } => {
            let content = if text.trim().is_empty() {
                Value::Null
            } else {
                json!(text)
            };
            let calls: Vec<Value> = tool_calls
                .iter()
                .map(|c| {
                    json!({"id": c.id, "type": "function",
                           "function": {"name": c.name, "arguments": c.arguments.as_sent()}})
                })
                .collect();
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
        Message::ToolResult {
            call_id,
            content,
            is_error,
            ..
        } => {
            let content = if *is_error {
                format!("{TOOL_ERROR_PREFIX}{content}")
            } else {
                content.to_string()
            };
            json!({"role": "tool", "tool_call_id": call_id, "content": content})
        }
    })
}

/// Reads a Chat Completions response (the first choice).
pub fn parse_response(answer: &Value) -> Result<Completion, ProviderError> {
    let choice = answer["choices"]
        .get(0)
        .ok_or_else(|| ProviderError::BadResponse("no `choices[0]`".into()))?;
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| ProviderError::BadResponse("no `choices[0].message`".into()))?;
    let text = match &message["content"] {
        Value::String(text) => text.clone(),
        // Content parts: keep the text ones.
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    };
    let mut tool_calls = Vec::new();
    if let Some(calls) = message["tool_calls"].as_array() {
        for call in calls {
            let function = &call["function"];
            let name = function["name"]
                .as_str()
                .filter(|n| !n.is_empty())
                .ok_or_else(|| ProviderError::BadResponse("tool call without a name".into()))?;
            // Some compatible servers leave the id out: it stays empty here,
            // and the loop gives the call a session-unique one (as it does
            // for an id the session used already).
            let id = call["id"].as_str().unwrap_or_default().to_owned();
            let arguments = match &function["arguments"] {
                Value::String(text) => ToolArguments::from_model(text),
                // A few servers send the object itself.
                Value::Object(map) => ToolArguments::Json(map.clone()),
                Value::Null => ToolArguments::from_model(""),
                other => ToolArguments::from_model(&other.to_string()),
            };
            tool_calls.push(ToolCall {
                id,
                name: name.to_owned(),
                arguments,
            });
        }
    }
    let usage = &answer["usage"];
    // `prompt_tokens` includes the cached ones. The format reports no cache
    // writes (OpenAI's caching is automatic and writes are not billed
    // apart).
    let usage = TokenUsage::reported(
        usage["prompt_tokens"].as_u64().unwrap_or(0),
        usage["completion_tokens"].as_u64().unwrap_or(0),
        usage["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0),
        0,
    );
    let stop_reason = match choice["finish_reason"].as_str() {
        Some("stop") => StopReason::EndTurn,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        other => StopReason::Other(other.unwrap_or_default().to_owned()),
    };
    Ok(Completion {
        text,
        tool_calls,
        usage,
        stop_reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_calls_results_and_errors() {
        let call = ToolCall {
            id: "c1".into(),
            name: "grep".into(),
            arguments: ToolArguments::from_model("{oops"),
        };
        let assistant = message(&Message::Assistant {
            text: "".into(),
            tool_calls: vec![call.into()].into(),
        });
        assert_eq!(
            assistant,
            Some(json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{oops"}}]}))
        );
        let failed = message(&Message::ToolResult {
            call_id: "c1".into(),
            name: "grep".into(),
            content: "boom".into(),
            is_error: true,
        });
        assert_eq!(failed.unwrap()["content"], "[tool error] boom");
    }

    #[test]
    fn parses_calls_keeping_bad_arguments_verbatim() {
        let answer = json!({"choices": [{"message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "x", "type": "function", "function": {"name": "g", "arguments": "{\"a\": "}},
                           {"type": "function", "function": {"name": "h", "arguments": "{}"}}]},
            "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4,
                      "prompt_tokens_details": {"cached_tokens": 2}}});
        let c = parse_response(&answer).unwrap();
        assert_eq!(
            c.tool_calls[0].arguments,
            ToolArguments::Raw("{\"a\": ".into())
        );
        assert_eq!(c.tool_calls[1].id, "", "a missing id is left to the loop");
        assert_eq!(
            c.usage,
            TokenUsage {
                cache_read_input_tokens: 2,
                ..TokenUsage::new(3, 4)
            }
        );
        assert_eq!(c.stop_reason, StopReason::ToolUse);
        assert!(parse_response(&json!({"choices": []})).is_err());
    }

    #[test]
    fn the_wire_body_is_the_value_body_byte_for_byte() {
        let calls = |ids: &[(&str, &str)]| -> Vec<inquest_core::MessageCall<'static>> {
            ids.iter()
                .map(|(id, args)| {
                    ToolCall {
                        id: (*id).into(),
                        name: "grep".into(),
                        arguments: ToolArguments::from_model(args),
                    }
                    .into()
                })
                .collect()
        };
        let transcript = vec![
            Message::User {
                text: "why \"slow\"? é\n".into(),
            },
            Message::Assistant {
                text: " ".into(),
                tool_calls: calls(&[
                    ("a", r#"{"z":1,"a":{"y":[1.5,-2e-7,"ü"]}}"#),
                    ("b", "{oops"),
                ])
                .into(),
            },
            Message::ToolResult {
                call_id: "a".into(),
                name: "grep".into(),
                content: "line\n\tmore".into(),
                is_error: false,
            },
            Message::ToolResult {
                call_id: "b".into(),
                name: "grep".into(),
                content: "".into(),
                is_error: true,
            },
            Message::Assistant {
                text: "".into(),
                tool_calls: vec![].into(),
            },
            Message::Assistant {
                text: "thinking".into(),
                tool_calls: calls(&[("c", "{}")]).into(),
            },
            Message::ToolResult {
                call_id: "c".into(),
                name: "grep".into(),
                content: "ok".into(),
                is_error: false,
            },
            Message::Assistant {
                text: "done".into(),
                tool_calls: vec![].into(),
            },
        ];
        let tools = [crate::ToolSpec {
            name: "grep".into(),
            description: "search \u{1F50E}".into(),
            input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        }];
        for (system, tools) in [("You investigate.", &tools[..]), ("  ", &[][..])] {
            let request = CompletionRequest {
                system,
                messages: &transcript,
                tools,
                max_tokens: 777,
            };
            let mut value = request_body("gpt-x", &request);
            if let Some(fields) = value.as_object_mut() {
                fields.insert("stream".into(), Value::Bool(true));
                fields.insert("stream_options".into(), json!({"include_usage": true}));
            }
            let wire = StreamedBody {
                model: "gpt-x",
                request: &request,
            };
            assert_eq!(
                String::from_utf8(serde_json::to_vec(&wire).unwrap()).unwrap(),
                String::from_utf8(serde_json::to_vec(&value).unwrap()).unwrap()
            );
        }
    }
}
