//! The fake Chat Completions API: request checks and reply bodies.
//! Error messages follow the real API's wording where it is known.

use inquest_core::TokenUsage;
use serde_json::{Value, json};

use super::FakeReply;

pub(super) fn error_type(status: u16) -> &'static str {
    match status {
        400 | 404 => "invalid_request_error",
        401 => "authentication_error",
        429 => "rate_limit_error",
        _ => "server_error",
    }
}

pub(super) fn validate(body: &Value) -> Result<(), String> {
    if body["model"].as_str().is_none_or(str::is_empty) {
        return Err("you must provide a model parameter".into());
    }
    if !matches!(body["stream"], Value::Null | Value::Bool(_)) {
        return Err("Invalid type for 'stream': expected a boolean.".into());
    }
    if !body["stream_options"].is_null() && body["stream"] != true {
        return Err(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.".into(),
        );
    }
    check_tools(&body["tools"])?;
    let messages = body["messages"]
        .as_array()
        .ok_or("Missing required parameter: 'messages'.")?;
    if messages.is_empty() {
        return Err("Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.".into());
    }
    // Call ids of the last assistant message still waiting for a result.
    let mut pending: Vec<String> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or("");
        if role != "tool" && !pending.is_empty() {
            return Err(unanswered(&pending));
        }
        match role {
            "system" | "developer" | "user" => {
                if !(message["content"].is_string() || message["content"].is_array()) {
                    return Err(format!("Invalid value for 'messages[{i}].content'"));
                }
            }
            "assistant" => {
                let calls = match &message["tool_calls"] {
                    Value::Null => Vec::new(),
                    Value::Array(calls) => calls.clone(),
                    _ => return Err(format!("Invalid type for 'messages[{i}].tool_calls'")),
                };
                let content_ok = match &message["content"] {
                    Value::String(_) | Value::Array(_) => true,
                    Value::Null => !calls.is_empty(),
                    _ => false,
                };
                if !content_ok {
                    return Err(format!(
                        "Invalid value for 'content': expected a string, got null. (messages[{i}])"
                    ));
                }
                for (k, call) in calls.iter().enumerate() {
                    let at = format!("messages[{i}].tool_calls[{k}]");
                    let id = call["id"].as_str().filter(|s| !s.is_empty());
                    let id = id.ok_or(format!("Missing required parameter: '{at}.id'."))?;
                    if call["type"] != "function" {
                        return Err(format!("Missing required parameter: '{at}.type'."));
                    }
                    if !call["function"]["name"].is_string() {
                        return Err(format!("Missing required parameter: '{at}.function.name'."));
                    }
                    if !call["function"]["arguments"].is_string() {
                        return Err(format!(
                            "Invalid type for '{at}.function.arguments': expected a string."
                        ));
                    }
                    pending.push(id.to_owned());
                }
            }
            "tool" => {
                let id = message["tool_call_id"].as_str().unwrap_or("");
                let Some(at) = pending.iter().position(|p| p == id) else {
                    return Err("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.".into());
                };
                pending.remove(at);
                if !(message["content"].is_string() || message["content"].is_array()) {
                    return Err(format!("Invalid value for 'messages[{i}].content'"));
                }
            }
            other => {
                return Err(format!(
                    "Invalid value: '{other}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'."
                ));
            }
        }
    }
    if pending.is_empty() {
        Ok(())
    } else {
        Err(unanswered(&pending))
    }
}

fn unanswered(pending: &[String]) -> String {
    format!(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
        pending.join(", ")
    )
}

fn check_tools(tools: &Value) -> Result<(), String> {
    let tools = match tools {
        Value::Null => return Ok(()),
        Value::Array(tools) => tools,
        _ => return Err("Invalid type for 'tools': expected an array.".into()),
    };
    for (k, tool) in tools.iter().enumerate() {
        if tool["type"] != "function" {
            return Err(format!("Missing required parameter: 'tools[{k}].type'."));
        }
        let name = tool["function"]["name"].as_str().unwrap_or("");
        let pattern_ok = (1..=64).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !pattern_ok {
            return Err(format!(
                "Invalid 'tools[{k}].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
            ));
        }
        if !matches!(
            tool["function"]["parameters"],
            Value::Null | Value::Object(_)
        ) {
            return Err(format!("Invalid type for 'tools[{k}].function.parameters'"));
        }
    }
    Ok(())
}

/// `usage` is what the reply reports (cache reads as
/// `prompt_tokens_details.cached_tokens`; the format has no cache writes).
pub(super) fn reply_body(reply: &FakeReply, usage: &TokenUsage, model: &str) -> Value {
    let mut message = json!({
        "role": "assistant",
        "content": if reply.text.is_empty() { Value::Null } else { json!(reply.text) },
    });
    let finish_reason = if reply.tool_calls.is_empty() {
        "stop"
    } else {
        let calls: Vec<Value> = reply
            .tool_calls
            .iter()
            .map(|c| {
                let mut call = json!({"type": "function",
                       "function": {"name": c.name, "arguments": c.arguments}});
                // An empty id is left out, as some compatible servers do.
                if !c.id.is_empty() {
                    call["id"] = json!(c.id);
                }
                call
            })
            .collect();
        message["tool_calls"] = Value::Array(calls);
        "tool_calls"
    };
    json!({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
                  "total_tokens": usage.input_tokens.saturating_add(usage.output_tokens),
                  "prompt_tokens_details": {"cached_tokens": usage.cache_read_input_tokens}}
    })
}
