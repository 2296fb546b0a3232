//! Shared by the fault process tests (`replicas_faults.rs`): a replica
//! config with chosen lease and shutdown timing and an MCP server whose
//! mutating tool runs until the test lets it end (`gated_tools.py`), a
//! model front that can hold a model call in flight for as long as the
//! test wants, a PostgreSQL cluster the test owns (so it can restart it),
//! and transcript checks.

use std::{
    net::SocketAddr,
    path::PathBuf,
    process::Command,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use inquest_proto::v1 as pb;
use inquest_store::embedded::{EmbeddedOptions, EmbeddedPostgres};
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
    sync::watch,
    task::JoinHandle,
};

use super::{ReplicaConfig, Server};

// ---------------------------------------------------------------------
// Replica configuration
// ---------------------------------------------------------------------

/// The timing a fault test runs its replicas with.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub lease_ttl: Duration,
    pub renew_interval: Duration,
    pub reap_interval: Duration,
    pub grace: Duration,
}

impl Timing {
    /// The replica tests' short lease (ttl 2 s, renewed every 500 ms) and
    /// the given shutdown grace.
    pub fn short_lease(grace: Duration) -> Timing {
        Timing {
            lease_ttl: Duration::from_secs(2),
            renew_interval: Duration::from_millis(500),
            reap_interval: Duration::from_millis(200),
            grace,
        }
    }
}

/// The fault tests' MCP server: `gated_restart`, a mutating tool that
/// records each execution and runs until the test opens its gate.
pub fn gated_tools_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/gated_tools.py")
}

/// A [`ReplicaConfig`] with `timing` and the gated-tools MCP server
/// (`gated_tools.py`): its `count_file` gets one JSON line per execution
/// of `gated_restart` (service, idempotency key, server pid), so
/// [`ReplicaConfig::executions`] counts executions; the gates live in
/// `<dir>/gates`.
pub fn replica_config(providers: &str, python: &str, timing: Timing) -> ReplicaConfig {
    let dir = tempfile::Builder::new()
        .prefix("inquest-faults-")
        .tempdir_in("/tmp")
        .unwrap();
    let count_file = dir.path().join("executions.jsonl");
    let gates = dir.path().join("gates");
    std::fs::create_dir(&gates).unwrap();
    let servers = json!({"mcpServers": {"gated": {
        "command": python,
        "args": [gated_tools_script().display().to_string()],
        "env": {
            "GATED_EXEC_LOG": count_file.display().to_string(),
            "GATED_RELEASE_DIR": gates.display().to_string(),
        },
    }}});
    let mcp = dir.path().join("mcp.json");
    std::fs::write(&mcp, servers.to_string()).unwrap();
    let toml = format!(
        "[lease]\nttl = \"{}ms\"\nrenew_interval = \"{}ms\"\nreap_interval = \"{}ms\"\n\n\
         [store]\nmax_connections = 4\n\n[shutdown]\ngrace = \"{}ms\"\n\n\
         [approval]\nmode = \"off\"\n\n{providers}\n\n\
         [mcp]\nconfig = \"{}\"\n",
        timing.lease_ttl.as_millis(),
        timing.renew_interval.as_millis(),
        timing.reap_interval.as_millis(),
        timing.grace.as_millis(),
        mcp.display()
    );
    let config = dir.path().join("inquest.toml");
    std::fs::write(&config, toml).unwrap();
    ReplicaConfig {
        dir,
        config,
        count_file,
    }
}

/// Lets every running (and future) `gated_restart(service)` of `config`'s
/// replicas return.
pub fn open_gate(config: &ReplicaConfig, service: &str) {
    std::fs::write(config.dir.path().join("gates").join(service), b"open").unwrap();
}

