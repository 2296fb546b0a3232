//! PostgreSQL persistence for Inquest.
//!
//! [`Store`] owns the connection pool and is the only way the rest of the
//! service reads or writes durable state. Every call goes through
//! [`Store::run`], which times it, bounds it with a timeout and classifies
//! its failure (see [`StoreError`]). Turn appends additionally run detached
//! from the caller (see [`Store::append_turn`]).
//!
//! [`embedded`] runs a private PostgreSQL cluster for the zero-config
//! default and for test runs.
//!
//! Also here: leases and their fencing epoch ([`lease`]), the session
//! state machine's transitions as conditional updates (`bursts.rs`, with
//! statuses bound from `inquest_core::Event`, never spelled in SQL), group
//! commit of appends (`group.rs`), LISTEN/NOTIFY (`listen.rs`,
//! [`notify`]) and the migrations (`migrations/` at the repository root).
//! Must not depend on: the engine, the agent, the gRPC edge or the wire
//! types. Start reading at [`Store::run`], then `turns.rs` and `lease.rs`.

mod alerts;
mod approvals;
mod audit;
#[cfg(feature = "bench")]
mod bench;
mod bursts;
pub mod embedded;
mod erase;
mod error;
mod events;
mod failover;
mod forks;
mod group;
mod idempotency;
mod incidents;
mod lease;
pub mod listen;
mod migrate;
pub mod notify;
mod partitions;
mod queued;
mod reports;
mod rows;
mod schedules;
mod sessions;
mod tenants;
mod text;
pub mod tls;
mod tokens;
mod turns;
mod webhooks;

use std::{future::Future, time::Duration};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_util::task::TaskTracker;
use tracing::Instrument;

pub use alerts::{
    AlertEvent, AlertNotification, AlertOrigin, AlertSeen, AlertsRecorded, FollowUp,
    PendingFollowUp, StartReservation,
};
pub use approvals::{ApprovalRow, DecideOutcome, NewApproval};
pub use audit::{AuditEntry, AuditEvent, AuditPage};
pub use bursts::{CallerEvent, Queueing, SendOutcome, Transition};
pub use erase::{Erased, KeepFor, RetentionBatch, Target as EraseTarget};
pub use error::StoreError;
pub use events::{EventContext, EventRow, Failing};
pub use forks::{ForkOutcome, ForkRequest, Forked};
pub use group::{DEFAULT_APPEND_STATEMENTS, MAX_GROUP};
pub use idempotency::EXPIRE_BATCH;
pub use incidents::{Incident, IncidentPage, IncidentSource};
pub use lease::{Lease, Renewal, ReplicaId};
pub use listen::{ListenEvent, ListenerConfig, run_listener};
pub use queued::QueuedMessage;
pub use reports::{NewReport, ReportRow};
pub use schedules::{FireTick, ScheduleState, TickOutcome, TickRow};
pub use sessions::{SessionPage, SessionRow, StartedSession};
pub use tokens::{ApiToken, IssuedToken};
pub use turns::{Appended, TurnPage, WriteId};
pub use webhooks::{
    AttemptPage, AttemptRow, BACKLOG_COUNT_CAP, Backlog, MAX_ATTEMPTS_KEPT, NewAttempt, NewWebhook,
    WebhookRow,
};

