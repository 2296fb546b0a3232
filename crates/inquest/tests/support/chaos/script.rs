//! What the chaos model answers, derived from the request alone (like the
//! `script` provider), so any replica can continue any session after any
//! fault: the last user message carries a tag `[chaos s=<session>
//! m=<message>]`; the seed and the tag fix how many steps that message
//! takes and which tools each step calls; the number of assistant
//! messages since the tag says which step is next.
//!
//! The model behaves like a careful operator on one point: when a
//! `restart_service` call came back as an error (for instance the
//! synthetic "may have partly run" result a recovery gives a cut-off
//! call), it asks for the same restart again, once. Such a repeat reaches
//! the tool only if the server let the model continue, so the execution
//! log shows whether a cut-off mutating call was re-run without a human's
//! confirmation.

use serde_json::{Value, json};

use super::mix;

pub const MUTATING_TOOL: &str = "restart_service";
pub const READ_TOOL: &str = "read_status";

/// The tag a workload message carries.
pub fn tag(session: usize, message: usize) -> String {
    format!("[chaos s={session} m={message}]")
}

/// The text of message `message` of session `session`.
pub fn user_message(session: usize, message: usize) -> String {
    if message == 0 {
        format!(
            "{} Checkout is failing for some users; find out why.",
            tag(session, message)
        )
    } else {
        format!(
            "{} Follow-up {message}: is it stable now? Check again.",
            tag(session, message)
        )
    }
}

/// A reply: its text and its tool calls (id, name, arguments as sent).
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub text: String,
    pub calls: Vec<(String, String, String)>,
}

fn hash(seed: u64, parts: &[u64]) -> u64 {
    parts.iter().fold(mix(seed), |h, p| {
        mix(h ^ p.wrapping_mul(0x2545_f491_4f6c_dd1d))
    })
}

fn n(v: usize) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// How many tool-calling steps message `message` of `session` takes.
pub fn steps(seed: u64, session: usize, message: usize) -> usize {
    1 + usize::try_from(hash(seed, &[n(session), n(message)]) % 3).unwrap_or(0)
}

/// The calls of step `step` (name, arguments): one or two tools, each
/// mutating or read-only, most taking 0.3 to 3 s, one in eight 6 s:
/// longer than the lease TTL (a partition or a freeze cuts it off while
/// another replica could take over) and than the shutdown grace (SIGTERM
/// must leave it dangling). The `service` argument names the action
/// uniquely within the session.
pub fn step_calls(seed: u64, session: usize, message: usize, step: usize) -> Vec<(String, Value)> {
    const SECONDS: [f64; 8] = [0.3, 0.5, 0.5, 1.0, 1.5, 2.0, 3.0, 6.0];
    let h = hash(seed, &[n(session), n(message), n(step), 7]);
    let count = if h % 10 < 3 { 2 } else { 1 };
    (0..count)
        .map(|c| {
            let h = mix(h ^ n(c + 1));
            let name = if (h >> 8).is_multiple_of(2) {
                MUTATING_TOOL
            } else {
                READ_TOOL
            };
            let seconds = SECONDS[usize::try_from((h >> 16) % 8).unwrap_or(0)];
            let service = format!("svc-s{session}-m{message}-k{step}-c{c}");
            (
                name.to_owned(),
                json!({"service": service, "seconds": seconds}),
            )
        })
        .collect()
}

/// A short think time for the model call, 0 to 400 ms, so faults also
/// land mid-model-call.
pub fn think_ms(seed: u64, body: &Value) -> u64 {
    let len = body["messages"].as_array().map_or(0, Vec::len);
    hash(seed, &[n(len), 99]) % 400
}

fn role(m: &Value) -> &str {
    m["role"].as_str().unwrap_or("")
}

fn text(m: &Value) -> &str {
    m["content"].as_str().unwrap_or("")
}

/// The session and message a tagged text names.
pub fn parse_tag(content: &str) -> Option<(usize, usize)> {
    let start = content.find("[chaos s=")?;
    let rest = &content[start + "[chaos s=".len()..];
    let (session, rest) = rest.split_once(" m=")?;
    let (message, _) = rest.split_once(']')?;
    Some((session.parse().ok()?, message.parse().ok()?))
}

fn calls(m: &Value) -> &[Value] {
    m["tool_calls"].as_array().map_or(&[], Vec::as_slice)
}

