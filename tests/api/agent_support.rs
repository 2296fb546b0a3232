//! Helpers of the agent-loop tests: providers pointed at the fake model
//! servers, a gate that holds a fake's answers back, and bounded polls of
//! the API for a burst's end.

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{Arc, Mutex, OnceLock, PoisonError},
    time::Duration,
};

use inquest_agent::{ProviderConfig, ProviderKind};
use inquest_proto::rpc::Rpc;
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use inquest_server::Config;
use inquest_testkit::fake::{FakeProvider, Flavor};
use inquest_tests::{TestApp, spawn_app_with};
use tokio::{
    io::AsyncWriteExt,
    net::{TcpListener, TcpStream},
    sync::watch,
    task::{JoinHandle, JoinSet},
};
use tonic::{Code, transport::Channel};

pub type Client = InvestigationsClient<Channel>;

/// Every RPC of `inquest.v1.Investigations`, as the proto names it: the
/// generated table's names.
pub const RPCS: [&str; Rpc::ALL.len()] = {
    let mut names = [""; Rpc::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = Rpc::ALL[i].name();
        i += 1;
    }
    names
};

/// Hang guard of every wait here. Generous: it only turns a hang into a
/// failure and asserts nothing about speed.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// An environment variable that is set whenever the suite runs under
/// cargo, used as the fake Anthropic provider's `api_key_env` (the fake
/// only checks that a key is sent). Tests never set variables: that is
/// unsound with other threads running.
fn key_env() -> &'static str {
    if std::env::var_os("CARGO_PKG_NAME").is_some() {
        "CARGO_PKG_NAME"
    } else {
        "PATH"
    }
}

/// A provider entry for `fake`, reached at `base_url` (the fake's own, or a
/// [`Gate`]'s). No retries unless the test asks; a tiny backoff.
pub fn provider_at(flavor: Flavor, name: &str, base_url: String) -> ProviderConfig {
    let mut p = ProviderConfig::new(match flavor {
        Flavor::Anthropic => ProviderKind::Anthropic,
        Flavor::OpenAi => ProviderKind::OpenAi,
    });
    p.name = Some(name.into());
    p.model = Some("fake-model".into());
    p.base_url = Some(base_url);
    if flavor == Flavor::Anthropic {
        p.api_key_env = Some(key_env().into());
    }
    p.max_retries = Some(0);
    p.backoff = Some(Duration::from_millis(1));
    p.timeout = Some(Duration::from_secs(300));
    p
}

pub fn provider(fake: &FakeProvider, flavor: Flavor, name: &str) -> ProviderConfig {
    provider_at(flavor, name, fake.base_url())
}

/// The example investigation's directory.
pub fn example_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/checkout-latency")
}

/// Serves the example's evidence with the built-in file tools, as server
/// `evidence`.
pub fn evidence_tools(config: &mut Config) {
    config.tools.files_root = Some(example_dir().join("evidence"));
    config.tools.files_server = Some("evidence".into());
}

/// A server whose only provider is `fake` (OpenAI flavour) and whose tools
/// are the evidence files; `tweak` adjusts the rest.
pub async fn app_with_fake(fake: &FakeProvider, tweak: impl FnOnce(&mut Config)) -> TestApp {
    let entry = provider(fake, Flavor::OpenAi, "fake");
    spawn_app_with(|config| {
        config.providers = vec![entry];
        evidence_tools(config);
        tweak(config);
    })
    .await
}

/// Creates an incident and starts a session with `message`.
pub async fn start(client: &mut Client, message: &str) -> String {
    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: "agent loop test".into(),
            description: "p99 latency of checkout is up".into(),
        })
        .await
        .expect("create incident")
        .into_inner();
    client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.id,
            message: message.into(),
            idempotency_key: String::new(),
        })
        .await
        .expect("start session")
        .into_inner()
        .id
}

/// A follow-up message; returns its seq.
pub async fn send(client: &mut Client, session: &str, message: &str) -> i64 {
    client
        .send_message(pb::SendMessageRequest {
            session_id: session.into(),
            message: message.into(),
            idempotency_key: String::new(),
            if_running: 0,
        })
        .await
        .expect("send message")
        .into_inner()
        .seq
}

pub async fn session(client: &mut Client, session: &str) -> pb::Session {
    client
        .get_session(pb::GetSessionRequest {
            session_id: session.into(),
        })
        .await
        .expect("get session")
        .into_inner()
}

/// Every stored turn, in seq order.
pub async fn turns(client: &mut Client, session: &str) -> Vec<pb::SessionTurn> {
    let page = client
        .list_turns(pb::ListTurnsRequest {
            session_id: session.into(),
            after_seq: 0,
            before_seq: 0,
            limit: 1000,
        })
        .await
        .expect("list turns")
        .into_inner();
    assert_eq!(page.next_after_seq, 0, "more than one page of turns");
    page.turns
}

/// `GetReport` of `burst` (0 = latest); `None` while it does not exist.
pub async fn report(client: &mut Client, session: &str, burst: u32) -> Option<pb::Report> {
    match client
        .get_report(pb::GetReportRequest {
            session_id: session.into(),
            burst,
        })
        .await
    {
        Ok(r) => Some(r.into_inner()),
        Err(status) if status.code() == Code::NotFound => None,
        Err(status) => panic!("GetReport failed: {status:?}"),
    }
}

