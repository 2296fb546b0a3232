//! Crash recovery across replicas (issue 6), with real processes: several
//! `inquest serve` binaries share one PostgreSQL database, each spawning
//! the real Python MCP incident-tools server, all talking to one in-test
//! fake model provider. The replica running a session is killed (`kill -9`)
//! or paused (`SIGSTOP`) at a precise point; another replica must claim the
//! orphan, write a recovery notice, and either continue on its own or hold
//! the session until `ContinueSession`, without losing or duplicating a
//! turn and without re-running a mutating tool.

mod support;

use std::time::Duration;

use inquest_agent::fake::{Behaviour, FakeProvider, FakeReply, Flavor, Recorded};
use inquest_proto::v1 as pb;
use support::{
    Client, ReplicaConfig, Server, all_turns as turns, create_incident, fake_provider_toml,
    get_session, start_session,
};

/// A generous guard so a broken build fails instead of hanging; every wait
/// is a poll on a condition (the one timed wait lets a tool of known length
/// finish), never a fixed sleep standing for "long enough".
const GUARD: Duration = Duration::from_secs(60);

/// The process tests start many processes (each replica spawns a Python
/// MCP server); on a small shared machine, run at most two cases at once
/// so lease renewals (every 500 ms, TTL 2 s) are never starved.
static GATE: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// What the OpenAI adapter sends for a call whose result was never
/// recorded: the core's synthetic result, marked as an error.
fn synthetic_result() -> String {
    format!(
        "{}{}",
        inquest_agent::openai::TOOL_ERROR_PREFIX,
        inquest_core::resume::INTERRUPTED_TOOL_RESULT
    )
}

/// One case's world: a fake model, a config shared by its replicas, and
/// a fresh database.
struct World {
    fake: FakeProvider,
    config: ReplicaConfig,
    url: String,
}

impl World {
    /// `None` (the test skips) when the MCP SDK is missing and
    /// `INQUEST_REQUIRE_MCP` is not set.
    async fn new() -> Option<World> {
        let python = inquest_agent::mcp::testing::python()?;
        let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
        let config = ReplicaConfig::new(&fake_provider_toml(&fake.base_url()), Some(&python));
        let (_, url) = inquest_tests::fresh_database().await;
        Some(World { fake, config, url })
    }

