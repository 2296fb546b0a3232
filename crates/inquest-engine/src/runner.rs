//! Starts, recovers and finishes bursts: the glue between the agent loop,
//! leases and the server's persist-then-publish path.
//!
//! `StartSession` and `SendMessage` leave a session `pending`; [`Runner::start`]
//! claims it under a lease (`pending` → `running`, epoch + 1, atomically, so
//! one burst per session). The reaper ([`Runner::run_reaper`], on every
//! replica) claims orphans: `running` sessions whose lease expired because
//! their worker died or stalled, and `pending` ones nobody claimed. Either
//! way the burst then runs the same path: a lease keeper renews the lease
//! beside it, [`crate::resume::prepare`] validates and plans (a notice for
//! a plan that is not clean, a hold when it needs confirmation), the agent
//! runs from the stored turns, and the report and closing status are
//! written, all fenced by the lease epoch. Everything the burst needs
//! comes from the database, so the same path serves a first message, a
//! follow-up after a restart, and a burst whose worker died on another
//! replica.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use inquest_agent::{Agent, BurstReport, Stop};
use inquest_core::{Ending, ExitReason, SessionId, SideEffect, error_chain};
use inquest_store::{Lease, NewReport, SessionRow};
use time::OffsetDateTime;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::Instrument;

use crate::{
    agent_runtime::AgentRuntime,
    approvals::ApprovalGates,
    burst_log::BurstLog,
    keeper::{Held, KeeperTiming, keep_lease},
    lease::LeaseSection,
    resume::{self, Mode, Prepared},
    turn_log::{TurnLog, TurnLogError},
};

/// What a running tool that is not read-only gets after an interrupt when
/// the embedder says nothing (the default `shutdown.grace`).
const DEFAULT_INTERRUPT_GRACE: Duration = Duration::from_secs(10);

/// Orphans (and stale pending sessions) claimed per reaper pass.
const REAP_BATCH: u32 = 16;

/// Runs bursts on this replica. Cheap to clone.
#[derive(Clone)]
pub struct Runner {
    /// `None` when no provider is configured: sessions are stored and
    /// watched, but no agent runs (a warning says so at startup).
    agent: Option<Arc<Agent>>,
    log: TurnLog,
    /// Owner of every burst task; shutdown waits for them.
    tasks: TaskTracker,
    /// Server shutdown: bursts start no new model call or tool, let
    /// running tools finish, and are handed over.
    shutdown: CancellationToken,
    /// The shutdown grace ran out: tools still running are dropped and
    /// left dangling for the next replica's recovery plan.
    abandon: CancellationToken,
    lease: LeaseSection,
    /// This replica's burst slots (`limits.max_running_bursts`).
    slots: Arc<Slots>,
    /// `limits.max_notice_bytes`: notices `resume::prepare` writes are cut
    /// to it.
    max_notice_bytes: usize,
    /// Where bursts and the reaper run (`agent_runtime.rs`).
    runtime: AgentRuntime,
    /// Each tenant's approval policy (`[approval]`).
    approvals: ApprovalGates,
    /// How long a running tool that is not read-only may go on after an
    /// interrupt (`shutdown.grace`: the time a side effect is given to
    /// land, whatever stops the burst).
    interrupt_grace: Duration,
}

/// The cap on bursts running here at once. A burst holds a [`Slot`] from
/// before its claim to after its last write; a session that finds no free
/// slot stays `pending` in the store, which is the queue: the reaper
/// claims the oldest pending sessions as slots free.
struct Slots {
    permits: Arc<Semaphore>,
    max: usize,
    /// Fired when a burst gives its slot back.
    freed: Notify,
    /// A start found no free slot since the reaper last emptied the queue:
    /// the reaper claims pending sessions of any age, not only stale ones.
    deferred: AtomicBool,
}

/// One running burst's share of [`Slots`]; giving it back wakes the reaper.
struct Slot {
    _permit: OwnedSemaphorePermit,
    slots: Arc<Slots>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.freed.notify_one();
    }
}

