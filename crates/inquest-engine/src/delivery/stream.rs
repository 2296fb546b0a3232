//! One webhook's stream: claims its lease, reads the events after its
//! cursor, sends each (retrying with backoff while the next waits, so the
//! order holds), and moves the cursor a run of deliveries at a time. Gives
//! an event up after `give_up_after`, and disables an API webhook failing
//! for `disable_after`. See the parent module for the whole design.

use std::{
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use inquest_core::{Backoff, Tenant, error_chain};
use inquest_store::{EventRow, NewAttempt, Store, StoreError};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{Attempt, LEASE_TTL, Sender};
use crate::sender::MAX_ERROR_CHARS;
use crate::targets::TargetPolicy;
use crate::webhooks::Webhook;

/// How often a replica without a stream's lease tries to take it, and an
/// idle stream looks for new events even without a wake-up (the LISTEN
/// connection may be down).
const POLL: Duration = Duration::from_millis(200);
/// How often an idle stream reads for new events without a wake-up.
const IDLE_POLL: Duration = Duration::from_secs(1);
/// Deliveries recorded at once: the cursor moves (and the attempts are
/// written) after this many, or after [`FLUSH_AFTER`], whichever first.
/// A replica that dies sends at most this many again.
const FLUSH_EVERY: usize = 50;
const FLUSH_AFTER: Duration = Duration::from_millis(500);
/// Events read at once.
const BATCH: u32 = 100;
/// The first retry's delay; doubling to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Why delivery of a batch stopped early.
enum Stop {
    Shutdown,
    /// Another replica holds the stream now.
    LeaseLost,
    /// The API webhook was deleted.
    Gone,
    /// The API webhook failed for `disable_after` and is disabled now.
    Disabled,
}

/// What became of one event on one stream.
enum Outcome {
    /// The receiver answered 2xx.
    Delivered,
    /// It failed for `give_up_after`.
    GaveUp,
    /// Not for this webhook.
    Skipped,
}

/// Deliveries not yet recorded: the cursor moves past them, and their
/// attempts are written, together. Also when the lease was last renewed
/// (the instant the renewing statement was sent, so the lease is known
/// to last at least [`LEASE_TTL`] from it).
struct Run {
    events: Vec<i64>,
    attempts: Vec<Attempt>,
    since: Option<Instant>,
    renewed: Instant,
}

impl Run {
    fn new(renewed: Instant) -> Self {
        Self {
            events: Vec::new(),
            attempts: Vec::new(),
            since: None,
            renewed,
        }
    }

    fn push(&mut self, event: i64, attempt: Attempt) {
        self.since.get_or_insert_with(Instant::now);
        self.events.push(event);
        self.attempts.push(attempt);
    }

    /// Whether to record (and renew) before the next POST: after
    /// [`FLUSH_EVERY`] deliveries, when the oldest waited [`FLUSH_AFTER`],
    /// or when a third of the lease has gone since it was renewed. The last
    /// one matters after a pause (SIGSTOP, a stalled host): a replica whose
    /// lease may have passed to another must find out before it sends
    /// again, or the two would interleave the stream.
    fn due(&self) -> bool {
        self.events.len() >= FLUSH_EVERY
            || self.since.is_some_and(|t| t.elapsed() >= FLUSH_AFTER)
            || self.renewed.elapsed() >= LEASE_TTL / 3
    }
}

/// Whose stream, and where its cursor lives.
pub(super) enum Source {
    Configured(Webhook),
    Api { id: Uuid, tenant: Tenant },
}

pub(super) struct Stream {
    store: Store,
    sender: Sender,
    source: Source,
    /// `give_up_after` and `disable_after`.
    policy: TargetPolicy,
    /// For logs: the configured name, or the API webhook's id.
    label: String,
    /// Bumped on each new event (see [`super::WAKE_CHANNEL`]).
    woken: tokio::sync::watch::Receiver<u64>,
    shutdown: CancellationToken,
    /// The API webhook's secret last registered for redaction: a rotated
    /// one is registered once, when first seen.
    registered: Mutex<String>,
    /// A configured webhook failing for `disable_after` was said to be so
    /// (once per failing streak, not on every attempt).
    said_failing: AtomicBool,
}

impl Stream {
    pub(super) fn new(
        store: Store,
        sender: Sender,
        source: Source,
        policy: TargetPolicy,
        woken: tokio::sync::watch::Receiver<u64>,
        shutdown: CancellationToken,
    ) -> Self {
        let label = match &source {
            Source::Configured(hook) => hook.name.clone(),
            Source::Api { id, .. } => id.to_string(),
        };
        Self {
            store,
            sender,
            source,
            policy,
            label,
            woken,
            shutdown,
            registered: Mutex::new(String::new()),
            said_failing: AtomicBool::new(false),
        }
    }

    pub(super) async fn run(mut self) {
        let name = self.label.clone();
        if let Source::Configured(hook) = &self.source {
            while let Err(e) = self.store.open_webhook_cursor(&hook.name).await {
                tracing::warn!(webhook = %name, error = %error_chain(&e), "cannot open the webhook's cursor; trying again");
                if self.pause(POLL * 5).await.is_err() {
                    return;
                }
            }
        }
        loop {
            // Seen before reading: an event that commits after this wakes
            // the wait below even if the read missed it.
            self.woken.borrow_and_update();
            let asked = Instant::now();
            let delivered = match self.claim().await {
                Ok(Some(delivered)) => delivered,
                Ok(None) => {
                    if self.pause(POLL).await.is_err() {
                        break;
                    }
                    continue;
                }
                Err(e) => {
                    tracing::warn!(webhook = %name, error = %error_chain(&e), "cannot claim the webhook's stream; trying again");
                    if self.pause(POLL * 5).await.is_err() {
                        break;
                    }
                    continue;
                }
            };
            match self.deliver_after(delivered, asked).await {
                Ok(true) => {}
                Ok(false) => {
                    if self.idle().await.is_err() {
                        break;
                    }
                }
                Err(Stop::LeaseLost) => {
                    tracing::info!(webhook = %name, "another replica delivers this webhook now");
                }
                // The disabling gave the lease up.
                Err(Stop::Shutdown | Stop::Disabled) => break,
                Err(Stop::Gone) => return,
            }
        }
        if let Err(e) = self.release().await {
            tracing::warn!(webhook = %name, error = %error_chain(&e), "cannot release the webhook's stream; it passes on when its lease expires");
        }
    }

    /// Waits for a new event: woken at its commit, or after
    /// [`IDLE_POLL`] (a wake-up may be lost while the LISTEN connection is
    /// down), or stops at shutdown.
    async fn idle(&mut self) -> Result<(), Stop> {
        tokio::select! {
            () = self.shutdown.cancelled() => Err(Stop::Shutdown),
            () = tokio::time::sleep(IDLE_POLL) => Ok(()),
            // Err (the listener ended) disables this branch.
            Ok(()) = self.woken.changed() => Ok(()),
        }
    }

    async fn claim(&self) -> Result<Option<i64>, StoreError> {
        match &self.source {
            Source::Configured(hook) => self.store.claim_webhook(&hook.name, LEASE_TTL).await,
            Source::Api { id, .. } => self.store.claim_api_webhook(*id, LEASE_TTL).await,
        }
    }

    async fn release(&self) -> Result<(), StoreError> {
        match &self.source {
            Source::Configured(hook) => self.store.release_webhook(&hook.name).await,
            Source::Api { id, .. } => self.store.release_api_webhook(*id).await,
        }
    }

    async fn read_after(&self, delivered: i64) -> Result<Vec<EventRow>, StoreError> {
        match &self.source {
            Source::Configured(_) => self.store.events_after(delivered, BATCH).await,
            Source::Api { tenant, .. } => {
                self.store
                    .list_events(tenant, delivered, &[], None, BATCH)
                    .await
            }
        }
    }

    /// The webhook as it is now: an API webhook is read again (its secret
    /// may have been rotated); deleted, the stream stops. `None`: its row
    /// is unusable, and the stream waits as for a failing receiver.
    async fn hook(&self) -> Result<Option<Webhook>, Stop> {
        let row = match &self.source {
            Source::Configured(hook) => return Ok(Some(hook.clone())),
            Source::Api { id, .. } => {
                let mut backoff = Backoff::new(FIRST_BACKOFF, MAX_BACKOFF).jittered();
                loop {
                    match self.store.webhook_now(*id).await {
                        Ok(Some(row)) => break row,
                        Ok(None) => return Err(Stop::Gone),
                        Err(e) => {
                            tracing::warn!(webhook = %self.label, error = %error_chain(&e), "cannot read the webhook; trying again");
                            self.pause(backoff.next_delay()).await?;
                        }
                    }
                }
            }
        };
        self.register(&row.secret);
        match Webhook::from_row(&row) {
            Ok(hook) => Ok(Some(hook)),
            Err(e) => {
                // Checked at CreateWebhook: only a row edited by hand gets
                // here.
                tracing::warn!(webhook = %self.label, error = %e, "the webhook's row is unusable");
                Ok(None)
            }
        }
    }

    fn register(&self, secret: &str) {
        let mut last = self
            .registered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *last != secret {
            inquest_redact::register(secret);
            secret.clone_into(&mut last);
        }
    }

    /// Delivers the events after `delivered`, in order; `true` when there
    /// were any. Deliveries are recorded a run at a time ([`Run`]); a
    /// failure records the run before it, then retries its event alone.
    /// `renewed`: when the claim that returned `delivered` was sent.
    async fn deliver_after(&self, delivered: i64, renewed: Instant) -> Result<bool, Stop> {
        let events = match self.read_after(delivered).await {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(webhook = %self.label, error = %error_chain(&e), "cannot read events; trying again");
                self.pause(POLL * 5).await?;
                return Ok(false);
            }
        };
        let Some(last) = events.last().map(|e| e.id) else {
            return Ok(false);
        };
        let Some(mut hook) = self.hook().await? else {
            self.pause(POLL * 5).await?;
            return Ok(false);
        };
        let mut run = Run::new(renewed);
        for event in &events {
            if !hook.wants(&event.kind, &event.tenant) {
                continue;
            }
            if run.due() {
                self.flush(&mut run, None).await?;
            }
            let attempt = tokio::select! {
                () = self.shutdown.cancelled() => {
                    // What reached the receiver is kept, so it is not sent
                    // again by the next holder.
                    self.flush(&mut run, None).await?;
                    return Err(Stop::Shutdown);
                }
                attempt = self.sender.send(&hook, event, &self.store) => attempt,
            };
            if attempt.delivered() {
                metrics::counter!("inquest_webhook_attempts_total", "outcome" => "delivered")
                    .increment(1);
                metrics::counter!("inquest_webhook_deliveries_total", "outcome" => "delivered")
                    .increment(1);
                self.said_failing.store(false, Ordering::Relaxed);
                run.push(event.id, attempt);
                if run.due() {
                    self.flush(&mut run, None).await?;
                }
                continue;
            }
            self.flush(&mut run, None).await?;
            let outcome = self.retry(event, attempt).await?;
            run.renewed = Instant::now();
            match outcome {
                Outcome::Delivered => self.advance(event.id, true, &[]).await?,
                Outcome::GaveUp => self.advance(event.id, false, &[]).await?,
                // Renewed anyway: the retries' pauses renewed it, but
                // not necessarily just now.
                Outcome::Skipped => self.renew().await?,
            }
            // A failure took time: the webhook may have changed meanwhile.
            match self.hook().await? {
                Some(now) => hook = now,
                None => return Ok(true),
            }
        }
        // Past the tail of events not for this webhook too, so they are
        // not read again.
        self.flush(&mut run, Some(last)).await?;
        Ok(true)
    }

    /// Records `run` (its deliveries, and the cursor at its last event or
    /// at `to` when later), which renews the lease, and starts a new run.
    /// With nothing to record, only renews.
    async fn flush(&self, run: &mut Run, to: Option<i64>) -> Result<(), Stop> {
        let last = run.events.last().copied();
        let renewed = Instant::now();
        let Some(to) = last.max(to) else {
            self.renew().await?;
            run.renewed = renewed;
            return Ok(());
        };
        let taken = std::mem::replace(run, Run::new(renewed));
        let attempts: Vec<NewAttempt<'_>> = match &self.source {
            Source::Api { id, .. } => taken
                .events
                .iter()
                .zip(&taken.attempts)
                .map(|(event, attempt)| NewAttempt {
                    webhook: *id,
                    event_id: *event,
                    status_code: attempt.status,
                    error: None,
                    duration: attempt.duration,
                    redelivery: false,
                })
                .collect(),
            Source::Configured(_) => Vec::new(),
        };
        self.advance(to, last.is_some(), &attempts).await
    }

    /// Renews the lease; [`Stop::LeaseLost`] when it is another replica's
    /// now. A database that does not answer is retried: nothing is sent
    /// meanwhile.
    async fn renew(&self) -> Result<(), Stop> {
        let mut backoff = Backoff::new(FIRST_BACKOFF, MAX_BACKOFF).jittered();
        loop {
            match self.claim().await {
                Ok(Some(_)) => return Ok(()),
                Ok(None) => return Err(Stop::LeaseLost),
                Err(e) => {
                    tracing::warn!(webhook = %self.label, error = %error_chain(&e), "cannot renew the webhook's lease; trying again");
                    self.pause(backoff.next_delay()).await?;
                }
            }
        }
    }

    /// Moves the cursor to `event`; `delivered` ends the failing streak.
    /// `attempts` (an API webhook's deliveries up to `event`) are recorded
    /// with it.
    async fn advance(
        &self,
        event: i64,
        delivered: bool,
        attempts: &[NewAttempt<'_>],
    ) -> Result<(), Stop> {
        let mut backoff = Backoff::new(FIRST_BACKOFF, MAX_BACKOFF).jittered();
        loop {
            let moved = match &self.source {
                Source::Configured(hook) => {
                    self.store
                        .advance_webhook(&hook.name, event, delivered, LEASE_TTL)
                        .await
                }
                Source::Api { id, .. } => {
                    self.store
                        .advance_api_webhook_with(*id, event, delivered, LEASE_TTL, attempts)
                        .await
                }
            };
            match moved {
                Ok(true) => return Ok(()),
                Ok(false) => return Err(Stop::LeaseLost),
                Err(e) => {
                    // Not moving the cursor is safe: the event is sent
                    // again (at least once).
                    tracing::warn!(webhook = %self.label, event, error = %error_chain(&e), "cannot record a delivery; trying again");
                    self.pause(backoff.next_delay()).await?;
                }
            }
        }
    }

    /// After `attempt` failed: records it, then sends `event` again until
    /// the receiver answers 2xx, or it has failed for `give_up_after`. The
    /// webhook is read again before each attempt.
    async fn retry(&self, event: &EventRow, mut attempt: Attempt) -> Result<Outcome, Stop> {
        let mut backoff = Backoff::new(FIRST_BACKOFF, MAX_BACKOFF).jittered();
        loop {
            self.record(event, &attempt).await;
            let Some(error) = attempt.error else {
                metrics::counter!("inquest_webhook_attempts_total", "outcome" => "delivered")
                    .increment(1);
                metrics::counter!("inquest_webhook_deliveries_total", "outcome" => "delivered")
                    .increment(1);
                self.said_failing.store(false, Ordering::Relaxed);
                return Ok(Outcome::Delivered);
            };
            metrics::counter!("inquest_webhook_attempts_total", "outcome" => "failed").increment(1);
            tracing::warn!(webhook = %self.label, event = event.id, %error, "webhook delivery failed; retrying");
            let marked = match &self.source {
                Source::Configured(hook) => {
                    self.store
                        .webhook_failed(&hook.name, &error, LEASE_TTL)
                        .await
                }
                Source::Api { id, .. } => {
                    self.store.api_webhook_failed(*id, &error, LEASE_TTL).await
                }
            };
            match marked {
                Ok(Some(failing)) => {
                    // One late attempt can cross both thresholds (the
                    // backoff's jitter alone allows it): the event's
                    // give-up is recorded first, so its history says what
                    // became of it before the webhook stops.
                    let gave_up = failing.retrying >= self.policy.give_up_after;
                    if gave_up {
                        self.give_up(event, &error).await;
                    }
                    if failing.failing >= self.policy.disable_after {
                        self.disable(failing.failing).await?;
                    }
                    if gave_up {
                        return Ok(Outcome::GaveUp);
                    }
                }
                Ok(None) => return Err(Stop::LeaseLost),
                // Without the clocks the event is retried: giving up or
                // disabling waits for a failure that can be recorded.
                Err(e) => {
                    tracing::warn!(webhook = %self.label, error = %error_chain(&e), "cannot record a failed delivery");
                }
            }
            self.pause_holding(backoff.next_delay()).await?;
            attempt = match self.hook().await? {
                Some(hook) if hook.wants(&event.kind, &event.tenant) => tokio::select! {
                    () = self.shutdown.cancelled() => return Err(Stop::Shutdown),
                    attempt = self.sender.send(&hook, event, &self.store) => attempt,
                },
                // Filtered out meanwhile: the cursor moves past it as past
                // any event not for this webhook.
                Some(_) => return Ok(Outcome::Skipped),
                // Waits as for a failing receiver.
                None => Attempt::failed(None, "the webhook's row is unusable", Instant::now()),
            };
        }
    }

    /// Marks `event` failed for this webhook: said in the log, the
    /// metrics and an API webhook's history.
    async fn give_up(&self, event: &EventRow, last_error: &str) {
        let after = duration_text(self.policy.give_up_after);
        tracing::error!(webhook = %self.label, event = event.id, %last_error, "gave up delivering an event after {after}; the next one follows");
        metrics::counter!("inquest_webhook_deliveries_total", "outcome" => "gave_up").increment(1);
        let error = format!("gave up after {after}; the last attempt: {last_error}");
        let attempt = Attempt {
            status: None,
            error: Some(error.chars().take(MAX_ERROR_CHARS).collect()),
            duration: Duration::ZERO,
        };
        self.record(event, &attempt).await;
    }

    /// Disables an API webhook failing for `failing` (at least
    /// `disable_after`); the stream stops. A configured webhook is the
    /// operator's to remove: it is only said, and it goes on giving up
    /// events one by one.
    async fn disable(&self, failing: Duration) -> Result<(), Stop> {
        let Source::Api { id, .. } = &self.source else {
            if !self.said_failing.swap(true, Ordering::Relaxed) {
                tracing::error!(webhook = %self.label, "every attempt failed for {}; check the receiver or remove the webhook", duration_text(failing));
            }
            return Ok(());
        };
        let reason = format!(
            "every delivery attempt failed for {} (disable_after is {}); delete and create the webhook again to resume",
            duration_text(failing),
            duration_text(self.policy.disable_after)
        );
        let mut backoff = Backoff::new(FIRST_BACKOFF, MAX_BACKOFF).jittered();
        loop {
            match self.store.disable_api_webhook(*id, &reason).await {
                Ok(true) => {
                    tracing::error!(webhook = %self.label, %reason, "webhook disabled");
                    metrics::counter!("inquest_webhooks_disabled_total").increment(1);
                    return Err(Stop::Disabled);
                }
                Ok(false) => return Err(Stop::LeaseLost),
                Err(e) => {
                    tracing::warn!(webhook = %self.label, error = %error_chain(&e), "cannot disable the webhook; trying again");
                    self.pause(backoff.next_delay()).await?;
                }
            }
        }
    }

    /// An API webhook's attempt goes to its history; losing one record is
    /// logged, never a reason to send again.
    async fn record(&self, event: &EventRow, attempt: &Attempt) {
        let Source::Api { id, .. } = &self.source else {
            return;
        };
        let new = NewAttempt {
            webhook: *id,
            event_id: event.id,
            status_code: attempt.status,
            error: attempt.error.as_deref(),
            duration: attempt.duration,
            redelivery: false,
        };
        if let Err(e) = self.store.record_webhook_attempt(new).await {
            tracing::warn!(webhook = %self.label, event = event.id, error = %error_chain(&e), "cannot record a webhook attempt");
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
            match self.claim().await {
                Ok(Some(_)) => {}
                Ok(None) => return Err(Stop::LeaseLost),
                // The database is away: the next attempt's record says
                // whether the lease survived.
                Err(e) => {
                    tracing::warn!(webhook = %self.label, error = %error_chain(&e), "cannot renew the webhook's lease");
                }
            }
        }
    }

    /// Sleeps `delay`, or stops at shutdown.
    async fn pause(&self, delay: Duration) -> Result<(), Stop> {
        tokio::select! {
            () = self.shutdown.cancelled() => Err(Stop::Shutdown),
            () = tokio::time::sleep(delay) => Ok(()),
        }
    }
}

/// `d` for a person, cut to whole seconds from a second on: "24h", "90m",
/// "2s", "250ms".
fn duration_text(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0 => format!("{}ms", d.as_millis()),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}