/// Waits until burst `burst` has landed its report and the session has
/// left `pending`/`running`; returns the report and the session.
pub async fn finished(client: &mut Client, id: &str, burst: u32) -> (pb::Report, pb::Session) {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        if let Some(r) = report(client, id, burst).await {
            let s = session(client, id).await;
            let active = [pb::SessionStatus::Pending, pb::SessionStatus::Running];
            if !active.contains(&s.status()) {
                return (r, s);
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "burst {burst} of session {id} never ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `check` until it holds; panics after the hang guard.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Asserts a session's status and exit reason.
pub fn assert_ended(s: &pb::Session, status: pb::SessionStatus, exit_reason: &str) {
    assert_eq!(s.status(), status, "session status of {s:?}");
    assert_eq!(s.exit_reason, exit_reason, "session exit reason");
}

/// The turns without the resume notices (records for humans that a
/// follow-up after an unfinished burst starts with).
pub fn without_notices(turns: Vec<pb::SessionTurn>) -> Vec<pb::SessionTurn> {
    turns
        .into_iter()
        .filter(|t| t.role() != pb::TurnRole::Notice)
        .collect()
}

/// A turn as (role, content, tool calls as (id, name, arguments), tool call
/// id, is_error): what the transcript assertions compare.
pub type Shape = (
    pb::TurnRole,
    String,
    Vec<(String, String, String)>,
    String,
    bool,
);

pub fn shapes(turns: &[pb::SessionTurn]) -> Vec<Shape> {
    turns
        .iter()
        .map(|t| {
            (
                t.role(),
                t.content.clone(),
                t.tool_calls
                    .iter()
                    .map(|c| (c.id.clone(), c.name.clone(), c.arguments_json.clone()))
                    .collect(),
                t.tool_call_id.clone(),
                t.is_error,
            )
        })
        .collect()
}

pub fn user(text: &str) -> Shape {
    (
        pb::TurnRole::User,
        text.into(),
        vec![],
        String::new(),
        false,
    )
}

pub fn assistant(text: &str, calls: &[(&str, &str, &str)]) -> Shape {
    (
        pb::TurnRole::Assistant,
        text.into(),
        calls
            .iter()
            .map(|(i, n, a)| ((*i).into(), (*n).into(), (*a).into()))
            .collect(),
        String::new(),
        false,
    )
}

/// A tool result; its content is compared separately (it is the tool's).
pub fn tool_result_of(turn: &pb::SessionTurn) -> (String, String, bool) {
    assert_eq!(turn.role(), pb::TurnRole::Tool, "not a tool turn: {turn:?}");
    (
        turn.tool_call_id.clone(),
        turn.tool_name.clone(),
        turn.is_error,
    )
}

/// A TCP proxy in front of a fake provider that lets requests through at
/// once but holds every answer back until [`Gate::open`]: a model call
/// that is "in flight" for as long as the test needs.
pub struct Gate {
    addr: SocketAddr,
    upstream: SocketAddr,
    open: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Gate {
    pub async fn in_front_of(fake: &FakeProvider) -> Gate {
        let base = fake.base_url();
        let authority = base
            .trim_start_matches("http://")
            .split('/')
            .next()
            .expect("fake base url");
        let upstream: SocketAddr = authority.parse().expect("fake address");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("gate bind");
        let addr = listener.local_addr().expect("gate address");
        let (open, _) = watch::channel(false);
        let gate = open.clone();
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                connections.spawn(relay(client, upstream, gate.subscribe()));
            }
        });
        Gate {
            addr,
            upstream,
            open,
            task,
        }
    }

    /// The fake's base URL with the gate's address.
    pub fn base_url(&self, fake: &FakeProvider) -> String {
        fake.base_url()
            .replace(&self.upstream.to_string(), &self.addr.to_string())
    }

    /// Lets every held and later answer through.
    pub fn open(&self) {
        self.open.send_replace(true);
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(client: TcpStream, upstream: SocketAddr, mut open: watch::Receiver<bool>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let requests = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
        let _ = server_write.shutdown().await;
    });
    if open.wait_for(|open| *open).await.is_ok() {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
    }
    requests.abort();
}

/// Log lines of one test, captured by a thread-local subscriber: with a
/// current-thread runtime every task of the test (the server's included)
/// logs into it.
#[derive(Clone, Default)]
pub struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl CapturedLog {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }

    /// Installs the capture for this thread until the guard drops.
    pub fn install(&self) -> tracing::subscriber::DefaultGuard {
        use tracing_subscriber::util::SubscriberInitExt as _;
        // With a single registered dispatcher, tracing-core decides a new
        // callsite's interest from the registering thread's default: a
        // callsite first hit by another test's thread would be disabled
        // for good. A second, never-used dispatcher, alive for the whole
        // run, makes it consult every registered dispatcher instead.
        static SECOND: OnceLock<tracing::Dispatch> = OnceLock::new();
        SECOND.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
        tracing_subscriber::fmt()
            .with_writer(self.clone())
            .with_ansi(false)
            .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
            .finish()
            .set_default()
    }
}

impl std::io::Write for CapturedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CapturedLog {
    type Writer = CapturedLog;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}
