//! A dedicated, reconnecting `LISTEN` connection.
//!
//! Replicas share one database and tell each other about new transcript
//! turns with `NOTIFY`. [`run_listener`] keeps one connection (outside the
//! pool: a pooled connection is handed back and reused, a listening one must
//! stay put) subscribed to one channel and reports, in order, when the
//! subscription is up ([`ListenEvent::Listening`]), when it went down
//! ([`ListenEvent::Lost`]: anything sent until the next `Listening` may be
//! missed) and every payload in between.
//!
//! One task does everything: it drives the connection itself with
//! [`tokio_postgres::Connection::poll_message`] (the only way to see
//! notifications), so nothing is spawned and dropping the future closes the
//! connection.

use std::{
    future::{Future, poll_fn},
    pin::pin,
    task::Poll,
    time::Duration,
};

use inquest_core::{Backoff, error_chain};

use tokio_postgres::{AsyncMessage, Config, Connection, Socket};

use crate::tls::{PgTls, PgTlsStream};
use tokio_util::sync::CancellationToken;

/// What the listener reports, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenEvent {
    /// LISTEN is active (first time and after every reconnect). Anything
    /// NOTIFYed while it was down was missed.
    Listening,
    /// The connection dropped (or failed to connect); notifications may be
    /// missed from now until the next `Listening`. Reported once per loss,
    /// not once per failed reconnect attempt.
    Lost,
    /// One notification's payload on the channel.
    Notification(String),
}

/// Where and how to listen.
#[derive(Debug, Clone)]
pub struct ListenerConfig {
    /// The database to connect to (same form as the store's URL).
    pub database_url: String,
    /// The channel to `LISTEN` on, taken literally (case and punctuation are
    /// kept; it is quoted as an identifier). At most 63 bytes, not empty.
    pub channel: String,
    /// The session's `application_name`, so operators can find the listener
    /// in `pg_stat_activity`. Overrides one given in the URL.
    pub application_name: String,
    /// Bound on establishing a connection (TCP, start-up, authentication)
    /// and, separately, on the `LISTEN` statement.
    pub connect_timeout: Duration,
    /// First delay before reconnecting after a loss; doubles on each failed
    /// attempt up to `max_backoff`, and starts over after a successful
    /// `LISTEN`. Each delay is jittered down by up to half.
    pub min_backoff: Duration,
    pub max_backoff: Duration,
}

impl ListenerConfig {
    /// `application_name` `inquest-listen`, a 3 s connect timeout and a
    /// backoff from 100 ms to 10 s.
    pub fn new(database_url: impl Into<String>, channel: impl Into<String>) -> Self {
        Self {
            database_url: database_url.into(),
            channel: channel.into(),
            application_name: "inquest-listen".to_owned(),
            connect_timeout: Duration::from_secs(3),
            min_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
        }
    }
}

/// PostgreSQL truncates identifiers longer than this (NAMEDATALEN - 1); a
/// longer channel would be listened to under a different name than the one
/// notifications are matched against.
const MAX_CHANNEL_BYTES: usize = 63;

