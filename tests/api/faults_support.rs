//! Helpers of the fault tests: a second replica on the same database, a
//! slow link in front of a fake model (so a burst lasts long enough to be
//! hit), a row lock held from a side connection, the transcript checks, a
//! seeded random source, and a log dump when a test fails.

use std::{collections::HashMap, net::SocketAddr, time::Duration};

use inquest_core::SessionId;
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use inquest_server::{Application, Config};
use inquest_testkit::fake::{FakeProvider, Recorded};
use inquest_tests::TestApp;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    task::{JoinHandle, JoinSet},
};
use tokio_util::sync::CancellationToken;
use tonic::{Code, transport::Channel};

use crate::agent_support::{CapturedLog, Client, report, session};

/// A small deterministic random source (xorshift64*): the rounds of a test
/// vary, and a failing round can be replayed from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A second server on `app`'s database, as another replica: the same
/// configuration, its own port and replica id.
pub struct Replica {
    pub addr: SocketAddr,
    stop: CancellationToken,
    server: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Replica {
    pub async fn beside(app: &TestApp, replica_id: &str) -> Replica {
        let mut config: Config = app.config.clone();
        config.listen = "127.0.0.1:0".parse().expect("literal address");
        config.replica_id = Some(replica_id.into());
        let built = Application::build(&config, &app.db_url)
            .await
            .expect("building the second replica");
        let addr = built.local_addr().expect("bound address");
        let stop = CancellationToken::new();
        let server = tokio::spawn(built.run(stop.clone()));
        Replica {
            addr,
            stop,
            server: Some(server),
        }
    }

    pub async fn client(&self) -> Client {
        InvestigationsClient::connect(format!("http://{}", self.addr))
            .await
            .expect("connecting to the second replica")
    }

    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.stop.cancel();
        match self.server.take() {
            Some(handle) => handle.await?,
            None => Ok(()),
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A TCP proxy in front of a fake provider that holds every chunk of every
/// answer back for `delay`: each model call takes at least that long, so a
/// burst of many calls lasts long enough for a fault to hit its writes.
pub struct SlowLink {
    addr: SocketAddr,
    upstream: SocketAddr,
    task: JoinHandle<()>,
}

impl SlowLink {
    pub async fn in_front_of(fake: &FakeProvider, delay: Duration) -> SlowLink {
        let base = fake.base_url();
        let authority = base
            .trim_start_matches("http://")
            .split('/')
            .next()
            .expect("fake base url");
        let upstream: SocketAddr = authority.parse().expect("fake address");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("link bind");
        let addr = listener.local_addr().expect("link address");
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                connections.spawn(slow_relay(client, upstream, delay));
            }
        });
        SlowLink {
            addr,
            upstream,
            task,
        }
    }

    /// The fake's base URL with the link's address.
    pub fn base_url(&self, fake: &FakeProvider) -> String {
        fake.base_url()
            .replace(&self.upstream.to_string(), &self.addr.to_string())
    }
}

impl Drop for SlowLink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn slow_relay(client: TcpStream, upstream: SocketAddr, delay: Duration) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let requests = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
        let _ = server_write.shutdown().await;
    });
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match server_read.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tokio::time::sleep(delay).await;
                if client_write.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        }
    }
    requests.abort();
}

/// The session row's lock, held by an open transaction on a side
/// connection (what a long write of another client, or a stalled
/// autovacuum of the row, looks like to the server).
pub struct RowLock {
    db: tokio_postgres::Client,
}

impl RowLock {
    pub async fn take(db_url: &str, session: SessionId) -> RowLock {
        let db = inquest_tests::connect(db_url).await;
        db.batch_execute("BEGIN").await.expect("BEGIN");
        let locked = db
            .query(
                "SELECT id FROM sessions WHERE id = $1 FOR UPDATE",
                &[session.as_uuid()],
            )
            .await
            .expect("locking the session row");
        assert_eq!(locked.len(), 1, "the session row exists");
        RowLock { db }
    }

    pub async fn release(self) {
        self.db.batch_execute("COMMIT").await.expect("COMMIT");
    }
}

/// Backends of `db_name` opened by the server (application_name
/// `inquest`) that wait on a lock right now.
pub async fn server_backends_waiting_on_a_lock(db_name: &str) -> i64 {
    inquest_tests::connect(&inquest_tests::admin_url())
        .await
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 \
             AND application_name = 'inquest' AND wait_event_type = 'Lock'",
            &[&db_name],
        )
        .await
        .expect("reading pg_stat_activity")
        .get(0)
}

/// Terminates every backend of `db_name` the server opened (its pool's
/// connections, application_name `inquest`; not the LISTEN connection, not
/// the test's own). Returns how many were terminated.
pub async fn terminate_server_backends(admin: &tokio_postgres::Client, db_name: &str) -> usize {
    admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 \
             AND application_name = 'inquest' AND pid <> pg_backend_pid()",
            &[&db_name],
        )
        .await
        .expect("terminating the server's backends")
        .iter()
        .filter(|r| r.get::<_, bool>(0))
        .count()
}

pub fn is_active(status: pb::SessionStatus) -> bool {
    matches!(
        status,
        pb::SessionStatus::Pending | pb::SessionStatus::Running
    )
}