impl Slots {
    fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            permits: Arc::new(Semaphore::new(max)),
            max,
            freed: Notify::new(),
            deferred: AtomicBool::new(false),
        })
    }

    /// Up to `n` free slots, taken now (none is waited for).
    fn take(self: &Arc<Self>, n: usize) -> Vec<OwnedSemaphorePermit> {
        let mut taken = Vec::new();
        while taken.len() < n {
            match Arc::clone(&self.permits).try_acquire_owned() {
                Ok(permit) => taken.push(permit),
                Err(_) => break,
            }
        }
        taken
    }

    /// A taken permit bound to a burst: returning it wakes the reaper.
    /// Permits taken but not used are dropped unbound and wake nobody.
    fn bind(self: &Arc<Self>, permit: OwnedSemaphorePermit) -> Slot {
        Slot {
            _permit: permit,
            slots: Arc::clone(self),
        }
    }
}

/// How long a burst that gave its lease up waits for the store to answer,
/// to mark turns a failover lost (`BurstLog::look_for_lost_turns`).
const LOST_TURNS_PATIENCE: Duration = Duration::from_secs(60);

impl Runner {
    pub fn new(
        agent: Option<Arc<Agent>>,
        log: TurnLog,
        tasks: TaskTracker,
        shutdown: CancellationToken,
        abandon: CancellationToken,
        lease: LeaseSection,
        max_running_bursts: usize,
    ) -> Self {
        Self {
            agent,
            log,
            tasks,
            shutdown,
            abandon,
            lease,
            slots: Slots::new(max_running_bursts.max(1)),
            max_notice_bytes: crate::DEFAULT_MAX_NOTICE_BYTES,
            runtime: AgentRuntime::shared(),
            approvals: ApprovalGates::default(),
            interrupt_grace: DEFAULT_INTERRUPT_GRACE,
        }
    }

    /// Gives a running tool that is not read-only `grace` to finish after
    /// an interrupt (the server passes `shutdown.grace`).
    pub fn with_interrupt_grace(mut self, grace: Duration) -> Self {
        self.interrupt_grace = grace;
        self
    }

    /// Screens tool calls with these policies.
    pub fn with_approvals(mut self, approvals: ApprovalGates) -> Self {
        self.approvals = approvals;
        self
    }

    /// Runs bursts and the reaper on `runtime`.
    pub fn with_runtime(mut self, runtime: AgentRuntime) -> Self {
        self.runtime = runtime;
        self
    }

    /// Spawns a burst-side task (a burst, its hand-back, the reaper) on
    /// the agent runtime, owned by this runner's tracker.
    fn spawn_agent<F>(&self, work: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        match self.runtime.handle() {
            Some(handle) => drop(self.tasks.spawn_on(work, handle)),
            None => drop(self.tasks.spawn(work)),
        }
    }

    /// Cuts the notices this runner writes to `max` bytes (plus a marker).
    pub fn with_max_notice_bytes(mut self, max: usize) -> Self {
        self.max_notice_bytes = max;
        self
    }

    /// `limits.max_running_bursts`.
    pub fn max_running_bursts(&self) -> usize {
        self.slots.max
    }

    /// Bursts running on this replica now.
    pub fn running_bursts(&self) -> usize {
        self.slots.max - self.slots.permits.available_permits()
    }

