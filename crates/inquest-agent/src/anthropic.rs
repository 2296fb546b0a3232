//! Anthropic Messages API adapter (`POST {base_url}/v1/messages`).
//!
//! Mapping of the neutral transcript:
//! - a user message → a `user` message with one `text` block;
//! - an assistant message → an `assistant` message with a `text` block (if
//!   its text is not blank) and one `tool_use` block per call;
//! - a tool result → a `tool_result` block (`is_error` when it failed) in a
//!   `user` message.
//!
//! Same-role neighbours are folded into one message: the results of one
//! assistant turn become one user message with several `tool_result`
//! blocks, a user text that follows them joins that message (after the
//! results, which the API requires to come first), and consecutive
//! assistant turns are merged. Blank text blocks are never sent (the API
//! rejects them), and a message left with no blocks is left out.
//!
//! `tool_use.input` must be a JSON object. Arguments the model sent that
//! were not a JSON object (`ToolArguments::Raw`) are sent back as
//! `{"_raw_arguments": "<text as sent>"}` ([`RAW_ARGUMENTS_KEY`]): the model
//! sees exactly what it sent, and the request stays valid.

use std::time::Duration;

use inquest_core::{CallArguments, Message, MessageCall, TokenUsage, ToolArguments, ToolCall};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};

use crate::{
    ApiKey, Completion, CompletionRequest, ConfigError, OnText, Provider, ProviderError,
    ProviderFuture, StopReason, http, sse::SseEvent,
};

/// The API version this adapter speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// Used when no `base_url` is configured.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `input` key that carries arguments which were not a JSON object.
pub const RAW_ARGUMENTS_KEY: &str = "_raw_arguments";

/// Talks to the Anthropic Messages API.
pub struct AnthropicProvider {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: ApiKey,
    timeout: Duration,
    /// The longest response body read (`limits.max_provider_response_bytes`).
    max_response_bytes: usize,
}

impl AnthropicProvider {
    /// `timeout` bounds each request, body included.
    pub fn new(
        base_url: &str,
        model: &str,
        api_key: ApiKey,
        timeout: Duration,
    ) -> Result<Self, ConfigError> {
        Ok(Self {
            client: http::client(timeout).map_err(ConfigError::HttpClient)?,
            url: http::join(base_url, "/v1/messages"),
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
        headers.insert(
            HeaderName::from_static("x-api-key"),
            http::secret_header(self.api_key.expose())?,
        );
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        Ok(headers)
    }
}

impl Provider for AnthropicProvider {
    fn complete<'a>(&'a self, request: &'a CompletionRequest<'a>) -> ProviderFuture<'a> {
        self.complete_streaming(request, &crate::provider::ignore_text)
    }

