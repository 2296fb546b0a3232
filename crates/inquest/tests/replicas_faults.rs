//! Faults around a running burst, with real processes: the
//! `inquest` binary as replicas sharing one PostgreSQL database, each with
//! a real Python MCP server (`support/gated_tools.py`: its mutating
//! `gated_restart` records every execution with its idempotency key and
//! runs until the test opens its gate, so the test acts while a tool runs
//! without racing a timer), and the strict fake model provider.
//!
//! - SIGTERM while a mutating tool runs: within the grace the tool
//!   finishes, its real result is stored and the session is handed over;
//!   past the grace the call is left dangling and the next replica holds
//!   it for confirmation.
//! - SIGSTOP of the lease holder between its assistant turn and the tool:
//!   once thawed past its deadline it starts no tool and writes nothing.
//! - PostgreSQL restarted under a model call and under a tool-result
//!   write: the session still completes with a valid transcript, and the
//!   mutating tool ran once per call.
//!
//! Setup and checks are shared with the crash tests (`support/crash.rs`)
//! and `support/faults.rs`. Every wait is a bounded poll on a condition.

mod support;

use std::time::Duration;

use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use serde_json::Value;
use support::{
    Server, all_turns as turns, crash::*, create_incident, fake_provider_toml, faults::*,
    fleet::Fleet, get_session, settled, start_session,
};

/// A world whose replicas run with `timing`; panics without the MCP SDK.
async fn world(timing: Timing) -> World {
    let python = require_python();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let config = replica_config(&fake_provider_toml(&fake.base_url()), &python, timing);
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    World {
        fake,
        config,
        url,
        _database: database,
    }
}

/// Starts one replica of `world` named `name` with extra environment.
async fn replica(world: &World, name: &str, env: &[(&str, &str)]) -> Server {
    Server::start_with(
        name,
        &[
            "--config",
            world.config.path(),
            "--database-url",
            &world.url,
        ],
        env,
    )
    .await
}

const RESULT: &str = "restarted checkout";
const CALL: &str = "call-gated";

