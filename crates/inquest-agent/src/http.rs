//! HTTP plumbing shared by the Anthropic and OpenAI adapters: building a
//! client, posting a request and reading its event stream, and turning transport failures and error bodies
//! into [`ProviderError`]s.

use std::{error::Error as _, sync::Once, time::Duration};

use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use serde_json::Value;

use crate::{
    ProviderError,
    sse::{SseEvent, SseParser},
};

/// Longest error-body excerpt kept in an error message.
const MAX_ERROR_TEXT: usize = 500;

/// Builds a client whose every request (connect, send, whole body) ends
/// after `timeout`.
///
/// TLS is rustls with the `ring` crypto provider (reqwest's default would
/// be aws-lc-rs, which needs cmake to build). reqwest with
/// `rustls-no-provider` uses the process-wide default provider, so this
/// installs `ring` as that default once, unless something else in the
/// process installed one first (then that one is used).
pub(crate) fn client(timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    install_crypto_provider();
    reqwest::Client::builder().timeout(timeout).build()
}

/// Installs rustls's `ring` provider as the process default, once, unless
/// one is installed already. Every reqwest client of this crate (providers
/// and MCP servers over HTTP) must be built after this.
pub(crate) fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Err only if another thread installed one in between: fine.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

/// Default of `limits.max_provider_response_bytes`: 8 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// What [`post_sse`] got.
pub(crate) enum Streamed {
    /// The stream reached its terminal event.
    Done,
    /// The server answered with something other than `text/event-stream`
    /// (it ignored `"stream": true`, as a few compatible servers do): the
    /// body, read as a non-streamed answer.
    Json(Value),
}

/// POSTs `body` (which asks for a stream) and feeds the server-sent events
/// of a 2xx answer to `on_event` as they arrive, until it returns
/// `Ok(true)` (the terminal event) or an error.
///
/// The body is read chunk by chunk and never past `max_body` bytes: a
/// success body that is longer is [`ProviderError::TooLarge`] (as soon as
/// a `content-length` says so, or the bytes read pass the cap; for a
/// stream, the whole stream); an error body is only shown in part anyway,
/// so it is cut there and the status decides. The client's
/// `timeout` covers the whole exchange, so a stream that stalls between
/// chunks ends as [`ProviderError::Timeout`]. A stream that ends before its
/// terminal event is [`ProviderError::Connection`] (retryable, like an
/// answer cut off).
pub(crate) async fn post_sse<B: serde::Serialize + Sync + ?Sized>(
    client: &reqwest::Client,
    url: &str,
    headers: HeaderMap,
    body: &B,
    timeout: Duration,
    max_body: usize,
    mut on_event: impl FnMut(SseEvent) -> Result<bool, ProviderError> + Send,
) -> Result<Streamed, ProviderError> {
    let mut response = send(client, url, headers, body, timeout).await?;
    let events = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    if !events || !response.status().is_success() {
        let bytes = read_capped(response, timeout, max_body).await?;
        return serde_json::from_slice(&bytes)
            .map(Streamed::Json)
            .map_err(|e| ProviderError::BadResponse(format!("body is not JSON: {e}")));
    }
    if response
        .content_length()
        .is_some_and(|n| usize::try_from(n).map_or(true, |n| n > max_body))
    {
        return Err(ProviderError::TooLarge { limit: max_body });
    }
    let mut parser = SseParser::new();
    let mut read = 0usize;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| transport_error(&e, timeout))?
    {
        read += chunk.len();
        if read > max_body {
            return Err(ProviderError::TooLarge { limit: max_body });
        }
        for event in parser.push(&chunk) {
            if on_event(event)? {
                return Ok(Streamed::Done);
            }
        }
    }
    Err(ProviderError::Connection(
        "the event stream ended before its terminal event".into(),
    ))
}

