//! Building and running the server. `main` and the tests start the very
//! same [`Application`].

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use inquest_broadcast::TurnBroadcaster;
use inquest_core::Limits;
use inquest_store::{
    Store,
    embedded::{EmbeddedOptions, EmbeddedPostgres},
};
use tokio::net::TcpListener;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tonic::service::LayerExt as _;

use crate::agent::{BuiltAgent, build_agent};
use crate::limits::ApiLimits;
use crate::ops::health::DbHealth;
use crate::shutdown::{ServerFuture, finish_in_flight_work, serve_until_shutdown};
use crate::{
    config::{Config, WatchSection},
    service::InvestigationsService,
    watch::{WatchMetrics, Watches},
};
use inquest_engine::LeaseSection;
use inquest_engine::agent_runtime::AgentRuntime;
use inquest_engine::runner::Runner;
use inquest_engine::turn_log::LeaseTiming;
use inquest_engine::turn_log::TurnLog;

/// A server bound to its port, connected and migrated, not yet serving.
pub struct Application {
    listener: TcpListener,
    /// The admin HTTP listener (`[admin]`), when enabled and bound.
    admin: Option<TcpListener>,
    /// `[auth] mode = "required"`: the token verifier (none: every caller
    /// is the default tenant's admin).
    auth: Option<crate::edge::auth::Verifier>,
    /// The deployment's page-token key (from the database).
    pages: crate::service::pages::PageTokens,
    /// Without authentication on a loopback listener: the names answered
    /// (DNS rebinding). `None`: every name.
    hosts: Option<crate::edge::hosts::AllowedHosts>,
    /// `[tls]`: the certificate new gRPC connections get (none: plaintext).
    tls: Option<crate::edge::tls::Certificates>,
    store: Store,
    /// The persist-then-publish path and its broadcaster. Exposed so tests
    /// (and the agent loop) write turns exactly as the server does.
    log: TurnLog,
    watch: WatchSection,
    lease: LeaseSection,
    /// The database, for the dedicated LISTEN connection.
    database_url: String,
    metrics: Arc<WatchMetrics>,
    /// Database round trips the health prober made.
    health_probes: Arc<AtomicU64>,
    limits: Limits,
    /// `limits.max_running_bursts`.
    max_running_bursts: usize,
    /// `[approval]` and each tenant's own.
    approvals: inquest_engine::ApprovalGates,
    /// `limits.feed_queue_capacity`.
    feed_queue_capacity: usize,
    /// `[limits] max_connections` and `connection_preface_timeout`.
    connections: crate::edge::conn::ConnectionLimits,
    /// `[limits] max_concurrent_streams`: HTTP/2 streams per connection.
    max_concurrent_streams: u32,
    /// `[limits]`: request and response sizes, notice size, watch caps.
    api: ApiLimits,
    grace: Duration,
    /// Idempotency keys older than this are deleted, every
    /// `key_cleanup_interval`.
    key_retention: Duration,
    /// `[[events.webhooks]]`, secrets read, and the API webhooks'
    /// sender: delivered by `inquest_engine::delivery` once the replica
    /// serves.
    deliveries: inquest_engine::delivery::Deliveries,
    /// `[webhooks]`: where API webhooks may send.
    webhook_policy: inquest_engine::targets::TargetPolicy,
    key_cleanup_interval: Duration,
    /// The agent (none without providers) and its MCP connections.
    agent: BuiltAgent,
    /// `Config::require_agent` and no agent: burst-opening calls are
    /// refused.
    refuse_bursts: bool,
    /// `[tenants]`: per-tenant limits on new bursts.
    tenants: crate::config::tenants::TenantsSection,
    /// `[retention]`: what leaves, and when (`crate::retention`).
    retention: crate::retention::RetentionSection,
    /// Where bursts run (`[runtime] agent_threads`).
    runtime: AgentRuntime,
    /// `[alerts]`: the webhook's bounds and triggers.
    alerts: crate::alerts::config::AlertsSection,
    /// `[[schedules]]`, compiled.
    schedules: Arc<Vec<crate::schedules::Schedule>>,
}

