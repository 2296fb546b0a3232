//! Shared by the crash-recovery process tests (`replicas_crash.rs`,
//! `replicas_recovery.rs`): one case's world (a fake model, replicas with
//! the real MCP server, a fresh database) and the checks every case makes.

use std::time::Duration;

use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor, Recorded};

use super::{
    Client, ReplicaConfig, Server, all_turns as turns, fake_provider_toml, get_session, settled,
};

/// A generous guard so a broken build fails instead of hanging; every wait
/// is a poll on a condition (the one timed wait lets a tool of known length
/// finish), never a fixed sleep standing for "long enough".
pub const GUARD: Duration = Duration::from_secs(60);

/// The process tests start many processes (each replica spawns a Python
/// MCP server); on a small shared machine, run at most two cases at once
/// so lease renewals (every 500 ms, TTL 2 s) are never starved.
pub static GATE: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// What the OpenAI adapter sends for a call whose result was never
/// recorded: the core's synthetic result, marked as an error.
pub fn synthetic_result() -> String {
    format!(
        "{}{}",
        inquest_agent::openai::TOOL_ERROR_PREFIX,
        inquest_core::resume::INTERRUPTED_TOOL_RESULT
    )
}

/// One case's world: a fake model, a config shared by its replicas, and
/// a fresh database.
pub struct World {
    pub fake: FakeProvider,
    pub config: ReplicaConfig,
    pub url: String,
    /// Dropped with the world, after its replicas.
    pub _database: inquest_tests::TestDatabase,
}

impl World {
    /// `None` (the test skips) when the MCP SDK is missing and
    /// `INQUEST_REQUIRE_MCP` is not set.
    pub async fn new() -> Option<World> {
        Self::with_approval("off").await
    }

    /// [`World::new`] whose replicas hold calls for approval under
    /// `[approval] mode = approval`.
    pub async fn with_approval(approval: &str) -> Option<World> {
        let python = inquest_testkit::mcp::python()?;
        let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
        let config = ReplicaConfig::with_approval(
            &fake_provider_toml(&fake.base_url()),
            Some(&python),
            approval,
        );
        let database = inquest_tests::fresh_database().await;
        let url = database.url.clone();
        Some(World {
            fake,
            config,
            url,
            _database: database,
        })
    }

    /// Starts replica-a (with `failpoints` armed, if any) and `others`
    /// more (replica-b, replica-c, ...) without failpoints, all at once.
    pub async fn start(&self, failpoints: Option<&str>, others: usize) -> (Server, Vec<Server>) {
        let mut starting = Vec::new();
        for i in 0..=others {
            let name = format!("replica-{}", char::from(b'a' + u8::try_from(i).unwrap()));
            let config = self.config.path().to_owned();
            let url = self.url.clone();
            let failpoints = failpoints.filter(|_| i == 0).map(str::to_owned);
            starting.push(tokio::spawn(async move {
                let env: Vec<(&str, &str)> = failpoints
                    .as_deref()
                    .map(|f| vec![("INQUEST_FAILPOINTS", f)])
                    .unwrap_or_default();
                Server::start_with(&name, &["--config", &config, "--database-url", &url], &env)
                    .await
            }));
        }
        let mut servers = Vec::new();
        for s in starting {
            servers.push(s.await.expect("a replica started"));
        }
        let a = servers.remove(0);
        (a, servers)
    }
}