    /// Runs `work` to its end in a task this runner's tracker owns, and
    /// waits for it: a caller that goes away (a client that gives up right
    /// after its commit) cannot cut the unit short.
    pub async fn unit<T, E, F>(&self, work: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<inquest_store::StoreError> + Send + 'static,
        F: std::future::Future<Output = Result<T, E>> + Send + 'static,
    {
        // The task runs in the caller's span (the handler's, below `rpc`),
        // so a burst it starts is in the request's trace.
        self.tasks
            .spawn(work.in_current_span())
            .await
            .map_err(|e| {
                E::from(inquest_store::StoreError::Internal(format!(
                    "request task failed: {e}"
                )))
            })?
    }

    /// Starts the burst of a `pending` session in the background. Does
    /// nothing when no agent is configured or the server is shutting down.
    ///
    /// The burst's trace continues the current span's (the handler span,
    /// below `rpc`, of the request that made the session pending).
    pub fn start(&self, session: SessionId) {
        self.spawn_pending(session, Mode::Fresh, Some(tracing::Span::current()));
    }

    /// Starts the burst `ContinueSession` confirmed: the recovery plan is
    /// re-stored but neither re-noticed nor held again.
    pub fn start_confirmed(&self, session: SessionId) {
        self.spawn_pending(session, Mode::Confirmed, Some(tracing::Span::current()));
    }

    /// Starts the bursts of sessions left `pending` (their message was
    /// stored but the process stopped before the burst was claimed). Called
    /// once at startup; later, the reaper picks up pending sessions older
    /// than the lease TTL.
    pub async fn start_pending(&self) {
        if self.agent.is_none() {
            return;
        }
        // Oldest first; those beyond the free slots stay pending and the
        // reaper takes them as slots free.
        let free = self.slots.permits.available_permits();
        match self.log.burst_store().pending_sessions(free as u32).await {
            Ok(sessions) => {
                if !sessions.is_empty() {
                    tracing::info!(count = sessions.len(), "starting bursts left pending");
                }
                if sessions.len() >= free {
                    self.slots.deferred.store(true, Ordering::SeqCst);
                }
                for session in sessions {
                    // No request started these: each burst is a new trace.
                    self.spawn_pending(session, Mode::Fresh, None);
                }
            }
            Err(e) => tracing::warn!(error = %error_chain(&e), "cannot look for pending sessions"),
        }
    }

    /// How a tool affects the world, for recovery plans: from the agent's
    /// tool catalog; every tool is mutating when no agent is configured.
    pub fn side_effect(&self, tool: &str) -> SideEffect {
        self.agent
            .as_ref()
            .map_or(SideEffect::Mutating, |a| a.side_effect(tool))
    }

    /// Every `reap_interval` until shutdown, and whenever a burst frees a
    /// slot while sessions wait for one: claims orphans, then pending
    /// sessions (oldest first), as many as there are free slots, and runs
    /// their bursts here. A replica without an agent claims nothing (it
    /// could not run them).
    /// Runs [`Runner::run_reaper`] on the agent runtime, owned by the
    /// tracker.
    pub fn spawn_reaper(&self) {
        self.spawn_agent(self.clone().run_reaper());
    }

    pub async fn run_reaper(self) {
        if self.agent.is_none() {
            return;
        }
        let mut tick = tokio::time::interval(self.lease.reap_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => return,
                _ = tick.tick() => {}
                () = self.slots.freed.notified() => {
                    if !self.slots.deferred.load(Ordering::SeqCst) {
                        continue;
                    }
                }
            }
            self.expire_approvals().await;
            self.reap_once().await;
        }
    }

    /// Denies as expired the approvals still pending past their time
    /// (`approval.timeout`), and starts the bursts that frees: the model
    /// is told and can report. Any replica may do it; each session's
    /// expiry is one transaction under its row lock, so it happens once.
    pub async fn expire_approvals(&self) {
        if self.agent.is_none() || self.shutdown.is_cancelled() {
            return;
        }
        match self.log.burst_store().expire_approvals(REAP_BATCH).await {
            Ok(sessions) => {
                for session in sessions {
                    tracing::info!(%session, "approvals expired; the burst continues");
                    metrics::counter!("inquest_approvals_decided_total", "outcome" => "expired")
                        .increment(1);
                    self.start(session);
                }
            }
            Err(e) => {
                tracing::warn!(error = %error_chain(&e), "cannot expire pending approvals")
            }
        }
    }

