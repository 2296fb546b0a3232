//! The fake's HTTP side: a hyper 1 server on loopback, one task per
//! connection, all owned by the accept loop's `JoinSet`.

use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use http_body_util::BodyExt;
use hyper::{
    Request, Response, StatusCode,
    body::{Bytes, Incoming},
    server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::{net::TcpListener, task::JoinSet};

use inquest_core::TokenUsage;

use super::{
    Behaviour, Flavor, Recorded, Shared, anthropic, cache, openai,
    stream::{self, FakeBody},
};

/// Binds and spawns the accept loop. Aborting the returned task drops its
/// `JoinSet`, which aborts every connection task.
pub(super) async fn spawn(
    flavor: Flavor,
    shared: Arc<Mutex<Shared>>,
    open: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else {
                        // Out of descriptors or similar: back off briefly.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    // Each SSE chunk goes out when written, as a real
                    // provider's would (Nagle would hold it for an ACK).
                    let _ = stream.set_nodelay(true);
                    let shared = Arc::clone(&shared);
                    let open = open.clone();
                    connections.spawn(async move {
                        let service = service_fn(move |request| {
                            handle(flavor, Arc::clone(&shared), open.clone(), request)
                        });
                        // A client that goes away mid-request is normal here.
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
    });
    Ok((addr, task))
}

async fn handle(
    flavor: Flavor,
    shared: Arc<Mutex<Shared>>,
    mut open: tokio::sync::watch::Receiver<bool>,
    request: Request<Incoming>,
) -> Result<Response<FakeBody>, Infallible> {
    let (parts, body) = request.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let prompt = match flavor {
        Flavor::Anthropic => cache::anthropic(&body),
        Flavor::OpenAi => cache::openai(&body),
    };
    let mut recorded = Recorded {
        cache_breakpoints: cache::breakpoints(&body),
        prompt,
        shared_prefix_bytes: 0,
        usage: None,
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect(),
        body,
    };
    let checked = check(flavor, &recorded);
    let tokens = super::fake_tokens(bytes.len());
    let summary = super::is_compaction_request(&recorded.body);
    let streamed = recorded.body["stream"] == true;
    let include_usage = recorded.body["stream_options"]["include_usage"] == true;
    let (behaviour, usage, over, summaries, delay, piece_bytes) = {
        let mut shared = shared.lock().unwrap_or_else(PoisonError::into_inner);
        let over = shared.context_window.filter(|&w| tokens > w);
        if checked.is_ok() && over.is_some() {
            shared.too_long += 1;
        } else if checked.is_ok() && summary {
            shared.summaries += 1;
        }
        if checked.is_ok() && over.is_none() {
            if let Some(previous) = &shared.last_prompt {
                recorded.shared_prefix_bytes = recorded.prompt.shared_prefix(previous);
            }
            shared.last_prompt = Some(recorded.prompt.clone());
        }
        let behaviour = match checked {
            Ok(()) if over.is_none() && !summary => shared.script.pop_front(),
            _ => None,
        };
        let replied = if over.is_some() || summary {
            None
        } else {
            match &behaviour {
                None => Some(super::FakeReply::text("fake reply")),
                Some(Behaviour::Reply(r)) => Some(r.clone()),
                Some(_) => None,
            }
            .filter(|_| checked.is_ok())
        };
        let usage = replied.map(|r| {
            let usage = if shared.estimate_usage && r.usage == TokenUsage::default() {
                estimate(flavor, &recorded)
            } else {
                r.usage
            };
            (r, usage)
        });
        recorded.usage = usage.as_ref().map(|(_, u)| *u);
        shared.requests.push(recorded.clone());
        (
            behaviour,
            usage,
            over,
            shared.summaries,
            shared.stream_delay,
            shared.piece_bytes,
        )
    };
    let answer = |reply: &super::FakeReply,
                  usage: &TokenUsage,
                  model: &str,
                  broken: Option<(usize, super::Break)>| {
        if streamed {
            let pieces = stream::pieces(
                flavor,
                reply,
                usage,
                model,
                piece_bytes,
                include_usage,
                broken,
            );
            event_stream(FakeBody::stream(flavor, pieces, delay, Arc::clone(&shared)))
        } else {
            json_response(200, self::reply(flavor, reply, usage, model))
        }
    };
    if let Err((status, message)) = checked {
        return Ok(error(flavor, status, &message));
    }
    // Held answers wait here (the fake lives as long as the sender).
    let _ = open.wait_for(|open| *open).await;
    let model = recorded.body["model"].as_str().unwrap_or("fake");
    if let Some(window) = over {
        return Ok(too_long(flavor, window, tokens));
    }
    if summary {
        let text = format!(
            "Summary {summaries} by the fake model: the investigation so far read evidence with \
             its tools; nothing else is known."
        );
        let summary_reply = super::FakeReply::text(&text).usage(tokens, 20);
        return Ok(answer(&summary_reply, &summary_reply.usage, model, None));
    }
    if let Some((r, usage)) = usage {
        return Ok(answer(&r, &usage, model, None));
    }
    Ok(match behaviour {
        None | Some(Behaviour::Reply(_)) => error(flavor, 500, "fake: no reply to send"),
        Some(Behaviour::Broken { reply, after, how }) if streamed => {
            answer(&reply, &reply.usage, model, Some((after, how)))
        }
        Some(Behaviour::Broken { .. }) => error(flavor, 500, "fake: broken stream, not streamed"),
        Some(Behaviour::Fail(status)) => error(flavor, status, "scripted failure"),
        Some(Behaviour::Raw(status, text)) => response(status, text),
        Some(Behaviour::Hang) => std::future::pending().await,
    })
}

/// Path, headers and transcript checks; `Err` is (status, message).
fn check(flavor: Flavor, request: &Recorded) -> Result<(), (u16, String)> {
    let (path, headers_ok) = match flavor {
        Flavor::Anthropic => ("/v1/messages", anthropic::check_headers(request)),
        Flavor::OpenAi => ("/v1/chat/completions", Ok(())),
    };
    if request.method != "POST" || request.path != path {
        return Err((
            404,
            format!("no route for {} {}", request.method, request.path),
        ));
    }
    headers_ok?;
    if request.body.is_null() {
        return Err((400, "request body is not valid JSON".into()));
    }
    let valid = match flavor {
        Flavor::Anthropic => anthropic::validate(&request.body),
        Flavor::OpenAi => openai::validate(&request.body),
    };
    valid.map_err(|message| (400, message))
}

fn reply(flavor: Flavor, reply: &super::FakeReply, usage: &TokenUsage, model: &str) -> Value {
    match flavor {
        Flavor::Anthropic => anthropic::reply_body(reply, usage, model),
        Flavor::OpenAi => openai::reply_body(reply, usage, model),
    }
}

/// The usage a caching provider would report for `request`; see
/// [`super::FakeProvider::estimate_usage`].
fn estimate(flavor: Flavor, request: &Recorded) -> TokenUsage {
    let prompt = &request.prompt;
    let cacheable = prompt.cached_up_to;
    let read = request.shared_prefix_bytes.min(cacheable);
    let (read, written) = match flavor {
        Flavor::Anthropic => (cache::tokens(read), cache::tokens(cacheable - read)),
        Flavor::OpenAi => (cache::tokens(read), 0),
    };
    TokenUsage {
        input_tokens: cache::tokens(prompt.text.len()).max(read + written),
        output_tokens: 20,
        cache_read_input_tokens: read,
        cache_creation_input_tokens: written,
        cost: None,
    }
}

fn error(flavor: Flavor, status: u16, message: &str) -> Response<FakeBody> {
    let body = match flavor {
        Flavor::Anthropic => json!({"type": "error", "error": {
            "type": anthropic::error_type(status), "message": message}}),
        Flavor::OpenAi => json!({"error": {
            "message": message, "type": openai::error_type(status),
            "param": if status == 400 { json!("messages") } else { Value::Null },
            "code": null}}),
    };
    json_response(status, body)
}

/// The provider's standard "too long" answer; see the module docs.
fn too_long(flavor: Flavor, window: u64, tokens: u64) -> Response<FakeBody> {
    let body = match flavor {
        Flavor::Anthropic => json!({"type": "error", "error": {
            "type": "invalid_request_error",
            "message": format!("prompt is too long: {tokens} tokens > {window} maximum")}}),
        Flavor::OpenAi => json!({"error": {
            "message": format!("This model's maximum context length is {window} tokens. However, \
                your messages resulted in {tokens} tokens. Please reduce the length of the \
                messages."),
            "type": "invalid_request_error", "param": "messages",
            "code": "context_length_exceeded"}}),
    };
    json_response(400, body)
}

/// A 200 answer carrying server-sent events.
fn event_stream(body: FakeBody) -> Response<FakeBody> {
    let mut response = Response::new(body);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    response.headers_mut().insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-cache"),
    );
    response
}

fn json_response(status: u16, body: Value) -> Response<FakeBody> {
    let mut response = response(status, body.to_string());
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

fn response(status: u16, body: String) -> Response<FakeBody> {
    let mut response = Response::new(FakeBody::full(Bytes::from(body)));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response
}
