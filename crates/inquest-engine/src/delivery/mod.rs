//! Delivers the event log to webhooks: the configured ones
//! (`[[events.webhooks]]`, every tenant's events unless one is named, the
//! cursor a row of `webhook_cursors`) and those made over the API (one
//! tenant's events, the cursor in their `webhooks` row, each attempt
//! recorded in `webhook_attempts`). One task per webhook on every replica,
//! of which only the holder of the webhook's lease sends, so one stream is
//! delivered by one replica at a time, in id order. API webhooks are read
//! from the table every [`SCAN`]: a new one starts, a deleted one stops.
//!
//! At least once: the cursor moves past an event only after the receiver
//! answered 2xx (or the event is not for this webhook); an event whose
//! answer was lost, or whose replica died after sending, is sent again,
//! with the same `webhook-id` so receivers can deduplicate. A failed
//! attempt is retried with jittered exponential backoff while the next
//! event waits, so the order holds, for `[webhooks] give_up_after`: then
//! the event is given up (an API webhook's history records it) and the
//! cursor moves on. An API webhook whose every attempt failed for
//! `disable_after` is disabled, with the reason in its row. Both clocks
//! are in the rows (migration V28), so a replica taking a stream over
//! keeps counting. A replica that stops gives its leases up; one that dies
//! leaves them to expire ([`LEASE_TTL`]).
//!
//! API webhooks go through [`crate::targets`]: their client refuses
//! forbidden addresses on every connection, and their secret is read
//! before each attempt, so a rotation signs the next attempt.

use std::{collections::HashMap, time::Duration};

use inquest_core::{Tenant, error_chain};
use inquest_store::{Backlog, ListenEvent, ListenerConfig, Store, StoreError, run_listener};
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use uuid::Uuid;

pub use crate::sender::{ATTEMPT_TIMEOUT, Attempt, Sender};
use crate::targets::TargetPolicy;
use crate::webhooks::Webhook;

mod stream;

use stream::{Source, Stream};

/// How long a replica holds a webhook's stream without renewing (each
/// attempt and each delivered event renews it). A dead replica's streams
/// resume on another this long after its last attempt.
pub const LEASE_TTL: Duration = Duration::from_secs(15);
/// The channel `record_event` notifies with each new event's id
/// (migration V30): it wakes idle streams at once.
pub const WAKE_CHANNEL: &str = "inquest_log";
/// How often the table of API webhooks is read for new and deleted ones.
pub const SCAN: Duration = Duration::from_secs(2);
/// API webhooks delivered by one replica at most (each is one task).
const MAX_API_STREAMS: u32 = 1000;

/// The configured webhooks, and the senders of both kinds, made at
/// startup so a client that cannot be built stops it.
pub struct Deliveries {
    configured: Sender,
    webhooks: Vec<Webhook>,
    api: Sender,
    /// `[webhooks]`: `give_up_after` and `disable_after` here.
    policy: TargetPolicy,
}

impl Deliveries {
    /// `console`: `[console] public_url`, which Slack messages link to.
    pub fn new(
        webhooks: Vec<Webhook>,
        policy: TargetPolicy,
        console: Option<String>,
    ) -> Result<Self, String> {
        Ok(Self {
            configured: Sender::configured(console.clone())?,
            webhooks,
            api: Sender::guarded(policy, console)?,
            policy,
        })
    }

    /// The sender of API webhooks (RedeliverEvent sends with it).
    pub fn api_sender(&self) -> Sender {
        self.api.clone()
    }