/// Runs until `shutdown` fires: connects, runs `LISTEN "<channel>"`, reports
/// [`ListenEvent::Listening`], then forwards every notification on that
/// channel in arrival order. When the connection errors or closes it
/// reports [`ListenEvent::Lost`] once, backs off, reconnects and repeats.
///
/// Returns promptly when `shutdown` fires, whatever it is doing (connecting,
/// listening or backing off); the connection is dropped with the future.
///
/// `on_event` runs on the listener's task between polls of the connection:
/// it must be cheap and must not block.
///
/// A configuration that can never work (an unparsable URL, an empty or
/// over-long channel name) is logged as an error and reported as one
/// `Lost`; the listener then waits for shutdown.
pub async fn run_listener(
    config: ListenerConfig,
    shutdown: CancellationToken,
    mut on_event: impl FnMut(ListenEvent) + Send,
) {
    let channel = config.channel.as_str();
    let (pg, tls) = match pg_config(&config) {
        Ok(pg) => pg,
        Err(problem) => {
            tracing::error!(channel, %problem, "the LISTEN connection cannot be configured");
            on_event(ListenEvent::Lost);
            shutdown.cancelled().await;
            return;
        }
    };
    let listen_sql = format!("LISTEN {}", quote_ident(channel));
    let mut state = State {
        down: false,
        failed_attempts: 0,
        // A zero delay would never grow: retry at least a millisecond apart.
        backoff: Backoff::new(
            config.min_backoff.max(Duration::from_millis(1)),
            config.max_backoff,
        )
        .jittered(),
    };

    loop {
        let attempt = listen_once(
            &pg,
            &tls,
            &listen_sql,
            channel,
            config.connect_timeout,
            &mut state,
            &mut on_event,
        );
        let failure = tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            failure = attempt => failure,
        };

        state.failed_attempts += 1;
        if !state.down {
            state.down = true;
            tracing::warn!(
                channel,
                error = %error_chain(&failure),
                "LISTEN connection lost; notifications may be missed until it is back"
            );
            on_event(ListenEvent::Lost);
        } else {
            tracing::debug!(
                channel,
                attempt = state.failed_attempts,
                error = %error_chain(&failure),
                "LISTEN reconnect attempt failed"
            );
        }

        let delay = state.backoff.next_delay();
        tracing::debug!(
            channel,
            ?delay,
            "reconnecting the LISTEN connection after a delay"
        );
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// Why one connection's life ended.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error("could not connect")]
    Connect(#[source] tokio_postgres::Error),
    #[error("connecting timed out after {0:?}")]
    ConnectTimeout(Duration),
    #[error("LISTEN failed")]
    Listen(#[source] tokio_postgres::Error),
    #[error("LISTEN did not complete within {0:?}")]
    ListenTimeout(Duration),
    #[error("connection failed")]
    Connection(#[source] tokio_postgres::Error),
    #[error("connection closed")]
    Closed,
}

/// What survives reconnects.
struct State {
    /// `Lost` was reported and no `Listening` since.
    down: bool,
    /// Failed attempts since the last `Listening` (for the logs).
    failed_attempts: u32,
    backoff: Backoff,
}

/// One connection's life: connect, LISTEN, forward notifications until it
/// fails. Never returns on success, only with why it ended.
async fn listen_once(
    pg: &Config,
    tls: &PgTls,
    listen_sql: &str,
    channel: &str,
    connect_timeout: Duration,
    state: &mut State,
    on_event: &mut (impl FnMut(ListenEvent) + Send),
) -> Failure {
    // tokio-postgres's own connect timeout covers each TCP connect only;
    // this one also covers start-up and authentication. It is per host of
    // a multi-host URL, as the driver's is: one partitioned away must not
    // use up the time of the hosts after it.
    let hosts = u32::try_from(pg.get_hosts().len().max(1)).unwrap_or(1);
    let (client, mut connection) = match tokio::time::timeout(
        connect_timeout.saturating_mul(hosts),
        pg.connect(tls.clone()),
    )
    .await
    {
        Ok(Ok(connected)) => connected,
        Ok(Err(e)) => return Failure::Connect(e),
        Err(_) => return Failure::ConnectTimeout(connect_timeout.saturating_mul(hosts)),
    };

    // The LISTEN only completes while the connection is being driven, and
    // the connection can only be driven here (nothing is spawned), so both
    // are polled together. A notification can be read in the same poll as
    // the LISTEN's response, before the LISTEN future sees its result: keep
    // those until `Listening` has been reported.
    let mut early = Vec::new();
    let listened = tokio::time::timeout(
        connect_timeout,
        drive_until(&mut connection, client.batch_execute(listen_sql), |m| {
            if let Some(payload) = accept(m, channel) {
                early.push(payload);
            }
        }),
    )
    .await;
    match listened {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => return Failure::Listen(e),
        Ok(Err(failure)) => return failure,
        Err(_) => return Failure::ListenTimeout(connect_timeout),
    }

    if state.down {
        tracing::info!(
            channel,
            failed_attempts = state.failed_attempts,
            "LISTEN connection is back"
        );
    } else {
        tracing::info!(channel, "listening");
    }
    state.down = false;
    state.failed_attempts = 0;
    state.backoff.reset();
    on_event(ListenEvent::Listening);
    for payload in early {
        on_event(ListenEvent::Notification(payload));
    }

    // `client` must outlive this loop: once every client handle is dropped
    // the connection sends Terminate and `poll_message` ends with `None`.
    loop {
        match poll_fn(|cx| connection.poll_message(cx)).await {
            Some(Ok(message)) => {
                if let Some(payload) = accept(message, channel) {
                    on_event(ListenEvent::Notification(payload));
                }
            }
            Some(Err(e)) => {
                drop(client);
                return Failure::Connection(e);
            }
            None => {
                drop(client);
                return Failure::Closed;
            }
        }
    }
}

/// Polls `request` (a query on the connection's client) to completion while
/// driving `connection`, handing any asynchronous message to `on_message`.
/// `Err` if the connection ends first.
async fn drive_until<F: Future>(
    connection: &mut Connection<Socket, PgTlsStream>,
    request: F,
    mut on_message: impl FnMut(AsyncMessage),
) -> Result<F::Output, Failure> {
    let mut request = pin!(request);
    poll_fn(|cx| {
        // The request first: its first poll queues the query, which the
        // connection then writes in the same pass.
        if let Poll::Ready(output) = request.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        loop {
            match connection.poll_message(cx) {
                Poll::Ready(Some(Ok(message))) => on_message(message),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(Failure::Connection(e))),
                Poll::Ready(None) => return Poll::Ready(Err(Failure::Closed)),
                Poll::Pending => break,
            }
        }
        // The connection may have just delivered the response.
        match request.as_mut().poll(cx) {
            Poll::Ready(output) => Poll::Ready(Ok(output)),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// The payload of a notification on `channel`; logs and drops the rest.
fn accept(message: AsyncMessage, channel: &str) -> Option<String> {
    match message {
        AsyncMessage::Notification(n) if n.channel() == channel => Some(n.payload().to_owned()),
        AsyncMessage::Notification(n) => {
            tracing::debug!(
                channel,
                other = n.channel(),
                "ignoring a notification on another channel"
            );
            None
        }
        AsyncMessage::Notice(notice) => {
            tracing::debug!(
                channel,
                severity = notice.severity(),
                code = notice.code().code(),
                message = notice.message(),
                "notice on the LISTEN connection"
            );
            None
        }
        other => {
            tracing::debug!(
                channel,
                ?other,
                "unexpected message on the LISTEN connection"
            );
            None
        }
    }
}

fn pg_config(config: &ListenerConfig) -> Result<(Config, PgTls), String> {
    let channel = &config.channel;
    if channel.is_empty() {
        return Err("the channel name is empty".to_owned());
    }
    if channel.len() > MAX_CHANNEL_BYTES {
        return Err(format!(
            "the channel name is {} bytes long; PostgreSQL truncates names to {MAX_CHANNEL_BYTES}",
            channel.len()
        ));
    }
    if channel.contains('\0') {
        return Err("the channel name contains a NUL character".to_owned());
    }
    let (mut pg, tls) =
        crate::tls::parse(&config.database_url).map_err(|e| error_chain(&e).to_string())?;
    pg.connect_timeout(config.connect_timeout);
    pg.application_name(config.application_name.as_str());
    // This connection never sends anything once it listens, so a peer that
    // vanished (host gone, network cut) is only noticed by TCP keepalives,
    // whose libpq default waits two hours: all that time it would look like
    // `Listening` while missing every notification. Unless the URL set
    // them, probe after 30 s idle and give up after about a minute.
    if pg.get_keepalives()
        && pg.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60)
        && pg.get_keepalives_interval().is_none()
        && pg.get_keepalives_retries().is_none()
    {
        pg.keepalives_idle(Duration::from_secs(30));
        pg.keepalives_interval(Duration::from_secs(10));
        pg.keepalives_retries(3);
    }
    Ok((pg, tls))
}

/// `name` as a quoted SQL identifier: case and punctuation kept.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;
    use tokio_postgres::NoTls;

    /// Bound on any single wait, so a broken listener fails the test
    /// instead of hanging it. Generous: the assertions are about what
    /// happens, not how fast.
    const PATIENCE: Duration = Duration::from_secs(30);

    /// The superuser URL of a running cluster, the same variable the
    /// integration harness (`tests/src/lib.rs`) reads.
    fn admin_url() -> String {
        std::env::var("DATABASE_URL").unwrap_or_else(|_| {
            panic!(
                "DATABASE_URL is not set: these tests need a running PostgreSQL. Run them with \
                 `cargo xtask test`, which starts a throwaway cluster, or point DATABASE_URL at \
                 a server you own (e.g. postgres://inquest@127.0.0.1:55432/postgres)"
            )
        })
    }

    /// A plain client; its connection is driven by a task that ends when
    /// the client is dropped.
    async fn connect(url: &str) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(url, NoTls)
            .await
            .expect("connecting to the test cluster");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    }

    fn unique(prefix: &str) -> String {
        format!(
            "{prefix}{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        )
    }

    struct Running {
        events: mpsc::UnboundedReceiver<ListenEvent>,
        shutdown: CancellationToken,
        task: tokio::task::JoinHandle<()>,
    }

    impl Running {
        fn start(config: ListenerConfig) -> Self {
            let (tx, events) = mpsc::unbounded_channel();
            let shutdown = CancellationToken::new();
            let task = tokio::spawn(run_listener(config, shutdown.clone(), move |event| {
                let _ = tx.send(event);
            }));
            Self {
                events,
                shutdown,
                task,
            }
        }

        async fn next(&mut self) -> ListenEvent {
            tokio::time::timeout(PATIENCE, self.events.recv())
                .await
                .expect("no listener event in time")
                .expect("the listener ended without being shut down")
        }

        /// Shuts down, waits for `run_listener` to return, and hands back
        /// whatever it reported that was not read yet.
        async fn stop(mut self) -> Vec<ListenEvent> {
            self.shutdown.cancel();
            tokio::time::timeout(PATIENCE, self.task)
                .await
                .expect("run_listener did not return after shutdown")
                .expect("the listener task panicked");
            let mut rest = Vec::new();
            while let Ok(event) = self.events.try_recv() {
                rest.push(event);
            }
            rest
        }
    }

    fn config(url: &str, channel: &str, app: &str) -> ListenerConfig {
        ListenerConfig {
            application_name: app.to_owned(),
            min_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(200),
            ..ListenerConfig::new(url, channel)
        }
    }

    async fn notify(client: &tokio_postgres::Client, channel: &str, payload: &str) {
        client
            .execute("SELECT pg_notify($1, $2)", &[&channel, &payload])
            .await
            .expect("NOTIFY");
    }

    async fn backends(admin: &tokio_postgres::Client, app: &str) -> i64 {
        admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            )
            .await
            .expect("reading pg_stat_activity")
            .get(0)
    }

    #[tokio::test]
    async fn forwards_notifications_in_order_with_exact_payloads() {
        let url = admin_url();
        // Case, spaces and a double quote: only a quoted identifier LISTENs
        // on exactly this name.
        let channel = unique("Inquest \"listen\" ");
        let other = unique("inquest_other_");
        let app = unique("inquest-listen-test-");
        let mut listener = Running::start(config(&url, &channel, &app));
        assert_eq!(listener.next().await, ListenEvent::Listening);
        assert_eq!(backends(&connect(&url).await, &app).await, 1);

        // NOTIFY takes payloads shorter than 8000 bytes.
        let big = "ü".repeat(100) + &"0123456789".repeat(770);
        assert_eq!(big.len(), 7_900);
        let payloads = vec![
            "first".to_owned(),
            "it's \"quoted\" \\ 'ünïcødé' ✓ 🚀\nsecond line".to_owned(),
            String::new(),
            big,
            "first".to_owned(), // a repeat in its own transaction is delivered again
            "last".to_owned(),
        ];
        let sender = connect(&url).await;
        for (i, payload) in payloads.iter().enumerate() {
            notify(&sender, &channel, payload).await;
            if i == 1 {
                notify(&sender, &other, "not for this listener").await;
                // Case matters for a quoted name.
                notify(&sender, &channel.to_lowercase(), "wrong case").await;
            }
        }

        let mut received = Vec::new();
        while received.len() < payloads.len() {
            match listener.next().await {
                ListenEvent::Notification(p) => received.push(p),
                other => panic!("expected only notifications, got {other:?}"),
            }
        }
        assert_eq!(received, payloads);

        assert_eq!(listener.stop().await, Vec::new());
        // The connection went with the listener.
        let admin = connect(&url).await;
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while backends(&admin, &app).await != 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the listener's backend outlived shutdown"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn reconnects_after_its_backend_is_killed() {
        let url = admin_url();
        let channel = unique("inquest_listen_");
        let app = unique("inquest-listen-test-");
        let mut listener = Running::start(config(&url, &channel, &app));
        assert_eq!(listener.next().await, ListenEvent::Listening);

        let admin = connect(&url).await;
        notify(&admin, &channel, "before").await;
        assert_eq!(
            listener.next().await,
            ListenEvent::Notification("before".to_owned())
        );

        for round in 0..2 {
            // A backend killed in the previous round may still be on its
            // way out of pg_stat_activity; the live one is among these.
            let killed = admin
                .query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE application_name = $1",
                    &[&app],
                )
                .await
                .expect("terminating the listener's backend")
                .iter()
                .filter(|row| row.get::<_, bool>(0))
                .count();
            assert!(killed >= 1, "round {round}: no listener backend to kill");

            assert_eq!(listener.next().await, ListenEvent::Lost, "round {round}");
            assert_eq!(
                listener.next().await,
                ListenEvent::Listening,
                "round {round}"
            );

            let payload = format!("after reconnect {round}");
            notify(&admin, &channel, &payload).await;
            assert_eq!(
                listener.next().await,
                ListenEvent::Notification(payload),
                "round {round}"
            );
        }

        assert_eq!(listener.stop().await, Vec::new());
    }

    #[tokio::test]
    async fn shutdown_during_backoff_returns_and_reported_lost() {
        // Nothing listens on port 1; the backoff is far longer than the
        // test's patience, so returning at all means shutdown cut it short.
        let mut listener = Running::start(ListenerConfig {
            min_backoff: Duration::from_secs(3_600),
            max_backoff: Duration::from_secs(3_600),
            ..ListenerConfig::new("postgres://inquest@127.0.0.1:1/postgres", "inquest_listen")
        });
        assert_eq!(listener.next().await, ListenEvent::Lost);
        // The listener is now asleep in its backoff.
        assert_eq!(listener.stop().await, Vec::new());
    }

    #[tokio::test]
    async fn an_impossible_channel_is_reported_lost_and_waits_for_shutdown() {
        let mut listener = Running::start(ListenerConfig::new(
            "postgres://inquest@127.0.0.1:1/postgres",
            "x".repeat(MAX_CHANNEL_BYTES + 1),
        ));
        assert_eq!(listener.next().await, ListenEvent::Lost);
        assert_eq!(listener.stop().await, Vec::new());
    }

    #[test]
    fn quotes_identifiers() {
        assert_eq!(quote_ident("turns"), "\"turns\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }

    #[test]
    fn backoff_grows_to_its_cap_with_jitter_and_resets() {
        let min = Duration::from_millis(100);
        let max = Duration::from_millis(1_000);
        let mut backoff = Backoff::new(min, max);
        let steps = [100, 200, 400, 800, 1_000, 1_000];
        for step in steps {
            let step = Duration::from_millis(step);
            let delay = backoff.next_delay();
            assert!(
                delay >= step / 2 && delay <= step,
                "{delay:?} for step {step:?}"
            );
        }
        backoff.reset();
        assert!(backoff.next_delay() <= min);
    }
}