async fn send<B: serde::Serialize + Sync + ?Sized>(
    client: &reqwest::Client,
    url: &str,
    headers: HeaderMap,
    body: &B,
    timeout: Duration,
) -> Result<reqwest::Response, ProviderError> {
    client
        .post(url)
        .headers(headers)
        .json(body)
        .send()
        .await
        .map_err(|e| transport_error(&e, timeout))
}

/// The body of a response, at most `max_body` bytes, or the error its
/// status means.
async fn read_capped(
    mut response: reqwest::Response,
    timeout: Duration,
    max_body: usize,
) -> Result<Vec<u8>, ProviderError> {
    let status = response.status();
    let retry_after = retry_after(response.headers());
    let too_large = ProviderError::TooLarge { limit: max_body };
    let declared = response
        .content_length()
        .and_then(|n| usize::try_from(n).ok());
    if status.is_success() && declared.is_some_and(|n| n > max_body) {
        return Err(too_large);
    }
    let mut bytes = Vec::with_capacity(declared.unwrap_or(0).min(max_body));
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| transport_error(&e, timeout))?
    {
        if bytes.len() + chunk.len() > max_body {
            if status.is_success() {
                return Err(too_large);
            }
            bytes.extend_from_slice(&chunk[..max_body - bytes.len()]);
            break;
        }
        bytes.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        if let Some(too_long) = context_too_long(status.as_u16(), &bytes) {
            return Err(too_long);
        }
        let (kind, message) = error_details(&bytes);
        return Err(ProviderError::Status {
            status: status.as_u16(),
            kind,
            message,
            retry_after,
        });
    }
    Ok(bytes)
}

/// The error an event stream's own `error` event (Anthropic:
/// `{"type":"error","error":{"type":"overloaded_error","message":…}}`;
/// an OpenAI-compatible chunk `{"error":{…}}`) stands for: the status the
/// same error has when it comes as an answer, so it is retried or failed
/// over exactly like one.
pub(crate) fn stream_error(data: &str) -> ProviderError {
    let (kind, message) = error_details(data.as_bytes());
    let status = match kind.as_deref() {
        Some("invalid_request_error") => 400,
        Some("authentication_error") => 401,
        Some("permission_error") => 403,
        Some("not_found_error") => 404,
        Some("request_too_large") => 413,
        Some("rate_limit_error") => 429,
        Some("overloaded_error") => 529,
        _ => 500,
    };
    ProviderError::Status {
        status,
        kind,
        message,
        retry_after: None,
    }
}

fn transport_error(error: &reqwest::Error, timeout: Duration) -> ProviderError {
    if error.is_timeout() {
        return ProviderError::Timeout(timeout);
    }
    // reqwest's Display leaves out the cause ("error sending request"); the
    // chain says what actually happened (refused, reset, DNS, TLS).
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    ProviderError::Connection(text)
}

/// `retry-after` in whole seconds (the HTTP-date form is ignored).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds))
}

/// The error type and message of an error body. Anthropic
/// (`{"type":"error","error":{"type","message"}}`) and OpenAI
/// (`{"error":{"message","type",…}}`) share the `error.type` /
/// `error.message` path; anything else is shown as (truncated) text.
fn error_details(body: &[u8]) -> (Option<String>, String) {
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        let error = &value["error"];
        if let Some(message) = error["message"].as_str() {
            let kind = error["type"].as_str().map(str::to_owned);
            return (kind, truncate(message));
        }
        if let Some(message) = error.as_str() {
            return (None, truncate(message));
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        (None, "(empty body)".to_owned())
    } else {
        (None, truncate(text))
    }
}