/// Tunables of the store. Defaults suit one replica on a small machine.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub database_url: String,
    /// Size of the pool API calls use: reads, health probes, the
    /// writes of `StartSession` / `SendMessage` and other caller calls.
    pub max_connections: usize,
    /// Size of the separate pool running bursts use (turn writes, lease
    /// claims and renewals, closes, the reads a burst's preparation makes).
    /// A flood of reads cannot take these connections, so it cannot make a
    /// burst's writes or its lease renewals wait (see [`Store::for_bursts`]).
    pub burst_connections: usize,
    /// Bound on each read and each non-turn write.
    pub op_timeout: Duration,
    /// Bound on each turn write. Independent of any caller's cancellation.
    pub turn_write_timeout: Duration,
    /// Bound on waiting for or opening a pooled connection. A database that
    /// is down is reported after this long.
    pub connect_timeout: Duration,
    /// This process: owner of the leases it takes, origin of the
    /// notifications it sends.
    pub replica_id: ReplicaId,
    /// How long a lease claim or renewal holds.
    pub lease_ttl: Duration,
    /// Where the burst lane's connections are opened and driven (`None`:
    /// wherever one is asked for). A socket is bound to the reactor of the
    /// runtime it is opened on, and a connection's I/O task is spawned
    /// beside it; the server puts the burst lane's on the runtime bursts
    /// run on, so a turn write's reply is read there even when the
    /// connection was asked for by an RPC handler (an on-access claim) on
    /// the serving runtime.
    pub burst_runtime: Option<tokio::runtime::Handle>,
    /// How many turn-append statements each lane runs at once. Appends
    /// that arrive while these are busy wait and go out together, one
    /// statement for up to [`MAX_GROUP`] sessions (group commit, see
    /// `group.rs`); with fewer appends in flight each goes out alone.
    pub append_statements: usize,
    /// How long the database lets one of this process's transactions sit
    /// idle between its statements before it ends the transaction (and the
    /// connection), releasing its locks. The store's transactions send
    /// their statements back to back, so only a frozen process (SIGSTOP, a
    /// stalled VM) waits that long, and meanwhile it holds the rows it
    /// wrote: a session row another replica must claim, an idempotency key
    /// a retry on another replica must find. Zero: no limit.
    pub idle_in_transaction_timeout: Duration,
}

impl StoreConfig {
    pub fn new(database_url: impl Into<String>) -> Self {
        Self {
            database_url: database_url.into(),
            max_connections: 16,
            burst_connections: 8,
            op_timeout: Duration::from_secs(10),
            turn_write_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(3),
            replica_id: ReplicaId::generate(),
            lease_ttl: Duration::from_secs(30),
            burst_runtime: None,
            append_statements: DEFAULT_APPEND_STATEMENTS,
            idle_in_transaction_timeout: DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT,
        }
    }
}

/// [`StoreConfig::idle_in_transaction_timeout`] by default: a third of
/// the default lease TTL, so a session a frozen replica was writing is
/// free again well before another replica may claim it. (The server
/// derives it from its own `lease.ttl` the same way.)
pub const DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(10);

/// The shortest idle-in-transaction timeout the server derives from a
/// short lease TTL: a process merely slow to be scheduled on a loaded
/// machine must not have its transactions ended.
pub const MIN_IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(2);

/// Opens connections as deadpool's default does, spawning each one's I/O
/// task on `runtime` when given ([`StoreConfig::burst_runtime`]).
struct SpawnOn<T> {
    tls: T,
    runtime: Option<tokio::runtime::Handle>,
    /// [`StoreConfig::idle_in_transaction_timeout`], set on each connection.
    idle_in_transaction: Duration,
}

impl<T> deadpool_postgres::Connect for SpawnOn<T>
where
    T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket> + Clone + Sync + Send + 'static,
    T::Stream: Sync + Send,
    T::TlsConnect: Sync + Send,
    <T::TlsConnect as tokio_postgres::tls::TlsConnect<tokio_postgres::Socket>>::Future: Send,
{
    fn connect(
        &self,
        pg: &tokio_postgres::Config,
    ) -> std::pin::Pin<
        Box<
            dyn Future<
                    Output = Result<
                        (tokio_postgres::Client, tokio::task::JoinHandle<()>),
                        tokio_postgres::Error,
                    >,
                > + Send
                + '_,
        >,
    > {
        let tls = self.tls.clone();
        let pg = pg.clone();
        let runtime = self.runtime.clone();
        let idle = self.idle_in_transaction;
        Box::pin(async move {
            let Some(runtime) = runtime else {
                return open(pg, tls, idle).await;
            };
            // Connect there, not just drive there: a socket answers to the
            // reactor of the runtime it was opened on, so one opened on the
            // serving runtime (a claim made by an RPC handler) would wake
            // its connection task only when that runtime's busy workers next
            // poll for I/O, milliseconds late under a fan-out.
            // Owned: a caller that gives up (the pool's create timeout)
            // ends the attempt, as it would end one made here.
            let mut attempt = AbortOnDrop(runtime.spawn(open(pg.clone(), tls.clone(), idle)));
            match (&mut attempt.0).await {
                Ok(opened) => opened,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // That runtime is shutting down: open it here instead.
                Err(_) => open(pg, tls, idle).await,
            }
        })
    }
}

