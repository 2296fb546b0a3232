//! The fakes' model of a prompt cache: what part of a request repeats the
//! previous one byte for byte, in the order the provider caches it.
//!
//! A request's prompt is read as a list of segments in cache order (tools,
//! then the system prompt, then each message's blocks for Anthropic; tools,
//! then each message for OpenAI), each the JSON text of one element with
//! its `cache_control` taken out: a breakpoint marks where a cached prefix
//! ends, it is not part of what is cached, so moving it to the newest block
//! does not change the prefix before it. JSON object keys serialize in a
//! fixed (sorted) order here, so equal values are equal text.

use serde_json::Value;

/// One request's prompt in cache order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prompt {
    /// The segments' text, concatenated.
    pub text: String,
    /// End offset in `text` of the last segment that carries a cache
    /// breakpoint (0 when none does).
    pub cached_up_to: usize,
}

impl Prompt {
    /// Length of the byte-identical prefix this prompt shares with
    /// `previous`.
    pub fn shared_prefix(&self, previous: &Prompt) -> usize {
        self.text
            .bytes()
            .zip(previous.text.bytes())
            .take_while(|(a, b)| a == b)
            .count()
    }
}

/// An Anthropic Messages body in cache order.
pub fn anthropic(body: &Value) -> Prompt {
    let mut prompt = Prompt::default();
    let mut push = |segment: &Value| {
        let (text, marked) = without_cache_control(segment);
        prompt.text.push_str(&text);
        if marked {
            prompt.cached_up_to = prompt.text.len();
        }
    };
    for tool in body["tools"].as_array().into_iter().flatten() {
        push(tool);
    }
    match &body["system"] {
        Value::Array(blocks) => blocks.iter().for_each(&mut push),
        Value::Null => {}
        other => push(other),
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        push(&Value::String(
            message["role"].as_str().unwrap_or("").to_owned(),
        ));
        match &message["content"] {
            Value::Array(blocks) => blocks.iter().for_each(&mut push),
            other => push(other),
        }
    }
    prompt
}

/// A Chat Completions body in cache order (OpenAI caches any repeated
/// prefix; there are no breakpoints, so `cached_up_to` is the whole text).
pub fn openai(body: &Value) -> Prompt {
    let mut text = String::new();
    for item in body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(body["messages"].as_array().into_iter().flatten())
    {
        text.push_str(&item.to_string());
    }
    let cached_up_to = text.len();
    Prompt { text, cached_up_to }
}

/// Paths of the blocks that carry `cache_control`, in body order.
pub fn breakpoints(body: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let mut check = |value: &Value, at: String| {
        if value.get("cache_control").is_some() {
            found.push(at);
        }
    };
    for (k, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        check(tool, format!("tools.{k}"));
    }
    for (j, block) in body["system"].as_array().into_iter().flatten().enumerate() {
        check(block, format!("system.{j}"));
    }
    for (i, message) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (j, block) in message["content"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            check(block, format!("messages.{i}.content.{j}"));
            for (k, part) in block["content"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                check(part, format!("messages.{i}.content.{j}.content.{k}"));
            }
        }
    }
    found
}

fn without_cache_control(segment: &Value) -> (String, bool) {
    match segment {
        Value::Object(map) if map.contains_key("cache_control") => {
            let mut map = map.clone();
            map.remove("cache_control");
            (Value::Object(map).to_string(), true)
        }
        other => (other.to_string(), false),
    }
}

/// Tokens the fakes count for `bytes` of prompt: about four bytes a token,
/// the usual rule of thumb for English and JSON.
pub fn tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_moved_breakpoint_keeps_the_prefix() {
        let first = json!({"system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}]}]});
        let second = json!({"system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]},
                         {"role": "assistant", "content": [{"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}]}]});
        let (a, b) = (anthropic(&first), anthropic(&second));
        assert_eq!(b.shared_prefix(&a), a.text.len());
        assert_eq!(b.cached_up_to, b.text.len());
        assert_eq!(
            breakpoints(&second),
            vec!["system.0".to_owned(), "messages.1.content.0".to_owned()]
        );
    }
}
