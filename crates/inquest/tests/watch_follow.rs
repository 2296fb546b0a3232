//! `inquest watch --follow` as a real CLI process against a real server:
//! it shows the first burst, waits past its end, shows the burst a
//! follow-up sent through the API opens, and exits 0 when the session is
//! cancelled; Ctrl-C (SIGINT) ends it quietly with 0 too. Without
//! `--follow`, watch ends when the burst settles. Through a PostgreSQL
//! outage longer than a few reconnects, or while the server restarts,
//! `watch` and `send` retry until it is over, and `send` stores its
//! message once.

mod support;

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use inquest_proto::v1 as pb;
use support::{Server, all_turns, create_incident, faults::OwnCluster, settled, start_session};

/// A running CLI process whose stdout lines are collected.
struct Cli {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<String>>,
}

impl Cli {
    fn start(server: &Server, args: &[&str]) -> Cli {
        Self::start_at(server.port, args)
    }

    fn start_at(port: u16, args: &[&str]) -> Cli {
        Self::start_with_servers(&format!("http://127.0.0.1:{port}"), args)
    }

    /// A CLI whose `INQUEST_SERVER` is `servers` (comma-separated).
    fn start_with_servers(servers: &str, args: &[&str]) -> Cli {
        let mut child = Command::new(env!("CARGO_BIN_EXE_inquest"))
            .args(args)
            .env("INQUEST_SERVER", servers)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                eprintln!("[watch] {line}");
                sink.lock().unwrap().push(line);
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                let mut all = sink.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        Cli {
            child,
            lines,
            stderr,
        }
    }