    /// One reaper pass. Returns how many bursts it started.
    pub async fn reap_once(&self) -> usize {
        if self.agent.is_none() || self.shutdown.is_cancelled() {
            return 0;
        }
        let store = self.log.burst_store();
        let mut started = 0;
        let mut permits = self.slots.take(REAP_BATCH as usize);
        if permits.is_empty() {
            return 0;
        }
        match store.claim_orphans(permits.len() as u32).await {
            Ok(leases) => {
                for lease in leases {
                    let Some(permit) = permits.pop() else {
                        break;
                    };
                    tracing::warn!(session = %lease.session(), epoch = lease.epoch(), "claimed an orphaned session; recovering it");
                    metrics::counter!("inquest_orphans_recovered_total", "by" => "reaper")
                        .increment(1);
                    self.spawn_claimed(lease, Mode::Recovered, self.slots.bind(permit));
                    started += 1;
                }
            }
            Err(e) => {
                tracing::warn!(error = %error_chain(&e), "reaper cannot look for orphaned sessions")
            }
        }
        if permits.is_empty() {
            return started;
        }
        // Sessions this replica deferred for want of a slot are claimed at
        // any age; otherwise only those nobody claimed within a lease TTL
        // (their replica died before starting them, or had no room).
        let deferred = self.slots.deferred.swap(false, Ordering::SeqCst);
        let min_age = if deferred {
            Duration::ZERO
        } else {
            self.lease.ttl
        };
        let want = permits.len();
        match store.claim_oldest_pending(want as u32, min_age).await {
            Ok(leases) => {
                if deferred && leases.len() == want {
                    // The queue may hold more than this pass had room for.
                    self.slots.deferred.store(true, Ordering::SeqCst);
                }
                for lease in leases {
                    let Some(permit) = permits.pop() else {
                        break;
                    };
                    tracing::info!(session = %lease.session(), "claimed a pending session; starting its burst");
                    self.spawn_claimed(lease, Mode::Fresh, self.slots.bind(permit));
                    started += 1;
                }
            }
            Err(e) => {
                if deferred {
                    self.slots.deferred.store(true, Ordering::SeqCst);
                }
                tracing::warn!(error = %error_chain(&e), "reaper cannot look for pending sessions")
            }
        }
        started
    }

    /// The lazy claim: when a call touches a session whose worker is gone
    /// (`running` with an expired lease), claim and recover it now rather
    /// than at the next reaper pass. Returns whether this call claimed it.
    pub async fn recover_if_orphaned(&self, row: &SessionRow) -> bool {
        if self.agent.is_none() || !row.is_orphaned(OffsetDateTime::now_utc()) {
            return false;
        }
        // No free slot: the reaper (here or elsewhere) recovers it later.
        let Some(permit) = self.slots.take(1).pop() else {
            return false;
        };
        match self.log.burst_store().claim_orphan(row.id).await {
            Ok(Some(lease)) => {
                tracing::warn!(session = %row.id, epoch = lease.epoch(), "claimed an orphaned session on access; recovering it");
                metrics::counter!("inquest_orphans_recovered_total", "by" => "access").increment(1);
                self.spawn_claimed(lease, Mode::Recovered, self.slots.bind(permit));
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(session = %row.id, error = %error_chain(&e), "cannot claim an orphaned session");
                false
            }
        }
    }

    fn accepting(&self) -> Option<Arc<Agent>> {
        if self.shutdown.is_cancelled() || self.tasks.is_closed() {
            return None;
        }
        self.agent.clone()
    }

