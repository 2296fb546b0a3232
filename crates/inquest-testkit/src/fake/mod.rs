//! Fake model providers for tests.
//!
//! A [`FakeProvider`] is a real HTTP server on `127.0.0.1:0` speaking one
//! wire format ([`Flavor`]). It checks every request the way the real API
//! does and answers an invalid one with HTTP 400 in the provider's error
//! shape:
//!
//! - Anthropic: roles only `user`/`assistant`, the first one `user`; no
//!   empty content and no blank text blocks; every `tool_use` answered by a
//!   `tool_result` in the immediately next user message, results before
//!   other blocks, one result per call; no `tool_result` without a
//!   `tool_use` in the previous message. Same-role neighbours are allowed,
//!   as they are by the real API today.
//! - OpenAI: an assistant message with `tool_calls` must be followed by
//!   `tool` messages answering every `tool_call_id` before any other
//!   message; a `tool` message must answer such a call.
//!
//! Anthropic also: `cache_control` only `{"type": "ephemeral"}` (a `ttl`
//! of "5m" or "1h" allowed), on at most 4 blocks, never on an empty text
//! block.
//!
//! Requests are recorded (rejected ones too) for shape checks, with their
//! cache breakpoints and how much of their prompt repeats the previous
//! valid request byte for byte ([`cache`]). Valid
//! requests are answered by the next scripted [`Behaviour`] (a reply, an
//! error status, or hanging until the client gives up), or by a plain
//! default reply when the script is empty.
//!
//! A context window ([`FakeProvider::with_context_window`]) makes the fake
//! count each valid request at one token per 4 bytes of its body (rounded
//! up) and answer one over the window with the provider's standard "too
//! long" error, exactly as the real API words it (OpenAI: HTTP 400,
//! `code: "context_length_exceeded"`, "This model's maximum context length
//! is N tokens. However, your messages resulted in M tokens…"; Anthropic:
//! HTTP 400 `invalid_request_error`, "prompt is too long: M tokens > N
//! maximum"), without taking a scripted behaviour.
//!
//! A compaction request (its system prompt holds
//! [`inquest_core::compaction::COMPACTION_MARKER`]) that fits is answered
//! with an automatic summary naming how many came before, also without
//! taking a scripted behaviour, so a test's script stays the
//! investigation's own.
//!
//! A request with `"stream": true` is answered with server-sent events
//! shaped like the real API's (Anthropic: `message_start`, `ping`,
//! `content_block_start` / `content_block_delta` (`text_delta`,
//! `input_json_delta`) / `content_block_stop`, `message_delta` with the
//! stop reason and output tokens, `message_stop`; OpenAI: `chat.completion.chunk`
//! deltas of `content` and `tool_calls` by index, the finish reason, a
//! usage chunk when `stream_options.include_usage` asks, `[DONE]`), with
//! the delay and piece size of [`FakeProvider::set_streaming`]; a
//! [`Behaviour::Broken`] breaks it mid-answer. Others get one JSON body.
//!
//! The server task is owned by the [`FakeProvider`]: dropping it aborts the
//! accept loop, and with it every connection task it owns.

mod anthropic;
pub mod cache;
mod openai;
mod server;
mod stream;

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, PoisonError},
};

use inquest_core::TokenUsage;
use serde_json::Value;

/// Which wire format a fake speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Anthropic,
    OpenAi,
}

/// A tool call the fake model makes; an empty `id` is sent as no id at
/// all (OpenAI flavour); `arguments` is the raw text it
/// "sends" (for Anthropic, text that is not a JSON object is sent as a
/// JSON string `input`).
#[derive(Debug, Clone, PartialEq)]
pub struct FakeToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A scripted model reply.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FakeReply {
    pub text: String,
    pub tool_calls: Vec<FakeToolCall>,
    pub usage: TokenUsage,
}

impl FakeReply {
    pub fn text(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            ..Self::default()
        }
    }

    /// Adds a tool call.
    pub fn call(mut self, id: &str, name: &str, arguments: &str) -> Self {
        self.tool_calls.push(FakeToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        });
        self
    }

    /// Adds a tool call sent without an id (the OpenAI flavour leaves the
    /// `id` field out, as some compatible servers do).
    pub fn call_without_id(self, name: &str, arguments: &str) -> Self {
        self.call("", name, arguments)
    }

    pub fn usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = TokenUsage {
            input_tokens,
            output_tokens,
            ..self.usage
        };
        self
    }

    /// Reports `read` and `written` of the input tokens as cache reads and
    /// writes (the OpenAI flavour has no writes and reports only `read`).
    /// `input_tokens` stays the whole prompt, as [`FakeReply::usage`] set it.
    pub fn cached(mut self, read: u64, written: u64) -> Self {
        self.usage.cache_read_input_tokens = read;
        self.usage.cache_creation_input_tokens = written;
        self
    }
}