/// Waits (up to `guard`) until the session has left pending/running and
/// its latest report exists; returns both.
pub async fn settled_with_report(
    client: &mut Client,
    id: &str,
    guard: Duration,
) -> (pb::Report, pb::Session) {
    let deadline = tokio::time::Instant::now() + guard;
    loop {
        if let Some(r) = report(client, id, 0).await {
            let s = session(client, id).await;
            if !is_active(s.status()) {
                return (r, s);
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "session {id} never settled with a report: {:?}",
            session(client, id).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (up to `guard`) until the session has left pending/running.
pub async fn settled(client: &mut Client, id: &str, guard: Duration) -> pb::Session {
    let deadline = tokio::time::Instant::now() + guard;
    loop {
        let s = session(client, id).await;
        if !is_active(s.status()) {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "session {id} never settled: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every stored turn, through as many pages as it takes.
pub async fn all_turns(client: &mut Client, id: &str) -> Vec<pb::SessionTurn> {
    let mut out = Vec::new();
    let mut after = 0;
    for _ in 0..1000 {
        let page = client
            .list_turns(pb::ListTurnsRequest {
                session_id: id.into(),
                after_seq: after,
                before_seq: 0,
                limit: 1000,
            })
            .await
            .expect("list turns")
            .into_inner();
        out.extend(page.turns);
        if page.next_after_seq == 0 {
            return out;
        }
        after = page.next_after_seq;
    }
    panic!("more than 1000 pages of turns");
}

/// Seqs 1..N with no gap and no duplicate.
pub fn assert_gapless(turns: &[pb::SessionTurn]) {
    let seqs: Vec<i64> = turns.iter().map(|t| t.seq).collect();
    let want: Vec<i64> = (1..=turns.len() as i64).collect();
    assert_eq!(seqs, want, "stored seqs are not 1..N");
}

/// The stored transcript is one a provider takes: every tool call is
/// answered exactly once, by a result stored after it and before the next
/// user or assistant turn (notices aside), and no result answers a call
/// that was never made. Returns how many calls there were.
pub fn assert_tool_calls_answered_once(turns: &[pb::SessionTurn]) -> usize {
    let mut answers: HashMap<String, usize> = HashMap::new();
    let mut calls: Vec<String> = Vec::new();
    let mut open: Vec<String> = Vec::new();
    for t in turns {
        match t.role() {
            pb::TurnRole::Tool => {
                *answers.entry(t.tool_call_id.clone()).or_default() += 1;
                let at = open.iter().position(|c| *c == t.tool_call_id);
                assert!(
                    at.is_some(),
                    "seq {}: a result for {:?}, which no open call made",
                    t.seq,
                    t.tool_call_id
                );
                if let Some(at) = at {
                    open.remove(at);
                }
            }
            pb::TurnRole::Notice => {}
            role => {
                assert!(
                    open.is_empty(),
                    "seq {} ({role:?}) comes before the results of {open:?}",
                    t.seq
                );
                for c in &t.tool_calls {
                    calls.push(c.id.clone());
                    open.push(c.id.clone());
                }
            }
        }
    }
    for c in &calls {
        assert_eq!(
            answers.get(c).copied().unwrap_or(0),
            1,
            "tool call {c} is not answered exactly once"
        );
    }
    assert_eq!(
        calls.len(),
        answers.len(),
        "results for calls never made: {answers:?}"
    );
    calls.len()
}

/// Every request the OpenAI-flavoured fake received was a valid
/// transcript (checked here independently of the fake's own check): an
/// assistant message's tool calls are all answered by the tool messages
/// right after it, once each, and no tool message answers anything else.
pub fn assert_requests_valid(requests: &[Recorded]) {
    for (i, r) in requests.iter().enumerate() {
        let messages = r.body["messages"]
            .as_array()
            .unwrap_or_else(|| panic!("request {i} has no messages: {}", r.body));
        let mut open: Vec<String> = Vec::new();
        for (j, m) in messages.iter().enumerate() {
            let role = m["role"].as_str().unwrap_or("");
            if role == "tool" {
                let id = m["tool_call_id"].as_str().unwrap_or("");
                let at = open.iter().position(|c| c == id);
                assert!(
                    at.is_some(),
                    "request {i}, message {j}: result for {id:?}, not an open call"
                );
                if let Some(at) = at {
                    open.remove(at);
                }
                continue;
            }
            assert!(
                open.is_empty(),
                "request {i}, message {j} ({role}) before the results of {open:?}"
            );
            if let Some(calls) = m["tool_calls"].as_array() {
                open = calls
                    .iter()
                    .map(|c| c["id"].as_str().unwrap_or("").to_owned())
                    .collect();
            }
        }
        assert!(
            open.is_empty(),
            "request {i} ends with unanswered calls {open:?}"
        );
    }
}

/// Whether a status is one a client may see from a read while the pool is
/// exhausted.
pub fn is_retryable(code: Code) -> bool {
    matches!(code, Code::Unavailable)
}

/// Captures this test's log lines; prints them if the test fails.
pub struct LogDump {
    pub log: CapturedLog,
    _guard: tracing::subscriber::DefaultGuard,
}

impl LogDump {
    pub fn install() -> LogDump {
        let log = CapturedLog::default();
        let guard = log.install();
        LogDump { log, _guard: guard }
    }

    pub fn text(&self) -> String {
        self.log.text()
    }

    /// Waits (up to `guard`) until a line containing `needle` was logged.
    pub async fn wait_for(&self, needle: &str, guard: Duration) {
        let deadline = tokio::time::Instant::now() + guard;
        while !self.text().contains(needle) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "never logged: {needle:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for LogDump {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let text = self.log.text();
            const TAIL: usize = 60_000;
            let start = text.len().saturating_sub(TAIL);
            let start = (start..text.len())
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(text.len());
            eprintln!(
                "---- server log (last {TAIL} bytes) ----\n{}",
                &text[start..]
            );
        }
    }
}

/// A channel to `addr` (for many concurrent clients on one connection).
pub async fn channel(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect()
        .await
        .expect("connecting")
}