/// The model's first reply: the mutating tool, on `checkout`.
fn restart_call() -> FakeReply {
    FakeReply::text("Restarting checkout.").call(CALL, "gated_restart", r#"{"service":"checkout"}"#)
}

// ---------------------------------------------------------------------
// 1. SIGTERM within the grace: the tool finishes, its result is stored.
// ---------------------------------------------------------------------

/// A runs `gated_restart` when it gets SIGTERM (grace 10 s); once A is
/// shutting down the tool is let finish. A starts no model call, stores
/// the tool's real result, hands the session over and exits 0. B (running
/// all along) continues the session to COMPLETED by itself, and the tool
/// never runs again.
#[tokio::test]
async fn sigterm_lets_a_running_mutating_tool_finish() {
    let _permit = GATE.acquire().await.unwrap();
    let world = world(Timing::short_lease(Duration::from_secs(10))).await;
    let (mut a, others) = world.start(None, 1).await;
    let b = &others[0];
    let _guard = KillOnPanic(vec![a.pid(), b.pid()]);
    let call = CALL;
    world
        .fake
        .reply(restart_call())
        .reply(FakeReply::text(FINAL_ANSWER))
        .reply(FakeReply::text(REPORT));
    let mut ca = a.client().await;
    let mut cb = b.client().await;
    let incident = create_incident(&mut ca, "checkout down").await;
    let id = start_session(&mut ca, &incident.id, QUESTION)
        .await
        .unwrap()
        .id;
    eventually("the tool started", || async {
        (world.config.executions() == 1).then_some(())
    })
    .await;
    let running = get_session(&mut cb, &id).await;
    assert_eq!(running.status(), pb::SessionStatus::Running, "{running:?}");
    assert_eq!(running.lease_owner, "replica-a", "{running:?}");

    a.signal("TERM");
    a.wait_for_log("shutting down: no new connections").await;
    // A is shutting down while its tool runs; now the tool ends.
    open_gate(&world.config, "checkout");
    let exit = wait_exit(&mut a).await;
    assert!(exit.success(), "replica-a exit status {exit}");
    assert!(
        a.logged("burst handed over to the other replicas"),
        "A hands the session over once its tool finished"
    );
    assert!(
        !a.logged("tools still running at the end of the grace"),
        "the tool finished within the 10 s grace"
    );
    // A's burst made its one model call (the one that asked for the
    // tool) and no other: B's recovery may already have called the model.
    assert!(
        server_logged_all(
            &a,
            &[
                "burst finished",
                "exit_reason=\"interrupted\"",
                "model_calls=1 "
            ]
        ),
        "A starts no model call after SIGTERM"
    );
    // What A left: the call and its real result.
    let left = turns(&mut cb, &id).await;
    assert!(left.len() >= 3, "{left:#?}");
    assert_eq!(
        left[..3].iter().map(role).collect::<Vec<_>>(),
        [
            pb::TurnRole::User,
            pb::TurnRole::Assistant,
            pb::TurnRole::Tool
        ],
        "{left:#?}"
    );
    assert_eq!(left[1].tool_calls[0].id, call);
    assert_eq!(left[2].tool_call_id, call, "{left:#?}");
    assert_eq!(left[2].content, RESULT, "the tool's real result");
    assert!(!left[2].is_error, "{:?}", left[2]);

    let done = settled(&mut cb, &id).await;
    assert_eq!(done.status(), pb::SessionStatus::Completed, "{done:?}");
    assert_eq!(done.exit_reason, "completed", "{done:?}");
    claimer(&[b]);
    // A reaper pass A began before SIGTERM may claim the session the moment
    // A's own hand-over commits (the claim's UPDATE waited on that row); a
    // replica shutting down hands such a claim straight back without
    // running anything (`Runner::spawn_claimed`), which costs one epoch.
    let handed_back = a.logged("claimed an orphaned session");
    assert!(
        !server_logged_all(&a, &["mode=\"recovered\"", "burst finished"]),
        "A runs no recovered burst while shutting down"
    );
    assert_eq!(
        done.lease_epoch,
        running.lease_epoch + 1 + i64::from(handed_back),
        "{done:?}"
    );
    if let Some(plan) = &done.last_recovery_plan {
        assert!(
            plan.can_auto_continue && !plan.requires_confirmation,
            "a complete tail continues by itself: {plan:?}"
        );
        assert!(plan.repaired_call_ids.is_empty(), "{plan:?}");
    }
    let last = turns(&mut cb, &id).await;
    assert_gapless(&last);
    assert_prefix(&left, &last);
    assert_provider_shape(&last, &[]);
    assert_eq!(
        last.iter()
            .filter(|t| t.role() == pb::TurnRole::Tool)
            .count(),
        1,
        "one result, A's: {last:#?}"
    );
    assert!(
        last[3..]
            .iter()
            .all(|t| matches!(t.role(), pb::TurnRole::Notice | pb::TurnRole::Assistant)),
        "{last:#?}"
    );
    let final_turn = last.last().unwrap();
    assert_eq!(final_turn.role(), pb::TurnRole::Assistant);
    assert_eq!(final_turn.content, FINAL_ANSWER);

    let requests = world.fake.requests();
    assert_eq!(requests.len(), 3, "A's call, B's call, B's report author");
    let sent = messages(&requests[1]);
    let answer = sent
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call)
        .unwrap_or_else(|| panic!("B's request answers the call: {sent:#?}"));
    assert_eq!(answer["content"], RESULT, "{sent:#?}");
    assert_report(&mut cb, &id).await;
    assert_eq!(world.config.executions(), 1, "the tool ran exactly once");
    assert_eq!(executions_of_call(&world.config, &id, call), 1);
    for s in others {
        s.stop().await;
    }
}

// ---------------------------------------------------------------------
// 2. SIGTERM past the grace: the call is left for confirmation.
// ---------------------------------------------------------------------