/// Polls `check` (every 50 ms) until it returns `Some`, for at most
/// [`GUARD`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls the session (through `c`) until its status is `status`.
pub async fn wait_status(c: &mut Client, id: &str, status: pb::SessionStatus) -> pb::Session {
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let s = get_session(c, id).await;
        if s.status() == status {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "session never became {status:?}: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Seqs are exactly 1..=N: no gap, no duplicate.
pub fn assert_gapless(turns: &[pb::SessionTurn]) {
    let seqs: Vec<i64> = turns.iter().map(|t| t.seq).collect();
    let expected: Vec<i64> = (1..=i64::try_from(turns.len()).unwrap()).collect();
    assert_eq!(seqs, expected, "seqs must be 1..=N");
}

/// The parts of a turn that must never change once committed.
pub fn key(t: &pb::SessionTurn) -> (i64, i32, String, Vec<(String, String)>, String) {
    (
        t.seq,
        t.role,
        t.content.clone(),
        t.tool_calls
            .iter()
            .map(|c| (c.id.clone(), c.name.clone()))
            .collect(),
        t.tool_call_id.clone(),
    )
}

/// `before` is a prefix of `after`, turn for turn.
pub fn assert_prefix(before: &[pb::SessionTurn], after: &[pb::SessionTurn]) {
    assert!(
        after.len() >= before.len(),
        "turns were lost: {before:?} -> {after:?}"
    );
    for (b, a) in before.iter().zip(after) {
        assert_eq!(key(b), key(a), "a committed turn changed or vanished");
    }
}

pub fn role(t: &pb::SessionTurn) -> pb::TurnRole {
    t.role()
}

/// The chat messages of a recorded OpenAI request, system prompt left out.
pub fn messages(r: &Recorded) -> Vec<serde_json::Value> {
    r.body["messages"]
        .as_array()
        .expect("an OpenAI request has messages")
        .iter()
        .filter(|m| m["role"] != "system")
        .cloned()
        .collect()
}

/// `messages` holds the assistant call `call_id` immediately followed by a
/// tool message answering it with the synthetic "interrupted" error.
pub fn assert_synthetic_answer(messages: &[serde_json::Value], call_id: &str) {
    let at = messages
        .iter()
        .position(|m| {
            m["role"] == "assistant"
                && m["tool_calls"]
                    .as_array()
                    .is_some_and(|calls| calls.iter().any(|c| c["id"] == call_id))
        })
        .unwrap_or_else(|| panic!("no assistant message calls {call_id}: {messages:#?}"));
    let answer = &messages[at + 1];
    assert_eq!(answer["role"], "tool", "{messages:#?}");
    assert_eq!(answer["tool_call_id"], call_id, "{messages:#?}");
    assert_eq!(
        answer["content"].as_str().unwrap(),
        synthetic_result(),
        "{messages:#?}"
    );
}

/// Kills (SIGKILL) the servers a failing test leaves behind, so a panic
/// never leaks a replica hanging at a failpoint. On the success path every
/// server is stopped explicitly and this does nothing.
pub struct KillOnPanic(pub Vec<u32>);

impl Drop for KillOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for pid in &self.0 {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        }
    }
}

/// Exactly one of `survivors` claimed the orphan; returns its index.
pub fn claimer(survivors: &[&Server]) -> usize {
    let claimed: Vec<usize> = survivors
        .iter()
        .enumerate()
        .filter(|(_, s)| s.logged("claimed an orphaned session"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        claimed.len(),
        1,
        "exactly one surviving replica must claim the orphan"
    );
    claimed[0]
}

/// After a hold: queues the final answer and the report, confirms through
/// `c`, and waits for the session to complete. Checks the model's first
/// request after the confirmation: a valid transcript (the fake would have
/// refused anything else) answering `call_id` with the synthetic error.
/// Returns the stored turns at the end.
pub async fn confirm_and_complete(
    world: &World,
    c: &mut Client,
    id: &str,
    call_id: &str,
) -> Vec<pb::SessionTurn> {
    let requests_before = world.fake.request_count();
    world
        .fake
        .reply(FakeReply::text(FINAL_ANSWER))
        .reply(FakeReply::text(REPORT));
    c.continue_session(pb::ContinueSessionRequest {
        session_id: id.into(),
    })
    .await
    .expect("ContinueSession on a held session");
    let done = settled(c, id).await;
    assert_eq!(done.status(), pb::SessionStatus::Completed, "{done:?}");
    assert_eq!(done.exit_reason, "completed");

    let requests = world.fake.requests();
    assert_eq!(
        requests.len(),
        requests_before + 2,
        "one model call and the report author after the confirmation"
    );
    assert_synthetic_answer(&messages(&requests[requests_before]), call_id);
    assert_report(c, id).await;
    turns(c, id).await
}

pub async fn assert_report(c: &mut Client, id: &str) {
    let report = c
        .get_report(pb::GetReportRequest {
            session_id: id.into(),
            burst: 0,
        })
        .await
        .expect("the session has a report")
        .into_inner();
    assert_eq!(report.exit_reason, "completed", "{report:?}");
    assert_eq!(report.summary, REPORT, "{report:?}");
}

pub const QUESTION: &str = "why is checkout down?";
pub const FINAL_ANSWER: &str = "Checkout is back after the restart.";
pub const REPORT: &str = "Report: checkout was restarted.";
pub const RESTART: &str = "call-restart";
