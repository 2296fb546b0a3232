//! The `script` provider: replays a scripted investigation, so the demo
//! runs without an API key.
//!
//! A script file is JSON, either a list of replies or an object with the
//! list and the text of the closing reply:
//!
//! ```json
//! [ {"text": "Checking the logs.",
//!    "tool_calls": [{"name": "read_log", "arguments": {"file": "app.log"}}],
//!    "usage": {"input_tokens": 900, "output_tokens": 40}},
//!   {"text": "The pool was exhausted at 10:02."} ]
//! ```
//! ```json
//! {"replies": [ … ], "final": "Nothing more to add."}
//! ```
//!
//! `arguments` is an object, or a string used as the raw text the model
//! "sent" (so a script can show invalid arguments). Every reply needs text
//! or a tool call: a reply with neither would be left out of a rebuilt
//! transcript and replayed forever.
//!
//! Which reply comes next is derived from the request, not kept in memory:
//! the nth reply (from 0) answers a transcript holding n assistant
//! messages. A resumed session (another process, another replica)
//! therefore continues where its script left off, and one provider serves
//! any number of sessions. After the last reply every call gets the
//! closing plain reply. A caller that asks for something other than the
//! next investigation step (say a report summary) gets the reply at that
//! position too; it should use its text only.
//!
//! Without `usage`, tokens are estimated at four characters a token.
//!
//! A compaction keeps the position: a summary message says how
//! many model turns it stands in for, and those count; a summary request
//! itself is answered with [`SUMMARY_TEXT`].

use std::path::Path;

use inquest_core::{Message, TokenUsage, ToolArguments, ToolCall};
use serde::Deserialize;
use serde_json::Value;

use crate::{Completion, CompletionRequest, Provider, ProviderFuture, StopReason};

/// The answer to a compaction's summary request.
pub const SUMMARY_TEXT: &str =
    "The scripted investigation so far, summarised by the script provider.";

/// The closing reply when the file does not name one.
pub const DEFAULT_FINAL_TEXT: &str = "The scripted investigation has ended; nothing more to add.";

/// Why a script could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("cannot read script {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("script is not valid: {0}")]
    Json(#[from] serde_json::Error),
    #[error("script reply {0} has neither text nor tool calls")]
    EmptyReply(usize),
    #[error("script reply {reply}: tool call {call} has a blank name")]
    BlankToolName { reply: usize, call: usize },
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ScriptFile {
    Replies(Vec<ReplyFile>),
    Full {
        replies: Vec<ReplyFile>,
        #[serde(rename = "final")]
        final_text: Option<String>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyFile {
    #[serde(default)]
    text: String,
    #[serde(default)]
    tool_calls: Vec<CallFile>,
    usage: Option<TokenUsage>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallFile {
    name: String,
    #[serde(default = "empty_object")]
    arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

#[derive(Debug, Clone, PartialEq)]
struct ScriptReply {
    text: String,
    tool_calls: Vec<(String, ToolArguments)>,
    usage: Option<TokenUsage>,
}

/// Replays a script; see the module docs.
#[derive(Debug, Clone)]
pub struct ScriptProvider {
    replies: Vec<ScriptReply>,
    final_text: String,
}

impl ScriptProvider {
    pub fn from_file(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_json(&text)
    }

    pub fn from_json(text: &str) -> Result<Self, ScriptError> {
        let (replies, final_text) = match serde_json::from_str(text)? {
            ScriptFile::Replies(replies) => (replies, None),
            ScriptFile::Full {
                replies,
                final_text,
            } => (replies, final_text),
        };
        let replies = replies
            .into_iter()
            .enumerate()
            .map(|(index, reply)| {
                if reply.text.trim().is_empty() && reply.tool_calls.is_empty() {
                    return Err(ScriptError::EmptyReply(index));
                }
                let tool_calls = reply
                    .tool_calls
                    .into_iter()
                    .enumerate()
                    .map(|(call, c)| {
                        if c.name.trim().is_empty() {
                            return Err(ScriptError::BlankToolName { reply: index, call });
                        }
                        let arguments = match c.arguments {
                            Value::String(raw) => ToolArguments::from_model(&raw),
                            other => ToolArguments::from_model(&other.to_string()),
                        };
                        Ok((c.name, arguments))
                    })
                    .collect::<Result<_, _>>()?;
                Ok(ScriptReply {
                    text: reply.text,
                    tool_calls,
                    usage: reply.usage,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            replies,
            final_text: final_text
                .filter(|t| !t.trim().is_empty())
                .unwrap_or_else(|| DEFAULT_FINAL_TEXT.to_owned()),
        })
    }

    /// How many scripted replies there are (the closing one not counted).
    pub fn len(&self) -> usize {
        self.replies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.replies.is_empty()
    }

    /// The reply to a request; pure, so it is also what `complete` returns.
    pub fn reply(&self, request: &CompletionRequest<'_>) -> Completion {
        if request
            .system
            .contains(inquest_core::compaction::COMPACTION_MARKER)
        {
            // A compaction's summary request: not a step of the script.
            let text = SUMMARY_TEXT.to_owned();
            let usage = estimate_usage(request, &text, &[]);
            return Completion {
                text,
                tool_calls: Vec::new(),
                usage,
                stop_reason: StopReason::EndTurn,
            };
        }
        // Model turns a compaction's summary stands in for count too, so
        // a compacted transcript continues where the script is.
        let summarised: usize = request
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::User { text } => inquest_core::compaction::summarised_model_turns(text),
                _ => None,
            })
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
            .sum();
        let position = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count()
            .saturating_add(summarised);
        let (text, tool_calls, usage) = match self.replies.get(position) {
            Some(reply) => {
                let calls: Vec<ToolCall> = reply
                    .tool_calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, arguments))| ToolCall {
                        // Unique per session: one position per assistant turn.
                        id: format!("script_{position}_{i}"),
                        name: name.clone(),
                        arguments: arguments.clone(),
                    })
                    .collect();
                (reply.text.clone(), calls, reply.usage)
            }
            None => (self.final_text.clone(), Vec::new(), None),
        };
        let usage = match usage {
            // A script is a provider too: its figures get the same clamp.
            Some(u) => TokenUsage::reported(
                u.input_tokens,
                u.output_tokens,
                u.cache_read_input_tokens,
                u.cache_creation_input_tokens,
            ),
            None => estimate_usage(request, &text, &tool_calls),
        };
        let stop_reason = if tool_calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        };
        Completion {
            text,
            tool_calls,
            usage,
            stop_reason,
        }
    }
}

impl Provider for ScriptProvider {
    fn complete<'a>(&'a self, request: &'a CompletionRequest<'a>) -> ProviderFuture<'a> {
        let completion = self.reply(request);
        Box::pin(async move { Ok(completion) })
    }
}