/// A runs `gated_restart` (its gate never opens) when it gets SIGTERM
/// (grace 1 s). When the grace ends the tool is dropped and its call left
/// without a result; A exits 0. B finds the call dangling (`interrupted_turn`) and holds the
/// session; the tool does not run again, and after ContinueSession the
/// model gets the synthetic "interrupted" result and the session completes.
#[tokio::test]
async fn sigterm_past_the_grace_leaves_the_call_for_confirmation() {
    let _permit = GATE.acquire().await.unwrap();
    let world = world(Timing::short_lease(Duration::from_secs(1))).await;
    let (mut a, others) = world.start(None, 1).await;
    let b = &others[0];
    let _guard = KillOnPanic(vec![a.pid(), b.pid()]);
    let call = CALL;
    world.fake.reply(restart_call());
    let mut ca = a.client().await;
    let mut cb = b.client().await;
    let incident = create_incident(&mut ca, "checkout down").await;
    let id = start_session(&mut ca, &incident.id, QUESTION)
        .await
        .unwrap()
        .id;
    eventually("the tool started", || async {
        (world.config.executions() == 1).then_some(())
    })
    .await;
    let running = get_session(&mut cb, &id).await;
    assert_eq!(running.lease_owner, "replica-a", "{running:?}");

    a.signal("TERM");
    let exit = wait_exit(&mut a).await;
    assert!(exit.success(), "replica-a exit status {exit}");
    assert!(
        a.logged("tools still running at the end of the grace"),
        "the tool outlived the 1 s grace"
    );

    let held = wait_status(&mut cb, &id, pb::SessionStatus::AwaitingConfirmation).await;
    claimer(&[b]);
    assert_eq!(held.exit_reason, "awaiting_confirmation", "{held:?}");
    assert_eq!(held.lease_epoch, running.lease_epoch + 1, "{held:?}");
    let plan = held
        .last_recovery_plan
        .as_ref()
        .expect("a stored recovery plan");
    assert_eq!(plan.kind, "interrupted_turn", "{plan:?}");
    assert!(
        plan.requires_confirmation && !plan.can_auto_continue,
        "{plan:?}"
    );
    assert_eq!(plan.repaired_call_ids, [call], "{plan:?}");
    assert_eq!(plan.interrupted_calls.len(), 1, "{plan:?}");
    assert_eq!(plan.interrupted_calls[0].name, "gated_restart");
    assert_eq!(plan.interrupted_calls[0].side_effect, "mutating");

    // The dying replica wrote no result for the call; the notice is B's.
    let recovered = turns(&mut cb, &id).await;
    assert_gapless(&recovered);
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
        recovered.iter().all(|t| t.tool_call_id != call),
        "no result of A's own for the cut-off call: {recovered:#?}"
    );
    assert!(
        recovered[2]
            .content
            .starts_with("Recovery: interrupted_turn."),
        "{:?}",
        recovered[2].content
    );
    // Held: the tool did not run again and the model was not asked.
    assert_eq!(world.config.executions(), 1);
    assert_eq!(world.fake.request_count(), 1);
    let still = get_session(&mut cb, &id).await;
    assert_eq!(
        still.status(),
        pb::SessionStatus::AwaitingConfirmation,
        "{still:?}"
    );
    assert_eq!(world.config.executions(), 1, "no re-run without a human");

    let last = confirm_and_complete(&world, &mut cb, &id, call).await;
    assert_gapless(&last);
    assert_prefix(&recovered, &last);
    assert_provider_shape(&last, &[call]);
    assert!(last.iter().all(|t| t.tool_call_id != call), "{last:#?}");
    // The model answered with text after the confirmation, so the tool
    // ran once; a repeat would have needed its own call.
    let ran = world.config.executions();
    assert!(ran <= 2, "at most once before and once after confirming");
    assert_eq!(ran, 1, "the model did not call the tool again");
    assert_eq!(executions_of_call(&world.config, &id, call), 1);
    for s in others {
        s.stop().await;
    }
}

// ---------------------------------------------------------------------
// 3. SIGSTOP of the lease holder: no tool after its deadline.
// ---------------------------------------------------------------------