    /// Starts replica-a (with `failpoints` armed, if any) and `others`
    /// more (replica-b, replica-c, ...) without failpoints, all at once.
    async fn start(&self, failpoints: Option<&str>, others: usize) -> (Server, Vec<Server>) {
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
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
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
async fn wait_status(c: &mut Client, id: &str, status: pb::SessionStatus) -> pb::Session {
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
fn assert_gapless(turns: &[pb::SessionTurn]) {
    let seqs: Vec<i64> = turns.iter().map(|t| t.seq).collect();
    let expected: Vec<i64> = (1..=i64::try_from(turns.len()).unwrap()).collect();
    assert_eq!(seqs, expected, "seqs must be 1..=N");
}

/// The parts of a turn that must never change once committed.
fn key(t: &pb::SessionTurn) -> (i64, i32, String, Vec<(String, String)>, String) {
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
fn assert_prefix(before: &[pb::SessionTurn], after: &[pb::SessionTurn]) {
    assert!(
        after.len() >= before.len(),
        "turns were lost: {before:?} -> {after:?}"
    );
    for (b, a) in before.iter().zip(after) {
        assert_eq!(key(b), key(a), "a committed turn changed or vanished");
    }
}

fn role(t: &pb::SessionTurn) -> pb::TurnRole {
    t.role()
}

/// The chat messages of a recorded OpenAI request, system prompt left out.
fn messages(r: &Recorded) -> Vec<serde_json::Value> {
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
fn assert_synthetic_answer(messages: &[serde_json::Value], call_id: &str) {
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
struct KillOnPanic(Vec<u32>);

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
fn claimer(survivors: &[&Server]) -> usize {
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
async fn confirm_and_complete(
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
    let done = wait_settled(c, id).await;
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

async fn assert_report(c: &mut Client, id: &str) {
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

/// Polls until the session is neither pending nor running.
async fn wait_settled(c: &mut Client, id: &str) -> pb::Session {
    let deadline = tokio::time::Instant::now() + GUARD;
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
            "session never settled: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const QUESTION: &str = "why is checkout down?";
const FINAL_ANSWER: &str = "Checkout is back after the restart.";
const REPORT: &str = "Report: checkout was restarted.";
const RESTART: &str = "call-restart";

// ---------------------------------------------------------------------
// 1. kill -9 at each failpoint of a turn that calls a mutating tool.
// ---------------------------------------------------------------------

/// Replica A (failpoint `point` armed to hang once) runs a session whose
/// first model reply calls the mutating `restart_service`; once A reports
/// the failpoint, it is killed with -9. A surviving replica must claim
/// the orphan (epoch + 1), hold it with an `interrupted_turn` notice (the
/// call has no stored result and may have run), keep every turn committed
/// before the kill, and run nothing again; `ContinueSession` then sends
/// the model the synthetic error for the call and the session completes.
///
/// `ran`: whether the tool had run when A hung (it counts executions).
/// At every point the assistant turn is committed and no result is: the
/// first fenced write of a fresh burst is the assistant turn (the user
/// turn is written by `StartSession`), so even `between-commit-and-publish`
/// hangs right after that turn committed and before the tool ran.
async fn kill9_at_failpoint(point: &str, ran: bool, replicas: usize) {
    let _permit = GATE.acquire().await.unwrap();
    let Some(world) = World::new().await else {
        return;
    };
    let (a, others) = world
        .start(Some(&format!("{point}=1*return(hang)")), replicas - 1)
        .await;
    let _guard = KillOnPanic(
        std::iter::once(a.pid())
            .chain(others.iter().map(Server::pid))
            .collect(),
    );
    world
        .fake
        .reply(FakeReply::text("Restarting checkout.").call(
            RESTART,
            "restart_service",
            r#"{"service":"checkout"}"#,
        ));
    let mut ca = a.client().await;
    let mut cb = others[0].client().await;
    let incident = create_incident(&mut ca, "checkout down").await;
    let session = start_session(&mut ca, &incident.id, QUESTION)
        .await
        .unwrap();
    let id = session.id.clone();
    a.wait_for_log(&format!("failpoint {point} reached")).await;

    // What A committed before it dies: the user turn and the assistant
    // turn calling the tool; no result.
    let running = get_session(&mut cb, &id).await;
    assert_eq!(running.status(), pb::SessionStatus::Running, "{running:?}");
    assert_eq!(running.lease_owner, "replica-a", "{running:?}");
    let before = turns(&mut cb, &id).await;
    assert_eq!(
        before.iter().map(role).collect::<Vec<_>>(),
        [pb::TurnRole::User, pb::TurnRole::Assistant],
        "{before:#?}"
    );
    assert_eq!(before[1].tool_calls[0].id, RESTART);
    assert_eq!(
        world.config.executions(),
        usize::from(ran),
        "tool runs when A hung"
    );
    a.kill9().await;

    let held = wait_status(&mut cb, &id, pb::SessionStatus::AwaitingConfirmation).await;
    let survivors: Vec<&Server> = others.iter().collect();
    let who = claimer(&survivors);
    eprintln!("{point}: recovered by {}", survivors[who].name);
    assert_eq!(
        held.lease_epoch,
        running.lease_epoch + 1,
        "one claim took the session over: {held:?}"
    );
    assert_eq!(held.exit_reason, "awaiting_confirmation");
    let plan = held
        .last_recovery_plan
        .as_ref()
        .expect("a stored recovery plan");
    assert_eq!(plan.kind, "interrupted_turn", "{plan:?}");
    assert!(
        plan.requires_confirmation && !plan.can_auto_continue,
        "{plan:?}"
    );
    assert_eq!(plan.repaired_call_ids, [RESTART]);
    assert_eq!(plan.interrupted_calls.len(), 1, "{plan:?}");
    assert_eq!(plan.interrupted_calls[0].name, "restart_service");
    assert_eq!(plan.interrupted_calls[0].side_effect, "mutating");

    // Recovery added exactly its notice; the dead worker added nothing.
    let recovered = turns(&mut cb, &id).await;
    assert_gapless(&recovered);
    assert_prefix(&before, &recovered);
    assert_eq!(recovered.len(), before.len() + 1, "{recovered:#?}");
    assert_eq!(recovered[2].role(), pb::TurnRole::Notice);
    assert!(
        recovered[2]
            .content
            .starts_with("Recovery: interrupted_turn."),
        "{:?}",
        recovered[2].content
    );
    // Held: nothing ran again, the model was not asked.
    assert_eq!(world.config.executions(), usize::from(ran));
    assert_eq!(world.fake.request_count(), 1);

    let last = confirm_and_complete(&world, &mut cb, &id, RESTART).await;
    assert_gapless(&last);
    assert_prefix(&recovered, &last);
    assert_eq!(
        last.iter().map(role).collect::<Vec<_>>(),
        [
            pb::TurnRole::User,
            pb::TurnRole::Assistant,
            pb::TurnRole::Notice,
            pb::TurnRole::Assistant
        ],
        "the synthetic result lives in the transcript only: {last:#?}"
    );
    assert_eq!(last[3].content, FINAL_ANSWER);
    assert_eq!(
        world.config.executions(),
        usize::from(ran),
        "the mutating tool never runs twice"
    );
    for s in others {
        s.stop().await;
    }
}

#[tokio::test]
async fn kill9_after_assistant_persisted_holds_for_confirmation() {
    kill9_at_failpoint("after-assistant-persisted", false, 2).await;
}

#[tokio::test]
async fn kill9_before_tool_run_holds_for_confirmation() {
    kill9_at_failpoint("before-tool-run", false, 2).await;
}

#[tokio::test]
async fn kill9_after_tool_run_holds_for_confirmation_and_never_reruns() {
    kill9_at_failpoint("after-tool-run", true, 2).await;
}

#[tokio::test]
async fn kill9_before_tool_result_persist_holds_for_confirmation_and_never_reruns() {
    kill9_at_failpoint("before-tool-result-persist", true, 2).await;
}

#[tokio::test]
async fn kill9_between_commit_and_publish_holds_for_confirmation() {
    // Three replicas: either survivor may take it over.
    kill9_at_failpoint("between-commit-and-publish", false, 3).await;
}

// ---------------------------------------------------------------------
// 2. kill -9 while a slow mutating tool runs.
// ---------------------------------------------------------------------

/// A dies while `slow_restart` (30 s, counted when it starts) runs in its
/// MCP server. Another replica recovers the session once A's lease
/// expired, does NOT run the tool again, and holds the session; after
/// `ContinueSession` the model gets the synthetic error for that call.
#[tokio::test]
async fn kill9_during_a_slow_mutating_tool_never_reruns_it() {
    let _permit = GATE.acquire().await.unwrap();
    let Some(world) = World::new().await else {
        return;
    };
    let (a, others) = world.start(None, 2).await;
    let _guard = KillOnPanic(
        std::iter::once(a.pid())
            .chain(others.iter().map(Server::pid))
            .collect(),
    );
    let call = "call-slow";
    world
        .fake
        .reply(FakeReply::text("Restarting checkout slowly.").call(
            call,
            "slow_restart",
            r#"{"service":"checkout","seconds":30}"#,
        ));
    let mut ca = a.client().await;
    let mut cb = others[0].client().await;
    let incident = create_incident(&mut ca, "checkout down").await;
    let id = start_session(&mut ca, &incident.id, QUESTION)
        .await
        .unwrap()
        .id;
    eventually("the slow tool started", || async {
        (world.config.executions() == 1).then_some(())
    })
    .await;
    let running = get_session(&mut cb, &id).await;
    assert_eq!(running.lease_owner, "replica-a", "{running:?}");
    let before = turns(&mut cb, &id).await;
    a.kill9().await;

    let held = wait_status(&mut cb, &id, pb::SessionStatus::AwaitingConfirmation).await;
    let survivors: Vec<&Server> = others.iter().collect();
    let who = claimer(&survivors);
    eprintln!("slow tool: recovered by {}", survivors[who].name);
    assert_eq!(held.lease_epoch, running.lease_epoch + 1, "{held:?}");
    let plan = held
        .last_recovery_plan
        .as_ref()
        .expect("a stored recovery plan");
    assert_eq!(plan.kind, "interrupted_turn", "{plan:?}");
    assert_eq!(plan.repaired_call_ids, [call]);
    let recovered = turns(&mut cb, &id).await;
    assert_gapless(&recovered);
    assert_prefix(&before, &recovered);
    assert_eq!(
        recovered.iter().map(role).collect::<Vec<_>>(),
        [
            pb::TurnRole::User,
            pb::TurnRole::Assistant,
            pb::TurnRole::Notice
        ],
        "{recovered:#?}"
    );
    assert!(
        recovered[2]
            .content
            .starts_with("Recovery: interrupted_turn.")
    );
    assert_eq!(
        world.config.executions(),
        1,
        "recovery must not re-run the tool"
    );

    let last = confirm_and_complete(&world, &mut cb, &id, call).await;
    assert_gapless(&last);
    assert_prefix(&recovered, &last);
    assert_eq!(last.len(), 4, "{last:#?}");
    assert!(
        last.iter().all(|t| t.tool_call_id != call),
        "no result for the cut-off call is ever stored: {last:#?}"
    );
    assert_eq!(
        world.config.executions(),
        1,
        "the slow tool ran exactly once"
    );
    for s in others {
        s.stop().await;
    }
}

// ---------------------------------------------------------------------
// 3. kill -9 while the model call is in flight.
// ---------------------------------------------------------------------

/// (a) The tail is a complete set of tool results: A read a log (read-only)
/// and is waiting for the model when it dies. The recovering replica
/// continues on its own ("interrupted_prompt"), sending the model exactly
/// the request A had sent.
#[tokio::test]
async fn kill9_while_the_model_answers_tool_results_continues_automatically() {
    let _permit = GATE.acquire().await.unwrap();
    let Some(world) = World::new().await else {
        return;
    };
    let (a, others) = world.start(None, 1).await;
    let _guard = KillOnPanic(vec![a.pid(), others[0].pid()]);
    let call = "call-read";
    world
        .fake
        .reply(FakeReply::text("Reading the logs.").call(
            call,
            "read_log",
            r#"{"service":"checkout"}"#,
        ))
        .push(Behaviour::Hang)
        .reply(FakeReply::text(FINAL_ANSWER))
        .reply(FakeReply::text(REPORT));
    let mut ca = a.client().await;
    let mut cb = others[0].client().await;
    let incident = create_incident(&mut ca, "checkout down").await;
    let id = start_session(&mut ca, &incident.id, QUESTION)
        .await
        .unwrap()
        .id;
    eventually("A asked the model about the tool result", || async {
        (world.fake.request_count() == 2).then_some(())
    })
    .await;
    let running = get_session(&mut cb, &id).await;
    assert_eq!(running.lease_owner, "replica-a", "{running:?}");
    let before = turns(&mut cb, &id).await;
    assert_eq!(
        before.iter().map(role).collect::<Vec<_>>(),
        [
            pb::TurnRole::User,
            pb::TurnRole::Assistant,
            pb::TurnRole::Tool
        ],
        "{before:#?}"
    );
    assert!(!before[2].is_error, "{before:#?}");
    a.kill9().await;

    let done = wait_settled(&mut cb, &id).await;
    claimer(&[&others[0]]);
    assert_eq!(done.status(), pb::SessionStatus::Completed, "{done:?}");
    assert_eq!(done.lease_epoch, running.lease_epoch + 1, "{done:?}");
    let plan = done
        .last_recovery_plan
        .as_ref()
        .expect("a stored recovery plan");
    assert_eq!(plan.kind, "interrupted_prompt", "{plan:?}");
    assert!(
        plan.can_auto_continue && !plan.requires_confirmation,
        "{plan:?}"
    );
    assert!(plan.repaired_call_ids.is_empty(), "{plan:?}");

    let last = turns(&mut cb, &id).await;
    assert_gapless(&last);
    assert_prefix(&before, &last);
    assert_eq!(
        last.iter().map(role).collect::<Vec<_>>(),
        [
            pb::TurnRole::User,
            pb::TurnRole::Assistant,
            pb::TurnRole::Tool,
            pb::TurnRole::Notice,
            pb::TurnRole::Assistant
        ],
        "{last:#?}"
    );
    assert!(
        last[3].content.starts_with("Recovery: interrupted_prompt."),
        "{:?}",
        last[3].content
    );
    assert_eq!(last[4].content, FINAL_ANSWER);
    let requests = world.fake.requests();
    assert_eq!(requests.len(), 4, "first, hung, recovered, report author");
    assert_eq!(
        messages(&requests[2]),
        messages(&requests[1]),
        "recovery resends the interrupted prompt"
    );
    assert_report(&mut cb, &id).await;
    for s in others {
        s.stop().await;
    }
}

/// (b) The tail is the user's first message: the very first model call
/// hangs when A dies. The recovering replica continues on its own.
#[tokio::test]
async fn kill9_while_the_model_answers_the_first_message_continues_automatically() {
    let _permit = GATE.acquire().await.unwrap();
    let Some(world) = World::new().await else {
        return;
    };
    let (a, others) = world.start(None, 1).await;
    let _guard = KillOnPanic(vec![a.pid(), others[0].pid()]);
    world
        .fake
        .push(Behaviour::Hang)
        .reply(FakeReply::text(FINAL_ANSWER))
        .reply(FakeReply::text(REPORT));
    let mut ca = a.client().await;
    let mut cb = others[0].client().await;
    let incident = create_incident(&mut ca, "checkout down").await;
    let id = start_session(&mut ca, &incident.id, QUESTION)
        .await
        .unwrap()
        .id;
    eventually("A asked the model", || async {
        (world.fake.request_count() == 1).then_some(())
    })
    .await;
    let running = get_session(&mut cb, &id).await;
    assert_eq!(running.lease_owner, "replica-a", "{running:?}");
    a.kill9().await;

    let done = wait_settled(&mut cb, &id).await;
    claimer(&[&others[0]]);
    assert_eq!(done.status(), pb::SessionStatus::Completed, "{done:?}");
    assert_eq!(done.lease_epoch, running.lease_epoch + 1, "{done:?}");
    let plan = done
        .last_recovery_plan
        .as_ref()
        .expect("a stored recovery plan");
    assert_eq!(plan.kind, "interrupted_prompt", "{plan:?}");
    let last = turns(&mut cb, &id).await;
    assert_gapless(&last);
    assert_eq!(
        last.iter().map(role).collect::<Vec<_>>(),
        [
            pb::TurnRole::User,
            pb::TurnRole::Notice,
            pb::TurnRole::Assistant
        ],
        "{last:#?}"
    );
    assert_eq!(last[0].content, QUESTION);
    assert!(
        last[1].content.starts_with("Recovery: interrupted_prompt."),
        "{:?}",
        last[1].content
    );
    assert_eq!(last[2].content, FINAL_ANSWER);
    let requests = world.fake.requests();
    assert_eq!(requests.len(), 3, "hung, recovered, report author");
    assert_eq!(messages(&requests[1]), messages(&requests[0]));
    assert_report(&mut cb, &id).await;
    for s in others {
        s.stop().await;
    }
}

// ---------------------------------------------------------------------
// 4. A paused worker cannot append after another replica took over.
// ---------------------------------------------------------------------

/// A runs `slow_restart` (6 s) and is frozen with SIGSTOP while the tool
/// runs in its (not frozen) MCP server. Its lease expires, B claims and
/// holds the session. A is thawed only after the tool has finished, so its
/// result is waiting for A: A tries to store it and is refused by the
/// epoch fence (or its keeper notices the loss first); either way it logs
/// "lease lost" and writes nothing.
#[tokio::test]
async fn a_paused_worker_cannot_append_after_another_replica_took_over() {
    const TOOL_SECONDS: u64 = 6;
    let _permit = GATE.acquire().await.unwrap();
    let Some(world) = World::new().await else {
        return;
    };
    let (a, others) = world.start(None, 1).await;
    let b = &others[0];
    let _guard = KillOnPanic(vec![a.pid(), b.pid()]);
    let call = "call-slow";
    world
        .fake
        .reply(FakeReply::text("Restarting checkout slowly.").call(
            call,
            "slow_restart",
            &format!(r#"{{"service":"checkout","seconds":{TOOL_SECONDS}}}"#),
        ));
    let mut ca = a.client().await;
    let mut cb = b.client().await;
    let incident = create_incident(&mut ca, "checkout down").await;
    let id = start_session(&mut ca, &incident.id, QUESTION)
        .await
        .unwrap()
        .id;
    eventually("the slow tool started", || async {
        (world.config.executions() == 1).then_some(())
    })
    .await;
    let tool_started = tokio::time::Instant::now();
    a.signal("STOP");
    let running = get_session(&mut cb, &id).await;
    assert_eq!(running.lease_owner, "replica-a", "{running:?}");
    assert_eq!(running.status(), pb::SessionStatus::Running);

    let held = wait_status(&mut cb, &id, pb::SessionStatus::AwaitingConfirmation).await;
    claimer(&[b]);
    assert_eq!(held.lease_epoch, running.lease_epoch + 1, "{held:?}");
    let plan = held
        .last_recovery_plan
        .as_ref()
        .expect("a stored recovery plan");
    assert_eq!(plan.kind, "interrupted_turn", "{plan:?}");
    let recovered = turns(&mut cb, &id).await;
    assert_eq!(
        recovered.iter().map(role).collect::<Vec<_>>(),
        [
            pb::TurnRole::User,
            pb::TurnRole::Assistant,
            pb::TurnRole::Notice
        ],
        "{recovered:#?}"
    );

    // Let the tool finish in A's MCP server (it runs TOOL_SECONDS from its
    // start), so its result is waiting when A resumes.
    tokio::time::sleep_until(tool_started + Duration::from_secs(TOOL_SECONDS + 1)).await;
    a.signal("CONT");
    a.wait_for_log("this burst writes nothing more").await;
    assert!(a.logged("lease lost"));
    let refused_at_persist = a.logged("lease lost; abandoning the burst");
    eprintln!("paused worker: refused at persist = {refused_at_persist}");

    let after = get_session(&mut cb, &id).await;
    assert_eq!(
        after.status(),
        pb::SessionStatus::AwaitingConfirmation,
        "{after:?}"
    );
    assert_eq!(after.lease_epoch, held.lease_epoch, "{after:?}");
    let last = turns(&mut cb, &id).await;
    assert_gapless(&last);
    assert_eq!(
        last.iter().map(key).collect::<Vec<_>>(),
        recovered.iter().map(key).collect::<Vec<_>>(),
        "the paused worker wrote nothing"
    );
    assert!(last.iter().all(|t| t.tool_call_id != call), "{last:#?}");
    assert_eq!(world.config.executions(), 1);
    assert_eq!(
        world.fake.request_count(),
        1,
        "A did not call the model again"
    );
    a.kill9().await;
    for s in others {
        s.stop().await;
    }
}
