//! One POST of one event to one webhook: signed as Standard Webhooks, or
//! a Slack message ([`crate::slack`]); the receiver's answer read only as
//! far as an excerpt of a refusal. [`crate::delivery`] runs the streams
//! that call it; RedeliverEvent calls it directly.

use std::time::{Duration, Instant};

use inquest_core::error_chain;
use inquest_store::{EventRow, Store};

use crate::targets::TargetPolicy;
use crate::webhooks::{Format, Webhook};

/// A receiver must answer within this, or the attempt failed.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this much of an error (a receiver's status line, a transport
/// error, a refusal) is kept.
pub(crate) const MAX_ERROR_CHARS: usize = 512;
/// At most this much of a refusing receiver's answer is read and kept.
const MAX_ANSWER_BYTES: usize = 512;

/// reqwest is built without a default TLS provider (see the root
/// Cargo.toml); the agent installs the same one for its clients.
pub(crate) fn install_tls_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Err only if another thread installed one in between: fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// What one POST ended with.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The receiver's status; `None` when none came.
    pub status: Option<u16>,
    /// `None` after a 2xx; else why not, secrets redacted, cut.
    pub error: Option<String>,
    pub duration: Duration,
}

impl Attempt {
    pub fn delivered(&self) -> bool {
        self.error.is_none()
    }

    pub(crate) fn failed(status: Option<u16>, error: &str, started: Instant) -> Self {
        let error = inquest_redact::redact(error);
        Self {
            status,
            error: Some(error.chars().take(MAX_ERROR_CHARS).collect()),
            duration: started.elapsed(),
        }
    }
}

/// Signs and POSTs one event to one webhook. For API webhooks it holds
/// the `[webhooks]` policy, checked before each attempt, and a client
/// whose resolver applies it.
#[derive(Clone)]
pub struct Sender {
    client: reqwest::Client,
    policy: Option<TargetPolicy>,
    /// `[console] public_url`: Slack messages link to it.
    console: Option<String>,
}

impl Sender {
    /// For API webhooks: `policy` on every attempt and connection.
    pub fn guarded(policy: TargetPolicy, console: Option<String>) -> Result<Self, String> {
        Ok(Self {
            client: policy.client(ATTEMPT_TIMEOUT)?,
            policy: Some(policy),
            console,
        })
    }

    /// For the configured webhooks: the operator's own URLs, unchecked.
    pub(crate) fn configured(console: Option<String>) -> Result<Self, String> {
        install_tls_provider();
        // No redirects: an event goes only to the URL in the config.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(ATTEMPT_TIMEOUT)
            .connect_timeout(ATTEMPT_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot build the webhook HTTP client: {}", error_chain(&e)))?;
        Ok(Self {
            client,
            policy: None,
            console,
        })
    }

    /// One POST of `event` to `hook` in its format: signed for Standard
    /// Webhooks; for Slack, with what the store says about the event now.
    pub async fn send(&self, hook: &Webhook, event: &EventRow, store: &Store) -> Attempt {
        let started = Instant::now();
        if let Some(policy) = &self.policy
            && let Err(why) = policy.check_url(hook.url.as_str())
        {
            return Attempt::failed(None, &why, started);
        }
        let request = self
            .client
            .post(hook.url.clone())
            .header("content-type", "application/json");
        let request = match hook.format {
            Format::Standard => {
                let body = body(event);
                let id = format!("evt_{}", event.id);
                // Signed at send time: receivers refuse timestamps too far
                // from their clock, and a retry can come much later.
                let timestamp = time::OffsetDateTime::now_utc().unix_timestamp();
                let signature = hook.signature(&id, timestamp, &body);
                request
                    .header("webhook-id", &id)
                    .header("webhook-timestamp", timestamp.to_string())
                    .header("webhook-signature", signature)
                    .body(body)
            }
            Format::Slack => match store.event_context(event).await {
                Ok(context) => {
                    let message = crate::slack::message(event, &context, self.console.as_deref());
                    request.body(message.to_string())
                }
                Err(e) => {
                    let why = format!("cannot read the event's context: {}", error_chain(&e));
                    return Attempt::failed(None, &why, started);
                }
            },
        };
        match request.send().await {
            // A 2xx body is not read: only the status counts, and a huge
            // or slow body cannot hold the stream up.
            Ok(response) if response.status().is_success() => Attempt {
                status: Some(response.status().as_u16()),
                error: None,
                duration: started.elapsed(),
            },
            Ok(response) => {
                let status = response.status();
                let answer = excerpt(response).await;
                let why = if answer.is_empty() {
                    format!("receiver answered {status}")
                } else {
                    format!("receiver answered {status}: {answer}")
                };
                Attempt::failed(Some(status.as_u16()), &why, started)
            }
            // Without the URL: a receiver's URL may carry its own secret
            // (a token in the path), and the error is kept and logged.
            Err(e) => Attempt::failed(
                None,
                &format!(
                    "cannot reach the receiver: {}",
                    error_chain(&e.without_url())
                ),
                started,
            ),
        }
    }
}

/// The start of a refusing receiver's answer (Slack names its reason
/// there: `invalid_blocks`, `no_service`), at most [`MAX_ANSWER_BYTES`]
/// read, as one line of text. Whatever the rest is, it is not read.
async fn excerpt(mut response: reqwest::Response) -> String {
    let mut bytes: Vec<u8> = Vec::new();
    while bytes.len() < MAX_ANSWER_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = MAX_ANSWER_BYTES - bytes.len();
                bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Ok(None) | Err(_) => break,
        }
    }
    String::from_utf8_lossy(&bytes)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .to_owned()
}

/// The Standard Webhooks body: `{type, timestamp, data}`; `data` is the
/// event's payload with its ids.
fn body(event: &EventRow) -> Vec<u8> {
    let mut data = serde_json::Map::new();
    data.insert("event_id".into(), event.id.into());
    data.insert("tenant".into(), event.tenant.clone().into());
    data.insert("incident_id".into(), event.incident_id.to_string().into());
    data.insert(
        "session_id".into(),
        event
            .session_id
            .map_or(serde_json::Value::Null, |s| s.to_string().into()),
    );
    if let serde_json::Value::Object(payload) = &event.payload {
        for (k, v) in payload {
            data.insert(k.clone(), v.clone());
        }
    }
    let timestamp = event
        .created_at
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let body = serde_json::json!({
        "type": event.kind,
        "timestamp": timestamp,
        "data": data,
    });
    body.to_string().into_bytes()
}