fn service_of(call: &Value) -> Option<String> {
    let arguments = call["function"]["arguments"].as_str()?;
    let arguments: Value = serde_json::from_str(arguments).ok()?;
    arguments["service"].as_str().map(str::to_owned)
}

/// The reply to a valid Chat Completions request body.
pub fn reply(seed: u64, body: &Value) -> Reply {
    let messages = body["messages"].as_array().map_or(&[][..], Vec::as_slice);
    let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    let tagged = messages
        .iter()
        .rposition(|m| role(m) == "user" && parse_tag(text(m)).is_some());
    let Some(at) = tagged else {
        return plain("There is nothing to investigate yet.");
    };
    let Some((session, message)) = parse_tag(text(&messages[at])) else {
        return plain("There is nothing to investigate yet.");
    };
    if !has_tools {
        // The report author: no tools offered.
        return plain(&format!(
            "Report on session {session}: checkout was restarted and is stable \
             (after message {message})."
        ));
    }
    let position = messages.iter().filter(|m| role(m) == "assistant").count();
    let id = |i: usize| format!("call_{position}_{i}");
    let after = &messages[at + 1..];
    if let Some(action) = failed_restart(messages, after) {
        let arguments = json!({"service": action, "seconds": 0.5}).to_string();
        return Reply {
            text: format!("Retrying {action}: the last attempt did not report success."),
            calls: vec![(id(0), MUTATING_TOOL.to_owned(), arguments)],
        };
    }
    let progress = after
        .iter()
        .filter(|m| role(m) == "assistant" && text(m).starts_with("Step "))
        .count();
    if progress >= steps(seed, session, message) {
        return plain(&format!(
            "Final answer to message {message} of session {session}: checkout is healthy again."
        ));
    }
    Reply {
        text: format!("Step {progress} of message {message}: checking."),
        calls: step_calls(seed, session, message, progress)
            .into_iter()
            .enumerate()
            .map(|(i, (name, arguments))| (id(i), name, arguments.to_string()))
            .collect(),
    }
}

/// The action of a `restart_service` call of the last tool-calling
/// assistant message that came back as an error and was not repeated yet.
fn failed_restart(all: &[Value], after: &[Value]) -> Option<String> {
    let last = after
        .iter()
        .rposition(|m| role(m) == "assistant" && !calls(m).is_empty())?;
    for call in calls(&after[last]) {
        if call["function"]["name"] != MUTATING_TOOL {
            continue;
        }
        let failed = after[last + 1..].iter().any(|m| {
            role(m) == "tool"
                && m["tool_call_id"] == call["id"]
                && text(m).starts_with(inquest_agent::openai::TOOL_ERROR_PREFIX)
        });
        let Some(action) = service_of(call).filter(|_| failed) else {
            continue;
        };
        let asked = all
            .iter()
            .filter(|m| role(m) == "assistant")
            .flat_map(calls)
            .filter(|c| service_of(c).as_deref() == Some(action.as_str()))
            .count();
        if asked < 2 {
            return Some(action);
        }
    }
    None
}

/// Whether `text` is a whole reply text of the model: a model call
/// abandoned half-way must have stored nothing, never a part.
pub fn is_whole_reply(text: &str) -> bool {
    (text.starts_with("Step ") && text.ends_with(": checking."))
        || (text.starts_with("Final answer to message ")
            && text.ends_with(": checkout is healthy again."))
        || (text.starts_with("Retrying ")
            && text.ends_with(": the last attempt did not report success."))
        || text == "There is nothing to investigate yet."
}

/// The message an answer's text says it works on ("Step 0 of message 2",
/// "Final answer to message 2 of …"); `None` for a retry.
pub fn answered_message(text: &str) -> Option<usize> {
    let rest = text
        .strip_prefix("Final answer to message ")
        .or_else(|| text.split_once(" of message ").map(|(_, rest)| rest))?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn plain(text: &str) -> Reply {
    Reply {
        text: text.to_owned(),
        calls: Vec::new(),
    }
}

/// The Chat Completions response body for `reply`.
pub fn completion(reply: &Reply, model: &str) -> Value {
    let mut message = json!({"role": "assistant", "content": reply.text});
    let finish = if reply.calls.is_empty() {
        "stop"
    } else {
        message["tool_calls"] = reply
            .calls
            .iter()
            .map(|(id, name, arguments)| {
                json!({"id": id, "type": "function",
                       "function": {"name": name, "arguments": arguments}})
            })
            .collect();
        "tool_calls"
    };
    json!({
        "id": "chatcmpl-chaos", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    })
}