impl Application {
    /// Connects to `database_url`, applies migrations and binds
    /// `config.listen` (port 0 picks a free port).
    pub async fn build(config: &Config, database_url: &str) -> anyhow::Result<Self> {
        // Unusable TLS files stop startup before anything else happens.
        let tls = config
            .tls
            .as_ref()
            .map(crate::edge::tls::Certificates::load)
            .transpose()?;
        // Unreadable webhook secrets too: a webhook configured is one
        // delivered to.
        let deliveries = config
            .events
            .webhooks
            .iter()
            .map(inquest_engine::webhooks::WebhookSection::load)
            .collect::<Result<Vec<_>, _>>()
            .and_then(|hooks| {
                inquest_engine::delivery::Deliveries::new(
                    hooks,
                    config.webhooks,
                    config.console.public_url.clone(),
                )
            })
            .map_err(anyhow::Error::msg)?;
        let runtime = AgentRuntime::new(config.runtime.agent_threads)?;
        // After the agent runtime's threads exist (they keep the process's
        // priority; a thread inherits its creator's) and after an embedded
        // PostgreSQL was started (`serve`).
        if runtime.handle().is_some() && config.runtime.serving_nice > 0 {
            match inquest_engine::priority::lower_serving_workers(config.runtime.serving_nice) {
                // An internal detail an operator rarely needs at start.
                Ok(nice) => tracing::debug!(
                    nice,
                    "serving threads yield to bursts: they run at this nice value from their next wake-up (runtime.serving_nice)"
                ),
                Err(e) => tracing::warn!(
                    error = %e,
                    "cannot read this thread's priority; serving threads keep the process's"
                ),
            }
        }
        let store = Store::connect(&inquest_store::StoreConfig {
            burst_runtime: runtime.handle().cloned(),
            ..config.store_config(database_url)
        })
        .context("configuring the database pool")?;
        store.migrate().await.context("migrating the database")?;
        // This month's turns partition and the next ones, before the first
        // append (the migration made them too, but a replica may start
        // months after it ran).
        store
            .make_turn_partitions()
            .await
            .context("making the turns table's partitions")?;
        let pages = crate::service::pages::PageTokens::new(
            &store
                .page_token_key()
                .await
                .context("reading the page-token key")?,
        );
        let listener = TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("binding {}", config.listen))?;
        let bound = listener.local_addr()?;
        config.auth.check(bound).map_err(anyhow::Error::msg)?;
        if config.auth.mode == crate::edge::auth::AuthMode::None && !bound.ip().is_loopback() {
            tracing::warn!(listen = %bound, "--insecure-no-auth: anyone who can reach this port can read every incident and run sessions");
        }
        let auth = match config.auth.mode {
            crate::edge::auth::AuthMode::None => None,
            crate::edge::auth::AuthMode::Required => {
                let verifier = crate::edge::auth::Verifier::new(store.clone());
                Some(match &config.auth.oidc {
                    Some(oidc) => verifier.with_oidc(crate::edge::oidc::Oidc::start(oidc).await?),
                    None => verifier,
                })
            }
        };
        // A loopback server without authentication answers only to
        // loopback names: a web page that rebinds its own name to 127.0.0.1
        // must not drive it. Anywhere else anyone can reach it directly.
        let hosts = (auth.is_none() && bound.ip().is_loopback())
            .then(|| crate::edge::hosts::AllowedHosts::new(&config.http));
        let admin = bind_admin(&config.admin).await;
        let mut broadcaster = TurnBroadcaster::new(config.watch.channel_capacity);
        if runtime.handle().is_some() {
            // Bursts publish from the agent runtime; a session watched by
            // many is delivered from this (the serving) runtime's threads,
            // where its watch streams run.
            broadcaster =
                broadcaster.with_fanout(&tokio::runtime::Handle::current(), FANOUT_THRESHOLD);
        }
        let log = TurnLog::new(store.clone(), broadcaster).with_lease_timing(LeaseTiming {
            ttl: config.lease.ttl,
            margin: config.lease.margin(),
        });
        let agent = match runtime.handle() {
            // Connected from the agent runtime: an MCP server's pipes (and
            // an HTTP one's connections) answer to the reactor of the
            // runtime they were opened on, and the tool calls that read
            // them run in bursts there; opened here, every tool result
            // would wait for a busy serving runtime to poll for I/O.
            Some(handle) => {
                let config = config.clone();
                let mut built =
                    AbortOnDrop(handle.spawn(async move { build_agent(&config).await }));
                (&mut built.0).await.context("connecting the agent")??
            }
            None => build_agent(config).await?,
        };
        Ok(Self {
            listener,
            admin,
            auth,
            hosts,
            pages,
            tls,
            store,
            log,
            watch: config.watch.clone(),
            lease: config.lease.clone(),
            database_url: database_url.to_owned(),
            metrics: Arc::default(),
            health_probes: Arc::default(),
            limits: config.limits(),
            max_running_bursts: config.limits.max_running_bursts,
            approvals: config
                .approval_gates()
                .map_err(crate::config::ConfigError::Invalid)?,
            feed_queue_capacity: config.limits.feed_queue_capacity,
            connections: crate::edge::conn::ConnectionLimits {
                max_connections: config.limits.max_connections,
                preface_timeout: config.limits.connection_preface_timeout,
                idle_timeout: config.limits.idle_connection_timeout,
            },
            max_concurrent_streams: config.limits.max_concurrent_streams,
            api: ApiLimits::from_config(&config.limits),
            grace: config.shutdown.grace,
            key_retention: config.limits.idempotency_key_retention,
            deliveries,
            webhook_policy: config.webhooks,
            key_cleanup_interval: config.limits.idempotency_cleanup_interval(),
            refuse_bursts: config.require_agent && agent.agent.is_none(),
            agent,
            tenants: config.tenants.clone(),
            retention: config.retention.clone(),
            runtime,
            alerts: config.alerts.clone(),
            schedules: Arc::new(config.compiled_schedules().map_err(anyhow::Error::msg)?),
        })
    }

    /// The runtime bursts run on (`inquest_engine::agent_runtime`): a benchmark writes
    /// there to stand where a burst stands.
    pub fn agent_runtime(&self) -> &AgentRuntime {
        &self.runtime
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Where the admin listener (`/metrics`, `/healthz`, `/readyz`) is
    /// bound, if it is.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(|l| l.local_addr().ok())
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The persist-then-publish path this server writes turns through.
    pub fn turn_log(&self) -> &TurnLog {
        &self.log
    }

    /// How many database probes health checking has made (however many
    /// checks were asked).
    pub fn health_probes(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.health_probes)
    }

    /// Counters over this server's watch streams.
    pub fn watch_metrics(&self) -> Arc<WatchMetrics> {
        Arc::clone(&self.metrics)
    }

    /// Serves until `shutdown` fires, then stops accepting, gives in-flight
    /// calls `shutdown.grace` to finish, waits for every turn write in
    /// flight, and returns.
    pub async fn run(mut self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let tasks = TaskTracker::new();
        // Fires when the shutdown grace runs out: tools still running then
        // are dropped, left dangling for the next replica's plan.
        let abandon = CancellationToken::new();
        let (health, readiness) = self.health(&tasks, &shutdown);
        let runner = self.runner(&tasks, &shutdown, &abandon);
        let serving = self.hear_other_replicas(&tasks, &shutdown).await;
        if let Some(listener) = self.admin.take() {
            self.serve_admin(listener, readiness, &serving, &runner, &tasks, &shutdown)?;
        }
        self.start_background_work(&runner, &tasks, &shutdown).await;
        let grace = self.grace;
        let (store, mcp) = (self.store.clone(), self.agent.mcp.clone());
        let server = self.serve_grpc(health, runner, &tasks, &shutdown)?;
        let grace_ends = serve_until_shutdown(server, &shutdown, grace).await?;
        finish_in_flight_work(tasks, abandon, grace_ends).await;
        store.drain_writes().await;
        if let Some(mcp) = mcp {
            mcp.close().await;
        }
        tracing::info!("shutdown complete");
        Ok(())
    }

    /// gRPC health checking that asks the database, and the readiness the
    /// admin listener's `/readyz` reports. Health answers undecodable and
    /// oversized requests as the API does: INVALID_ARGUMENT, not tonic's
    /// INTERNAL / OUT_OF_RANGE.
    fn health(
        &self,
        tasks: &TaskTracker,
        shutdown: &CancellationToken,
    ) -> (HealthServer, crate::ops::health::Readiness) {
        let db_health = DbHealth::new(
            self.store.clone(),
            shutdown.clone(),
            tasks.clone(),
            Arc::clone(&self.health_probes),
        );
        let readiness = db_health.readiness();
        let max_request_bytes = self.api.max_request_bytes;
        let health = crate::limits::Limited::new(
            tonic_health::pb::health_server::HealthServer::new(db_health)
                .max_decoding_message_size(max_request_bytes),
            max_request_bytes,
        );
        (health, readiness)
    }

    /// The engine's runner: burst slots, the lease keeper, the reaper.
    fn runner(
        &self,
        tasks: &TaskTracker,
        shutdown: &CancellationToken,
        abandon: &CancellationToken,
    ) -> Runner {
        Runner::new(
            self.agent.agent.clone(),
            self.log.clone(),
            tasks.clone(),
            shutdown.clone(),
            abandon.clone(),
            self.lease.clone(),
            self.max_running_bursts,
        )
        .with_max_notice_bytes(self.api.max_notice_bytes)
        .with_runtime(self.runtime.clone())
        .with_approvals(self.approvals.clone())
        .with_interrupt_grace(self.grace)
    }

    /// Starts the cross-replica feed and waits (bounded) for its first
    /// LISTEN. Serving starts only once other replicas' announcements are
    /// heard, so no watcher starts in a window the feed does not cover. A
    /// database that will not take the LISTEN does not stop the server:
    /// the feed keeps trying, and watchers are made to reconnect when it is
    /// up. Returns the flag that says the server serves.
    async fn hear_other_replicas(
        &self,
        tasks: &TaskTracker,
        shutdown: &CancellationToken,
    ) -> Arc<AtomicBool> {
        let serving = Arc::new(AtomicBool::new(false));
        let listening = inquest_engine::feed::spawn(
            &self.database_url,
            &self.log,
            tasks,
            shutdown,
            Arc::clone(&serving),
            self.feed_queue_capacity,
        );
        if tokio::time::timeout(LISTEN_WAIT, listening.notified())
            .await
            .is_err()
        {
            tracing::warn!(wait = ?LISTEN_WAIT, "cross-replica feed not listening yet; serving anyway");
        }
        serving.store(true, Ordering::SeqCst);
        serving
    }

    /// `/metrics`, `/healthz`, `/readyz` on the admin listener.
    fn serve_admin(
        &self,
        listener: TcpListener,
        readiness: crate::ops::health::Readiness,
        serving: &Arc<AtomicBool>,
        runner: &Runner,
        tasks: &TaskTracker,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<()> {
        let state = crate::ops::admin::AdminState {
            readiness,
            serving: Arc::clone(serving),
            watch: Arc::clone(&self.metrics),
            runner: runner.clone(),
            store: self.store.clone(),
        };
        let addr = crate::ops::admin::serve(listener, state, tasks, shutdown.clone())?;
        tracing::info!(%addr, "admin listener: /metrics, /healthz, /readyz");
        Ok(())
    }

    /// Claims the sessions left pending, then starts the reaper, the OIDC
    /// key refresher and the idempotency-key cleanup.
    async fn start_background_work(
        &self,
        runner: &Runner,
        tasks: &TaskTracker,
        shutdown: &CancellationToken,
    ) {
        // Sessions left pending are claimed before requests are served, so
        // a session a request makes pending now is this replica's to start
        // in the request's trace, not the startup pass's in a new one.
        runner.start_pending().await;
        runner.spawn_reaper();
        if let Some(oidc) = self
            .auth
            .as_ref()
            .and_then(crate::edge::auth::Verifier::oidc)
        {
            oidc.spawn_refresher(tasks, shutdown.clone());
        }
        self.deliveries
            .spawn(&self.store, &self.database_url, tasks, shutdown)
            .await;
        spawn_idempotency_cleanup(
            &self.store,
            tasks,
            shutdown,
            self.key_retention,
            self.key_cleanup_interval,
        );
        crate::retention::spawn(&self.store, &self.retention, &self.tenants, tasks, shutdown);
        crate::retention::spawn_partitions(&self.store, tasks, shutdown);
        tracing::info!(
            replica_id = %self.store.replica_id(),
            lease_ttl = ?self.lease.ttl,
            "replica ready"
        );
    }

    /// The gRPC server on the bound listener (with TLS when configured),
    /// stopping to accept when `shutdown` fires: the investigations service
    /// behind its layers, health, reflection, and the web console.
    fn serve_grpc(
        self,
        health: HealthServer,
        runner: Runner,
        tasks: &TaskTracker,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<ServerFuture> {
        let reflection_v1 = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(inquest_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()
            .context("building reflection (v1)")?;
        let reflection_v1alpha = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(inquest_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1alpha()
            .context("building reflection (v1alpha)")?;
        let watches = Watches {
            log: self.log.clone(),
            store: self.store.clone(),
            shutdown: shutdown.clone(),
            heartbeat: self.watch.heartbeat,
            drain_page: self.watch.drain_page,
            drain_delay: self.watch.test_drain_delay,
            metrics: Arc::clone(&self.metrics),
            channel_capacity: self.watch.channel_capacity,
            limits: self.api,
        };
        // The Alertmanager webhook (`alerts/`): plain HTTP beside the
        // console, with its own credential check on the same verifier.
        let alerts = Arc::new(crate::alerts::Alerts {
            store: self.store.clone(),
            log: self.log.clone(),
            runner: runner.clone(),
            verifier: self.auth.clone(),
            hosts: self.hosts.clone().map(Arc::new),
            triggers: self.alerts.matchers(),
            section: self.alerts,
            limits: self.limits,
            tenants: self.tenants.clone(),
            refuse_bursts: self.refuse_bursts,
        });
        Arc::clone(&alerts).spawn_sweep(tasks, shutdown.clone());
        crate::schedules::Scheduler {
            store: self.store.clone(),
            log: self.log.clone(),
            runner: runner.clone(),
            schedules: Arc::clone(&self.schedules),
            tenants: self.tenants.clone(),
            limits: self.limits,
        }
        .spawn(self.refuse_bursts, tasks, shutdown.clone());
        let investigations = InvestigationsService::new(
            self.store.clone(),
            watches,
            self.limits,
            self.api,
            runner,
            self.pages,
            crate::service::webhooks::WebhookApi {
                policy: self.webhook_policy,
                sender: self.deliveries.api_sender(),
            },
        )
        .with_tenants(self.tenants)
        .refusing_bursts(self.refuse_bursts)
        .with_schedules(Arc::clone(&self.schedules))
        .into_server();
        let addr = self.listener.local_addr()?;
        let auth_mode = match &self.auth {
            None if addr.ip().is_loopback() => "none (loopback only)",
            None => "none (--insecure-no-auth)",
            Some(verifier) if verifier.oidc().is_some() => "required (API tokens and OIDC)",
            Some(_) => "required (API tokens)",
        };
        let stop_accepting = shutdown.clone();
        // The web console (`console.rs`): the investigations service also
        // answers gRPC-Web (HTTP/1.1 or HTTP/2), translated to gRPC by
        // `GrpcWebService` outside every other layer, so the browser's calls
        // are measured, authenticated and size-checked exactly as a gRPC
        // client's; its static assets are the router's fallback, outside
        // the service and its auth. Health and reflection stay gRPC only.
        let routes = tonic::service::Routes::new(health)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(tonic_web::GrpcWebLayer::new().named_layer(
                crate::ops::admin::Measured::new(authenticated(
                    investigations,
                    self.auth,
                    self.hosts,
                )),
            ))
            .into_axum_router()
            .route(
                crate::alerts::PATH,
                axum::routing::post(move |request: axum::extract::Request| {
                    Arc::clone(&alerts).handle(request)
                }),
            )
            .fallback(crate::console::fallback);
        // A peer must keep up its side: streams per connection are capped,
        // a peer that makes the server reset streams gets a GOAWAY (hyper's
        // limit, which tonic leaves off unless asked), and a connection
        // whose peer stops answering pings is closed.
        let router = tonic::transport::Server::builder()
            .max_concurrent_streams(self.max_concurrent_streams)
            .http2_max_local_error_reset_streams(Some(LOCAL_RESET_STREAMS))
            .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
            .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
            .accept_http1(true)
            .layer(crate::edge::conn::CountRequestsLayer)
            .trace_fn(crate::ops::telemetry::rpc_span)
            .add_routes(tonic::service::Routes::from(routes).prepare());
        let stopped = async move { stop_accepting.cancelled().await };
        let tls = self.tls.is_some();
        // Every connection, TLS or not, passes the same gate first
        // (`edge/conn.rs`): the cap, the preface deadline, the idle
        // timeout, and TCP_NODELAY (without it a watch stream's small
        // frames, a turn or a text delta, wait for the client's delayed
        // ACK, up to 40 ms, behind the previous one).
        let accepted =
            crate::edge::conn::incoming(self.listener, self.connections, tasks, shutdown.clone());
        let server: ServerFuture = match self.tls {
            Some(certs) => {
                certs.spawn_reloader(tasks, shutdown.clone());
                let incoming = crate::edge::tls::incoming(accepted, certs, tasks, shutdown.clone());
                Box::pin(router.serve_with_incoming_shutdown(incoming, stopped))
            }
            None => {
                if !addr.ip().is_loopback() {
                    tracing::warn!(%addr, "serving gRPC without TLS on a non-loopback address; set [tls] cert and key");
                }
                Box::pin(router.serve_with_incoming_shutdown(accepted, stopped))
            }
        };
        tracing::info!(
            %addr,
            tls,
            auth = %auth_mode,
            console = %console_url(addr, tls),
            "serving inquest.v1.Investigations"
        );
        Ok(server)
    }
}

/// Where the web console answers, as a browser on this machine would open
/// it: an unspecified listen address (`0.0.0.0`, `::`) is reached through
/// loopback.
fn console_url(addr: SocketAddr, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    let host = match addr.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_owned(),
        ip if ip.is_unspecified() => "[::1]".to_owned(),
        std::net::IpAddr::V4(ip) => ip.to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
    };
    format!("{scheme}://{host}:{}/console/", addr.port())
}

/// A task that ends when its handle is dropped (startup given up).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Subscribers from which a session's live events are delivered by the
/// broadcaster's forwarding task on the serving runtime instead of by the
/// publishing burst (`TurnBroadcaster::with_fanout`). Below it, the burst
/// wakes its few watchers itself (one hand-off less).
const FANOUT_THRESHOLD: usize = 32;

/// Binds the admin listener, or says why not and goes on without it.
async fn bind_admin(admin: &crate::config::AdminSection) -> Option<TcpListener> {
    if !admin.enabled {
        return None;
    }
    match TcpListener::bind(admin.listen).await {
        Ok(listener) => Some(listener),
        Err(e) => {
            tracing::warn!(listen = %admin.listen, error = %e, "cannot bind the admin listener; running without /metrics, /healthz and /readyz");
            None
        }
    }
}

/// The service behind its credentials check, and behind the host check
/// when it runs without authentication on loopback.
fn authenticated<S>(
    service: S,
    verifier: Option<crate::edge::auth::Verifier>,
    hosts: Option<crate::edge::hosts::AllowedHosts>,
) -> crate::edge::auth::Authenticated<S> {
    let service = crate::edge::auth::Authenticated::new(service, verifier);
    match hosts {
        Some(hosts) => service.answering(hosts),
        None => service,
    }
}

/// The health service behind the request-size check.
type HealthServer = crate::limits::Limited<tonic_health::pb::health_server::HealthServer<DbHealth>>;

/// Streams a peer may make the server reset before it gets a GOAWAY
/// (hyper's own default when the limit is on).
const LOCAL_RESET_STREAMS: usize = 1024;
/// How often an HTTP/2 connection is pinged, and how long its peer has to
/// answer before the connection is closed: a peer that is gone (or never
/// meant to talk) does not hold a connection for ever.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// How long startup waits for the cross-replica feed to be listening. The
/// database just answered the migrations, so this is normally one connect;
/// generous because a feed that starts after serving must lag every
/// watcher already connected.
const LISTEN_WAIT: Duration = Duration::from_secs(30);

/// Deletes idempotency keys older than `retention` now and every
/// `interval` until shutdown, in a task the server's tracker owns. Every
/// replica runs one: the deletes skip rows another replica is deleting,
/// so they do not contend. A failed pass is logged and retried at the next
/// tick (a key kept a little longer is harmless).
fn spawn_idempotency_cleanup(
    store: &Store,
    tasks: &TaskTracker,
    shutdown: &CancellationToken,
    retention: Duration,
    interval: Duration,
) {
    let (store, shutdown) = (store.clone(), shutdown.clone());
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let pass = tokio::select! {
                () = shutdown.cancelled() => return,
                pass = store.expire_idempotency_keys(retention) => pass,
            };
            match pass {
                Ok(0) => {}
                Ok(deleted) => tracing::info!(deleted, ?retention, "expired idempotency keys"),
                Err(e) => tracing::warn!(
                    error = %inquest_core::error_chain(&e),
                    "cannot expire idempotency keys; trying again at the next pass"
                ),
            }
        }
    });
}

/// `inquest serve`: runs against `config.database_url`, or, without one,
/// against an embedded cluster in `config.data_dir` that is started first
/// and stopped last.
pub async fn serve(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    let (url, embedded) = match &config.database_url {
        Some(url) => (url.clone(), None),
        None => {
            let options = EmbeddedOptions::new(&config.data_dir);
            tracing::info!(data_dir = %config.data_dir.display(), "starting embedded PostgreSQL");
            let pg = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&options))
                .await
                .context("embedded PostgreSQL start panicked")?
                .context("starting embedded PostgreSQL")?;
            tracing::info!(port = pg.port(), log = %pg.log_file().display(), "embedded PostgreSQL is up");
            (pg.url(), Some(pg))
        }
    };
    let result = async {
        let app = Application::build(&config, &url).await?;
        app.run(shutdown).await
    }
    .await;
    if let Some(pg) = embedded {
        tracing::info!("stopping embedded PostgreSQL");
        let stopped = tokio::task::spawn_blocking(move || pg.stop()).await;
        match stopped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::error!(error = %inquest_core::error_chain(&e), "stopping embedded PostgreSQL failed")
            }
            Err(e) => tracing::error!(error = %e, "stopping embedded PostgreSQL panicked"),
        }
    }
    result
}