    /// `parent`: the span whose trace the burst joins (`None`: a new one).
    fn spawn_pending(&self, session: SessionId, mode: Mode, parent: Option<tracing::Span>) {
        let Some(agent) = self.accepting() else {
            return;
        };
        let Some(permit) = self.slots.take(1).pop() else {
            // Every slot is busy: the session stays pending, and the reaper
            // claims it (oldest first) when one frees.
            tracing::debug!(%session, running = self.running_bursts(), "no free burst slot; the session waits pending");
            self.slots.deferred.store(true, Ordering::SeqCst);
            metrics::counter!("inquest_bursts_deferred_total").increment(1);
            // A slot freed between the take and the flag woke a reaper
            // that saw no flag: wake it again so it looks.
            self.slots.freed.notify_one();
            return;
        };
        let slot = self.slots.bind(permit);
        let this = self.clone();
        let (span, trace_id) = burst_span(session, mode, parent.as_ref());
        self.spawn_agent(
            async move {
                let _slot = slot;
                let claim = this
                    .log
                    .claim_burst_traced(session, trace_id)
                    .instrument(tracing::info_span!("lease.claim", kind = "pending"))
                    .await;
                let (burst, cancel) = match claim {
                    Ok(Some(claimed)) => claimed,
                    // Claimed elsewhere, or cancelled before it started.
                    Ok(None) => return,
                    Err(e) => {
                        tracing::error!(%session, error = %error_chain(&e), "cannot claim the burst");
                        return;
                    }
                };
                this.drive(agent, burst, cancel, mode).await;
            }
            .instrument(span),
        );
    }

    fn spawn_claimed(&self, lease: Lease, mode: Mode, slot: Slot) {
        let Some(agent) = self.accepting() else {
            // Claimed while shutting down: hand it straight back.
            let store = self.log.burst_store().clone();
            self.spawn_agent(async move {
                if let Err(e) = store.release_lease(&lease).await {
                    tracing::warn!(session = %lease.session(), error = %error_chain(&e), "cannot release a claimed lease");
                }
            });
            return;
        };
        // Claimed by the reaper or on access: no request's trace to join.
        let (span, trace_id) = burst_span(lease.session(), mode, None);
        let store = self.log.burst_store().clone();
        let (burst, cancel) = self.log.adopt(lease);
        let this = self.clone();
        self.spawn_agent(
            async move {
                let _slot = slot;
                // The claim happened before this burst's trace existed;
                // its id is stored right after, fenced by the lease.
                if let Some(id) = trace_id {
                    let recorded = store
                        .record_trace_id(burst.lease(), id)
                        .instrument(tracing::info_span!("lease.claim", kind = "adopted"))
                        .await;
                    if let Err(e) = recorded {
                        tracing::warn!(error = %error_chain(&e), "cannot record the burst's trace id");
                    }
                }
                this.drive(agent, burst, cancel, mode).await
            }
            .instrument(span),
        );
    }

    /// Runs a claimed burst to its end, with the lease keeper beside it.
    async fn drive(
        &self,
        agent: Arc<Agent>,
        burst: BurstLog,
        cancel: CancellationToken,
        mode: Mode,
    ) {
        let session = burst.session();
        metrics::counter!("inquest_bursts_started_total", "mode" => mode.as_str()).increment(1);
        // Every burst runs under a lease it claimed: fresh and confirmed
        // from `pending`, recovered by taking over an expired one.
        metrics::counter!("inquest_lease_claims_total", "mode" => mode.as_str()).increment(1);
        let lost = CancellationToken::new();
        let (store, lease) = (self.log.burst_store().clone(), burst.lease().clone());
        let held = Held {
            session: lease.session(),
            epoch: lease.epoch(),
            sent_at: lease.sent_at(),
        };
        let keeper = keep_lease(
            move || {
                let (store, lease) = (store.clone(), lease.clone());
                async move { store.renew_lease(&lease).await }
            },
            held,
            burst.clock().clone(),
            KeeperTiming {
                every: self.lease.renew_interval(),
                ttl: self.lease.ttl,
                margin: self.lease.margin(),
            },
            lost.clone(),
            cancel.clone(),
            burst.interrupt().clone(),
        );
        let work = async {
            let classes = |tool: &str| agent.side_effect(tool);
            let start = match resume::prepare(&burst, &classes, mode, self.max_notice_bytes).await {
                Prepared::Run(start) => start,
                Prepared::Stopped => return None,
                Prepared::Failed(e) => {
                    self.end_without_burst(&burst, e).await;
                    return None;
                }
            };
            let stop = Stop {
                cancel,
                interrupt: burst.interrupt().clone(),
                interrupt_grace: self.interrupt_grace,
                shutdown: self.shutdown.clone(),
                abandon: self.abandon.clone(),
                lease_lost: lost.clone(),
            };
            let approved = start.approved.iter().map(|(_, c)| c.id.clone()).collect();
            burst.set_approval(self.approvals.for_tenant(&start.tenant), approved);
            Some(
                agent
                    .run_burst_approved(
                        &burst,
                        session,
                        start.turns,
                        start.transcript,
                        start.approved,
                        start.skills.as_deref(),
                        &stop,
                    )
                    .await,
            )
        };
        let report = tokio::select! {
            report = work => report,
            never = keeper => match never {},
        };
        if let Some(report) = report {
            self.finish(&burst, report).await;
        } else if lost.is_cancelled() {
            burst.abandon();
        }
    }

