//! Delivers the event log to the configured webhooks: one task per webhook
//! on every replica, of which only the holder of the webhook's lease (a
//! row of `webhook_cursors`) sends, so one stream is delivered by one
//! replica at a time, in id order.
//!
//! At least once: the cursor moves past an event only after the receiver
//! answered 2xx (or the event is not for this webhook); an event whose
//! answer was lost, or whose replica died after sending, is sent again,
//! with the same `webhook-id` so receivers can deduplicate. A failed
//! attempt is retried with jittered backoff, without end: the next event
//! waits, so the order holds. A replica that stops gives its leases up; one
//! that dies leaves them to expire ([`LEASE_TTL`]).

use std::time::Duration;

use inquest_core::{Backoff, error_chain};
use inquest_store::{EventRow, Store};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::webhooks::Webhook;

/// How long a replica holds a webhook's stream without renewing (each
/// attempt and each delivered event renews it). A dead replica's streams
/// resume on another this long after its last attempt.
pub const LEASE_TTL: Duration = Duration::from_secs(15);
/// How often an idle stream looks for new events, and a replica without a
/// stream's lease tries to take it.
const POLL: Duration = Duration::from_millis(200);
/// Events read at once.
const BATCH: u32 = 100;
/// A receiver must answer within this, or the attempt failed.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// The first retry's delay; doubling to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// At most this much of an error (a receiver's status line, a transport
/// error) is kept in `webhook_cursors.last_error`.
const MAX_ERROR_CHARS: usize = 512;

/// The configured webhooks and the HTTP client that reaches them, made
/// at startup so a client that cannot be built stops it.
pub struct Deliveries {
    client: reqwest::Client,
    webhooks: Vec<Webhook>,
}

impl Deliveries {
    /// `None` without webhooks: nothing to deliver, no client.
    pub fn new(webhooks: Vec<Webhook>) -> Result<Option<Self>, String> {
        if webhooks.is_empty() {
            return Ok(None);
        }
        // reqwest is built without a default TLS provider (see the root
        // Cargo.toml); the agent installs the same one for its clients.
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Err only if another thread installed one in between: fine.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        // No redirects: an event goes only to the URL in the config.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(ATTEMPT_TIMEOUT)
            .connect_timeout(ATTEMPT_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot build the webhook HTTP client: {}", error_chain(&e)))?;
        Ok(Some(Self { client, webhooks }))
    }

    /// Opens each webhook's cursor, then starts one delivery task per
    /// webhook, owned by `tasks`, until `shutdown`. Called before the
    /// replica serves: a new webhook receives every event of the requests
    /// it serves (a cursor that cannot be opened now is opened by its
    /// task, later).
    pub async fn spawn(&self, store: &Store, tasks: &TaskTracker, shutdown: &CancellationToken) {
        for hook in &self.webhooks {
            if let Err(e) = store.open_webhook_cursor(&hook.name).await {
                tracing::warn!(webhook = %hook.name, error = %error_chain(&e), "cannot open the webhook's cursor yet");
            }
        }
        for hook in &self.webhooks {
            let stream = Stream {
                store: store.clone(),
                client: self.client.clone(),
                hook: hook.clone(),
                shutdown: shutdown.clone(),
            };
            tasks.spawn(stream.run());
        }
    }
}

/// Why delivery of a batch stopped early.
enum Stop {
    Shutdown,
    /// Another replica holds the stream now.
    LeaseLost,
}

struct Stream {
    store: Store,
    client: reqwest::Client,
    hook: Webhook,
    shutdown: CancellationToken,
}

impl Stream {
    async fn run(self) {
        let name = self.hook.name.clone();
        while let Err(e) = self.store.open_webhook_cursor(&name).await {
            tracing::warn!(webhook = %name, error = %error_chain(&e), "cannot open the webhook's cursor; trying again");
            if self.pause(POLL * 5).await.is_err() {
                return;
            }
        }
        loop {
            let claimed = self.store.claim_webhook(&name, LEASE_TTL).await;
            let delivered = match claimed {
                Ok(Some(delivered)) => delivered,
                Ok(None) => {
                    if self.pause(POLL).await.is_err() {
                        return;
                    }
                    continue;
                }
                Err(e) => {
                    tracing::warn!(webhook = %name, error = %error_chain(&e), "cannot claim the webhook's stream; trying again");
                    if self.pause(POLL * 5).await.is_err() {
                        return;
                    }
                    continue;
                }
            };
            match self.deliver_after(delivered).await {
                Ok(true) => {}
                Ok(false) => {
                    if self.pause(POLL).await.is_err() {
                        break;
                    }
                }
                Err(Stop::LeaseLost) => {
                    tracing::info!(webhook = %name, "another replica delivers this webhook now");
                }
                Err(Stop::Shutdown) => break,
            }
        }
        if let Err(e) = self.store.release_webhook(&name).await {
            tracing::warn!(webhook = %name, error = %error_chain(&e), "cannot release the webhook's stream; it passes on when its lease expires");
        }
    }

