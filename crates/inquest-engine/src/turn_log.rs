//! Persist, then publish: the API's writes.
//!
//! [`TurnLog`] is what `StartSession`, `SendMessage`, `ContinueSession` and
//! `CancelSession` write through, and where a burst is claimed; the
//! burst's own writes go through its [`BurstLog`] (one per claimed burst,
//! fenced by its lease). A turn is appended to the store and only after the
//! commit is it published to this replica's [`LiveView`]; other replicas
//! hear of it from the store's `NOTIFY` through the [`crate::feed`]. A
//! failed write publishes nothing.

use std::time::Duration;

use inquest_broadcast::TurnBroadcaster;
use inquest_core::{IdempotencyKey, IncidentId, SessionId, Tenant, TenantQuota, UserMessage};
use inquest_store::{
    CallerEvent, DecideOutcome, Lease, SendOutcome, SessionRow, StartedSession, Store, StoreError,
    Transition,
};
use tokio_util::sync::CancellationToken;

use crate::{burst_log::BurstLog, live::LiveView};

/// Why a [`TurnLog`] write failed. Distinct from every other failure so a
/// burst can end with its own exit reason when its transcript cannot be
/// written.
#[derive(Debug, thiserror::Error)]
pub enum TurnLogError {
    /// The write was refused (not an outage), and nothing was published.
    #[error("write was refused; nothing was published")]
    NotPersisted(#[source] StoreError),
    /// The store stayed unreachable until the lease deadline; the write
    /// may or may not have committed (the next claimer reads the store).
    #[error("store unavailable until the lease deadline")]
    Unavailable(#[source] StoreError),
    /// The burst's final status was not recorded (watchers were still
    /// ended).
    #[error("burst end was not recorded")]
    CloseNotRecorded(#[source] StoreError),
    /// The burst could not be claimed.
    #[error("burst could not be claimed")]
    ClaimFailed(#[source] StoreError),
    /// The lease deadline passed: another replica may own the session.
    #[error("the lease deadline passed; another replica may run this session")]
    DeadlinePassed,
}

impl TurnLogError {
    pub fn store_error(&self) -> Option<&StoreError> {
        match self {
            TurnLogError::NotPersisted(e)
            | TurnLogError::Unavailable(e)
            | TurnLogError::CloseNotRecorded(e)
            | TurnLogError::ClaimFailed(e) => Some(e),
            TurnLogError::DeadlinePassed => None,
        }
    }
}

/// How long a lease holds and how early before its expiry its holder
/// stops acting for it (see [`crate::burst_log::LeaseClock`]).
#[derive(Debug, Clone, Copy)]
pub struct LeaseTiming {
    pub ttl: Duration,
    pub margin: Duration,
}

impl LeaseTiming {
    /// The default margin: a sixth of the TTL (5 s of the default 30 s).
    pub fn with_default_margin(ttl: Duration) -> Self {
        Self {
            ttl,
            margin: ttl / 6,
        }
    }
}

/// The API's persist-then-publish path. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct TurnLog {
    /// The API lane: the writes and reads callers make.
    store: Store,
    /// The burst lane ([`Store::for_bursts`]): claims, and every write a
    /// burst makes, so a flood of API calls cannot starve a running burst.
    burst_store: Store,
    live: LiveView,
    lease: LeaseTiming,
}

impl TurnLog {
    pub fn new(store: Store, broadcaster: TurnBroadcaster) -> Self {
        let lease = LeaseTiming::with_default_margin(store.lease_ttl());
        Self {
            burst_store: store.for_bursts(),
            store,
            live: LiveView::new(broadcaster),
            lease,
        }
    }

    /// The same log with another lease safety margin.
    pub fn with_lease_timing(mut self, lease: LeaseTiming) -> Self {
        self.lease = lease;
        self
    }

    /// This replica's live view, which every committed turn reaches.
    pub fn live(&self) -> &LiveView {
        &self.live
    }

    /// The API lane, for the engine's own reads.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The burst lane, for bursts, their leases and the reaper.
    pub(crate) fn burst_store(&self) -> &Store {
        &self.burst_store
    }

    /// Opens a session with its first user turn and publishes the turn.
    pub async fn start_session(
        &self,
        tenant: &Tenant,
        quota: TenantQuota,
        incident: IncidentId,
        message: UserMessage,
        key: Option<IdempotencyKey>,
    ) -> Result<StartedSession, StoreError> {
        self.start_session_with_skills(tenant, quota, incident, message, key, None)
            .await
    }

    /// [`TurnLog::start_session`] for a session whose bursts load only
    /// `skills` (`Store::start_session_with_skills`).
    pub async fn start_session_with_skills(
        &self,
        tenant: &Tenant,
        quota: TenantQuota,
        incident: IncidentId,
        message: UserMessage,
        key: Option<IdempotencyKey>,
        skills: Option<Vec<String>>,
    ) -> Result<StartedSession, StoreError> {
        let started = self
            .store
            .start_session_with_skills(tenant, quota, incident, message, key, skills)
            .await?;
        if started.created {
            self.live.publish_committed(started.first_turn.clone());
        }
        Ok(started)
    }

    /// Forks a session (`Store::fork_session`) and publishes the turns the
    /// fork stored after its copy, so a watcher of the fork that subscribed
    /// early still sees them live (the copied turns it drains).
    pub async fn fork_session(
        &self,
        tenant: &Tenant,
        quota: TenantQuota,
        req: inquest_store::ForkRequest,
    ) -> Result<inquest_store::ForkOutcome, StoreError> {
        let outcome = self.store.fork_session(tenant, quota, req).await?;
        if let inquest_store::ForkOutcome::Forked(forked) = &outcome {
            for turn in &forked.new_turns {
                self.live.publish_committed(turn.clone());
            }
        }
        Ok(outcome)
    }

    /// Publishes the opening turn of a session another path of the store
    /// committed (a scheduled tick's), as [`Self::start_session`] does for
    /// its own.
    pub fn publish_started(&self, started: &StartedSession) {
        if started.created {
            self.live.publish_committed(started.first_turn.clone());
        }
    }

    /// With `enqueue`, a message to a pending or running session is
    /// queued and announced to this replica's watchers; an interrupting
    /// one also stops the burst that will drain it, when that burst runs
    /// here (or is about to be claimed here). Other replicas hear it
    /// through the store's notification, and the holder reads it at its
    /// next lease renewal if that was missed.
    ///
    /// Stores a follow-up user turn (session becomes `pending`), lifts the
    /// broadcaster latch, and publishes the turn, all before returning, so
    /// a watch started after this returns follows the new burst.
    pub async fn send_message(
        &self,
        tenant: &Tenant,
        quota: TenantQuota,
        session: SessionId,
        message: UserMessage,
        key: Option<IdempotencyKey>,
        enqueue: Option<inquest_store::Queueing>,
    ) -> Result<SendOutcome, StoreError> {
        let outcome = self
            .store
            .send_or_enqueue(tenant, quota, session, message, key, enqueue)
            .await?;
        if let SendOutcome::Queued {
            interrupt: Some(epoch),
            ..
        } = &outcome
        {
            // A replay asks again: stopping a burst twice stops it once.
            let here = self.live.interrupt_burst(session, *epoch, true);
            let via = if here { "local" } else { "elsewhere" };
            metrics::counter!("inquest_interrupts_total", "via" => via).increment(1);
            tracing::info!(%session, epoch, here, "interrupting the burst");
        }
        if let SendOutcome::Queued {
            position,
            text,
            created: true,
            ..
        } = &outcome
        {
            self.live
                .publish_message_queued(inquest_broadcast::MessageQueued {
                    session_id: session,
                    text: text.as_str().into(),
                    position: *position,
                });
        }
        if let SendOutcome::Sent { turn, created } = &outcome {
            // A replay lifts the latch too: the first call may have been
            // cut off before it did (watchers check the store before they
            // end, so a latch lifted late never misleads one).
            self.live.reopen(session);
            if *created {
                self.live.publish_committed((**turn).clone());
            }
        }
        Ok(outcome)
    }

    /// Decides pending approvals (`DecideToolCalls`); the denied calls'
    /// results are published once committed, and a reopened session's
    /// watchers are let through, as a follow-up does.
    pub async fn decide_tool_calls(
        &self,
        tenant: &Tenant,
        session: SessionId,
        decisions: Vec<(String, inquest_core::approval::Decision)>,
        key: Option<IdempotencyKey>,
        request: inquest_core::RequestFingerprint,
    ) -> Result<DecideOutcome, StoreError> {
        let outcome = self
            .store
            .decide_tool_calls(tenant, session, decisions, key, request)
            .await?;
        if let DecideOutcome::Decided {
            turns,
            session: row,
            ..
        } = &outcome
        {
            if row.status == inquest_core::SessionStatus::Pending {
                self.live.reopen(session);
            }
            for turn in turns {
                self.live.publish_committed(turn.clone());
            }
        }
        Ok(outcome)
    }

    /// Claims a `pending` session's burst under a fresh lease (status
    /// `running`, epoch + 1). The token fires when the session is
    /// cancelled. `None` when the session is not pending (someone else
    /// claimed it, or it was cancelled).
    pub async fn claim_burst(
        &self,
        session: SessionId,
    ) -> Result<Option<(BurstLog, CancellationToken)>, TurnLogError> {
        self.claim_burst_traced(session, None).await
    }

    /// [`TurnLog::claim_burst`], storing `trace_id` (the burst's trace) on
    /// the session in the claim statement.
    pub async fn claim_burst_traced(
        &self,
        session: SessionId,
        trace_id: Option<String>,
    ) -> Result<Option<(BurstLog, CancellationToken)>, TurnLogError> {
        let lease = self
            .burst_store
            .claim_pending_traced(session, trace_id)
            .await
            .map_err(TurnLogError::ClaimFailed)?;
        Ok(lease.map(|lease| self.adopt(lease)))
    }

    /// Takes charge of a burst whose lease this replica holds (a claimed
    /// orphan): its writes go through the returned [`BurstLog`], and the
    /// token fires when the session is cancelled.
    pub fn adopt(&self, lease: Lease) -> (BurstLog, CancellationToken) {
        let (token, interrupt) = self.live.register_burst(lease.session(), lease.epoch());
        let burst = BurstLog::new(
            self.burst_store.clone(),
            self.live.clone(),
            lease,
            self.lease,
            interrupt,
        );
        (burst, token)
    }

    /// `ContinueSession`: a session `awaiting_confirmation` becomes
    /// `pending` (atomically: of two concurrent confirmations one wins) and
    /// the broadcaster latch is lifted, so a watch started after this
    /// returns follows the confirmed burst.
    pub async fn confirm(&self, session: SessionId) -> Result<Transition, StoreError> {
        let transition = self.store.transition(session, CallerEvent::Confirm).await?;
        if matches!(transition, Transition::Changed(_)) {
            self.live.reopen(session);
        }
        Ok(transition)
    }

    /// `CancelSession`: a pending, running, idle or awaiting-confirmation session
    /// becomes `cancelled` (atomically; a burst that ends at the same
    /// moment loses), its watchers end and its burst's token fires. Turns
    /// stay.
    pub async fn cancel(&self, session: SessionId) -> Result<Transition, StoreError> {
        let transition = self.store.transition(session, CallerEvent::Cancel).await?;
        if matches!(transition, Transition::Changed(_)) {
            self.live.session_settled(session, true);
        }
        Ok(transition)
    }

    /// `DeleteSession`, `DeleteIncident`: erases `target` (see
    /// `inquest_store::Store::erase`), then ends its watchers here and
    /// stops its bursts here; other replicas do the same on the `deleted`
    /// notification the erasure sent at commit.
    pub async fn erase(
        &self,
        tenant: &Tenant,
        target: inquest_store::EraseTarget,
        force: bool,
        audit: inquest_store::AuditEntry,
    ) -> Result<inquest_store::Erased, StoreError> {
        let erased = self.store.erase(tenant, target, force, audit).await?;
        if let inquest_store::Erased::Deleted { sessions } = &erased {
            for session in sessions {
                self.live.session_settled(*session, true);
            }
        }
        Ok(erased)
    }

    /// The session row, for callers that only hold a `TurnLog`.
    pub async fn session(&self, session: SessionId) -> Result<SessionRow, StoreError> {
        self.store.get_session(session).await
    }
}
