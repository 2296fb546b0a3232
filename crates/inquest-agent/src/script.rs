//! The `script` provider: replays a scripted investigation, so the demo
//! runs without an API key.
//!
//! A script file is JSON, either a list of replies or an object with the
//! list, the text of the closing reply, and what follow-ups get:
//!
//! ```json
//! [ {"text": "Checking the logs.",
//!    "tool_calls": [{"name": "read_log", "arguments": {"file": "app.log"}}],
//!    "usage": {"input_tokens": 900, "output_tokens": 40},
//!    "delay": "2s"},
//!   {"text": "The pool was exhausted at 10:02."} ]
//! ```
//! ```json
//! {"replies": [ … ], "final": "Nothing more to add.",
//!  "follow_up": {"replies": [ … ], "final": "…"}}
//! ```
//!
//! The keys of a reply: `text` (what the model says), `tool_calls` (each a
//! `name` and `arguments`), `usage` (`input_tokens`, `output_tokens`,
//! optional `cache_read_input_tokens`, `cache_creation_input_tokens`) and
//! `delay` (how long the reply takes to arrive, `"500ms"`, `"2s"`; default
//! the provider entry's `delay`, else none). `arguments` is an object, or a
//! string used as the raw text the model "sent" (so a script can show
//! invalid arguments). Every reply needs text or a tool call: a reply with
//! neither would be left out of a rebuilt transcript and replayed forever.
//!
//! Which reply comes next is derived from the request, not kept in memory:
//! the nth reply (from 0) answers a transcript holding n assistant
//! messages. A resumed session (another process, another replica)
//! therefore continues where its script left off, and one provider serves
//! any number of sessions. After the last reply every call gets the
//! closing plain reply (`final`). A caller that asks for something other
//! than the next investigation step (the report's author) gets the reply
//! at that position too; it should use its text only.
//!
//! A transcript with a user message after the opening one is a follow-up.
//! With a `follow_up` part, it is answered from that part, counted from
//! the latest user message: its replies, then its `final` (the text of
//! its report). Without one, a follow-up gets the closing reply.
//!
//! Without `usage`, tokens are estimated at four characters a token.
//!
//! A compaction keeps the position: a summary message says how
//! many model turns it stands in for, and those count; a summary request
//! itself is answered with [`SUMMARY_TEXT`].