    /// Delivers the events after `delivered`, in order; `true` when there
    /// were any.
    async fn deliver_after(&self, delivered: i64) -> Result<bool, Stop> {
        let events = match self.store.events_after(delivered, BATCH).await {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(webhook = %self.hook.name, error = %error_chain(&e), "cannot read events; trying again");
                self.pause(POLL * 5).await?;
                return Ok(false);
            }
        };
        let Some(last) = events.last().map(|e| e.id) else {
            return Ok(false);
        };
        for event in &events {
            if self.hook.wants(&event.kind, &event.tenant) {
                self.deliver(event).await?;
                self.advance(event.id).await?;
            }
        }
        // Past the tail of events not for this webhook, so they are not
        // read again.
        self.advance(last).await?;
        Ok(true)
    }

    async fn advance(&self, id: i64) -> Result<(), Stop> {
        let mut backoff = Backoff::new(FIRST_BACKOFF, MAX_BACKOFF).jittered();
        loop {
            match self
                .store
                .advance_webhook(&self.hook.name, id, LEASE_TTL)
                .await
            {
                Ok(true) => return Ok(()),
                Ok(false) => return Err(Stop::LeaseLost),
                Err(e) => {
                    // Not moving the cursor is safe: the event is sent
                    // again (at least once).
                    tracing::warn!(webhook = %self.hook.name, event = id, error = %error_chain(&e), "cannot record a delivery; trying again");
                    self.pause(backoff.next_delay()).await?;
                }
            }
        }
    }

    /// Sends `event` until the receiver answers 2xx.
    async fn deliver(&self, event: &EventRow) -> Result<(), Stop> {
        let body = body(event);
        let id = format!("evt_{}", event.id);
        let mut backoff = Backoff::new(FIRST_BACKOFF, MAX_BACKOFF).jittered();
        loop {
            let error = tokio::select! {
                () = self.shutdown.cancelled() => return Err(Stop::Shutdown),
                outcome = self.attempt(&id, &body) => match outcome {
                    Ok(()) => {
                        metrics::counter!("inquest_webhook_attempts_total", "outcome" => "delivered").increment(1);
                        return Ok(());
                    }
                    Err(error) => error,
                },
            };
            metrics::counter!("inquest_webhook_attempts_total", "outcome" => "failed").increment(1);
            tracing::warn!(webhook = %self.hook.name, event = event.id, %error, "webhook delivery failed; retrying");
            match self
                .store
                .webhook_failed(&self.hook.name, &error, LEASE_TTL)
                .await
            {
                Ok(true) => {}
                Ok(false) => return Err(Stop::LeaseLost),
                Err(e) => {
                    tracing::warn!(webhook = %self.hook.name, error = %error_chain(&e), "cannot record a failed delivery");
                }
            }
            self.pause_holding(backoff.next_delay()).await?;
        }
    }

    /// Sleeps `delay` between attempts, renewing the lease as it goes: a
    /// backoff longer than the lease does not hand the stream to another
    /// replica, which would start its own backoff from the beginning.
    async fn pause_holding(&self, delay: Duration) -> Result<(), Stop> {
        let until = tokio::time::Instant::now() + delay;
        loop {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            self.pause(left.min(LEASE_TTL / 3)).await?;
            match self.store.claim_webhook(&self.hook.name, LEASE_TTL).await {
                Ok(Some(_)) => {}
                Ok(None) => return Err(Stop::LeaseLost),
                // The database is away: the next attempt's record says
                // whether the lease survived.
                Err(e) => {
                    tracing::warn!(webhook = %self.hook.name, error = %error_chain(&e), "cannot renew the webhook's lease");
                }
            }
        }
    }

    /// One POST; the error as kept in the cursor row, secrets redacted.
    async fn attempt(&self, id: &str, body: &[u8]) -> Result<(), String> {
        // Signed at send time: receivers refuse timestamps too far from
        // their clock, and a retry can come much later than the event.
        let timestamp = time::OffsetDateTime::now_utc().unix_timestamp();
        let signature = self.hook.signature(id, timestamp, body);
        let sent = self
            .client
            .post(self.hook.url.clone())
            .header("content-type", "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body.to_vec())
            .send()
            .await;
        let error = match sent {
            // The body is not read: only the status counts, and a huge
            // or slow body cannot hold the stream up.
            Ok(response) if response.status().is_success() => return Ok(()),
            Ok(response) => format!("receiver answered {}", response.status()),
            Err(e) => format!("cannot reach the receiver: {}", error_chain(&e)),
        };
        let error = inquest_redact::redact(&error);
        Err(error.chars().take(MAX_ERROR_CHARS).collect())
    }

    /// Sleeps `delay`, or stops at shutdown.
    async fn pause(&self, delay: Duration) -> Result<(), Stop> {
        tokio::select! {
            () = self.shutdown.cancelled() => Err(Stop::Shutdown),
            () = tokio::time::sleep(delay) => Ok(()),
        }
    }
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