/// The provider's standard "too long" answer, if `body` is one:
/// OpenAI-compatible `{"error": {"code": "context_length_exceeded",
/// "message": "This model's maximum context length is 32768 tokens.
/// However, your messages resulted in 40000 tokens…"}}`, or Anthropic's
/// `invalid_request_error` "prompt is too long: 40000 tokens > 32768
/// maximum". Both are HTTP 400 (some compatible servers answer 413 or 422
/// with the same code, so any 4xx is read).
pub(crate) fn context_too_long(status: u16, body: &[u8]) -> Option<ProviderError> {
    if !(400..500).contains(&status) {
        return None;
    }
    let value: Value = serde_json::from_slice(body).ok()?;
    let error = &value["error"];
    let message = error["message"].as_str().unwrap_or_default();
    if error["code"].as_str() == Some("context_length_exceeded") {
        return Some(ProviderError::ContextTooLong {
            limit: number_after(message, "maximum context length is "),
            requested: number_after(message, "resulted in "),
        });
    }
    if let Some(rest) = message.strip_prefix("prompt is too long:") {
        // "prompt is too long: 40000 tokens > 32768 maximum"
        return Some(ProviderError::ContextTooLong {
            limit: number_after(rest, "> "),
            requested: number_after(rest, ""),
        });
    }
    None
}

/// The integer right after the first `marker` in `text` (spaces skipped).
fn number_after(text: &str, marker: &str) -> Option<u64> {
    let at = text.find(marker)? + marker.len();
    let digits: String = text[at..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn truncate(text: &str) -> String {
    if text.len() <= MAX_ERROR_TEXT {
        return text.to_owned();
    }
    let mut cut = MAX_ERROR_TEXT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

/// Joins a base URL and a path without doubling or losing the slash.
pub(crate) fn join(base_url: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base_url.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// A header value carrying a secret (an API key): marked sensitive so it is
/// never printed by the HTTP stack's debug output.
pub(crate) fn secret_header(text: &str) -> Result<reqwest::header::HeaderValue, ProviderError> {
    let mut value = reqwest::header::HeaderValue::from_str(text)
        .map_err(|_| ProviderError::InvalidRequest("API key is not a valid header".into()))?;
    value.set_sensitive(true);
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_of_both_providers_are_read() {
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            error_details(anthropic),
            (Some("overloaded_error".into()), "Overloaded".into())
        );
        let openai = br#"{"error":{"message":"bad","type":"invalid_request_error","param":"messages","code":null}}"#;
        assert_eq!(
            error_details(openai),
            (Some("invalid_request_error".into()), "bad".into())
        );
        assert_eq!(error_details(b"<html>502</html>").1, "<html>502</html>");
        assert_eq!(error_details(b"").1, "(empty body)");
        let long = "é".repeat(400);
        assert!(error_details(long.as_bytes()).1.ends_with('…'));
    }

    #[test]
    fn too_long_answers_of_both_providers_are_typed() {
        let openai = br#"{"error":{"message":"This model's maximum context length is 32768 tokens. However, your messages resulted in 40000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        assert!(matches!(
            context_too_long(400, openai),
            Some(ProviderError::ContextTooLong {
                limit: Some(32768),
                requested: Some(40000)
            })
        ));
        let anthropic = br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 40000 tokens > 32768 maximum"}}"#;
        assert!(matches!(
            context_too_long(400, anthropic),
            Some(ProviderError::ContextTooLong {
                limit: Some(32768),
                requested: Some(40000)
            })
        ));
        let other = br#"{"error":{"message":"bad","type":"invalid_request_error","code":null}}"#;
        assert!(context_too_long(400, other).is_none());
        assert!(context_too_long(500, openai).is_none());
        let vague = br#"{"error":{"message":"too long","code":"context_length_exceeded"}}"#;
        assert!(matches!(
            context_too_long(400, vague),
            Some(ProviderError::ContextTooLong {
                limit: None,
                requested: None
            })
        ));
    }

    #[test]
    fn urls_join_with_one_slash() {
        assert_eq!(join("http://h/", "/v1/messages"), "http://h/v1/messages");
        assert_eq!(
            join("http://h/v1", "chat/completions"),
            "http://h/v1/chat/completions"
        );
    }
}