    /// Asks for a stream (`"stream": true`) and reads its events
    /// ([`StreamedAnswer`]); the text deltas go to `on_text` as they come.
    fn complete_streaming<'a>(
        &'a self,
        request: &'a CompletionRequest<'a>,
        on_text: OnText<'a>,
    ) -> ProviderFuture<'a> {
        Box::pin(async move {
            let mut body = request_body(&self.model, request);
            if let Some(fields) = body.as_object_mut() {
                fields.insert("stream".into(), Value::Bool(true));
            }
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

/// A streamed Messages API answer being put together, event by event
/// (`message_start`, `content_block_start`, `content_block_delta` with
/// `text_delta` or `input_json_delta`, `content_block_stop`,
/// `message_delta` with the stop reason and usage, `message_stop`; `ping`
/// is ignored, `error` fails the call). Once complete it is the very
/// response body a non-streamed call gets ([`StreamedAnswer::into_response`]),
/// read by the same [`parse_response`], so text, tool calls, usage and the
/// stop reason come out the same either way.
#[derive(Debug, Default)]
pub struct StreamedAnswer {
    /// `message_start.message` (usage, id, model), updated by `message_delta`.
    message: Map<String, Value>,
    /// Content blocks by index: the start's block, and the tool input's
    /// JSON text so far.
    blocks: std::collections::BTreeMap<u64, (Value, String)>,
    /// Whether text was handed out, and from which block last (the
    /// non-streamed text joins non-empty blocks with a blank line).
    text_block: Option<u64>,
}

impl StreamedAnswer {
    /// Takes one event; `Ok(true)` at `message_stop`.
    pub fn event(&mut self, event: &SseEvent, on_text: OnText<'_>) -> Result<bool, ProviderError> {
        if event.event == "error" {
            return Err(http::stream_error(&event.data));
        }
        let data: Value = serde_json::from_str(&event.data).map_err(|e| {
            ProviderError::BadResponse(format!("event {:?} is not JSON: {e}", event.event))
        })?;
        let kind = data["type"].as_str().unwrap_or(event.event.as_str());
        match kind {
            "message_start" => {
                if let Some(message) = data["message"].as_object() {
                    self.message = message.clone();
                }
            }
            "content_block_start" => {
                let index = data["index"].as_u64().unwrap_or(0);
                self.blocks
                    .insert(index, (data["content_block"].clone(), String::new()));
            }
            "content_block_delta" => {
                let index = data["index"].as_u64().unwrap_or(0);
                let delta = &data["delta"];
                let Some((block, json)) = self.blocks.get_mut(&index) else {
                    return Err(ProviderError::BadResponse(format!(
                        "delta for content block {index}, which never started"
                    )));
                };
                match delta["type"].as_str() {
                    Some("text_delta") => {
                        let text = delta["text"].as_str().unwrap_or_default();
                        if text.is_empty() {
                            return Ok(false);
                        }
                        if let Some(fields) = block.as_object_mut() {
                            let so_far = fields
                                .entry("text")
                                .or_insert_with(|| Value::String(String::new()));
                            if let Value::String(so_far) = so_far {
                                so_far.push_str(text);
                            }
                        }
                        match self.text_block {
                            Some(previous) if previous != index => on_text("\n\n"),
                            _ => {}
                        }
                        self.text_block = Some(index);
                        on_text(text);
                    }
                    Some("input_json_delta") => {
                        json.push_str(delta["partial_json"].as_str().unwrap_or_default());
                    }
                    // Thinking, signatures, citations: not part of the reply.
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = data["delta"].get("stop_reason") {
                    self.message.insert("stop_reason".into(), reason.clone());
                }
                if let Some(delta) = data["usage"].as_object() {
                    let usage = self
                        .message
                        .entry("usage")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Value::Object(usage) = usage {
                        for (k, v) in delta {
                            if !v.is_null() {
                                usage.insert(k.clone(), v.clone());
                            }
                        }
                    }
                }
            }
            "message_stop" => return Ok(true),
            _ => {}
        }
        Ok(false)
    }

    /// The response body a non-streamed call would have got.
    pub fn into_response(mut self) -> Value {
        let content: Vec<Value> = std::mem::take(&mut self.blocks)
            .into_values()
            .map(|(mut block, json)| {
                if block["type"] == "tool_use" && !json.trim().is_empty() {
                    // Text that is not JSON is kept as sent (a string
                    // `input`, which `parse_response` keeps raw).
                    block["input"] = serde_json::from_str(&json).unwrap_or(Value::String(json));
                }
                block
            })
            .collect();
        self.message.insert("content".into(), Value::Array(content));
        Value::Object(self.message)
    }
}

/// The JSON body for one request.
///
/// Prompt caching: cache breakpoints (`cache_control: {"type":
/// "ephemeral"}`, [`cache_control`]) go on the system block (the system
/// prompt is sent as one text block for that), on the last tool
/// definition, and on the last content block of the newest message: three
/// of the API's four. The API caches tools, then system, then messages, so
/// the first two cache the part that never changes in a session and the
/// third everything up to the newest turn, which the next call of the
/// burst, or of a resume, sends again byte for byte (the body is built
/// only from the transcript, whose maps are ordered: serde_json's `Map` is
/// a `BTreeMap` here, nothing enables `preserve_order`).
pub fn request_body(model: &str, request: &CompletionRequest<'_>) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(request.max_tokens));
    if !request.system.trim().is_empty() {
        body.insert(
            "system".into(),
            json!([{"type": "text", "text": request.system, "cache_control": cache_control()}]),
        );
    }
    let mut messages = messages(request.messages);
    if let Some(last) = messages
        .last_mut()
        .and_then(|m| m["content"].as_array_mut())
        .and_then(|blocks| blocks.last_mut())
        .and_then(Value::as_object_mut)
    {
        last.insert("cache_control".into(), cache_control());
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        if let Some(last) = tools.last_mut().and_then(Value::as_object_mut) {
            last.insert("cache_control".into(), cache_control());
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(body)
}

/// The cache breakpoint every marked block carries.
pub fn cache_control() -> Value {
    json!({"type": "ephemeral"})
}

/// Maps and folds the transcript; see the module docs.
fn messages(transcript: &[Message<'_>]) -> Vec<Value> {
    let mut folded: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in transcript {
        let (role, blocks) = match message {
            Message::User { text } => ("user", text_block(text).into_iter().collect()),
            Message::Assistant { text, tool_calls } => {
                let mut blocks: Vec<Value> = text_block(text).into_iter().collect();
                blocks.extend(tool_calls.iter().map(tool_use_block));
                ("assistant", blocks)
            }
            Message::ToolResult {
                call_id,
                content,
                is_error,
                ..
            } => ("user", vec![tool_result_block(call_id, content, *is_error)]),
        };
        if blocks.is_empty() {
            continue;
        }
        match folded.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => folded.push((role, blocks)),
        }
    }
    folded
        .into_iter()
        .map(|(role, mut blocks)| {
            // The API wants tool results before any other block of their
            // user message. Stable, so call order is kept.
            blocks.sort_by_key(|b| b["type"] != "tool_result");
            json!({"role": role, "content": blocks})
        })
        .collect()
}

fn text_block(text: &str) -> Option<Value> {
    (!text.trim().is_empty()).then(|| json!({"type": "text", "text": text}))
}

fn tool_use_block(call: &MessageCall<'_>) -> Value {
    let input = match &call.arguments {
        CallArguments::Json(map) => Value::Object(map.as_ref().clone()),
        CallArguments::Raw(text) => json!({ RAW_ARGUMENTS_KEY: text }),
    };
    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
}

fn tool_result_block(call_id: &str, content: &str, is_error: bool) -> Value {
    let mut block = Map::new();
    block.insert("type".into(), json!("tool_result"));
    block.insert("tool_use_id".into(), json!(call_id));
    // An empty content string is left out (the field is optional) rather
    // than sent as an empty text.
    if !content.is_empty() {
        block.insert("content".into(), json!(content));
    }
    if is_error {
        block.insert("is_error".into(), json!(true));
    }
    Value::Object(block)
}

/// Reads a Messages API response.
pub fn parse_response(answer: &Value) -> Result<Completion, ProviderError> {
    let blocks = answer["content"]
        .as_array()
        .ok_or_else(|| ProviderError::BadResponse("no `content` array".into()))?;
    let mut texts = Vec::new();
    let mut tool_calls = Vec::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => {
                if let Some(text) = block["text"].as_str().filter(|t| !t.is_empty()) {
                    texts.push(text);
                }
            }
            Some("tool_use") => {
                let id = non_empty(&block["id"], "tool_use.id")?;
                let name = non_empty(&block["name"], "tool_use.name")?;
                let arguments = match &block["input"] {
                    Value::Object(map) => ToolArguments::Json(map.clone()),
                    Value::Null => ToolArguments::Json(Map::new()),
                    // Not something the API sends; kept as the raw text.
                    Value::String(text) => ToolArguments::from_model(text),
                    other => ToolArguments::from_model(&other.to_string()),
                };
                tool_calls.push(ToolCall {
                    id,
                    name,
                    arguments,
                });
            }
            // Thinking and server-side blocks are not part of the reply.
            _ => {}
        }
    }
    let usage = &answer["usage"];
    let count = |key: &str| usage[key].as_u64().unwrap_or(0);
    let (read, write) = (
        count("cache_read_input_tokens"),
        count("cache_creation_input_tokens"),
    );
    // The API's `input_tokens` leaves out the cached parts; ours counts
    // every prompt token, with the cached parts also on their own.
    let usage = TokenUsage::reported(
        count("input_tokens")
            .saturating_add(read)
            .saturating_add(write),
        count("output_tokens"),
        read,
        write,
    );
    let stop_reason = match answer["stop_reason"].as_str() {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        other => StopReason::Other(other.unwrap_or_default().to_owned()),
    };
    Ok(Completion {
        text: texts.join("\n\n"),
        tool_calls,
        usage,
        stop_reason,
    })
}

fn non_empty(value: &Value, what: &str) -> Result<String, ProviderError> {
    value
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| ProviderError::BadResponse(format!("missing {what}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, args: &str) -> MessageCall<'static> {
        ToolCall {
            id: id.into(),
            name: "grep".into(),
            arguments: ToolArguments::from_model(args),
        }
        .into()
    }

    fn result(id: &str) -> Message<'static> {
        Message::ToolResult {
            call_id: id.to_owned().into(),
            name: "grep".into(),
            content: format!("out {id}").into(),
            is_error: id == "b",
        }
    }

    #[test]
    fn folds_same_role_neighbours_and_drops_blank_text() {
        let transcript = vec![
            Message::User { text: "why".into() },
            Message::Assistant {
                text: " ".into(),
                tool_calls: vec![call("a", r#"{"q":1}"#), call("b", "{oops")].into(),
            },
            result("a"),
            result("b"),
            Message::User {
                text: "and?".into(),
            },
            Message::Assistant {
                text: "x".into(),
                tool_calls: vec![].into(),
            },
            Message::Assistant {
                text: "y".into(),
                tool_calls: vec![].into(),
            },
        ];
        let out = messages(&transcript);
        assert_eq!(out.len(), 4);
        assert_eq!(out[1]["content"].as_array().map(Vec::len), Some(2));
        assert_eq!(out[1]["content"][0]["type"], "tool_use");
        assert_eq!(
            out[1]["content"][1]["input"],
            json!({"_raw_arguments": "{oops"})
        );
        let user = &out[2]["content"];
        assert_eq!(user[0]["tool_use_id"], "a");
        assert_eq!(user[1]["is_error"], true);
        assert_eq!(user[2], json!({"type": "text", "text": "and?"}));
        assert_eq!(out[3]["content"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn parses_text_tool_calls_and_usage() {
        let answer = json!({
            "content": [{"type": "text", "text": "looking"},
                        {"type": "thinking", "thinking": "…"},
                        {"type": "tool_use", "id": "t1", "name": "grep", "input": {"q": "oom"}}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 7}
        });
        let c = parse_response(&answer).unwrap();
        assert_eq!(c.text, "looking");
        assert_eq!(
            c.tool_calls,
            vec![call("t1", r#"{"q":"oom"}"#).to_tool_call()]
        );
        assert_eq!(c.usage.input_tokens, 15);
        assert_eq!(c.usage.cache_read_input_tokens, 5);
        assert_eq!(c.usage.cache_creation_input_tokens, 0);
        assert_eq!(c.stop_reason, StopReason::ToolUse);
        assert!(parse_response(&json!({"x": 1})).is_err());
        let no_id = json!({"content": [{"type": "tool_use", "name": "g", "input": {}}]});
        assert!(matches!(
            parse_response(&no_id),
            Err(ProviderError::BadResponse(_))
        ));
    }
}