    /// Opens each configured webhook's cursor, then starts one delivery
    /// task per configured webhook, the task that follows the API
    /// webhooks, and the LISTEN connection that wakes them on each new
    /// event (on `database_url`), owned by `tasks`, until `shutdown`.
    /// Called before the replica serves: a new configured webhook receives
    /// every event of the requests it serves (a cursor that cannot be
    /// opened now is opened by its task, later).
    pub async fn spawn(
        &self,
        store: &Store,
        database_url: &str,
        tasks: &TaskTracker,
        shutdown: &CancellationToken,
    ) {
        let (wake, woken) = tokio::sync::watch::channel(0u64);
        let mut config = ListenerConfig::new(database_url, WAKE_CHANNEL);
        config.application_name = format!("inquest-deliver {}", store.replica_id());
        // Every new event, and every (re)connect (what was notified while
        // it was down is found by reading), wakes the streams.
        tasks.spawn(run_listener(config, shutdown.clone(), move |event| {
            if matches!(event, ListenEvent::Notification(_) | ListenEvent::Listening) {
                wake.send_modify(|n| *n = n.wrapping_add(1));
            }
        }));
        for hook in &self.webhooks {
            if let Err(e) = store.open_webhook_cursor(&hook.name).await {
                tracing::warn!(webhook = %hook.name, error = %error_chain(&e), "cannot open the webhook's cursor yet");
            }
        }
        for hook in &self.webhooks {
            let stream = Stream::new(
                store.clone(),
                self.configured.clone(),
                Source::Configured(hook.clone()),
                self.policy,
                woken.clone(),
                shutdown.clone(),
            );
            tasks.spawn(stream.run());
        }
        tasks.spawn(measure_backlog(
            store.clone(),
            self.webhooks.clone(),
            shutdown.clone(),
        ));
        let follow = follow_api_webhooks(
            store.clone(),
            self.api.clone(),
            self.policy,
            woken,
            tasks.clone(),
            shutdown.clone(),
        );
        tasks.spawn(follow);
    }
}

/// Sets the queue gauges every [`SCAN`]: the events not yet delivered on
/// the streams this replica holds, summed, and the age of the oldest. A
/// stream held elsewhere is that replica's to count, so the sum over
/// replicas counts each stream once.
async fn measure_backlog(store: Store, configured: Vec<Webhook>, shutdown: CancellationToken) {
    loop {
        match backlog(&store, &configured).await {
            Ok(backlog) => {
                #[allow(clippy::cast_precision_loss)]
                metrics::gauge!("inquest_webhook_queue_depth").set(backlog.events as f64);
                metrics::gauge!("inquest_webhook_oldest_undelivered_seconds")
                    .set(backlog.oldest.map_or(0.0, |d| d.as_secs_f64()));
            }
            Err(e) => {
                tracing::debug!(error = %error_chain(&e), "cannot measure the webhook queue; trying again");
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(SCAN) => {}
        }
    }
}

async fn backlog(store: &Store, configured: &[Webhook]) -> Result<Backlog, StoreError> {
    let mut total = store.held_api_webhooks_backlog().await?;
    if configured.is_empty() {
        return Ok(total);
    }
    for (name, delivered) in store.held_webhook_cursors().await? {
        let Some(hook) = configured.iter().find(|h| h.name == name) else {
            continue;
        };
        let (tenant, types) = hook.filter();
        total = total.and(store.events_backlog(delivered, tenant, &types).await?);
    }
    Ok(total)
}

/// Keeps one stream running per API webhook in the table: a new one is
/// started, a deleted (or disabled) one stopped, within [`SCAN`].
async fn follow_api_webhooks(
    store: Store,
    sender: Sender,
    policy: TargetPolicy,
    woken: tokio::sync::watch::Receiver<u64>,
    tasks: TaskTracker,
    shutdown: CancellationToken,
) {
    let mut running: HashMap<Uuid, CancellationToken> = HashMap::new();
    // Said once when the cap is reached, not on every scan.
    let mut full = false;
    loop {
        match store.active_webhooks(MAX_API_STREAMS).await {
            Ok(rows) => {
                let at_cap = rows.len() >= MAX_API_STREAMS as usize;
                if at_cap && !full {
                    tracing::warn!(
                        limit = MAX_API_STREAMS,
                        "as many webhooks as one replica delivers: newer ones wait until older ones are deleted"
                    );
                }
                full = at_cap;
                running.retain(|id, stop| {
                    let keep = rows.iter().any(|r| r.id == *id);
                    if !keep {
                        stop.cancel();
                    }
                    keep
                });
                for row in rows {
                    if running.contains_key(&row.id) {
                        continue;
                    }
                    let Ok(tenant) = Tenant::parse(&row.tenant) else {
                        tracing::warn!(webhook = %row.id, "a webhook's tenant is not a tenant name; not delivered");
                        continue;
                    };
                    // Before any line could hold it: an attempt's error,
                    // a receiver's answer.
                    inquest_redact::register(&row.secret);
                    let stop = shutdown.child_token();
                    let stream = Stream::new(
                        store.clone(),
                        sender.clone(),
                        Source::Api { id: row.id, tenant },
                        policy,
                        woken.clone(),
                        stop.clone(),
                    );
                    tasks.spawn(stream.run());
                    running.insert(row.id, stop);
                }
            }
            Err(e) => {
                tracing::warn!(error = %error_chain(&e), "cannot read the webhooks; trying again");
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(SCAN) => {}
        }
    }
}