/// A task that ends when its handle is dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Opens a connection, spawns its I/O task on the current runtime and
/// sets its `idle_in_transaction_session_timeout` (a `SET` after connecting
/// rather than a startup option, which a connection pooler such as
/// PgBouncer refuses by default).
async fn open<T>(
    pg: tokio_postgres::Config,
    tls: T,
    idle_in_transaction: Duration,
) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>
where
    T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket>,
    T::Stream: Send + 'static,
{
    let (client, connection) = pg.connect(tls).await?;
    let drive = tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "database connection ended with an error");
        }
    });
    // (Should this future be dropped before the answer, the client goes
    // with it, and its connection task ends on its own.)
    if !idle_in_transaction.is_zero()
        && let Err(e) = client
            .batch_execute(&format!(
                // Milliseconds, the setting's unit.
                "SET idle_in_transaction_session_timeout = {}",
                idle_in_transaction.as_millis().max(1)
            ))
            .await
    {
        drive.abort();
        return Err(e);
    }
    Ok((client, drive))
}

/// Handle to the database. Cheap to clone.
///
/// Two pools back it: the API lane (what [`Store::connect`] returns) and
/// the burst lane ([`Store::for_bursts`]). Every method runs on the lane of
/// the handle it is called on, so a caller picks its lane once, by which
/// handle it holds.
#[derive(Clone)]
pub struct Store {
    /// The pool this handle's operations take connections from; deadpool
    /// hands one out per operation and takes it back when the operation's
    /// future completes or is dropped.
    pool: Pool,
    /// The turn appends waiting for a statement on this handle's lane.
    appends: std::sync::Arc<group::AppendQueue>,
    /// Both lanes, so either handle can make the other.
    lanes: Lanes,
    /// Detached turn writes. A write keeps running when its caller goes
    /// away; shutdown waits on this tracker so none is cut off.
    writes: TaskTracker,
    op_timeout: Duration,
    turn_write_timeout: Duration,
    replica: ReplicaId,
    lease_ttl: Duration,
}

/// One pool's occupancy, for metrics.
#[derive(Debug, Clone, Copy)]
pub struct LaneStatus {
    /// `"api"` or `"burst"`.
    pub lane: &'static str,
    /// Connections open now.
    pub size: usize,
    /// Of those, idle.
    pub available: usize,
    /// Callers waiting for a connection.
    pub waiting: usize,
    pub max_size: usize,
}

/// The two pools behind a [`Store`].
#[derive(Clone)]
struct Lanes {
    api: Pool,
    burst: Pool,
    api_appends: std::sync::Arc<group::AppendQueue>,
    burst_appends: std::sync::Arc<group::AppendQueue>,
}

impl Store {
    /// Builds the pools. Connections are opened lazily, so this succeeds
    /// even while the database is down; the first operation reports it.
    /// The handle returned runs on the API lane.
    pub fn connect(config: &StoreConfig) -> Result<Self, StoreError> {
        let (mut pg, tls) = tls::parse(&config.database_url).map_err(|e| match e {
            tls::DbTlsError::Url(e) => StoreError::InvalidUrl(e),
            tls::DbTlsError::Setting(s) => StoreError::Config(s),
        })?;
        if let Some(password) = pg.get_password() {
            inquest_redact::register(&String::from_utf8_lossy(password));
        }
        pg.connect_timeout(config.connect_timeout);
        if pg.get_application_name().is_none() {
            pg.application_name("inquest");
        }
        // The connect timeout bounds each host of a multi-host URL in
        // turn; a pooled connection may have to try them all (the first
        // one partitioned away answers nothing until its timeout), so the
        // pool waits that long for a new connection before giving up.
        let hosts = u32::try_from(pg.get_hosts().len().max(1)).unwrap_or(1);
        let create_timeout = config.connect_timeout.saturating_mul(hosts);
        let pool = |size: usize, runtime: Option<tokio::runtime::Handle>| {
            let manager = Manager::from_connect(
                pg.clone(),
                SpawnOn {
                    tls: tls.clone(),
                    runtime,
                    idle_in_transaction: config.idle_in_transaction_timeout,
                },
                ManagerConfig {
                    recycling_method: RecyclingMethod::Fast,
                },
            );
            Pool::builder(manager)
                .max_size(size)
                .runtime(Runtime::Tokio1)
                .wait_timeout(Some(config.connect_timeout))
                .create_timeout(Some(create_timeout))
                .recycle_timeout(Some(config.connect_timeout))
                .build()
                .map_err(|e| StoreError::Config(e.to_string()))
        };
        let lanes = Lanes {
            api: pool(config.max_connections, None)?,
            burst: pool(
                config.burst_connections.max(1),
                config.burst_runtime.clone(),
            )?,
            api_appends: group::AppendQueue::new(config.append_statements),
            burst_appends: group::AppendQueue::new(config.append_statements),
        };
        Ok(Self {
            pool: lanes.api.clone(),
            appends: lanes.api_appends.clone(),
            lanes,
            writes: TaskTracker::new(),
            op_timeout: config.op_timeout,
            turn_write_timeout: config.turn_write_timeout,
            replica: config.replica_id.clone(),
            lease_ttl: config.lease_ttl,
        })
    }

