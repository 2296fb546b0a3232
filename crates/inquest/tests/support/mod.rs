//! The real `inquest` binary as a separate OS process, for the process
//! tests: start it on a free port, wait until it listens, talk to it, stop
//! it with SIGTERM and check it exits 0.

#![allow(dead_code)] // each test binary uses its own part of this

pub mod approval;
pub mod cli;
pub mod crash;
pub mod faults;
pub mod fleet;
pub mod follow;

use std::{
    io::{BufRead, BufReader},
    net::{TcpListener, TcpStream},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};

pub type Client = InvestigationsClient<tonic::transport::Channel>;

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed (SIGKILL) and reaped when dropped, so a test
/// that panics leaves no server running behind it.
pub struct Reaped(Child);

impl std::ops::Deref for Reaped {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        // Already reaped (stop, kill9): both are no-ops.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running `inquest serve`.
pub struct Server {
    child: Reaped,
    pub port: u16,
    /// Every stderr line so far (also echoed to the test's stderr, prefixed
    /// with the server's name).
    lines: Arc<Mutex<Vec<String>>>,
    pub name: String,
}

impl Server {
    /// Runs `inquest serve --listen 127.0.0.1:<free port> ARGS` and returns
    /// once it accepts connections. The suite's `DATABASE_URL` is not passed
    /// on: a server meant to use its embedded default must not see it.
    pub async fn start(args: &[&str]) -> Server {
        Self::start_with("server", args, &[]).await
    }

    /// [`Server::start`] with a name (its replica id, and the prefix of its
    /// echoed log lines) and extra environment (e.g. `INQUEST_FAILPOINTS`).
    pub async fn start_with(name: &str, args: &[&str], env: &[(&str, &str)]) -> Server {
        Self::start_on(free_port(), name, args, env).await
    }

    /// [`Server::start_with`] on a given port (e.g. to restart a server
    /// where its clients expect it).
    pub async fn start_on(port: u16, name: &str, args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_inquest"));
        command
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .env_remove("DATABASE_URL")
            .env_remove("INQUEST_DATABASE_URL")
            .env_remove("INQUEST_FAILPOINTS")
            .env("INQUEST_REPLICA_ID", name)
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = Reaped(command.spawn().unwrap());
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = Arc::clone(&lines);
        let prefix = name.to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("[{prefix}] {line}");
                sink.lock().unwrap().push(line);
            }
        });
        for _ in 0..1200 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Server {
                    child,
                    port,
                    lines,
                    name: name.to_owned(),
                };
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("server {name} exited before listening: {status}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("server {name} never listened on {port}");
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether some stderr line so far contains `needle`.
    pub fn logged(&self, needle: &str) -> bool {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(needle))
    }

    /// Waits (up to a minute) for a stderr line containing `needle`, e.g.
    /// `failpoint before-tool-run reached`.
    pub async fn wait_for_log(&self, needle: &str) {
        for _ in 0..6000 {
            if self.logged(needle) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("server {} never logged {needle:?}", self.name);
    }

    /// Sends `signal` (e.g. "KILL", "STOP", "CONT") to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} failed");
    }

    /// `kill -9`, then reaps the process.
    pub async fn kill9(self) {
        self.signal("KILL");
        let mut child = self.child;
        tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
    }

    pub async fn client(&self) -> Client {
        InvestigationsClient::connect(format!("http://127.0.0.1:{}", self.port))
            .await
            .unwrap()
    }

    /// Every stderr line so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// [`Server::stop`], then every stderr line it wrote (the stderr reader
    /// has read to the end once the process is gone).
    pub async fn stop_and_read_logs(self) -> Vec<String> {
        let lines = Arc::clone(&self.lines);
        self.stop().await;
        // The reader thread sees EOF right after the exit.
        tokio::time::sleep(Duration::from_millis(200)).await;
        lines.lock().unwrap().clone()
    }

    /// SIGTERM, then waits: the server must exit 0.
    pub async fn stop(self) {
        let mut child = self.child;
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(exit.success(), "exit status {exit}");
    }
}

pub async fn create_incident(c: &mut Client, title: &str) -> pb::Incident {
    c.create_incident(pb::CreateIncidentRequest {
        title: title.into(),
        description: String::new(),
    })
    .await
    .unwrap()
    .into_inner()
}

pub async fn start_session(
    c: &mut Client,
    incident_id: &str,
    message: &str,
) -> Result<pb::Session, tonic::Status> {
    c.start_session(pb::StartSessionRequest {
        incident_id: incident_id.into(),
        message: message.into(),
        idempotency_key: String::new(),
    })
    .await
    .map(tonic::Response::into_inner)
}

