//! The fake Anthropic Messages API: request checks and reply bodies.
//! Error messages follow the real API's wording where it is known.

use std::collections::HashSet;

use inquest_core::TokenUsage;
use serde_json::{Value, json};

use super::{FakeReply, Recorded};

pub(super) fn check_headers(request: &Recorded) -> Result<(), (u16, String)> {
    if request.header("x-api-key").is_none_or(str::is_empty) {
        return Err((401, "x-api-key header is required".into()));
    }
    if request.header("anthropic-version").is_none() {
        return Err((400, "anthropic-version: header is required".into()));
    }
    Ok(())
}

pub(super) fn error_type(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

pub(super) fn validate(body: &Value) -> Result<(), String> {
    if body["model"].as_str().is_none_or(str::is_empty) {
        return Err("model: Field required".into());
    }
    if !matches!(body["stream"], Value::Null | Value::Bool(_)) {
        return Err("stream: Input should be a valid boolean".into());
    }
    check_cache_control(body)?;
    if body["max_tokens"].as_u64().is_none_or(|n| n == 0) {
        return Err("max_tokens: Field required".into());
    }
    match &body["system"] {
        Value::Null | Value::String(_) => {}
        Value::Array(blocks) => {
            for (j, block) in blocks.iter().enumerate() {
                check_text_block(block, &format!("system.{j}"))?;
            }
        }
        _ => return Err("system: Input should be a valid string or list".into()),
    }
    check_tools(&body["tools"])?;
    let messages = body["messages"]
        .as_array()
        .ok_or("messages: Field required")?;
    if messages.is_empty() {
        return Err("messages: at least one message is required".into());
    }
    let mut seen_ids = HashSet::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or("");
        if role != "user" && role != "assistant" {
            return Err(format!(
                "messages.{i}.role: Input should be 'user' or 'assistant'"
            ));
        }
        if i == 0 && role != "user" {
            return Err("messages: first message must use the \"user\" role".into());
        }
        let blocks = blocks_of(message, i, messages.len())?;
        let mut results_done = false;
        for (j, block) in blocks.iter().enumerate() {
            let at = format!("messages.{i}.content.{j}");
            match block["type"].as_str().unwrap_or("") {
                "text" => {
                    check_text_block(block, &at)?;
                    results_done = true;
                }
                "tool_use" if role == "assistant" => {
                    let id = block["id"].as_str().filter(|s| !s.is_empty());
                    let id = id.ok_or(format!("{at}.id: Field required"))?;
                    if !id
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                    {
                        return Err(format!(
                            "{at}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                        ));
                    }
                    if block["name"].as_str().is_none_or(str::is_empty) {
                        return Err(format!("{at}.name: Field required"));
                    }
                    if !block["input"].is_object() {
                        return Err(format!("{at}.input: Input should be a valid dictionary"));
                    }
                    if !seen_ids.insert(id.to_owned()) {
                        return Err(format!("{at}: `tool_use` ids must be unique"));
                    }
                }
                "tool_result" if role == "user" => {
                    if results_done {
                        return Err(format!(
                            "messages.{i}: `tool_result` blocks must come before any other content in a user message"
                        ));
                    }
                    if block["tool_use_id"].as_str().is_none() {
                        return Err(format!("{at}.tool_use_id: Field required"));
                    }
                    match &block["content"] {
                        Value::Null | Value::String(_) => {}
                        Value::Array(parts) => {
                            for (k, part) in parts.iter().enumerate() {
                                check_text_block(part, &format!("{at}.content.{k}"))?;
                            }
                        }
                        _ => return Err(format!("{at}.content: Input should be a valid list")),
                    }
                    if !matches!(block["is_error"], Value::Null | Value::Bool(_)) {
                        return Err(format!("{at}.is_error: Input should be a valid boolean"));
                    }
                }
                other => {
                    return Err(format!(
                        "{at}: Input tag '{other}' is not allowed in a {role} message"
                    ));
                }
            }
        }
    }
    check_pairing(messages)
}

/// The API's rules for prompt-cache breakpoints: `cache_control` is
/// `{"type": "ephemeral"}` (optionally with a `ttl` of "5m" or "1h"), on at
/// most [`MAX_BREAKPOINTS`] blocks, and never on an empty text block.
fn check_cache_control(body: &Value) -> Result<(), String> {
    let at_paths = super::cache::breakpoints(body);
    if at_paths.len() > MAX_BREAKPOINTS {
        return Err(format!(
            "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {}.",
            at_paths.len()
        ));
    }
    for at in at_paths {
        let block = at
            .split('.')
            .try_fold(body, |v, key| match key.parse::<usize>() {
                Ok(i) => v.get(i),
                Err(_) => v.get(key),
            })
            .ok_or(format!("{at}: not found"))?;
        let control = &block["cache_control"];
        let Some(fields) = control.as_object() else {
            return Err(format!(
                "{at}.cache_control: Input should be a valid dictionary"
            ));
        };
        if control["type"] != "ephemeral" {
            return Err(format!(
                "{at}.cache_control.type: Input should be 'ephemeral'"
            ));
        }
        if !matches!(&control["ttl"], Value::Null)
            && control["ttl"] != "5m"
            && control["ttl"] != "1h"
        {
            return Err(format!(
                "{at}.cache_control.ttl: Input should be '5m' or '1h'"
            ));
        }
        if let Some(extra) = fields.keys().find(|k| *k != "type" && *k != "ttl") {
            return Err(format!(
                "{at}.cache_control.{extra}: Extra inputs are not permitted"
            ));
        }
        if block["type"] == "text" && block["text"].as_str().is_none_or(|t| t.trim().is_empty()) {
            return Err(format!(
                "{at}: cache_control cannot be set for empty text blocks"
            ));
        }
    }
    Ok(())
}

/// The API's limit on cache breakpoints in one request.
pub const MAX_BREAKPOINTS: usize = 4;

/// A message's blocks (string content counts as one text block).
fn blocks_of(message: &Value, i: usize, count: usize) -> Result<Vec<Value>, String> {
    let blocks = match &message["content"] {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(blocks) => blocks.clone(),
        _ => return Err(format!("messages.{i}.content: Field required")),
    };
    let final_assistant = i + 1 == count && message["role"] == "assistant";
    if blocks.is_empty() && !final_assistant {
        return Err(format!(
            "messages.{i}: all messages must have non-empty content except for the optional final assistant message"
        ));
    }
    Ok(blocks)
}

fn check_text_block(block: &Value, at: &str) -> Result<(), String> {
    if block["type"] != "text" {
        return Err(format!("{at}.type: Input should be 'text'"));
    }
    match block["text"].as_str() {
        None => Err(format!("{at}.text: Field required")),
        Some("") => Err("messages: text content blocks must be non-empty".into()),
        Some(t) if t.trim().is_empty() => {
            Err("messages: text content blocks must contain non-whitespace text".into())
        }
        Some(_) => Ok(()),
    }
}

fn check_tools(tools: &Value) -> Result<(), String> {
    let tools = match tools {
        Value::Null => return Ok(()),
        Value::Array(tools) => tools,
        _ => return Err("tools: Input should be a valid list".into()),
    };
    let mut names = HashSet::new();
    for (k, tool) in tools.iter().enumerate() {
        let name = tool["name"].as_str().unwrap_or("");
        let pattern_ok = (1..=128).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !pattern_ok {
            return Err(format!(
                "tools.{k}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
            ));
        }
        if tool["input_schema"]["type"] != "object" {
            return Err(format!(
                "tools.{k}.custom.input_schema.type: Input should be 'object'"
            ));
        }
        if !names.insert(name) {
            return Err("tools: Tool names must be unique.".into());
        }
    }
    Ok(())
}

/// Every `tool_use` answered in the immediately next message, exactly once;
/// every `tool_result` answering a `tool_use` of the previous message.
fn check_pairing(messages: &[Value]) -> Result<(), String> {
    let ids_of = |message: &Value, kind: &str, key: &str| -> Vec<String> {
        message["content"]
            .as_array()
            .map(|blocks| {
                blocks
                    .iter()
                    .filter(|b| b["type"] == kind)
                    .filter_map(|b| b[key].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    for (i, message) in messages.iter().enumerate() {
        let results = ids_of(message, "tool_result", "tool_use_id");
        let mut answered = HashSet::new();
        let previous_uses = match i.checked_sub(1).map(|p| &messages[p]) {
            Some(previous) if previous["role"] == "assistant" => ids_of(previous, "tool_use", "id"),
            _ => Vec::new(),
        };
        for (j, id) in results.iter().enumerate() {
            if !previous_uses.contains(id) {
                return Err(format!(
                    "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                ));
            }
            if !answered.insert(id.clone()) {
                return Err(format!(
                    "messages.{i}: each tool_use must have a single result. Found multiple `tool_result` blocks with id: {id}"
                ));
            }
        }
        let uses = ids_of(message, "tool_use", "id");
        if uses.is_empty() {
            continue;
        }
        let next_results = match messages.get(i + 1) {
            Some(next) if next["role"] == "user" => ids_of(next, "tool_result", "tool_use_id"),
            _ => Vec::new(),
        };
        let missing: Vec<&str> = uses
            .iter()
            .filter(|id| !next_results.contains(id))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                missing.join(", ")
            ));
        }
    }
    Ok(())
}

/// `usage` is what the reply reports; the API's `input_tokens` leaves the
/// cached parts out.
pub(super) fn reply_body(reply: &FakeReply, usage: &TokenUsage, model: &str) -> Value {
    let mut content = Vec::new();
    if !reply.text.is_empty() {
        content.push(json!({"type": "text", "text": reply.text}));
    }
    for call in &reply.tool_calls {
        let input = match serde_json::from_str::<Value>(&call.arguments) {
            Ok(object @ Value::Object(_)) => object,
            _ => Value::String(call.arguments.clone()),
        };
        content.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    let stop_reason = if reply.tool_calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    json!({
        "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop_reason, "stop_sequence": null,
        "usage": {"input_tokens": usage.input_tokens
                      .saturating_sub(usage.cache_read_input_tokens)
                      .saturating_sub(usage.cache_creation_input_tokens),
                  "cache_read_input_tokens": usage.cache_read_input_tokens,
                  "cache_creation_input_tokens": usage.cache_creation_input_tokens,
                  "output_tokens": usage.output_tokens}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(system_control: Value, message_control: Value, text: &str) -> Value {
        json!({"model": "m", "max_tokens": 10,
            "system": [{"type": "text", "text": "s", "cache_control": system_control}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": text, "cache_control": message_control}]}]})
    }

    #[test]
    fn cache_control_is_checked_as_the_api_does() {
        let ephemeral = json!({"type": "ephemeral"});
        assert_eq!(
            validate(&body(ephemeral.clone(), ephemeral.clone(), "q")),
            Ok(())
        );
        let ttl = json!({"type": "ephemeral", "ttl": "1h"});
        assert_eq!(validate(&body(ttl, ephemeral.clone(), "q")), Ok(()));
        let wrong_type = validate(&body(json!({"type": "persistent"}), ephemeral.clone(), "q"));
        assert!(
            wrong_type
                .unwrap_err()
                .contains("Input should be 'ephemeral'")
        );
        let not_object = validate(&body(json!("ephemeral"), ephemeral.clone(), "q"));
        assert!(not_object.unwrap_err().contains("valid dictionary"));
        let extra = validate(&body(
            json!({"type": "ephemeral", "x": 1}),
            ephemeral.clone(),
            "q",
        ));
        assert!(extra.unwrap_err().contains("Extra inputs"));
        let empty = validate(&body(ephemeral.clone(), ephemeral.clone(), " "));
        assert!(empty.unwrap_err().contains("empty text blocks"));
        // Five breakpoints: one too many.
        let mut five = body(ephemeral.clone(), ephemeral.clone(), "q");
        five["tools"] = json!([
            {"name": "a", "input_schema": {"type": "object"}, "cache_control": ephemeral},
            {"name": "b", "input_schema": {"type": "object"}, "cache_control": ephemeral},
            {"name": "c", "input_schema": {"type": "object"}, "cache_control": ephemeral}]);
        let too_many = validate(&five).unwrap_err();
        assert!(
            too_many.contains("A maximum of 4 blocks with cache_control"),
            "{too_many}"
        );
        five["tools"][0]
            .as_object_mut()
            .unwrap()
            .remove("cache_control");
        assert_eq!(validate(&five), Ok(()));
    }
}