    fn output(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// How many stdout lines so far contain `needle`.
    fn count(&self, needle: &str) -> usize {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// Waits (a minute at most: a hang guard) until `n` lines contain
    /// `needle`.
    async fn wait_for(&self, needle: &str, n: usize) {
        for _ in 0..6000 {
            if self.count(needle) >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "watch never printed {needle:?} {n} times:\n{}",
            self.output()
        );
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits (a minute at most) for the process to exit.
    async fn exit(&mut self) -> ExitStatus {
        for _ in 0..6000 {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the reader threads drain the pipes.
                tokio::time::sleep(Duration::from_millis(50)).await;
                return status;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("watch did not exit:\n{}", self.output());
    }
}

impl Drop for Cli {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A scripted provider's `script.json` and an `inquest.toml` serving it,
/// with the built-in file tools over `evidence/` (which holds
/// `deploys.log`), in a temporary directory.
struct Scripted {
    _dir: tempfile::TempDir,
    config: String,
}

impl Scripted {
    fn new(script: &str) -> Scripted {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("script.json"), script).unwrap();
        std::fs::create_dir(dir.path().join("evidence")).unwrap();
        std::fs::write(dir.path().join("evidence/deploys.log"), "14:05 deploy\n").unwrap();
        let config = dir.path().join("inquest.toml");
        std::fs::write(
            &config,
            "[[providers]]\nkind = \"script\"\nscript = \"script.json\"\n\n\
             [tools]\nfiles_root = \"evidence\"\nfiles_server = \"evidence\"\n",
        )
        .unwrap();
        Scripted {
            config: config.to_str().unwrap().to_owned(),
            _dir: dir,
        }
    }

    /// `serve` arguments for a server of this config on `url`.
    fn args<'a>(&'a self, url: &'a str) -> [&'a str; 4] {
        ["--database-url", url, "--config", &self.config]
    }
}

/// Two plain answers: the first burst's, then a follow-up's.
const TWO_ANSWERS: &str = r#"[{"text": "First look: nothing obvious yet."},
    {"text": "The deploy at 14:05 is the cause."}]"#;

/// Arms the first tool call to hang before it runs, so its burst stays
/// running: a live stream to watch.
const HANG_BEFORE_TOOL: (&str, &str) = ("INQUEST_FAILPOINTS", "before-tool-run=1*return(hang)");

/// A new incident titled `title` and a session asking "What happened?".
async fn asked(c: &mut support::Client, title: &str) -> pb::Session {
    let incident = create_incident(c, title).await;
    start_session(c, &incident.id, "What happened?")
        .await
        .expect("starting the session")
}

#[tokio::test]
async fn watch_follow_shows_every_burst_until_the_session_is_cancelled() {
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    // Burst 1: one plain answer. Burst 2 (the follow-up): a tool call that
    // the armed failpoint hangs before, so the burst is still running when
    // the test cancels it.
    let scripted = Scripted::new(
        r#"[{"text": "First look: nothing obvious yet."},
            {"text": "Checking the deploy log.",
             "tool_calls": [{"name": "read_file", "arguments": {"path": "deploys.log"}}]}]"#,
    );
    let server = Server::start_with("server", &scripted.args(&url), &[HANG_BEFORE_TOOL]).await;
    let mut c = server.client().await;
    let session = asked(&mut c, "follow me").await;
    let first = settled(&mut c, &session.id).await;
    assert_eq!(first.status(), pb::SessionStatus::Completed, "{first:?}");

    // Without --follow: the settled burst is shown and watch ends, 0.
    let mut plain = Cli::start(&server, &["watch", &session.id]);
    assert!(plain.exit().await.success(), "{}", plain.output());
    assert_eq!(plain.count("First look: nothing obvious yet."), 1);
    assert_eq!(plain.count("-- session completed"), 1);
    assert_eq!(plain.count("waiting for the next burst"), 0);

    // With --follow: past the end it waits instead of exiting. A second
    // follower is stopped with Ctrl-C while it waits.
    let mut follow = Cli::start(&server, &["watch", "--follow", &session.id]);
    let mut interrupted = Cli::start(&server, &["watch", "--follow", &session.id]);
    follow.wait_for("(waiting for the next burst", 1).await;
    interrupted.wait_for("(waiting for the next burst", 1).await;
    assert!(follow.running(), "watch --follow exited after one burst");
    assert_eq!(follow.count("First look: nothing obvious yet."), 1);

    interrupted.signal("INT");
    let status = interrupted.exit().await;
    assert!(status.success(), "Ctrl-C: {status}");
    assert_eq!(interrupted.stderr.lock().unwrap().as_str(), "");

    // A follow-up sent through the API: the follower shows its burst.
    let seq = c
        .send_message(pb::SendMessageRequest {
            session_id: session.id.clone(),
            message: "Look at the deploys.".into(),
            idempotency_key: String::new(),
            if_running: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .seq;
    follow.wait_for("Look at the deploys.", 1).await;
    follow.wait_for("Checking the deploy log.", 1).await;
    server
        .wait_for_log("failpoint before-tool-run reached")
        .await;
    assert!(follow.running());
    assert!(
        follow.count(&format!("#{seq:<4} user      Look at the deploys.")) == 1,
        "{}",
        follow.output()
    );

    // Cancelled: the only final status, so the follower exits 0.
    let cancelled = c
        .cancel_session(pb::CancelSessionRequest {
            session_id: session.id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(cancelled.status(), pb::SessionStatus::Cancelled);
    let status = follow.exit().await;
    assert!(
        status.success(),
        "{status}: {}",
        follow.stderr.lock().unwrap()
    );
    assert_eq!(
        follow.count("-- session cancelled"),
        1,
        "{}",
        follow.output()
    );
    // Each turn was shown once across both bursts.
    assert_eq!(follow.count("First look: nothing obvious yet."), 1);
    assert_eq!(follow.count("Checking the deploy log."), 1);
    // The failpoint's hang outlives the cancel and the shutdown grace: a
    // SIGTERM still ends the server, and cleanly (exit 0), once the grace
    // and the abandon wait are over.
    server.stop().await;
}

/// PostgreSQL is down for 40 s, longer than the eight reconnects the CLI
/// used to give up after (~32 s). Started during the outage, `watch` of a
/// completed session and `send` of a follow-up both retry through it (the
/// server answers STORE_UNAVAILABLE all along); once PostgreSQL is back,
/// `send` stores its message once (the key it made for it makes its
/// retries safe), both follow the burst it opens to its end and exit 0.
#[tokio::test]
async fn watch_and_send_ride_out_a_postgres_outage() {
    let cluster = OwnCluster::start().await;
    let scripted = Scripted::new(TWO_ANSWERS);
    let url = cluster.url();
    let server = Server::start_with("server", &scripted.args(&url), &[]).await;
    let mut c = server.client().await;
    let session = asked(&mut c, "outage").await;
    let first = settled(&mut c, &session.id).await;
    assert_eq!(first.status(), pb::SessionStatus::Completed, "{first:?}");

    cluster.stop().await;
    let mut watch = Cli::start(&server, &["watch", &session.id]);
    let mut send = Cli::start(&server, &["send", &session.id, "And the deploys?"]);
    watch.wait_for("(stream interrupted", 1).await;
    tokio::time::sleep(Duration::from_secs(40)).await;
    assert!(
        watch.running(),
        "watch gave up during the outage: {}",
        watch.stderr.lock().unwrap()
    );
    assert!(
        send.running(),
        "send gave up during the outage: {}",
        send.stderr.lock().unwrap()
    );
    cluster.start_again().await;

    for (name, cli) in [("send", &mut send), ("watch", &mut watch)] {
        let status = cli.exit().await;
        assert!(
            status.success(),
            "{name}: {status}: {}\n{}",
            cli.stderr.lock().unwrap(),
            cli.output()
        );
        // `watch` may end on the first burst or on the follow-up's.
        assert_eq!(cli.count("-- session "), 1, "{name}: {}", cli.output());
        assert_eq!(
            cli.count("-- session failed"),
            0,
            "{name}: {}",
            cli.output()
        );
    }
    // The follow-up's burst ends waiting for the user (the script's last
    // reply asks nothing of a tool).
    assert_eq!(send.count("-- session idle"), 1, "{}", send.output());
    assert_eq!(
        send.count("The deploy at 14:05 is the cause."),
        1,
        "{}",
        send.output()
    );
    let turns = all_turns(&mut c, &session.id).await;
    let sent = turns
        .iter()
        .filter(|t| t.content == "And the deploys?")
        .count();
    assert_eq!(sent, 1, "the follow-up was stored once: {turns:#?}");
    let s = settled(&mut c, &session.id).await;
    assert_eq!(s.status(), pb::SessionStatus::Idle, "{s:?}");
    server.stop().await;
}

/// The server is killed (-9) and started again on the same port 3 s later.
/// `send`, started while nothing listens, waits for the server instead of
/// failing; `watch --follow`, attached before the kill, reconnects. Both
/// show the follow-up's burst; the message is stored once.
#[tokio::test]
async fn send_and_watch_ride_out_a_server_restart() {
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    let scripted = Scripted::new(TWO_ANSWERS);
    let args = scripted.args(&url);
    let server = Server::start_with("server", &args, &[]).await;
    let port = server.port;
    let mut c = server.client().await;
    let session = asked(&mut c, "restart").await;
    settled(&mut c, &session.id).await;
    let mut follow = Cli::start(&server, &["watch", "--follow", &session.id]);
    follow.wait_for("(waiting for the next burst", 1).await;

    server.kill9().await;
    let mut send = Cli::start_at(port, &["send", &session.id, "And the deploys?"]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        send.running(),
        "send gave up while the server was down: {}",
        send.stderr.lock().unwrap()
    );
    let server = Server::start_on(port, "server", &args, &[]).await;

    let status = send.exit().await;
    assert!(
        status.success(),
        "{status}: {}\n{}",
        send.stderr.lock().unwrap(),
        send.output()
    );
    assert_eq!(
        send.count("The deploy at 14:05 is the cause."),
        1,
        "{}",
        send.output()
    );
    follow
        .wait_for("The deploy at 14:05 is the cause.", 1)
        .await;
    assert_eq!(
        follow.count("First look: nothing obvious yet."),
        1,
        "{}",
        follow.output()
    );
    // The outage was said once, however many attempts it took, and so
    // was its end.
    assert_eq!(
        follow.count("(stream interrupted"),
        1,
        "{}",
        follow.output()
    );
    assert_eq!(follow.count("(reconnected after"), 1, "{}", follow.output());
    let mut c = server.client().await;
    let turns = all_turns(&mut c, &session.id).await;
    let sent = turns
        .iter()
        .filter(|t| t.content == "And the deploys?")
        .count();
    assert_eq!(sent, 1, "the follow-up was stored once: {turns:#?}");
    follow.signal("INT");
    assert!(follow.exit().await.success());
    server.stop().await;
}

/// A stopped server (SIGSTOP: its connections stay open and silent) is
/// noticed by an attached `watch`: its HTTP/2 pings go unanswered, the
/// connection is closed and the watch says it is reconnecting, instead
/// of waiting on the silent stream forever. Once the server runs again
/// (SIGCONT) the watch goes on, and ends 0 when the session is cancelled.
#[tokio::test]
async fn watch_notices_a_stopped_server_and_reconnects_when_it_runs_again() {
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    let scripted = Scripted::new(
        r#"[{"text": "Checking the deploy log.",
             "tool_calls": [{"name": "read_file", "arguments": {"path": "deploys.log"}}]}]"#,
    );
    // The tool call hangs, so the burst stays running: a live stream.
    let server = Server::start_with("server", &scripted.args(&url), &[HANG_BEFORE_TOOL]).await;
    let mut c = server.client().await;
    let session = asked(&mut c, "stopped").await;
    server
        .wait_for_log("failpoint before-tool-run reached")
        .await;
    let mut watch = Cli::start(&server, &["watch", &session.id]);
    watch.wait_for("Checking the deploy log.", 1).await;

    server.signal("STOP");
    // Pings every 10 s, closed after 10 s unanswered: well within the
    // minute `wait_for` allows.
    let noticed = tokio::time::timeout(
        Duration::from_secs(60),
        watch.wait_for("(stream interrupted", 1),
    )
    .await;
    server.signal("CONT");
    assert!(
        noticed.is_ok(),
        "the watch never noticed: {}",
        watch.output()
    );
    assert!(watch.running(), "{}", watch.stderr.lock().unwrap());

    let cancelled = c
        .cancel_session(pb::CancelSessionRequest {
            session_id: session.id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(cancelled.status(), pb::SessionStatus::Cancelled);
    let status = watch.exit().await;
    assert!(
        status.success(),
        "{status}: {}\n{}",
        watch.stderr.lock().unwrap(),
        watch.output()
    );
    assert_eq!(watch.count("-- session cancelled"), 1, "{}", watch.output());
    assert_eq!(
        watch.count("Checking the deploy log."),
        1,
        "{}",
        watch.output()
    );
    server.stop().await;
}

/// The replica a watch is attached to dies (kill -9) while another one
/// runs the session, which ends meanwhile. With both replicas in
/// `--server`, the watch says the stream broke once, goes on on the other
/// replica, says it is back, and shows the end: it does not retry the
/// dead one until it gives up.
#[tokio::test]
async fn a_watch_moves_to_another_replica_and_shows_the_end_it_missed() {
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    let scripted = Scripted::new(
        r#"[{"text": "Checking the deploy log.",
             "tool_calls": [{"name": "read_file", "arguments": {"path": "deploys.log"}}]}]"#,
    );
    // The burst runs on `runner` and hangs before its tool: still running
    // while the watched replica dies.
    let watched = Server::start_with("watched", &scripted.args(&url), &[]).await;
    let runner = Server::start_with("runner", &scripted.args(&url), &[HANG_BEFORE_TOOL]).await;
    let mut c = runner.client().await;
    let session = asked(&mut c, "two replicas").await;
    runner
        .wait_for_log("failpoint before-tool-run reached")
        .await;
    let servers = format!(
        "http://127.0.0.1:{},http://127.0.0.1:{}",
        watched.port, runner.port
    );
    // Attached to the first address that answers: the watched replica.
    let mut watch = Cli::start_with_servers(&servers, &["watch", &session.id]);
    watch.wait_for("Checking the deploy log.", 1).await;

    watched.kill9().await;
    // The session ends on the other replica while the watch is cut off.
    c.cancel_session(pb::CancelSessionRequest {
        session_id: session.id.clone(),
    })
    .await
    .unwrap();
    let status = watch.exit().await;
    assert!(
        status.success(),
        "{status}: {}\n{}",
        watch.stderr.lock().unwrap(),
        watch.output()
    );
    assert_eq!(watch.count("(stream interrupted"), 1, "{}", watch.output());
    assert_eq!(watch.count("(reconnected after"), 1, "{}", watch.output());
    assert_eq!(watch.count("-- session cancelled"), 1, "{}", watch.output());
    runner.stop().await;
}

/// `inquest send --if-running enqueue` while a burst runs: the message is
/// queued (the command says where and exits 0 without following); without
/// the flag the send is refused, exit 1. The cancel drops the queue and
/// the session says so.
#[tokio::test]
async fn send_if_running_enqueue_queues_behind_the_running_burst() {
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    // The first burst's tool call hangs before it runs: a running burst.
    let scripted = Scripted::new(
        r#"[{"text": "Checking the deploy log.",
             "tool_calls": [{"name": "read_file", "arguments": {"path": "deploys.log"}}]}]"#,
    );
    let server = Server::start_with("server", &scripted.args(&url), &[HANG_BEFORE_TOOL]).await;
    let mut c = server.client().await;
    let session = asked(&mut c, "queue me").await;
    server
        .wait_for_log("failpoint before-tool-run reached")
        .await;

    let mut queued = Cli::start(
        &server,
        &[
            "send",
            &session.id,
            "Not the DB: pricing-svc.",
            "--if-running",
            "enqueue",
        ],
    );
    assert!(queued.exit().await.success(), "{}", queued.output());
    assert_eq!(
        queued.count(&format!(
            "queued at position 1 behind the running burst of session {}",
            session.id
        )),
        1,
        "{}",
        queued.output()
    );
    let mut json = Cli::start(
        &server,
        &[
            "send",
            &session.id,
            "And the cache.",
            "--if-running",
            "enqueue",
            "--json",
        ],
    );
    assert!(json.exit().await.success(), "{}", json.output());
    let line: serde_json::Value = serde_json::from_str(json.output().trim()).unwrap();
    assert_eq!(line["type"], "queued");
    assert_eq!(line["position"], 2);

    let mut refused = Cli::start(&server, &["send", &session.id, "Now?"]);
    let status = refused.exit().await;
    assert_eq!(status.code(), Some(1), "{}", refused.output());
    assert!(
        refused.stderr.lock().unwrap().contains("already running"),
        "{}",
        refused.stderr.lock().unwrap()
    );

    c.cancel_session(pb::CancelSessionRequest {
        session_id: session.id.clone(),
    })
    .await
    .unwrap();
    let turns = all_turns(&mut c, &session.id).await;
    assert!(
        turns
            .iter()
            .any(|t| t.content == "Session cancelled: 2 queued messages dropped without being run."),
        "{turns:?}"
    );
    server.stop().await;
}

/// `inquest send --interrupt` while the model is thinking (a scripted
/// reply that takes ten minutes): the burst stops, ends
/// `interrupted_by_user`, and the command follows the message's burst to
/// its answer, exit 0. `--queue` and `--interrupt` exclude each other.
#[tokio::test]
async fn send_interrupt_stops_the_running_burst_and_follows_the_message() {
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    let scripted = Scripted::new(
        r#"{"replies": [{"text": "Reading everything, slowly.", "delay": "600s"}],
            "final": "Nothing more.",
            "follow_up": {"replies": [{"text": "Looking at pricing-svc instead."}],
                          "final": "pricing-svc it is."}}"#,
    );
    let server = Server::start(&scripted.args(&url)).await;
    let mut c = server.client().await;
    let session = asked(&mut c, "interrupt me").await;
    let running = settled_or_running(&mut c, &session.id).await;
    assert_eq!(running, pb::SessionStatus::Running);