pub async fn get_session(c: &mut Client, id: &str) -> pb::Session {
    c.get_session(pb::GetSessionRequest {
        session_id: id.into(),
    })
    .await
    .unwrap()
    .into_inner()
}

/// Every committed turn of a session, in seq order, through `ListTurns`.
pub async fn all_turns(c: &mut Client, id: &str) -> Vec<pb::SessionTurn> {
    let mut all = Vec::new();
    let mut after_seq = 0;
    loop {
        let page = c
            .list_turns(pb::ListTurnsRequest {
                session_id: id.into(),
                after_seq,
                before_seq: 0,
                limit: 0,
            })
            .await
            .unwrap()
            .into_inner();
        all.extend(page.turns);
        if page.next_after_seq == 0 {
            return all;
        }
        after_seq = page.next_after_seq;
    }
}

/// Polls until the session is neither pending nor running; panics after a
/// minute (a hang guard, not a timing assertion: replica tests outlive
/// lease TTLs and tool sleeps).
pub async fn settled(c: &mut Client, id: &str) -> pb::Session {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let s = get_session(c, id).await;
        if !matches!(
            s.status(),
            pb::SessionStatus::Pending | pb::SessionStatus::Running
        ) {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "session {id} never settled: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Lease timing of the replica tests: short, so a dead replica is replaced
/// quickly.
pub const TEST_LEASE_TTL: Duration = Duration::from_secs(2);

/// A config directory for replicas: `inquest.toml` with short leases, the
/// given provider block, and (with `python`) the incident-tools MCP server
/// counting its mutating executions in `count_file`.
pub struct ReplicaConfig {
    pub dir: tempfile::TempDir,
    pub config: std::path::PathBuf,
    pub count_file: std::path::PathBuf,
}

impl ReplicaConfig {
    /// `providers` is TOML for one or more `[[providers]]` tables, e.g.
    /// from [`fake_provider_toml`]. No call waits for approval
    /// (`[approval] mode = "off"`): these tests are about other things.
    pub fn new(providers: &str, python: Option<&str>) -> ReplicaConfig {
        Self::with_approval(providers, python, "off")
    }

    /// [`ReplicaConfig::new`] with `[approval] mode = approval` (`"off"`,
    /// `"mutating"` or `"all"`).
    pub fn with_approval(providers: &str, python: Option<&str>, approval: &str) -> ReplicaConfig {
        let dir = tempfile::Builder::new()
            .prefix("inquest-replicas-")
            .tempdir_in("/tmp")
            .unwrap();
        let count_file = dir.path().join("executions.txt");
        let mut toml = format!(
            "[lease]\nttl = \"{}ms\"\nrenew_interval = \"500ms\"\nreap_interval = \"200ms\"\n\n\
             [store]\nmax_connections = 4\n\n[shutdown]\ngrace = \"5s\"\n\n\
             [approval]\nmode = \"{approval}\"\n\n{providers}\n",
            TEST_LEASE_TTL.as_millis()
        );
        if let Some(python) = python {
            let servers = serde_json::json!({"mcpServers": {"incident": {
                "command": python,
                "args": [inquest_testkit::mcp::incident_tools_script().display().to_string()],
                "env": {"INQUEST_MCP_COUNT_FILE": count_file.display().to_string()},
            }}});
            let mcp = dir.path().join("mcp.json");
            std::fs::write(&mcp, servers.to_string()).unwrap();
            toml.push_str(&format!("\n[mcp]\nconfig = \"{}\"\n", mcp.display()));
        }
        let config = dir.path().join("inquest.toml");
        std::fs::write(&config, toml).unwrap();
        ReplicaConfig {
            dir,
            config,
            count_file,
        }
    }

    pub fn path(&self) -> &str {
        self.config.to_str().unwrap()
    }

    /// How many times a counting tool (`restart_service`, `slow_restart`)
    /// started.
    pub fn executions(&self) -> usize {
        std::fs::read_to_string(&self.count_file)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }
}

/// A `[[providers]]` table for the in-test fake (OpenAI flavour), no
/// retries.
pub fn fake_provider_toml(base_url: &str) -> String {
    format!(
        "[[providers]]\nkind = \"openai\"\nname = \"fake\"\nmodel = \"fake-model\"\n\
         base_url = \"{base_url}\"\nmax_retries = 0\ntimeout = \"60s\"\n"
    )
}