    /// A burst whose preparation could not read or write the store: an
    /// outage hands it over (recovery retries it), a lost lease leaves it,
    /// anything else ends it `store_failed`.
    async fn end_without_burst(&self, burst: &BurstLog, e: TurnLogError) {
        let session = burst.session();
        let reason = match &e {
            TurnLogError::Unavailable(_) => ExitReason::StoreUnavailable,
            // Lost turns found at the claim leave the session to the next
            // claim, as a lost lease does.
            e if matches!(
                e.store_error(),
                Some(
                    inquest_store::StoreError::LeaseLost { .. }
                        | inquest_store::StoreError::HeadBehind { .. }
                )
            ) =>
            {
                ExitReason::LeaseLost
            }
            TurnLogError::DeadlinePassed => ExitReason::LeaseLost,
            _ => ExitReason::StoreFailed,
        };
        tracing::warn!(%session, exit_reason = %reason, error = %error_chain(&e), "burst could not be prepared");
        self.land(burst, reason).await;
    }

    /// Lands the burst: report and status (fenced), a hand-over at
    /// shutdown, nothing at all once the lease is lost.
    async fn finish(&self, burst: &BurstLog, report: BurstReport) {
        let session = burst.session();
        let exit = report.exit_reason;
        if let Ending::Close(_) = exit.ending() {
            let counters = serde_json::json!({
                "tool_calls": report.audit.tool_calls,
                "input_tokens": report.audit.input_tokens,
                "output_tokens": report.audit.output_tokens,
                "skills_loaded": report.skills_loaded,
                "skills_used": report.skills_used,
                "servers_used": report.servers_used,
                // This burst's model calls (its turns and author call).
                "burst": {
                    "tool_calls": report.burst_tool_calls,
                    "author_input_tokens": report.author_usage.input_tokens,
                    "author_output_tokens": report.author_usage.output_tokens,
                    "calls": report.burst_usage.calls,
                    "input_tokens": report.burst_usage.input_tokens,
                    "output_tokens": report.burst_usage.output_tokens,
                    "cache_read_input_tokens": report.burst_usage.cache_read_input_tokens,
                    "cache_creation_input_tokens": report.burst_usage.cache_creation_input_tokens,
                    "cost_nano_usd": report.burst_usage.cost.known.nanos(),
                    "cost_unknown_calls": report.burst_usage.cost.unknown_calls,
                },
            });
            let saved = burst
                .save_report(NewReport {
                    burst: report.burst,
                    exit_reason: exit,
                    summary: report.summary,
                    counters,
                    active_ms: report.active_time_ms,
                })
                .await;
            match saved {
                Ok(()) => {}
                Err(TurnLogError::Unavailable(e)) => {
                    tracing::warn!(%session, error = %error_chain(&e), "store unavailable before the report landed; handing the session over");
                    self.land(burst, ExitReason::StoreUnavailable).await;
                    return;
                }
                Err(e)
                    if matches!(
                        e.store_error(),
                        Some(inquest_store::StoreError::LeaseLost { .. })
                    ) =>
                {
                    tracing::warn!(%session, error = %error_chain(&e), "lease lost before the report landed; leaving the session to its new owner");
                    burst.abandon();
                    return;
                }
                Err(e) => {
                    tracing::error!(%session, error = %error_chain(&e), "cannot save the burst's report")
                }
            }
        }
        self.land(burst, exit).await;
    }