use std::{path::Path, time::Duration};

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
    Full(FullFile),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FullFile {
    replies: Vec<ReplyFile>,
    #[serde(rename = "final")]
    final_text: Option<String>,
    follow_up: Option<PartFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PartFile {
    #[serde(default)]
    replies: Vec<ReplyFile>,
    #[serde(rename = "final")]
    final_text: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyFile {
    #[serde(default)]
    text: String,
    #[serde(default)]
    tool_calls: Vec<CallFile>,
    usage: Option<TokenUsage>,
    #[serde(default, with = "inquest_core::duration_text::option")]
    delay: Option<Duration>,
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
    delay: Option<Duration>,
}

/// Replies, then the closing text: the opening burst, or a follow-up.
#[derive(Debug, Clone)]
struct Part {
    replies: Vec<ScriptReply>,
    final_text: String,
}

/// Replays a script; see the module docs.
#[derive(Debug, Clone)]
pub struct ScriptProvider {
    opening: Part,
    follow_up: Option<Part>,
    /// How long a reply without its own `delay` takes.
    delay: Duration,
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
        let (replies, final_text, follow_up) = match serde_json::from_str(text)? {
            ScriptFile::Replies(replies) => (replies, None, None),
            ScriptFile::Full(full) => (full.replies, full.final_text, full.follow_up),
        };
        let opening = Part::parse(replies, final_text, 0)?;
        let follow_up = follow_up
            .map(|part| Part::parse(part.replies, part.final_text, opening.replies.len()))
            .transpose()?;
        Ok(Self {
            opening,
            follow_up,
            delay: Duration::ZERO,
        })
    }

    /// Every reply without its own `delay` takes `delay` (the provider
    /// entry's `delay`): a demo slow enough to watch, or to kill the
    /// replica running it.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// How many scripted replies the opening burst has (the closing one not
    /// counted).
    pub fn len(&self) -> usize {
        self.opening.replies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.opening.replies.is_empty()
    }

    /// The reply to a request; pure, so it is also what `complete` returns.
    pub fn reply(&self, request: &CompletionRequest<'_>) -> Completion {
        self.answer(request).0
    }

    /// Which part answers `messages`, and the position in it: the opening
    /// part at the count of model turns so far, or, for a follow-up with a
    /// `follow_up` part, that part at the count since the latest user
    /// message. A compaction's summary counts the model turns it stands in
    /// for; the report author's prompt is not a user message. Also the
    /// model turns of the whole transcript, which make call ids unique.
    fn position(&self, messages: &[Message<'_>]) -> (&Part, usize, usize) {
        let summarised = |m: &Message<'_>| match m {
            Message::User { text } => inquest_core::compaction::summarised_model_turns(text)
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            _ => None,
        };
        let turns = |messages: &[Message<'_>]| {
            messages
                .iter()
                .map(|m| match m {
                    Message::Assistant { .. } => 1,
                    other => summarised(other).unwrap_or(0),
                })
                .fold(0usize, usize::saturating_add)
        };
        let is_user = |m: &Message<'_>| {
            matches!(m, Message::User { text } if text.as_ref() != crate::report::AUTHOR_PROMPT)
                && summarised(m).is_none()
        };
        let users: Vec<usize> = (0..messages.len())
            .filter(|&i| is_user(&messages[i]))
            .collect();
        let all = turns(messages);
        match (&self.follow_up, users.as_slice()) {
            (Some(part), [_, .., latest]) => (part, turns(&messages[latest + 1..]), all),
            _ => (&self.opening, all, all),
        }
    }

    /// The reply to a request and how long it takes to arrive.
    fn answer(&self, request: &CompletionRequest<'_>) -> (Completion, Duration) {
        if request
            .system
            .contains(inquest_core::compaction::COMPACTION_MARKER)
        {
            // A compaction's summary request: not a step of the script.
            let text = SUMMARY_TEXT.to_owned();
            let usage = estimate_usage(request, &text, &[]);
            let completion = Completion {
                text,
                tool_calls: Vec::new(),
                usage,
                stop_reason: StopReason::EndTurn,
            };
            return (completion, Duration::ZERO);
        }
        // Call ids are unique per session: the count of model turns so
        // far differs between any two of a session's turns.
        let (part, position, turn) = self.position(request.messages);
        let (text, tool_calls, usage, delay) = match part.replies.get(position) {
            Some(reply) => {
                let calls: Vec<ToolCall> = reply
                    .tool_calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, arguments))| ToolCall {
                        id: format!("script_{turn}_{i}"),
                        name: name.clone(),
                        arguments: arguments.clone(),
                    })
                    .collect();
                (
                    reply.text.clone(),
                    calls,
                    reply.usage,
                    reply.delay.unwrap_or(self.delay),
                )
            }
            None => (part.final_text.clone(), Vec::new(), None, self.delay),
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
        let completion = Completion {
            text,
            tool_calls,
            usage,
            stop_reason,
        };
        (completion, delay)
    }
}

impl Part {
    /// Checks and converts a part's replies; `first` is the index of its
    /// first reply in the file, for errors.
    fn parse(
        replies: Vec<ReplyFile>,
        final_text: Option<String>,
        first: usize,
    ) -> Result<Self, ScriptError> {
        let replies = replies
            .into_iter()
            .enumerate()
            .map(|(index, reply)| {
                let index = first + index;
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
                    delay: reply.delay,
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
}

impl Provider for ScriptProvider {
    fn complete<'a>(&'a self, request: &'a CompletionRequest<'a>) -> ProviderFuture<'a> {
        let (completion, delay) = self.answer(request);
        Box::pin(async move {
            // Dropped with the call: a cancelled burst does not wait it out.
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Ok(completion)
        })
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
        assert_eq!(full.opening.final_text, "bye");
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

    fn user(text: &str) -> Message<'static> {
        Message::User {
            text: text.to_owned().into(),
        }
    }

    fn assistant(text: &str) -> Message<'static> {
        Message::Assistant {
            text: text.to_owned().into(),
            tool_calls: Default::default(),
        }
    }