/// A commits the assistant turn calling the mutating `gated_restart` and
/// is stopped before the tool starts: a failpoint marks the commit, a
/// second one stalls A's burst right after it (its lease keeper, polled in
/// the same task, stalls with it) for longer than the lease leaves, and
/// within that stall the test freezes the whole process with SIGSTOP. A
/// stays frozen past its lease; B claims the session and holds it
/// (`interrupted_turn`). Thawed (SIGCONT) past its deadline, A refuses to
/// start the tool (a marker in front of every tool start stays silent)
/// and writes nothing. ContinueSession then completes the session on B;
/// the tool never ran. (Should the SIGSTOP come late, the stall alone
/// takes A past its deadline: the test does not depend on the timing.)
#[tokio::test]
async fn a_stopped_lease_holder_starts_no_tool_after_its_deadline() {
    let _permit = GATE.acquire().await.unwrap();
    let world = world(Timing::short_lease(Duration::from_secs(5))).await;
    // The commit of the assistant turn is marked; A stalls 3 s right
    // after it (before the tool; ttl 2 s); every tool A would start prints
    // a marker just before the call goes to its MCP server.
    let failpoints = "between-commit-and-publish=1*return(marked);\
                      after-assistant-persisted=1*sleep(3000);\
                      before-tool-run=return(tool-start)";
    let env_a = [("INQUEST_FAILPOINTS", failpoints)];
    let (a, b) = tokio::join!(
        replica(&world, "replica-a", &env_a),
        replica(&world, "replica-b", &[]),
    );
    let _guard = KillOnPanic(vec![a.pid(), b.pid()]);
    world.fake.reply(restart_call());
    let mut ca = a.client().await;
    let mut cb = b.client().await;
    let incident = create_incident(&mut ca, "checkout down").await;
    let id = start_session(&mut ca, &incident.id, QUESTION)
        .await
        .unwrap()
        .id;
    a.wait_for_log("failpoint between-commit-and-publish reached (marked)")
        .await;
    a.signal("STOP");
    assert_eq!(world.config.executions(), 0, "A is stopped before its tool");
    // What A committed: the user turn and the assistant turn calling the
    // tool (B's notice may already follow when this machine is slow).
    let before = turns(&mut cb, &id).await;
    assert!(before.len() >= 2, "{before:#?}");
    assert_eq!(
        before[..2].iter().map(role).collect::<Vec<_>>(),
        [pb::TurnRole::User, pb::TurnRole::Assistant],
        "{before:#?}"
    );
    assert_eq!(before[1].tool_calls[0].id, CALL);
    let before = before[..2].to_vec();

    let held = wait_status(&mut cb, &id, pb::SessionStatus::AwaitingConfirmation).await;
    claimer(&[&b]);
    assert_eq!(
        held.lease_epoch, 2,
        "A's claim (epoch 1), then B's: {held:?}"
    );
    let plan = held
        .last_recovery_plan
        .as_ref()
        .expect("a stored recovery plan");
    assert_eq!(plan.kind, "interrupted_turn", "{plan:?}");
    assert!(plan.requires_confirmation, "{plan:?}");
    assert_eq!(plan.repaired_call_ids, [CALL], "{plan:?}");
    let recovered = turns(&mut cb, &id).await;
    assert_prefix(&before, &recovered);
    assert_eq!(recovered.len(), 3, "{recovered:#?}");
    assert_eq!(world.config.executions(), 0);

    let stalled_alone = a.logged("tool not started");
    eprintln!("stopped holder: refused before SIGCONT (the SIGSTOP came late) = {stalled_alone}");
    a.signal("CONT");
    wait_for_line(&a, &["this burst writes nothing more", &id]).await;
    assert!(
        server_logged_all(&a, &["tool not started", "lease deadline passed", CALL]),
        "A refuses the tool at its deadline"
    );
    assert!(
        !a.logged("failpoint before-tool-run reached"),
        "A started no tool"
    );

    let after = get_session(&mut cb, &id).await;
    assert_eq!(
        after.status(),
        pb::SessionStatus::AwaitingConfirmation,
        "{after:?}"
    );
    assert_eq!(after.lease_epoch, held.lease_epoch, "{after:?}");
    let now = turns(&mut cb, &id).await;
    assert_eq!(
        now.iter().map(key).collect::<Vec<_>>(),
        recovered.iter().map(key).collect::<Vec<_>>(),
        "the thawed worker wrote nothing"
    );
    assert_eq!(world.config.executions(), 0, "no tool ran");
    assert_eq!(world.fake.request_count(), 1, "A called the model once");

    let last = confirm_and_complete(&world, &mut cb, &id, CALL).await;
    assert_gapless(&last);
    assert_provider_shape(&last, &[CALL]);
    assert_eq!(world.config.executions(), 0, "the tool never ran");
    a.stop().await;
    b.stop().await;
}