/// What the fake does with the next valid request.
#[derive(Debug, Clone, PartialEq)]
pub enum Behaviour {
    Reply(FakeReply),
    /// Answers with this status and the provider's error body.
    Fail(u16),
    /// Never answers (until the client gives up or the fake is dropped).
    Hang,
    /// Answers with this status and body verbatim.
    Raw(u16, String),
    /// A streamed request gets `reply` as a stream that breaks after
    /// `after` text deltas (0: before any content), as `how` says; a
    /// reply with no text breaks after its tool calls, before the stop.
    /// A request that did not ask for a stream gets HTTP 500.
    Broken {
        reply: FakeReply,
        after: usize,
        how: Break,
    },
}

/// How a [`Behaviour::Broken`] stream breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Break {
    /// The body ends, with no terminal event (`message_stop` / `[DONE]`).
    Close,
    /// The provider's mid-stream error: Anthropic's `error` event
    /// (`overloaded_error`), an OpenAI chunk with `error`.
    Error,
    /// Nothing more is written; the connection stays open.
    Stall,
}

/// When a streamed text delta was written ([`FakeProvider::chunks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkWritten {
    /// Which streamed answer of this fake (from 1).
    pub answer: usize,
    /// The answer's text length, in bytes, with this delta.
    pub text_end: usize,
    pub at: std::time::Instant,
}

/// One request as received.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Header names are lower case.
    pub headers: Vec<(String, String)>,
    /// `Value::Null` when the body was not JSON.
    pub body: Value,
    /// Where the body carries `cache_control` (`"system.0"`, `"tools.3"`,
    /// `"messages.5.content.1"`), in body order.
    pub cache_breakpoints: Vec<String>,
    /// The prompt in the provider's cache order ([`cache::Prompt`]).
    pub prompt: cache::Prompt,
    /// Bytes of `prompt` that repeat the previous valid request's prompt
    /// byte for byte (0 for the first).
    pub shared_prefix_bytes: usize,
    /// What the reply reported (`None` when the request was not answered
    /// with a reply).
    pub usage: Option<TokenUsage>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// State shared by the test and the server's connection tasks. A std
/// mutex: it is held only for pushes and pops, never across an await.
#[derive(Default)]
struct Shared {
    script: VecDeque<Behaviour>,
    requests: Vec<Recorded>,
    /// See the module docs; `None`: no window.
    context_window: Option<u64>,
    /// Requests answered "too long", and summaries answered.
    too_long: usize,
    summaries: usize,
    /// The previous valid request's prompt, for the shared prefix.
    last_prompt: Option<cache::Prompt>,
    /// Replies without scripted usage report an estimate; see
    /// [`FakeProvider::estimate_usage`].
    estimate_usage: bool,
    /// Streamed answers: the pause before each event after the first, and
    /// the size of each text (and tool-argument) piece.
    stream_delay: std::time::Duration,
    piece_bytes: usize,
    /// Streamed answers started, and their text deltas as written.
    answers: usize,
    chunks: Vec<ChunkWritten>,
}

/// Default size of a streamed text piece, in bytes.
pub const DEFAULT_PIECE_BYTES: usize = 8;

/// Tokens the fake counts for a request body of `bytes` bytes.
pub fn fake_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// Whether a request body is a compaction (summary) request.
pub fn is_compaction_request(body: &Value) -> bool {
    let marker = inquest_core::compaction::COMPACTION_MARKER;
    // Anthropic's system is a string or (with cache breakpoints) a list of
    // text blocks.
    let system = match &body["system"] {
        Value::String(s) => s.contains(marker),
        Value::Array(blocks) => blocks
            .iter()
            .any(|b| b["text"].as_str().is_some_and(|t| t.contains(marker))),
        _ => false,
    };
    system
        || body["messages"][0]["role"] == "system"
            && body["messages"][0]["content"]
                .as_str()
                .is_some_and(|s| s.contains(marker))
}