    fn ask(script: &ScriptProvider, messages: &[Message<'_>]) -> (Completion, Duration) {
        script.answer(&CompletionRequest {
            system: "",
            messages,
            tools: &[],
            max_tokens: 10,
        })
    }

    const WITH_FOLLOW_UP: &str = r#"{
        "replies": [
            {"text": "a", "tool_calls": [{"name": "search"}], "delay": "2s"},
            {"text": "b"}
        ],
        "final": "report",
        "follow_up": {
            "replies": [{"text": "f", "tool_calls": [{"name": "search"}]}, {"text": "g"}],
            "final": "follow-up report"
        }
    }"#;

    /// A follow-up is answered from the `follow_up` part, counted from the
    /// latest user message; the report author's prompt is not one, so the
    /// opening burst's report stays the opening `final`.
    #[test]
    fn a_follow_up_gets_its_own_replies_and_report() {
        let script = ScriptProvider::from_json(WITH_FOLLOW_UP)
            .unwrap()
            .with_delay(Duration::from_millis(5));
        let author = user(crate::report::AUTHOR_PROMPT);
        let mut t = vec![user("why?")];
        let (c, delay) = ask(&script, &t);
        assert_eq!((c.text.as_str(), delay), ("a", Duration::from_secs(2)));
        assert_eq!(c.tool_calls[0].id, "script_0_0");
        t.push(assistant("a"));
        let (c, delay) = ask(&script, &t);
        assert_eq!((c.text.as_str(), delay), ("b", Duration::from_millis(5)));
        t.push(assistant("b"));
        t.push(author.clone());
        assert_eq!(ask(&script, &t).0.text, "report");
        t.pop();

        t.push(user("And pricing-svc?"));
        let (c, _) = ask(&script, &t);
        assert_eq!(c.text, "f");
        assert_eq!(c.tool_calls[0].id, "script_2_0", "call ids stay unique");
        t.push(assistant("f"));
        assert_eq!(ask(&script, &t).0.text, "g");
        t.push(assistant("g"));
        t.push(author);
        assert_eq!(ask(&script, &t).0.text, "follow-up report");
    }

    /// Without a `follow_up` part a follow-up gets the closing reply, as
    /// before.
    #[test]
    fn without_a_follow_up_part_a_follow_up_gets_the_closing_reply() {
        let script =
            ScriptProvider::from_json(r#"{"replies": [{"text": "a"}], "final": "done"}"#).unwrap();
        let t = [user("why?"), assistant("a"), user("and?")];
        let (c, delay) = ask(&script, &t);
        assert_eq!((c.text.as_str(), delay), ("done", Duration::ZERO));
        assert!(ScriptProvider::from_json(r#"{"replies": [], "follow_up": {"nope": 1}}"#).is_err());
        assert!(ScriptProvider::from_json(r#"[{"text": "a", "delay": "soon"}]"#).is_err());
    }

    /// The example investigation's script loads, and answers the README's
    /// follow-up with something other than its report.
    #[test]
    fn the_example_script_answers_a_follow_up() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/checkout-latency/script.json");
        let script = ScriptProvider::from_file(&path).unwrap();
        let mut t = vec![user("Why did latency jump?")];
        for _ in 0..script.len() {
            let c = ask(&script, &t).0;
            t.push(Message::Assistant {
                text: c.text.into(),
                tool_calls: Default::default(),
            });
        }
        let report = ask(&script, &t).0.text;
        t.push(user("And pricing-svc?"));
        let answer = ask(&script, &t).0.text;
        assert_ne!(answer, report);
        assert!(answer.contains("pricing-svc"), "{answer}");
    }
}
