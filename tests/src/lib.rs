//! Integration-test harness: a fresh database per test on the run's
//! throwaway PostgreSQL cluster, the real server in-process on an ephemeral
//! port, and a generated gRPC client talking to it over TCP.
//!
//! The cluster's admin URL comes from `DATABASE_URL`; `cargo xtask test`
//! starts a throwaway cluster and sets it. Each test's database is dropped
//! when its [`TestDatabase`] goes (the end of the test, or of the
//! [`TestApp`] that owns it); one left by a killed test process is dropped
//! by the next process that makes a database, since its name carries the
//! process id of its maker.

pub mod driver;
pub mod resume;
pub mod retention;
pub mod tls;
pub mod watching;

use std::{net::SocketAddr, sync::Arc};

use inquest_broadcast::TurnBroadcaster;
use inquest_proto::v1::investigations_client::InvestigationsClient;
use inquest_server::{Application, Config, TurnLog, WatchMetrics};
use inquest_store::Store;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

/// The admin URL of the test cluster.
pub fn admin_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| {
        panic!(
            "DATABASE_URL is not set: run the suite with `cargo xtask test`, which starts a \
             throwaway PostgreSQL cluster, or point DATABASE_URL at a server you own"
        )
    })
}

/// `url` with its database name replaced by `db`.
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let authority_start = base.find("://").map(|i| i + 3).unwrap_or(0);
    let base = match base[authority_start..].find('/') {
        Some(i) => &base[..authority_start + i],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{db}?{q}"),
        None => format!("{base}/{db}"),
    }
}

/// Connects a plain client (its connection task runs in the background).
/// For process tests that hold a connection from [`connect`] without a
/// dependency of their own.
pub use tokio_postgres;

pub async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connecting to the test cluster");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// The prefix of every test database's name: `inquest_test_<pid>_<uuid>`.
const TEST_DATABASE_PREFIX: &str = "inquest_test_";

/// A test's own database, dropped (with any connection still open to it)
/// when this goes.
#[derive(Debug)]
pub struct TestDatabase {
    pub name: String,
    pub url: String,
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Drop runs inside the test's runtime, which must not be blocked
        // on itself: the statement runs on a thread of its own, waited for
        // (bounded) so the database is gone when the test ends.
        let name = self.name.clone();
        let (done, wait) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let dropped = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(anyhow::Error::from)
                .and_then(|rt| rt.block_on(drop_database(&name)));
            let _ = done.send(dropped);
        });
        match wait.recv_timeout(std::time::Duration::from_secs(30)) {
            Ok(Ok(())) => {}
            // A test that fails to clean up must not fail for it; the next
            // process's sweep takes the database.
            Ok(Err(e)) => eprintln!("warning: dropping test database {}: {e:#}", self.name),
            Err(_) => eprintln!("warning: dropping test database {} timed out", self.name),
        }
    }
}