    /// The same store on the burst lane: its own pool, which API reads and
    /// writes never use. Running bursts hold this handle.
    pub fn for_bursts(&self) -> Self {
        Self {
            pool: self.lanes.burst.clone(),
            appends: self.lanes.burst_appends.clone(),
            ..self.clone()
        }
    }

    /// How full each lane's pool is.
    pub fn pool_status(&self) -> [LaneStatus; 2] {
        let status = |lane, pool: &Pool| {
            let s = pool.status();
            LaneStatus {
                lane,
                size: s.size,
                available: s.available,
                waiting: s.waiting,
                max_size: s.max_size,
            }
        };
        [
            status("api", &self.lanes.api),
            status("burst", &self.lanes.burst),
        ]
    }

    /// One round trip to the database; what the health check asks.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.run("ping", async |client| {
            client.simple_query("SELECT 1").await?;
            Ok(())
        })
        .await
    }

    /// Stops accepting new turn writes and waits for those in flight.
    pub async fn drain_writes(&self) {
        self.writes.close();
        self.writes.wait().await;
    }

    /// Runs one database operation on a pooled connection: traced as a span
    /// named after `op`, bounded by the op timeout, errors classified.
    ///
    /// Nothing is retried here. Reads could be, but a caller that gets
    /// `Unavailable` is better served by its own retry policy (a gRPC client
    /// retries UNAVAILABLE); writes must not be blindly retried because a
    /// commit whose acknowledgement was lost would be applied twice.
    async fn run<T, F>(&self, op: &'static str, f: F) -> Result<T, StoreError>
    where
        F: AsyncFnOnce(&mut deadpool_postgres::Client) -> Result<T, StoreError>,
    {
        self.run_with_timeout(op, self.op_timeout, f).await
    }

    async fn run_with_timeout<T, F>(
        &self,
        op: &'static str,
        limit: Duration,
        f: F,
    ) -> Result<T, StoreError>
    where
        F: AsyncFnOnce(&mut deadpool_postgres::Client) -> Result<T, StoreError>,
    {
        self.run_measured(op, Some(limit), f).await
    }

    /// [`Store::run_with_timeout`], or with no timer of its own when
    /// `limit` is `None`: for a caller already bounded by one (a timer
    /// costs a registration in the runtime's timer wheel and a wake-up).
    async fn run_measured<T, F>(
        &self,
        op: &'static str,
        limit: Option<Duration>,
        f: F,
    ) -> Result<T, StoreError>
    where
        F: AsyncFnOnce(&mut deadpool_postgres::Client) -> Result<T, StoreError>,
    {
        let span = tracing::debug_span!("store", op, elapsed_ms = tracing::field::Empty);
        let started = std::time::Instant::now();
        let work = async {
            let client = self.pool.get().await.map_err(StoreError::from_pool)?;
            let mut in_flight = InFlight(Some(client));
            let result = match in_flight.0.as_mut() {
                Some(client) => f(client).await,
                None => Err(StoreError::Internal("pooled connection missing".into())),
            };
            match &result {
                Err(e) if e.node_refuses_writes() => in_flight.discard(),
                _ => in_flight.done(),
            }
            result
        };
        let result = match limit {
            Some(limit) => match tokio::time::timeout(limit, work)
                .instrument(span.clone())
                .await
            {
                Ok(result) => result,
                Err(_) => Err(StoreError::Timeout { op, after: limit }),
            },
            None => work.instrument(span.clone()).await,
        };
        span.record("elapsed_ms", started.elapsed().as_millis() as u64);
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e) => e.class(),
        };
        metrics::counter!("inquest_store_calls_total", "op" => op, "outcome" => outcome)
            .increment(1);
        metrics::histogram!("inquest_store_call_duration_seconds", "op" => op)
            .record(started.elapsed().as_secs_f64());
        result
    }

    /// Runs `work` so that it completes even if the caller's future is
    /// dropped (a cancelled request, a cancelled burst), and waits for it.
    ///
    /// The work is polled in the caller's task, with no hand-off to another
    /// task and no thread woken for it; only a caller that goes away before
    /// it is done hands what is left to a task of the store's tracker
    /// ([`Detached`]'s `Drop`). Either way the tracker counts it until it
    /// ends, so shutdown waits for it.
    fn detached<T, Fut>(
        &self,
        work: Fut,
    ) -> impl Future<Output = Result<T, StoreError>> + use<T, Fut>
    where
        T: Send + 'static,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let work = if self.writes.is_closed() {
            None
        } else {
            Some(Box::pin(self.writes.track_future(work)) as Write<T>)
        };
        let detached = Detached { work };
        async move {
            // Every detached operation is a write: one that timed out was
            // sent and may still have committed.
            detached.await.map_err(|e| match e {
                StoreError::Timeout { op, after } => StoreError::OutcomeUnknown { op, after },
                other => other,
            })
        }
    }
}