// ---------------------------------------------------------------------
// 4. PostgreSQL restarted mid-model-call and mid-tool-write.
// ---------------------------------------------------------------------

const TAG_MODEL_CALL: &str = "s1";
const TAG_TOOL_WRITE: &str = "s2";

/// The session tag (`[s1]`) of an OpenAI request's first user message.
fn tag_of(messages: &[Value]) -> String {
    let first = messages
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    first
        .strip_prefix('[')
        .and_then(|s| s.split_once(']'))
        .map(|(tag, _)| tag.to_owned())
        .unwrap_or_default()
}

/// The model of test 4, derived from the request (a recovered burst on
/// any replica gets the same answer): the author step (no tools offered)
/// gets the report; a follow-up gets a plain answer; otherwise the model
/// calls the session's mutating tool once (call id `call-<tag>`, service
/// `<tag>`), then answers.
fn restart_model(request: &Value) -> FakeReply {
    if request.get("tools").is_none() {
        return FakeReply::text(REPORT);
    }
    let messages = request_messages(request);
    let tag = tag_of(&messages);
    let last_user = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    if last_user.contains("follow-up") && messages.last().is_some_and(|m| m["role"] == "user") {
        return FakeReply::text("Still stable.");
    }
    let call = format!("call-{tag}");
    let called = messages.iter().any(|m| {
        m["tool_calls"]
            .as_array()
            .is_some_and(|calls| calls.iter().any(|c| c["id"] == call.as_str()))
    });
    if called {
        return FakeReply::text(FINAL_ANSWER);
    }
    FakeReply::text(&format!("Restarting {tag}.")).call(
        &call,
        "gated_restart",
        &format!(r#"{{"service":"{tag}"}}"#),
    )
}

/// Checks a session that went through a restart: COMPLETED, gapless,
/// provider-shaped, its call answered once with the tool's real result,
/// the tool executed once; then a follow-up (which the server rebuilds
/// from the stored turns and the strict fake checks) is answered too.
async fn assert_survived(
    c: &mut support::Client,
    model: &ModelFront,
    config: &support::ReplicaConfig,
    id: &str,
    tag: &str,
) {
    let done = settled(c, id).await;
    assert_eq!(
        done.status(),
        pb::SessionStatus::Completed,
        "{tag}: {done:?}"
    );
    assert_eq!(done.exit_reason, "completed", "{tag}: {done:?}");
    assert_report(c, id).await;
    let all = turns(c, id).await;
    assert_gapless(&all);
    assert_provider_shape(&all, &[]);
    let call = format!("call-{tag}");
    let results: Vec<_> = all.iter().filter(|t| t.tool_call_id == call).collect();
    assert_eq!(results.len(), 1, "{tag}: one result for {call}: {all:#?}");
    assert!(!results[0].is_error, "{tag}: the real result: {all:#?}");
    assert_eq!(
        all.last().map(|t| t.content.as_str()),
        Some(FINAL_ANSWER),
        "{tag}: {all:#?}"
    );
    assert_eq!(
        executions_of(config, tag),
        1,
        "{tag}: the mutating tool ran once"
    );
    assert_eq!(
        executions_of_call(config, id, &call),
        1,
        "{tag}: one execution under {call}'s idempotency key"
    );
    assert!(
        model.rejections().is_empty(),
        "every model request was provider-valid: {:#?}",
        model.rejections()
    );

    c.send_message(pb::SendMessageRequest {
        session_id: id.into(),
        message: format!("[{tag}] follow-up: is it still stable?"),
        idempotency_key: String::new(),
        if_running: 0,
    })
    .await
    .unwrap_or_else(|e| panic!("{tag}: the follow-up is accepted: {e}"));
    let again = settled(c, id).await;
    assert_eq!(again.status(), pb::SessionStatus::Idle, "{tag}: {again:?}");
    assert_eq!(again.exit_reason, "awaiting_user", "{tag}: {again:?}");
    let all = turns(c, id).await;
    assert_gapless(&all);
    assert_provider_shape(&all, &[]);
    assert_eq!(executions_of(config, tag), 1, "{tag}: no re-run");
    assert!(
        model.rejections().is_empty(),
        "the rebuilt transcript was provider-valid: {:#?}",
        model.rejections()
    );
}

/// A cluster of the test's own; replicas A and B (lease ttl 10 s, so the
/// outages stay inside one lease). Session s1: the model call is held in
/// flight while PostgreSQL restarts (`pg_ctl restart -m fast`), then
/// answered. Session s2: while `gated_restart` runs, PostgreSQL stops;
/// then the tool ends, its result write meets the outage (A logs its
/// retry), and PostgreSQL starts again. Both sessions complete; nothing is FAILED.
#[tokio::test]
async fn postgres_restart_mid_model_call_and_mid_tool_write() {
    let _permit = GATE.acquire().await.unwrap();
    let cluster = OwnCluster::start().await;
    let python = require_python();
    let model = ModelFront::start(Box::new(restart_model)).await;
    let timing = Timing {
        lease_ttl: Duration::from_secs(10),
        renew_interval: Duration::from_secs(1),
        reap_interval: Duration::from_millis(200),
        grace: Duration::from_secs(5),
    };
    let config = replica_config(&fake_provider_toml(&model.base_url()), &python, timing);
    let mut fleet = Fleet::new();
    fleet
        .start(&["replica-a", "replica-b"], &config, &cluster.url())
        .await;
    let mut ca = fleet.client("replica-a").await;
    let incident = create_incident(&mut ca, "checkout down").await;

    // s1: PostgreSQL restarts while the model call is in flight.
    open_gate(&config, TAG_MODEL_CALL);
    model.hold_next();
    let s1 = start_session(
        &mut ca,
        &incident.id,
        &format!("[{TAG_MODEL_CALL}] {QUESTION}"),
    )
    .await
    .unwrap()
    .id;
    eventually("s1's model call is in flight", || async {
        (model.held() == 1).then_some(())
    })
    .await;
    cluster.restart().await;
    model.release();
    let mut c1 = fleet.client("replica-b").await;
    assert_survived(&mut c1, &model, &config, &s1, TAG_MODEL_CALL).await;

    // s2: PostgreSQL goes down while the tool runs and comes back once the
    // result write has met the outage.
    let s2 = start_session(
        &mut ca,
        &incident.id,
        &format!("[{TAG_TOOL_WRITE}] {QUESTION}"),
    )
    .await
    .unwrap()
    .id;
    eventually("s2's tool started", || async {
        (executions_of(&config, TAG_TOOL_WRITE) == 1).then_some(())
    })
    .await;
    cluster.stop().await;
    open_gate(&config, TAG_TOOL_WRITE);
    wait_for_line(
        fleet.get("replica-a"),
        &[
            "store write did not land; retrying under the lease",
            &s2,
            "append_turn",
        ],
    )
    .await;
    cluster.start_again().await;
    let mut c2 = fleet.client("replica-b").await;
    assert_survived(&mut c2, &model, &config, &s2, TAG_TOOL_WRITE).await;

    for server in &fleet.servers {
        assert!(
            !server.logged("store_failed"),
            "{}: no burst ended store_failed",
            server.name
        );
    }
    fleet.stop_all().await;
}