async fn drop_database(name: &str) -> anyhow::Result<()> {
    let (client, connection) = tokio_postgres::connect(&admin_url(), tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    // WITH (FORCE): a server the test left running still holds
    // connections; they are ended with it.
    client
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await?;
    drop(client);
    let _ = connection.await;
    Ok(())
}

/// Drops the test databases whose maker process is gone (a run that was
/// killed, or a test binary that ended with databases still open), once
/// per process.
async fn sweep_leftovers(admin: &tokio_postgres::Client) {
    static SWEPT: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    SWEPT
        .get_or_init(|| async {
            let rows = match admin
                .query(
                    "SELECT datname FROM pg_database WHERE starts_with(datname, $1)",
                    &[&TEST_DATABASE_PREFIX],
                )
                .await
            {
                Ok(rows) => rows,
                Err(e) => {
                    eprintln!("warning: listing leftover test databases: {e}");
                    return;
                }
            };
            for row in rows {
                let name: String = row.get(0);
                let maker = name
                    .strip_prefix(TEST_DATABASE_PREFIX)
                    .and_then(|rest| rest.split_once('_'))
                    .and_then(|(pid, _)| pid.parse::<u32>().ok());
                let alive =
                    maker.is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
                if !alive && let Err(e) = drop_database(&name).await {
                    eprintln!("warning: dropping leftover test database {name}: {e:#}");
                }
            }
        })
        .await;
}

/// Creates a fresh, empty database, dropped when the returned value goes.
pub async fn fresh_database() -> TestDatabase {
    let admin = admin_url();
    let client = connect(&admin).await;
    sweep_leftovers(&client).await;
    let name = format!(
        "{TEST_DATABASE_PREFIX}{}_{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    );
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("creating a test database");
    let url = with_database(&admin, &name);
    TestDatabase { name, url }
}

/// A running server on its own database.
pub struct TestApp {
    pub addr: SocketAddr,
    pub db_name: String,
    pub db_url: String,
    /// A store on the same database, for setting up and checking state.
    pub store: Store,
    pub config: Config,
    /// The server's own persist-then-publish path (same broadcaster, same
    /// running-call registry), for playing the agent.
    pub turn_log: TurnLog,
    pub watch_metrics: Arc<WatchMetrics>,
    /// Database round trips the server's health checking made.
    pub health_probes: Arc<std::sync::atomic::AtomicU64>,
    /// The admin listener (`/metrics`, `/healthz`, `/readyz`).
    pub admin_addr: Option<SocketAddr>,
    shutdown: CancellationToken,
    server: Option<JoinHandle<anyhow::Result<()>>>,
    /// The database this app made for itself ([`spawn_app_with`]), dropped
    /// with it; `None` when the caller owns the database.
    database: Option<TestDatabase>,
}

/// Starts the server on a fresh database with default configuration.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// Starts the server on a fresh database; `tweak` adjusts the config.
pub async fn spawn_app_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
    let database = fresh_database().await;
    let mut app = spawn_app_on(database.name.clone(), database.url.clone(), tweak).await;
    app.database = Some(database);
    app
}

/// Starts the server on an existing database (e.g. one a test migrated
/// part way and filled with rows of an older schema); the server applies
/// the pending migrations at startup, as in production.
pub async fn spawn_app_on(
    db_name: String,
    db_url: String,
    tweak: impl FnOnce(&mut Config),
) -> TestApp {
    let mut config = Config {
        listen: "127.0.0.1:0".parse().expect("literal address"),
        database_url: Some(db_url.clone()),
        ..Config::default()
    };
    config.store.max_connections = 6;
    config.store.burst_connections = 4;
    config.admin.listen = "127.0.0.1:0".parse().expect("literal address");
    config.store.connect_timeout = std::time::Duration::from_secs(2);
    // Tests of other features run every tool call at once; the approval
    // tests (tests/api/approval.rs) set the policy they test.
    config.approval.mode = inquest_core::approval::Mode::Off;
    tweak(&mut config);
    let app = Application::build(&config, &db_url)
        .await
        .expect("building the application");
    let addr = app.local_addr().expect("bound address");
    let admin_addr = app.admin_addr();
    let store = Store::connect(&config.store_config(&db_url)).expect("test store");
    let turn_log = app.turn_log().clone();
    let watch_metrics = app.watch_metrics();
    let health_probes = app.health_probes();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(app.run(shutdown.clone()));
    TestApp {
        addr,
        db_name,
        db_url,
        store,
        config,
        turn_log,
        watch_metrics,
        health_probes,
        admin_addr,
        shutdown,
        server: Some(server),
        database: None,
    }
}

impl TestApp {
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub async fn channel(&self) -> Channel {
        Channel::from_shared(self.endpoint())
            .expect("endpoint")
            .connect()
            .await
            .expect("connecting to the test server")
    }

    pub async fn client(&self) -> InvestigationsClient<Channel> {
        InvestigationsClient::new(self.channel().await)
    }

    /// The server's broadcaster (for `subscriber_count`).
    pub fn broadcaster(&self) -> &TurnBroadcaster {
        self.turn_log.live().broadcaster()
    }

    /// Counts rows of a table in this app's database.
    pub async fn count(&self, table: &str) -> i64 {
        connect(&self.db_url)
            .await
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await
            .expect("counting rows")
            .get(0)
    }

    /// Makes this app's database refuse connections and cuts the open ones,
    /// as a database outage looks to the server.
    pub async fn take_database_down(&self) {
        let admin = connect(&admin_url()).await;
        admin
            .batch_execute(&format!(
                "ALTER DATABASE {0} ALLOW_CONNECTIONS false; \
                 SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{0}';",
                self.db_name
            ))
            .await
            .expect("taking the database down");
        // A backend still starting up when the database was closed passed
        // the check before it and is not yet listed under the database's
        // name: terminate until none is left, twice in a row.
        let mut clear = 0;
        for _ in 0..200 {
            let left: i64 = admin
                .query_one(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE datname = $1 AND pid <> pg_backend_pid()",
                    &[&self.db_name],
                )
                .await
                .expect("terminating the database's backends")
                .get(0);
            clear = if left == 0 { clear + 1 } else { 0 };
            if clear == 2 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("backends of {} kept reconnecting", self.db_name);
    }

    pub async fn bring_database_up(&self) {
        connect(&admin_url())
            .await
            .batch_execute(&format!(
                "ALTER DATABASE {} ALLOW_CONNECTIONS true",
                self.db_name
            ))
            .await
            .expect("bringing the database up");
    }

    /// Takes over this app's database, so it outlives the app (a test
    /// that restarts a server on the same data).
    pub fn take_database(&mut self) -> Option<TestDatabase> {
        self.database.take()
    }

    /// Triggers graceful shutdown and waits for the server to finish; then
    /// drops the app's own database.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        match self.server.take() {
            Some(handle) => handle.await?,
            None => Ok(()),
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