/// A pooled connection lent to one store call. A call dropped before it
/// finished (its timeout, or its caller's) may have left a statement in
/// the database's hands: one waiting on a lock a frozen client holds can
/// wait for as long as that client is frozen, and every later call on the
/// same connection would queue behind it and time out in turn. So such a
/// connection is taken out of the pool and closed (deadpool aborts its
/// I/O task), and the pool opens a fresh one when it needs one. The
/// statement itself goes on in its backend until it ends; its outcome is
/// what the caller was told it is: unknown.
struct InFlight(Option<deadpool_postgres::Client>);

impl InFlight {
    /// The call finished: the connection goes back to the pool.
    fn done(mut self) {
        drop(self.0.take());
    }

    /// The connection is to a node that refuses writes now (demoted after
    /// a switchover): closed rather than handed back, so the next call
    /// opens a fresh one, which the multi-host URL's
    /// `target_session_attrs=read-write` takes to the new primary.
    fn discard(mut self) {
        if let Some(client) = self.0.take() {
            tracing::warn!(
                "the database node refused a write as read-only: its connection is closed"
            );
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            tracing::debug!(
                "a store call ended before its statement answered: its connection is closed"
            );
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

/// A write polled by its caller that finishes on its own if the caller
/// drops it first (see [`Store::detached`]). `None`: refused at shutdown,
/// or done.
struct Detached<T: Send + 'static> {
    work: Option<Write<T>>,
}

/// A store write, boxed so that it can move to a task of its own halfway.
type Write<T> = std::pin::Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send>>;

impl<T: Send + 'static> Future for Detached<T> {
    type Output = Result<T, StoreError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let Some(work) = self.work.as_mut() else {
            return std::task::Poll::Ready(Err(StoreError::ShuttingDown));
        };
        // A panic inside the write is this call's error, as it was when
        // the write ran in a task of its own; the caller's task goes on.
        let polled =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work.as_mut().poll(cx)));
        match polled {
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Ok(std::task::Poll::Ready(result)) => {
                self.work = None;
                std::task::Poll::Ready(result)
            }
            Err(_) => {
                self.work = None;
                std::task::Poll::Ready(Err(StoreError::Internal("a store write panicked".into())))
            }
        }
    }
}

impl<T: Send + 'static> Drop for Detached<T> {
    fn drop(&mut self) {
        let Some(work) = self.work.take() else {
            return;
        };
        // The caller went away mid-write: what was sent may commit, so the
        // write runs to its end (its own timeout bounds it) in a task the
        // tracker still counts. Outside a runtime (it is shutting down)
        // there is nowhere to run it; it is dropped as its task would be.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = work.await;
            });
        }
    }
}