    let mut both = Cli::start(
        &server,
        &["send", &session.id, "Now?", "--queue", "--interrupt"],
    );
    assert_eq!(both.exit().await.code(), Some(2), "{}", both.output());

    let mut cli = Cli::start(
        &server,
        &[
            "send",
            &session.id,
            "Not the DB: pricing-svc.",
            "--interrupt",
        ],
    );
    let status = cli.exit().await;
    assert!(
        status.success(),
        "{status}: {}\n{}",
        cli.stderr.lock().unwrap(),
        cli.output()
    );
    assert_eq!(
        cli.count("interrupting the running burst of session"),
        1,
        "{}",
        cli.output()
    );
    assert_eq!(
        cli.count("Looking at pricing-svc instead."),
        1,
        "{}",
        cli.output()
    );
    let report = c
        .get_report(pb::GetReportRequest {
            session_id: session.id.clone(),
            burst: 1,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(report.exit_reason, "interrupted_by_user");
    let turns = all_turns(&mut c, &session.id).await;
    assert!(
        !turns.iter().any(|t| t.content.contains("slowly")),
        "{turns:?}"
    );
    server.stop().await;
}

/// Polls until the session is running (or settled); its status.
async fn settled_or_running(c: &mut support::Client, session: &str) -> pb::SessionStatus {
    for _ in 0..6000 {
        let s = c
            .get_session(pb::GetSessionRequest {
                session_id: session.into(),
            })
            .await
            .unwrap()
            .into_inner();
        if s.status() != pb::SessionStatus::Pending {
            return s.status();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("session {session} never left pending");
}