    /// Records how the burst ended, as its exit reason's
    /// [`ExitReason::ending`] says: a fenced close, a hand-over, or
    /// nothing. A close the store cannot take in time becomes a hand-over
    /// (the next claimer finds the final answer and only reports).
    async fn land(&self, burst: &BurstLog, exit: ExitReason) {
        let session = burst.session();
        metrics::counter!("inquest_bursts_ended_total", "exit_reason" => exit.as_str())
            .increment(1);
        match exit.ending() {
            Ending::Abandon => {
                tracing::warn!(%session, "lease lost or past its deadline: this burst writes nothing more");
                burst.abandon();
                // A failover takes seconds to a minute; the burst's slot
                // is held meanwhile, as its lease would have been.
                burst
                    .look_for_lost_turns(self.lease.ttl.max(LOST_TURNS_PATIENCE))
                    .await;
            }
            Ending::HandOver => {
                // One look while the lease is still ours: the next claimer
                // must not take seqs a failover lost for new turns.
                burst.look_for_lost_turns(Duration::ZERO).await;
                match burst.hand_over().await {
                    Ok(true) => {
                        tracing::info!(%session, exit_reason = %exit, "burst handed over to the other replicas")
                    }
                    Ok(false) => tracing::info!(%session, "burst no longer ours"),
                    Err(e) => {
                        tracing::warn!(%session, error = %error_chain(&e), "cannot hand the burst over; its lease will expire instead");
                        burst
                            .look_for_lost_turns(self.lease.ttl.max(LOST_TURNS_PATIENCE))
                            .await;
                    }
                }
            }
            Ending::Close(_) => match burst.close(exit).await {
                // The close turned queued messages into the next burst's
                // turns: start it here (any replica's reaper would too).
                Ok(
                    inquest_store::Transition::Changed(row)
                    | inquest_store::Transition::Unchanged(row),
                ) if row.status == inquest_core::SessionStatus::Pending => {
                    tracing::info!(%session, "queued messages open the next burst");
                    self.start(session);
                }
                Ok(_) => {}
                Err(TurnLogError::Unavailable(e)) => {
                    tracing::warn!(%session, error = %error_chain(&e), "store unavailable at the burst's end; its lease will expire and recovery lands it");
                    burst.abandon();
                }
                Err(e) => {
                    tracing::error!(%session, error = %error_chain(&e), "cannot record the burst's end");
                    burst.abandon();
                }
            },
        }
    }
}

/// A burst's root span (`inquest_agent::BURST_SPAN`) and its trace id,
/// recorded on the span as `trace_id` so every log line of the burst
/// carries it. Never a tracing child of `parent` (an RPC returns before its
/// burst ends); its OpenTelemetry parent is `parent`'s span, so the burst
/// is in the request's trace, or it starts a new trace.
fn burst_span(
    session: SessionId,
    mode: Mode,
    parent: Option<&tracing::Span>,
) -> (tracing::Span, Option<String>) {
    let span = tracing::info_span!(
        parent: None,
        "burst",
        session_id = %session,
        mode = mode.as_str(),
        trace_id = tracing::field::Empty,
        burst = tracing::field::Empty,
        exit_reason = tracing::field::Empty,
    );
    if let Some(parent) = parent {
        crate::trace::follow(&span, parent);
    }
    let trace_id = crate::trace::trace_id(&span);
    if let Some(id) = &trace_id {
        span.record("trace_id", id.as_str());
    }
    (span, trace_id)
}