fn estimate_usage(request: &CompletionRequest<'_>, text: &str, calls: &[ToolCall]) -> TokenUsage {
    let prompt: usize = request.system.len()
        + request
            .messages
            .iter()
            .map(|m| match m {
                Message::User { text } => text.len(),
                Message::Assistant { text, tool_calls } => {
                    text.len()
                        + tool_calls
                            .iter()
                            .map(|c| c.name.len() + c.arguments.as_sent().len())
                            .sum::<usize>()
                }
                Message::ToolResult { content, .. } => content.len(),
            })
            .sum::<usize>();
    let reply = text.len()
        + calls
            .iter()
            .map(|c| c.name.len() + c.arguments.as_sent().len())
            .sum::<usize>();
    let tokens = |chars: usize| u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX);
    TokenUsage::new(tokens(prompt), tokens(reply))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_empty_replies_and_unknown_fields() {
        assert!(matches!(
            ScriptProvider::from_json(r#"[{"text": " "}]"#),
            Err(ScriptError::EmptyReply(0))
        ));
        assert!(ScriptProvider::from_json(r#"[{"txt": "a"}]"#).is_err());
        assert!(matches!(
            ScriptProvider::from_json(r#"[{"tool_calls": [{"name": ""}]}]"#),
            Err(ScriptError::BlankToolName { reply: 0, call: 0 })
        ));
        let full =
            ScriptProvider::from_json(r#"{"replies": [{"text": "a"}], "final": "bye"}"#).unwrap();
        assert_eq!(full.len(), 1);
        assert_eq!(full.final_text, "bye");
    }

    #[test]
    fn estimates_usage_when_the_script_gives_none() {
        let script = ScriptProvider::from_json(r#"[{"text": "12345678"}]"#).unwrap();
        let messages = [Message::User {
            text: "abcd".into(),
        }];
        let request = CompletionRequest {
            system: "",
            messages: &messages,
            tools: &[],
            max_tokens: 10,
        };
        let c = script.reply(&request);
        assert_eq!(c.usage, TokenUsage::new(1, 2));
    }
}
