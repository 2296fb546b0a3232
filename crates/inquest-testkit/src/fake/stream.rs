//! Streamed answers of the fakes: server-sent events shaped exactly like
//! each real API's, written one event at a time with the fake's delay in
//! between, and a response body that can break mid-answer.

use std::{
    collections::VecDeque,
    convert::Infallible,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
    time::Duration,
};

use hyper::body::{Bytes, Frame};
use inquest_core::TokenUsage;
use serde_json::{Value, json};

use super::{Break, FakeReply, Flavor, Shared};

/// One event of a streamed answer; `text_end` is the answer's text length
/// once this event is written, for text deltas.
pub(super) struct Piece {
    bytes: Bytes,
    text_end: Option<usize>,
}

/// The events of `reply`, and where the stream breaks (`Some((after,
/// how))`: after that many text deltas).
pub(super) fn pieces(
    flavor: Flavor,
    reply: &FakeReply,
    usage: &TokenUsage,
    model: &str,
    piece_bytes: usize,
    include_usage: bool,
    broken: Option<(usize, Break)>,
) -> (VecDeque<Piece>, Option<Break>) {
    let texts = split(&reply.text, piece_bytes);
    let mut out = VecDeque::new();
    let mut text_end = 0;
    let mut deltas = 0;
    let mut text_piece = |out: &mut VecDeque<Piece>, event: Bytes, text: &str| -> bool {
        text_end += text.len();
        deltas += 1;
        out.push_back(Piece {
            bytes: event,
            text_end: Some(text_end),
        });
        broken.is_some_and(|(after, _)| deltas >= after)
    };
    let plain = |bytes: Bytes| Piece {
        bytes,
        text_end: None,
    };
    let how = broken.map(|(_, how)| how);
    let early = broken.is_some_and(|(after, _)| after == 0);
    match flavor {
        Flavor::Anthropic => {
            let sse =
                |name: &str, data: Value| Bytes::from(format!("event: {name}\ndata: {data}\n\n"));
            let input_tokens = usage
                .input_tokens
                .saturating_sub(usage.cache_read_input_tokens)
                .saturating_sub(usage.cache_creation_input_tokens);
            out.push_back(plain(sse(
                "message_start",
                json!({"type": "message_start", "message": {
                "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": input_tokens,
                          "cache_read_input_tokens": usage.cache_read_input_tokens,
                          "cache_creation_input_tokens": usage.cache_creation_input_tokens,
                          "output_tokens": 1}}}),
            )));
            out.push_back(plain(sse("ping", json!({"type": "ping"}))));
            if early {
                return (out, how);
            }
            let mut index = 0;
            if !reply.text.is_empty() {
                out.push_back(plain(sse(
                    "content_block_start",
                    json!({"type": "content_block_start",
                    "index": index, "content_block": {"type": "text", "text": ""}}),
                )));
                for text in &texts {
                    let event = sse(
                        "content_block_delta",
                        json!({"type": "content_block_delta",
                        "index": index, "delta": {"type": "text_delta", "text": text}}),
                    );
                    if text_piece(&mut out, event, text) {
                        return (out, how);
                    }
                }
                out.push_back(plain(sse(
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": index}),
                )));
                index += 1;
            }
            for call in &reply.tool_calls {
                out.push_back(plain(sse(
                    "content_block_start",
                    json!({"type": "content_block_start",
                    "index": index, "content_block": {"type": "tool_use", "id": call.id,
                    "name": call.name, "input": {}}}),
                )));
                let input = match serde_json::from_str::<Value>(&call.arguments) {
                    Ok(object @ Value::Object(_)) => object,
                    _ => Value::String(call.arguments.clone()),
                };
                for json_piece in split(&input.to_string(), piece_bytes) {
                    out.push_back(plain(sse("content_block_delta", json!({"type": "content_block_delta",
                        "index": index, "delta": {"type": "input_json_delta", "partial_json": json_piece}}))));
                }
                out.push_back(plain(sse(
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": index}),
                )));
                index += 1;
            }
            if broken.is_some() {
                return (out, how);
            }
            let stop_reason = if reply.tool_calls.is_empty() {
                "end_turn"
            } else {
                "tool_use"
            };
            out.push_back(plain(sse(
                "message_delta",
                json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                "usage": {"output_tokens": usage.output_tokens}}),
            )));
            out.push_back(plain(sse("message_stop", json!({"type": "message_stop"}))));
        }
        Flavor::OpenAi => {
            let chunk = |choices: Value| {
                Bytes::from(format!(
                    "data: {}\n\n",
                    json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                           "created": 0, "model": model, "choices": choices})
                ))
            };
            out.push_back(plain(chunk(json!([{"index": 0,
                "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]))));
            if early {
                return (out, how);
            }
            for text in &texts {
                let event =
                    chunk(json!([{"index": 0, "delta": {"content": text}, "finish_reason": null}]));
                if text_piece(&mut out, event, text) {
                    return (out, how);
                }
            }
            for (index, call) in reply.tool_calls.iter().enumerate() {
                let mut first = json!({"index": index, "type": "function",
                    "function": {"name": call.name, "arguments": ""}});
                if !call.id.is_empty() {
                    first["id"] = json!(call.id);
                }
                out.push_back(plain(chunk(json!([{"index": 0,
                    "delta": {"tool_calls": [first]}, "finish_reason": null}]))));
                for args in split(&call.arguments, piece_bytes) {
                    out.push_back(plain(chunk(json!([{"index": 0, "delta": {"tool_calls": [
                        {"index": index, "function": {"arguments": args}}]}, "finish_reason": null}]))));
                }
            }
            if broken.is_some() {
                return (out, how);
            }
            let finish = if reply.tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            };
            out.push_back(plain(chunk(
                json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
            )));
            if include_usage {
                out.push_back(plain(Bytes::from(format!("data: {}\n\n", json!({
                    "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                    "model": model, "choices": [],
                    "usage": {"prompt_tokens": usage.input_tokens,
                              "completion_tokens": usage.output_tokens,
                              "total_tokens": usage.input_tokens.saturating_add(usage.output_tokens),
                              "prompt_tokens_details": {"cached_tokens": usage.cache_read_input_tokens}}})))));
            }
            out.push_back(plain(Bytes::from_static(b"data: [DONE]\n\n")));
        }
    }
    (out, None)
}

/// The event a stream broken with [`Break::Error`] ends with.
fn error_event(flavor: Flavor) -> Bytes {
    match flavor {
        Flavor::Anthropic => Bytes::from(format!(
            "event: error\ndata: {}\n\n",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        )),
        Flavor::OpenAi => Bytes::from(format!(
            "data: {}\n\n",
            json!({"error": {"message": "The server had an error while processing your request.",
                             "type": "server_error", "param": null, "code": null}})
        )),
    }
}

/// `text` in pieces of about `bytes` bytes, cut at char boundaries.
fn split(text: &str, bytes: usize) -> Vec<String> {
    let bytes = bytes.max(1);
    let mut out = Vec::new();
    let mut piece = String::new();
    for c in text.chars() {
        if !piece.is_empty() && piece.len() + c.len_utf8() > bytes {
            out.push(std::mem::take(&mut piece));
        }
        piece.push(c);
    }
    if !piece.is_empty() {
        out.push(piece);
    }
    out
}

/// A fake's response body: all at once, or a stream of events written
/// one by one.
pub(super) enum FakeBody {
    Full(Option<Bytes>),
    Stream(Box<Streaming>),
}

pub(super) struct Streaming {
    flavor: Flavor,
    pieces: VecDeque<Piece>,
    /// How the stream ends after its pieces: `None` normally.
    broken: Option<Break>,
    delay: Duration,
    /// Waits out `delay` before the next piece; `None` before the first.
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    shared: Arc<Mutex<Shared>>,
    /// Where this answer's entries in `Shared::chunks` start.
    answer: usize,
    error_sent: bool,
}

impl FakeBody {
    pub(super) fn full(bytes: Bytes) -> Self {
        FakeBody::Full(Some(bytes))
    }

    pub(super) fn stream(
        flavor: Flavor,
        (pieces, broken): (VecDeque<Piece>, Option<Break>),
        delay: Duration,
        shared: Arc<Mutex<Shared>>,
    ) -> Self {
        let answer = {
            let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
            s.answers += 1;
            s.answers
        };
        FakeBody::Stream(Box::new(Streaming {
            flavor,
            pieces,
            broken,
            delay,
            sleep: None,
            shared,
            answer,
            error_sent: false,
        }))
    }
}

impl hyper::body::Body for FakeBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            FakeBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            FakeBody::Stream(s) => {
                if let Some(sleep) = &mut s.sleep {
                    if sleep.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    s.sleep = None;
                }
                let Some(piece) = s.pieces.pop_front() else {
                    return match s.broken {
                        None | Some(Break::Close) => Poll::Ready(None),
                        Some(Break::Error) if !s.error_sent => {
                            s.error_sent = true;
                            Poll::Ready(Some(Ok(Frame::data(error_event(s.flavor)))))
                        }
                        Some(Break::Error) => Poll::Ready(None),
                        // Never wakes: the client's timeout ends it.
                        Some(Break::Stall) => Poll::Pending,
                    };
                };
                if let Some(text_end) = piece.text_end {
                    let mut shared = s.shared.lock().unwrap_or_else(PoisonError::into_inner);
                    shared.chunks.push(super::ChunkWritten {
                        answer: s.answer,
                        text_end,
                        at: std::time::Instant::now(),
                    });
                }
                if !s.delay.is_zero() {
                    s.sleep = Some(Box::pin(tokio::time::sleep(s.delay)));
                }
                Poll::Ready(Some(Ok(Frame::data(piece.bytes))))
            }
        }
    }
}

use std::future::Future as _;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_chars_whole() {
        assert_eq!(split("héllo", 2), vec!["h", "é", "ll", "o"]);
        assert_eq!(split("", 4), Vec::<String>::new());
    }
}