/// The recorded `gated_restart` executions: (service, idempotency key).
pub fn executions(config: &ReplicaConfig) -> Vec<(String, String)> {
    std::fs::read_to_string(&config.count_file)
        .unwrap_or_default()
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("execution log line {line:?}: {e}"));
            (
                v["service"].as_str().unwrap_or_default().to_owned(),
                v["key"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// How many executions of `gated_restart` for `service` were recorded.
pub fn executions_of(config: &ReplicaConfig, service: &str) -> usize {
    executions(config)
        .iter()
        .filter(|(s, _)| s == service)
        .count()
}

/// How many executions carried the idempotency key of `call_id` in
/// `session` (one key per call: `inquest_core::tool_idempotency_key`).
pub fn executions_of_call(config: &ReplicaConfig, session: &str, call_id: &str) -> usize {
    let key = format!("inquest:{session}:{call_id}");
    executions(config).iter().filter(|(_, k)| *k == key).count()
}

/// The MCP Python SDK's interpreter; panics when it is missing (these
/// tests never skip).
pub fn require_python() -> String {
    inquest_testkit::mcp::python().unwrap_or_else(|| {
        panic!(
            "the fault tests need the Python MCP SDK (mcp=={}): set INQUEST_TEST_PYTHON",
            inquest_testkit::mcp::MCP_PYTHON_VERSION
        )
    })
}

/// Polls `server`'s stderr for a line containing every one of `needles`
/// (e.g. a message and a session id), for at most a minute.
pub async fn wait_for_line(server: &Server, needles: &[&str]) {
    for _ in 0..6000 {
        if server_logged_all(server, needles) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "server {} never logged a line with {needles:?}",
        server.name
    );
}

/// Whether one stderr line of `server` contains all of `needles`.
pub fn server_logged_all(server: &Server, needles: &[&str]) -> bool {
    server
        .lines
        .lock()
        .unwrap()
        .iter()
        .any(|line| needles.iter().all(|n| line.contains(n)))
}

/// Waits (at most a minute) for `server` to exit, e.g. after a SIGTERM;
/// returns its exit status. Unlike [`Server::stop`] the server is kept,
/// so its stderr can still be read.
pub async fn wait_exit(server: &mut Server) -> std::process::ExitStatus {
    for _ in 0..3000 {
        if let Some(status) = server.child.try_wait().unwrap() {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("server {} did not exit within a minute", server.name);
}

// ---------------------------------------------------------------------
// The model front
// ---------------------------------------------------------------------

/// How the front answers a valid request: derived from the request alone,
/// so a recovered burst on any replica gets the same answer.
pub type Answer = dyn Fn(&Value) -> FakeReply + Send + Sync;

#[derive(Default)]
struct FrontState {
    /// Hold the next this-many valid requests until [`ModelFront::release`].
    hold_next: usize,
    /// Requests held right now.
    held: usize,
    /// Every request the strict fake refused: its status and message.
    rejected: Vec<String>,
}

struct Front {
    fake: SocketAddr,
    state: Mutex<FrontState>,
    /// Bumped by every release; a held request waits for a newer value.
    released: watch::Sender<u64>,
    answer: Box<Answer>,
}

/// An HTTP/1.1 front for the replicas' OpenAI adapter: every request goes
/// to the strict fake provider first (which refuses a transcript that is
/// not provider-valid, and records it), then a valid one is answered by
/// `answer`, after being held if the test asked for that.
pub struct ModelFront {
    pub fake: FakeProvider,
    port: u16,
    front: Arc<Front>,
    accept: JoinHandle<()>,
}

impl ModelFront {
    pub async fn start(answer: Box<Answer>) -> ModelFront {
        let fake = FakeProvider::start(Flavor::OpenAi)
            .await
            .expect("starting the fake OpenAI provider");
        let authority = fake
            .base_url()
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        let front = Arc::new(Front {
            fake: authority.parse().expect("the fake listens on an address"),
            state: Mutex::new(FrontState::default()),
            released: watch::channel(0).0,
            answer,
        });
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the model front");
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::clone(&front);
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                tokio::spawn(connection(stream, Arc::clone(&shared)));
            }
        });
        ModelFront {
            fake,
            port,
            front,
            accept,
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// The next valid request is held (the model call stays in flight)
    /// until [`ModelFront::release`].
    pub fn hold_next(&self) {
        self.lock().hold_next += 1;
    }

    /// Lets every held request be answered.
    pub fn release(&self) {
        self.front.released.send_modify(|g| *g += 1);
    }

    pub fn held(&self) -> usize {
        self.lock().held
    }

    pub fn rejections(&self) -> Vec<String> {
        self.lock().rejected.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FrontState> {
        self.front
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for ModelFront {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn connection(stream: TcpStream, front: Arc<Front>) {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    while let Some((path, body)) = read_request(&mut read).await {
        let (status, body) = answer(&front, &path, &body).await;
        let head = format!(
            "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            if status == 200 { "OK" } else { "Error" },
            body.len()
        );
        if write.write_all(head.as_bytes()).await.is_err() || write.write_all(&body).await.is_err()
        {
            return;
        }
    }
}

async fn read_request<R: tokio::io::AsyncBufRead + Unpin>(
    read: &mut R,
) -> Option<(String, Vec<u8>)> {
    let mut line = String::new();
    read.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        read.read_line(&mut header).await.ok().filter(|n| *n > 0)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    read.read_exact(&mut body).await.ok()?;
    Some((path, body))
}

async fn answer(front: &Front, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let (status, verdict) = match validate(front.fake, path, body).await {
        Ok(v) => v,
        Err(e) => (502, format!("the fake did not answer: {e}").into_bytes()),
    };
    if status != 200 {
        front
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .rejected
            .push(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&verdict)
            ));
        return (status, verdict);
    }
    let mut released = front.released.subscribe();
    let hold = {
        let mut state = front.state.lock().unwrap_or_else(PoisonError::into_inner);
        let hold = state.hold_next > 0;
        if hold {
            state.hold_next -= 1;
            state.held += 1;
        }
        hold
    };
    if hold {
        let at = *released.borrow_and_update();
        // The replica may give up (its timeout) or die meanwhile; the
        // answer then goes nowhere, which is fine.
        let _ = released.wait_for(|g| *g > at).await;
        front
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .held -= 1;
    }
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let reply = (front.answer)(&request);
    let model = request["model"].as_str().unwrap_or("fake-model");
    (200, completion(&reply, model).to_string().into_bytes())
}

/// The fake's verdict on the request (on a fresh connection).
async fn validate(fake: SocketAddr, path: &str, body: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect(fake).await?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {fake}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(502);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.as_bytes().to_vec())
        .unwrap_or_default();
    Ok((status, body))
}

/// An OpenAI chat completion carrying `reply`.
fn completion(reply: &FakeReply, model: &str) -> Value {
    let mut message = json!({"role": "assistant", "content": reply.text});
    let finish = if reply.tool_calls.is_empty() {
        "stop"
    } else {
        message["tool_calls"] = reply
            .tool_calls
            .iter()
            .map(|c| {
                json!({"id": c.id, "type": "function",
                       "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect();
        "tool_calls"
    };
    json!({
        "id": "chatcmpl-faults", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    })
}

/// The non-system messages of an OpenAI request.
pub fn request_messages(request: &Value) -> Vec<Value> {
    request["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] != "system")
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------
// A PostgreSQL cluster the test owns
// ---------------------------------------------------------------------

/// A private cluster (initdb in a temporary directory, run as `postgres`
/// when root, `max_connections = 300`) that the test may restart. Stopped
/// (immediate) when dropped.
pub struct OwnCluster {
    pg: EmbeddedPostgres,
    bin: PathBuf,
    data_dir: PathBuf,
    as_postgres: bool,
    /// Dropped after the cluster is stopped.
    _dir: tempfile::TempDir,
}

const MAX_CONNECTIONS: u32 = 300;

impl OwnCluster {
    /// Panics (the test fails, never skips) when the server binaries are
    /// missing or the cluster cannot start.
    pub async fn start() -> OwnCluster {
        let bin = inquest_store::embedded::find_binaries().unwrap_or_else(|| {
            panic!(
                "PostgreSQL server binaries (initdb, pg_ctl) were not found: this test needs \
                 them (apt-get install postgresql)"
            )
        });
        let dir = tempfile::Builder::new()
            .prefix("inquest-faults-pg-")
            .tempdir_in("/tmp")
            .unwrap();
        let data_dir = dir.path().canonicalize().unwrap();
        let options = EmbeddedOptions {
            data_dir: data_dir.clone(),
            max_connections: MAX_CONNECTIONS,
            port: Some(super::free_port()),
            database: "inquest".into(),
        };
        let pg = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&options))
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("cannot start the test's own PostgreSQL cluster: {e}"));
        let as_postgres = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        OwnCluster {
            pg,
            bin,
            data_dir,
            as_postgres,
            _dir: dir,
        }
    }

    pub fn url(&self) -> String {
        self.pg.url()
    }

    fn pgdata(&self) -> PathBuf {
        self.data_dir.join("pgdata")
    }

    fn log(&self) -> PathBuf {
        self.data_dir.join("postgres.log")
    }

    fn pg_ctl(&self) -> Command {
        let path = self.bin.join("pg_ctl");
        if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        }
    }

    /// `pg_ctl restart -m fast`: every connection is dropped; the server
    /// accepts connections again when this returns. (`-l` again: without
    /// it the restarted server would log to, and hold open, this
    /// command's output pipes.)
    pub async fn restart(&self) {
        let mut cmd = self.pg_ctl();
        cmd.arg("-D")
            .arg(self.pgdata())
            .arg("-l")
            .arg(self.log())
            .args(["-m", "fast", "-w", "-t", "60", "restart"]);
        run_blocking("pg_ctl restart -m fast", cmd).await;
    }

    /// `pg_ctl stop -m fast`: the server is down when this returns.
    pub async fn stop(&self) {
        let mut cmd = self.pg_ctl();
        cmd.arg("-D")
            .arg(self.pgdata())
            .args(["-m", "fast", "-w", "-t", "60", "stop"]);
        run_blocking("pg_ctl stop -m fast", cmd).await;
    }

    /// Starts the stopped server again with the options it first ran with.
    pub async fn start_again(&self) {
        let mut cmd = self.pg_ctl();
        cmd.arg("-D")
            .arg(self.pgdata())
            .arg("-l")
            .arg(self.log())
            .arg("-o")
            .arg(format!(
                "-c listen_addresses=127.0.0.1 -p {} -c unix_socket_directories='' \
                 -c max_connections={MAX_CONNECTIONS}",
                self.pg.port()
            ))
            .args(["-w", "-t", "60", "start"]);
        run_blocking("pg_ctl start", cmd).await;
    }
}

async fn run_blocking(what: &'static str, mut cmd: Command) {
    let out = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::task::spawn_blocking(move || cmd.output()),
    )
    .await
    .unwrap_or_else(|_| panic!("{what} did not finish in 90 s"))
    .unwrap()
    .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = self
            .pg_ctl()
            .arg("-D")
            .arg(self.pgdata())
            .args(["-m", "immediate", "-w", "-t", "30", "stop"])
            .output();
    }
}

// ---------------------------------------------------------------------
// Transcript checks
// ---------------------------------------------------------------------

/// The stored transcript has the shape a provider accepts: every tool
/// call of an assistant turn is answered by exactly one tool turn before
/// the next assistant or user turn (notices may sit between), and every
/// tool turn answers a call of the assistant turn before it. `dangling`
/// names calls allowed to stay unanswered (a recovery answers them with a
/// synthetic result that lives in the rebuilt transcript only).
pub fn assert_provider_shape(turns: &[pb::SessionTurn], dangling: &[&str]) {
    let mut open: Vec<String> = Vec::new();
    let mut answered: Vec<String> = Vec::new();
    let close = |open: &mut Vec<String>, at: i64| {
        for id in open.drain(..) {
            assert!(
                dangling.contains(&id.as_str()),
                "call {id} is unanswered before seq {at}: {turns:#?}"
            );
        }
    };
    for t in turns {
        match t.role() {
            pb::TurnRole::Assistant => {
                close(&mut open, t.seq);
                open = t.tool_calls.iter().map(|c| c.id.clone()).collect();
            }
            pb::TurnRole::User => close(&mut open, t.seq),
            pb::TurnRole::Tool => {
                let at = open
                    .iter()
                    .position(|id| *id == t.tool_call_id)
                    .unwrap_or_else(|| {
                        panic!(
                            "tool turn {} answers {:?}, not an open call: {turns:#?}",
                            t.seq, t.tool_call_id
                        )
                    });
                assert!(
                    !answered.contains(&t.tool_call_id),
                    "call {} answered twice: {turns:#?}",
                    t.tool_call_id
                );
                answered.push(open.remove(at));
            }
            _ => {}
        }
    }
    close(&mut open, i64::MAX);
}