/// A running fake; see the module docs.
pub struct FakeProvider {
    flavor: Flavor,
    addr: std::net::SocketAddr,
    shared: Arc<Mutex<Shared>>,
    /// `false` while answers are held ([`FakeProvider::hold_answers`]).
    open: tokio::sync::watch::Sender<bool>,
    /// The accept loop; aborted on drop (see the module docs).
    task: tokio::task::JoinHandle<()>,
}

impl FakeProvider {
    /// Binds `127.0.0.1:0` and starts serving. Needs a tokio runtime.
    pub async fn start(flavor: Flavor) -> std::io::Result<Self> {
        let shared = Arc::new(Mutex::new(Shared {
            piece_bytes: DEFAULT_PIECE_BYTES,
            ..Shared::default()
        }));
        let (open, gate) = tokio::sync::watch::channel(true);
        let (addr, task) = server::spawn(flavor, Arc::clone(&shared), gate).await?;
        Ok(Self {
            flavor,
            addr,
            shared,
            open,
            task,
        })
    }

    /// The `base_url` to configure the matching adapter with.
    pub fn base_url(&self) -> String {
        match self.flavor {
            Flavor::Anthropic => format!("http://{}", self.addr),
            Flavor::OpenAi => format!("http://{}/v1", self.addr),
        }
    }

    /// Queues what to do with the next valid request.
    pub fn push(&self, behaviour: Behaviour) -> &Self {
        self.lock().script.push_back(behaviour);
        self
    }

    pub fn reply(&self, reply: FakeReply) -> &Self {
        self.push(Behaviour::Reply(reply))
    }

    /// Queues `times` failures with `status`.
    pub fn fail(&self, times: usize, status: u16) -> &Self {
        for _ in 0..times {
            self.push(Behaviour::Fail(status));
        }
        self
    }

    /// Gives the fake a context window of `tokens` (see the module docs).
    pub fn with_context_window(self, tokens: u64) -> Self {
        self.lock().context_window = Some(tokens);
        self
    }

    /// Requests answered with the "too long" error so far.
    pub fn too_long_count(&self) -> usize {
        self.lock().too_long
    }

    /// Compaction requests answered with a summary so far.
    pub fn summary_count(&self) -> usize {
        self.lock().summaries
    }

    /// From now on, a reply whose usage was not scripted reports an
    /// estimate from the request, as a caching provider would: about 4
    /// bytes a token ([`cache::tokens`]), the prefix repeated from the
    /// previous request up to the last cache breakpoint as cache reads
    /// (Anthropic; any repeated prefix for OpenAI), the rest up to that
    /// breakpoint as cache writes (Anthropic), 20 output tokens.
    pub fn estimate_usage(&self) -> &Self {
        self.lock().estimate_usage = true;
        self
    }

    /// Streamed answers wait `delay` between events (default: none) and
    /// cut text and tool arguments into pieces of `piece_bytes` bytes
    /// (default [`DEFAULT_PIECE_BYTES`]).
    pub fn set_streaming(&self, delay: std::time::Duration, piece_bytes: usize) -> &Self {
        let mut shared = self.lock();
        shared.stream_delay = delay;
        shared.piece_bytes = piece_bytes.max(1);
        self
    }

    /// From now on every valid request is recorded at once but answered
    /// only after [`FakeProvider::release_answers`]: a model call that is
    /// in flight for as long as the caller needs.
    pub fn hold_answers(&self) -> &Self {
        self.open.send_replace(false);
        self
    }

    /// Answers every held request, and the later ones at once.
    pub fn release_answers(&self) -> &Self {
        self.open.send_replace(true);
        self
    }

    /// Text deltas written so far, in order.
    pub fn chunks(&self) -> Vec<ChunkWritten> {
        self.lock().chunks.clone()
    }

    /// Queues a stream that breaks; see [`Behaviour::Broken`].
    pub fn broken(&self, reply: FakeReply, after: usize, how: Break) -> &Self {
        self.push(Behaviour::Broken { reply, after, how })
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    pub fn request_count(&self) -> usize {
        self.lock().requests.len()
    }

    /// Stops the server and waits until its socket is closed (dropping
    /// the fake also stops it, without waiting).
    pub async fn stop(mut self) {
        self.task.abort();
        // Cancelled is the expected outcome; the task has no other result.
        let _ = (&mut self.task).await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        self.task.abort();
    }
}
