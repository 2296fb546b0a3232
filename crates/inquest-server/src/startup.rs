//! Building and running the server. `main` and the tests start the very
//! same [`Application`].

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context;
use inquest_broadcast::TurnBroadcaster;
use inquest_core::Limits;
use inquest_proto::v1::investigations_server::InvestigationsServer;
use inquest_store::{
    Store,
    embedded::{EmbeddedOptions, EmbeddedPostgres},
};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    agent_config::{BuiltAgent, build_agent},
    config::{Config, WatchSection},
    health::DbHealth,
    runner::Runner,
    service::InvestigationsService,
    turn_log::TurnLog,
    watch::{WatchMetrics, Watches},
};

/// A server bound to its port, connected and migrated, not yet serving.
pub struct Application {
    listener: TcpListener,
    store: Store,
    /// The persist-then-publish path and its broadcaster. Exposed so tests
    /// (and the agent loop) write turns exactly as the server does.
    log: TurnLog,
    watch: WatchSection,
    metrics: Arc<WatchMetrics>,
    limits: Limits,
    grace: Duration,
    /// The agent (none without providers) and its MCP connections.
    agent: BuiltAgent,
}

impl Application {
    /// Connects to `database_url`, applies migrations and binds
    /// `config.listen` (port 0 picks a free port).
    pub async fn build(config: &Config, database_url: &str) -> anyhow::Result<Self> {
        let store = Store::connect(&config.store_config(database_url))
            .context("configuring the database pool")?;
        store.migrate().await.context("migrating the database")?;
        let listener = TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("binding {}", config.listen))?;
        let log = TurnLog::new(
            store.clone(),
            TurnBroadcaster::new(config.watch.channel_capacity),
        );
        let agent = build_agent(config).await?;
        Ok(Self {
            listener,
            store,
            log,
            watch: config.watch.clone(),
            metrics: Arc::default(),
            limits: config.limits(),
            grace: config.shutdown.grace,
            agent,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The persist-then-publish path this server writes turns through.
    pub fn turn_log(&self) -> &TurnLog {
        &self.log
    }

    /// Counters over this server's watch streams.
    pub fn watch_metrics(&self) -> Arc<WatchMetrics> {
        Arc::clone(&self.metrics)
    }

    /// Serves until `shutdown` fires, then stops accepting, gives in-flight
    /// calls `shutdown.grace` to finish, waits for every turn write in
    /// flight, and returns.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let tasks = TaskTracker::new();
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
        let health = tonic_health::pb::health_server::HealthServer::new(DbHealth::new(
            self.store.clone(),
            shutdown.clone(),
            tasks.clone(),
        ));
        let watches = Watches {
            log: self.log.clone(),
            shutdown: shutdown.clone(),
            tasks: tasks.clone(),
            heartbeat: self.watch.heartbeat,
            drain_page: self.watch.drain_page,
            drain_delay: self.watch.test_drain_delay,
            metrics: Arc::clone(&self.metrics),
            channel_capacity: self.watch.channel_capacity,
        };
        let runner = Runner::new(
            self.agent.agent.clone(),
            self.log.clone(),
            tasks.clone(),
            shutdown.clone(),
        );
        let pickup = runner.clone();
        tasks.spawn(async move { pickup.start_pending().await });
        let investigations =
            InvestigationsServer::new(InvestigationsService::new(watches, self.limits, runner));
        let addr = self.listener.local_addr()?;
        let stop_accepting = shutdown.clone();
        let server = tonic::transport::Server::builder()
            .trace_fn(|req| tracing::info_span!("rpc", method = %req.uri().path()))
            .add_service(health)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(investigations)
            .serve_with_incoming_shutdown(TcpListenerStream::new(self.listener), async move {
                stop_accepting.cancelled().await
            });
        tracing::info!(%addr, "serving inquest.v1.Investigations");
        tokio::pin!(server);
        tokio::select! {
            result = &mut server => result.context("gRPC server failed")?,
            () = shutdown.cancelled() => {
                tracing::info!(grace = ?self.grace, "shutting down: no new connections, finishing in-flight calls");
                match tokio::time::timeout(self.grace, &mut server).await {
                    Ok(result) => result.context("gRPC server failed")?,
                    Err(_) => tracing::warn!("in-flight calls did not finish within the grace period"),
                }
            }
        }
        // Bursts see the shutdown token and end `interrupted` (their last
        // writes still land); then the writes, then the tool servers.
        tasks.close();
        tasks.wait().await;
        self.store.drain_writes().await;
        if let Some(mcp) = &self.agent.mcp {
            mcp.close().await;
        }
        tracing::info!("shutdown complete");
        Ok(())
    }
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
            tracing::info!(port = pg.port(), "embedded PostgreSQL is up");
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
                tracing::error!(error = %crate::status::chain(&e), "stopping embedded PostgreSQL failed")
            }
            Err(e) => tracing::error!(error = %e, "stopping embedded PostgreSQL panicked"),
        }
    }
    result
}

/// Resolves when SIGTERM or Ctrl-C arrives; cancels `token` then.
pub async fn cancel_on_signal(token: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("Ctrl-C received"),
        () = term => tracing::info!("SIGTERM received"),
    }
    token.cancel();
}
