//! Approval across replicas and crashes, with real processes: `inquest
//! serve` replicas (`[approval] mode = "mutating"`) share one PostgreSQL
//! database, each with the real Python MCP incident-tools server, whose
//! `restart_service` counts its real executions in a file; one in-test
//! fake model. Every case checks gapless seqs and the exact number of
//! executions.
//!
//! - `kill9_after_approvals_requested_*`: the replica that asked is killed
//!   after the hold is stored and before its burst closed; another claims
//!   the orphan and closes it into `awaiting_approval` without asking the
//!   model again (a decision before that is refused and writes nothing);
//!   the approval, made there, runs the call once.
//! - `a_decision_on_another_replica_*`: a hold made on A, decided on B,
//!   with a watcher on each replica from before the decision: both see
//!   `ApprovalRequested`, then every turn once, the approved call's
//!   result included.
//! - `kill9_before_approval_started_*`: the replica that claimed the
//!   decided burst dies before it marks the call started; the next claimer
//!   runs it, once: an approval is not lost with its replica.
//! - `kill9_after_approval_started_*`: it dies after the mark, before the
//!   call reaches its server; the next claimer holds the call for a human
//!   (`interrupted_turn`) and never re-runs it because it was approved.
//! - `kill9_while_an_approved_call_runs_*`: it dies while the approved
//!   call runs in its MCP server; likewise held, never re-run.
//! - `the_cli_*`: `inquest watch` (on A) shows the held call and how to
//!   approve it and keeps following; `inquest approve` and `inquest deny`
//!   (on B) decide; the model is told who denied and why.
//!
//! (The same decisions in one process: `tests/api/approval.rs`. Crashes
//! without approval: `replicas_crash.rs`.)

mod support;

use inquest_proto::v1::{self as pb, watch_event::Event};
use inquest_server::reason::{ErrorReason, Reason};
use inquest_testkit::fake::FakeReply;
use inquest_tests::watching::{collect, watch};
use support::{
    Client, Server, all_turns as turns,
    approval::*,
    cli::{Cli, inquest_on},
    crash::*,
    get_session, settled,
};

// ---------------------------------------------------------------------
// 1. The asking replica dies before its burst closed into the hold.
// ---------------------------------------------------------------------

/// A stored the held call and hangs before closing its burst; killed,
/// B claims the orphan (epoch + 1) and closes it into
/// `awaiting_approval`: no notice, no model call, nothing ran. B's
/// approval then runs the call exactly once and the session completes.
#[tokio::test]
async fn kill9_after_approvals_requested_the_next_claimer_closes_the_hold_and_it_runs_once() {
    let _permit = GATE.acquire().await.unwrap();
    let Some(world) = world().await else {
        return;
    };
    let (a, b, _guard) =
        two_replicas(&world, Some("after-approvals-requested=1*return(hang)")).await;
    world.fake.reply(restart_reply());
    let mut ca = a.client().await;
    let mut cb = b.client().await;
    let id = started(&mut ca).await;
    a.wait_for_log("failpoint after-approvals-requested reached")
        .await;

    // A's burst still runs (its lease kept), the request is stored.
    let running = get_session(&mut cb, &id).await;
    assert_eq!(running.status(), pb::SessionStatus::Running, "{running:?}");
    assert_eq!(running.lease_owner, "replica-a", "{running:?}");
    assert_hold(&running, RESTART, pb::ApprovalState::Pending);
    let before = turns(&mut cb, &id).await;
    assert_eq!(
        before.iter().map(role).collect::<Vec<_>>(),
        [pb::TurnRole::User, pb::TurnRole::Assistant],
        "{before:#?}"
    );
    assert_eq!(world.config.executions(), 0);
    assert_eq!(world.fake.request_count(), 1);
    // Stored but not yet held: its burst has not closed, so nobody can
    // decide it yet, and a try writes nothing.
    let early = cb
        .decide_tool_calls(pb::DecideToolCallsRequest {
            session_id: id.clone(),
            decisions: vec![pb::ToolCallDecision {
                call_id: RESTART.into(),
                verdict: pb::ToolCallVerdict::Approve.into(),
                comment: String::new(),
            }],
            idempotency_key: String::new(),
        })
        .await
        .expect_err("a decision before the burst closed into the hold");
    assert_eq!(early.code(), tonic::Code::FailedPrecondition, "{early:?}");
    assert_eq!(
        ErrorReason::of(&early).map(|r| r.reason),
        Some(Reason::ApprovalNotPending),
        "{early:?}"
    );
    assert_hold(
        &get_session(&mut cb, &id).await,
        RESTART,
        pb::ApprovalState::Pending,
    );
    a.kill9().await;

    let held = wait_held(&mut cb, &id, RESTART).await;
    assert!(b.logged(CLAIMED_ORPHAN), "B took the orphan over");
    assert_eq!(
        held.lease_epoch,
        running.lease_epoch + 1,
        "one claim took the session over: {held:?}"
    );
    let closed = turns(&mut cb, &id).await;
    assert_gapless(&closed);
    assert_prefix(&before, &closed);
    assert_eq!(closed.len(), before.len(), "closing a hold adds no turn");
    assert_eq!(
        world.fake.request_count(),
        1,
        "the model was not asked again"
    );
    assert_eq!(world.config.executions(), 0, "a held call does not run");

    world
        .fake
        .reply(FakeReply::text(FINAL_ANSWER))
        .reply(FakeReply::text(REPORT));
    let decided = decide(&mut cb, &id, RESTART, pb::ToolCallVerdict::Approve, "go").await;
    assert_hold(&decided, RESTART, pb::ApprovalState::Approved);
    let last = assert_completed_after_restart(&world, &mut cb, &id, 1).await;
    assert_prefix(&closed, &last);
    assert_eq!(world.config.executions(), 1, "the approved call ran once");
    b.stop().await;
}

// ---------------------------------------------------------------------
// 2. Held on A, decided on B, watched on both.
// ---------------------------------------------------------------------

/// Follows `id` on one replica the way a client does across a hold: reads
/// `stream` to its end; while the session is `awaiting_approval`, waits
/// for the decision and watches again after the last turn it got; stops
/// once the session completed. The first stream's events go to `first`
/// as soon as it ended (the test decides only then). Returns the events
/// of every stream.
async fn follow(
    mut c: Client,
    id: String,
    mut stream: tonic::Streaming<pb::WatchEvent>,
    first: tokio::sync::mpsc::UnboundedSender<Vec<Event>>,
) -> Vec<Vec<Event>> {
    let mut all = Vec::new();
    let mut after = 0;
    loop {
        let (events, ending) = collect(stream).await;
        ending.expect("a watch ends OK, at a hold too");
        after = events
            .iter()
            .filter_map(|e| match e {
                Event::Turn(t) => Some(t.seq),
                _ => None,
            })
            .fold(after, i64::max);
        if all.is_empty() {
            let _ = first.send(events.clone());
        }
        all.push(events);
        let s = get_session(&mut c, &id).await;
        match s.status() {
            pb::SessionStatus::Completed => return all,
            pb::SessionStatus::AwaitingApproval => {
                eventually("the hold was decided", || {
                    let (mut c, id) = (c.clone(), id.clone());
                    async move {
                        (get_session(&mut c, &id).await.status()
                            != pb::SessionStatus::AwaitingApproval)
                            .then_some(())
                    }
                })
                .await;
            }
            _ => {}
        }
        stream = watch(&mut c, &id, after).await.expect("watching again");
    }
}

/// What one watcher saw: `ApprovalRequested` for the call once, at the
/// end of its first stream, right after the assistant turn asking for it;
/// across its streams every stored turn once, in order (`expected`).
fn assert_watched(who: &str, streams: &[Vec<Event>], expected: &[pb::SessionTurn]) {
    assert!(
        streams.len() >= 2,
        "{who}: the hold ended a stream: {streams:#?}"
    );
    let first = &streams[0];
    match first.last() {
        Some(Event::ApprovalRequested(a)) => {
            assert_eq!(
                (a.call_id.as_str(), a.tool.as_str(), a.server.as_str()),
                (RESTART, "restart_service", "incident"),
                "{who}: {a:?}"
            );
            assert_eq!(a.arguments_json, r#"{"service":"checkout"}"#, "{who}");
            assert_eq!(
                (a.side_effect.as_str(), a.rule.as_str()),
                ("mutating", MODE_RULE)
            );
            assert_eq!(a.assistant_seq, 2, "{who}: {a:?}");
            assert!(a.expires_at.is_some(), "{who}: {a:?}");
        }
        other => panic!("{who}: the first stream ends with the request, not {other:?}"),
    }
    let requested = streams
        .iter()
        .flatten()
        .filter(|e| matches!(e, Event::ApprovalRequested(_)))
        .count();
    assert_eq!(requested, 1, "{who}: the request was announced once");
    let mut seen = Vec::new();
    for event in streams.iter().flatten() {
        match event {
            Event::Turn(t) => seen.push(key(t)),
            Event::Lagged(l) => panic!("{who}: unexpected Lagged {l:?}"),
            Event::ToolCallStart(s) => assert_eq!(s.call_id, RESTART, "{who}"),
            _ => {}
        }
    }
    assert_eq!(
        seen,
        expected.iter().map(key).collect::<Vec<_>>(),
        "{who}: every turn once, in order"
    );
}

/// The model's reply is held back until a watcher on A and one on B are
/// attached to the running burst; the burst on A holds the restart; both
/// streams end OK with `ApprovalRequested`. Only then does B decide; both
/// watchers watch again and see the approved call's result (the call ran
/// once, on B, which started the burst) and the final answer.
#[tokio::test]
async fn a_decision_on_another_replica_reaches_watchers_on_both() {
    let _permit = GATE.acquire().await.unwrap();
    let Some(world) = world().await else {
        return;
    };
    let (a, b, _guard) = two_replicas(&world, None).await;
    world.fake.hold_answers();
    world.fake.reply(restart_reply());
    let mut ca = a.client().await;
    let mut cb = b.client().await;
    let id = started(&mut ca).await;
    eventually("the model was asked", || async {
        (world.fake.request_count() == 1).then_some(())
    })
    .await;
    let running = get_session(&mut cb, &id).await;
    assert_eq!(running.lease_owner, "replica-a", "{running:?}");
    let (first_tx, mut first_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut watchers = Vec::new();
    for (who, c) in [("A", &mut ca), ("B", &mut cb)] {
        let stream = watch(c, &id, 0).await.expect("a watch of a running burst");
        let task = tokio::spawn(follow(c.clone(), id.clone(), stream, first_tx.clone()));
        watchers.push((who, task));
    }
    world.fake.release_answers();

    let held = wait_held(&mut cb, &id, RESTART).await;
    assert_eq!(
        held.lease_epoch, running.lease_epoch,
        "A's burst made the hold: {held:?}"
    );
    for _ in 0..2 {
        let first = tokio::time::timeout(GUARD, first_rx.recv())
            .await
            .expect("both first streams ended at the hold")
            .expect("a watcher reports its first stream");
        assert!(
            matches!(first.last(), Some(Event::ApprovalRequested(_))),
            "{first:#?}"
        );
    }
    assert_eq!(world.config.executions(), 0);
    assert_eq!(world.fake.request_count(), 1);

    world
        .fake
        .reply(FakeReply::text(FINAL_ANSWER))
        .reply(FakeReply::text(REPORT));
    decide(&mut cb, &id, RESTART, pb::ToolCallVerdict::Approve, "").await;
    let last = assert_completed_after_restart(&world, &mut cb, &id, 1).await;
    let done = get_session(&mut ca, &id).await;
    assert_eq!(
        done.lease_epoch,
        held.lease_epoch + 1,
        "one more claim, for the decided burst"
    );
    assert!(
        !a.logged(CLAIMED_ORPHAN) && !b.logged(CLAIMED_ORPHAN),
        "nobody died: no orphan"
    );
    for (who, task) in watchers {
        let streams = tokio::time::timeout(GUARD, task)
            .await
            .unwrap_or_else(|_| panic!("watcher {who} never saw the end"))
            .expect("the watcher task");
        assert_watched(who, &streams, &last);
    }
    assert_eq!(world.config.executions(), 1, "the approved call ran once");
    a.stop().await;
    b.stop().await;
}

// ---------------------------------------------------------------------
// 3. and 4. The replica running the decided burst dies.
// ---------------------------------------------------------------------

/// Holds the restart on A (armed with `point`), approves it on A (the
/// replica that decides starts the burst, so A claims it) and waits until
/// A reports the point. Returns the running session and its turns, read
/// on B.
async fn approve_on_a_until(
    world: &World,
    a: &Server,
    cb: &mut Client,
    point: &str,
) -> (String, pb::Session, Vec<pb::SessionTurn>) {
    world.fake.reply(restart_reply());
    let mut ca = a.client().await;
    let id = started(&mut ca).await;
    wait_held(&mut ca, &id, RESTART).await;
    let decided = decide(&mut ca, &id, RESTART, pb::ToolCallVerdict::Approve, "").await;
    assert_hold(&decided, RESTART, pb::ApprovalState::Approved);
    a.wait_for_log(&format!("failpoint {point} reached")).await;
    let running = get_session(cb, &id).await;
    assert_eq!(running.status(), pb::SessionStatus::Running, "{running:?}");
    assert_eq!(running.lease_owner, "replica-a", "{running:?}");
    assert_hold(&running, RESTART, pb::ApprovalState::Approved);
    let before = turns(cb, &id).await;
    assert_eq!(
        before.iter().map(role).collect::<Vec<_>>(),
        [pb::TurnRole::User, pb::TurnRole::Assistant],
        "{before:#?}"
    );
    assert_eq!(world.config.executions(), 0, "the call has not run yet");
    assert_eq!(world.fake.request_count(), 1);
    (id, running, before)
}

/// A claimed the decided burst and dies before it marks the approved call
/// started; B's claim finds the call approved, unstarted and unanswered,
/// and runs it: exactly once, and the model goes on.
#[tokio::test]
async fn kill9_before_approval_started_the_next_claimer_runs_the_approved_call_once() {
    let _permit = GATE.acquire().await.unwrap();
    let Some(world) = world().await else {
        return;
    };
    let (a, b, _guard) = two_replicas(&world, Some("before-approval-started=1*return(hang)")).await;
    let mut cb = b.client().await;
    let (id, running, before) =
        approve_on_a_until(&world, &a, &mut cb, "before-approval-started").await;
    // For the burst B will run.
    world
        .fake
        .reply(FakeReply::text(FINAL_ANSWER))
        .reply(FakeReply::text(REPORT));
    a.kill9().await;

    let last = assert_completed_after_restart(&world, &mut cb, &id, 1).await;
    assert!(b.logged(CLAIMED_ORPHAN), "B took the orphan over");
    assert_prefix(&before, &last);
    let done = get_session(&mut cb, &id).await;
    assert_eq!(
        done.lease_epoch,
        running.lease_epoch + 1,
        "one claim took the session over: {done:?}"
    );
    assert!(
        done.last_recovery_plan.is_none(),
        "nothing was interrupted: no plan, no notice: {done:?}"
    );
    assert_eq!(world.config.executions(), 1, "the approval was not lost");
    b.stop().await;
}

/// A marked the approved call started and dies before sending it to its
/// server (it did not run, but nothing durable can tell): B's claim holds
/// it like any interrupted mutating call (`awaiting_confirmation`,
/// `interrupted_turn` naming it) instead of running it again because it
/// was approved once. `ContinueSession` answers the call with the
/// synthetic error, and nothing runs.
#[tokio::test]
async fn kill9_after_approval_started_holds_for_confirmation_and_never_reruns() {
    let _permit = GATE.acquire().await.unwrap();
    let Some(world) = world().await else {
        return;
    };
    let (a, b, _guard) = two_replicas(&world, Some("after-approval-started=1*return(hang)")).await;
    let mut cb = b.client().await;
    let (id, running, before) =
        approve_on_a_until(&world, &a, &mut cb, "after-approval-started").await;
    a.kill9().await;

    let held = wait_status(&mut cb, &id, pb::SessionStatus::AwaitingConfirmation).await;
    assert!(b.logged(CLAIMED_ORPHAN), "B took the orphan over");
    assert_eq!(held.lease_epoch, running.lease_epoch + 1, "{held:?}");
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
            .starts_with("Recovery: interrupted_turn."),
        "{:?}",
        recovered[2].content
    );
    assert_eq!(world.config.executions(), 0, "held, not re-run");
    assert_eq!(world.fake.request_count(), 1, "the model was not asked");

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
    assert_eq!(
        world.config.executions(),
        0,
        "an approved call that may have run is never re-run silently"
    );
    b.stop().await;
}

/// Held on A, approved on B, so B runs the approved `slow_restart` (30 s,
/// counted when it starts); B dies while it runs. A's claim holds the
/// session for a human (`interrupted_turn`): the call may have run, and
/// having been approved once does not let it run again. `ContinueSession`
/// answers it with the synthetic error; it ran once in all.
#[tokio::test]
async fn kill9_while_an_approved_call_runs_holds_for_confirmation_and_never_reruns() {
    const SLOW: &str = "call-slow";
    let _permit = GATE.acquire().await.unwrap();
    let Some(world) = world().await else {
        return;
    };
    let (a, b, _guard) = two_replicas(&world, None).await;
    world
        .fake
        .reply(FakeReply::text("Restarting checkout slowly.").call(
            SLOW,
            "slow_restart",
            r#"{"service":"checkout","seconds":30}"#,
        ));
    let mut ca = a.client().await;
    let mut cb = b.client().await;
    let id = started(&mut ca).await;
    wait_held_of(&mut ca, &id, SLOW, "slow_restart").await;
    let decided = decide(&mut cb, &id, SLOW, pb::ToolCallVerdict::Approve, "").await;
    assert_hold_of(&decided, SLOW, "slow_restart", pb::ApprovalState::Approved);
    eventually("the approved call started", || async {
        (world.config.executions() == 1).then_some(())
    })
    .await;
    let running = get_session(&mut ca, &id).await;
    assert_eq!(running.status(), pb::SessionStatus::Running, "{running:?}");
    assert_eq!(running.lease_owner, "replica-b", "the decider runs it");
    let before = turns(&mut ca, &id).await;
    assert_eq!(before.len(), 2, "{before:#?}");
    b.kill9().await;

    let held = wait_status(&mut ca, &id, pb::SessionStatus::AwaitingConfirmation).await;
    assert!(a.logged(CLAIMED_ORPHAN), "A took the orphan over");
    assert_eq!(held.lease_epoch, running.lease_epoch + 1, "{held:?}");
    let plan = held
        .last_recovery_plan
        .as_ref()
        .expect("a stored recovery plan");
    assert_eq!(plan.kind, "interrupted_turn", "{plan:?}");
    assert_eq!(plan.repaired_call_ids, [SLOW]);
    assert_eq!(
        plan.interrupted_calls[0].side_effect, "mutating",
        "{plan:?}"
    );
    let recovered = turns(&mut ca, &id).await;
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
    assert_eq!(world.config.executions(), 1, "not re-run");
    assert_eq!(world.fake.request_count(), 1, "the model was not asked");

    let last = confirm_and_complete(&world, &mut ca, &id, SLOW).await;
    assert_gapless(&last);
    assert_prefix(&recovered, &last);
    assert_eq!(last.len(), 4, "{last:#?}");
    assert!(
        last.iter().all(|t| t.tool_call_id != SLOW),
        "no result for the cut-off call is ever stored: {last:#?}"
    );
    assert_eq!(world.config.executions(), 1, "the approved call ran once");
    a.stop().await;
}

// ---------------------------------------------------------------------
// 5. The CLI: watch on A, approve and deny on B.
// ---------------------------------------------------------------------

/// `inquest watch` on A shows the held restart (tool, arguments, why) and
/// the command to approve it, and keeps following; `inquest approve` on B
/// approves it (it runs once), the model asks for a second restart, which
/// the watch shows held too; `inquest deny` on B denies it, the model is
/// told who denied it and why, and the watch exits 0 once the session
/// completed, having shown every turn.
#[tokio::test]
async fn the_cli_watches_a_hold_and_approves_and_denies_on_another_replica() {
    const CACHE: &str = "call-restart-cache";
    const DENIED: &str = "denied by anonymous: not during the sale";
    let _permit = GATE.acquire().await.unwrap();
    let Some(world) = world().await else {
        return;
    };
    let (a, b, _guard) = two_replicas(&world, None).await;
    world
        .fake
        .reply(restart_reply())
        .reply(FakeReply::text("Now the cache.").call(
            CACHE,
            "restart_service",
            r#"{"service":"cache"}"#,
        ))
        .reply(FakeReply::text(FINAL_ANSWER))
        .reply(FakeReply::text(REPORT));
    let mut ca = a.client().await;
    let mut cb = b.client().await;
    let id = started(&mut ca).await;
    let mut watching = Cli::start(&a, &["watch", &id]);

    watching
        .wait_for(&format!("approve: inquest approve {id} {RESTART}"), 1)
        .await;
    let shown = format!(
        r#"[approval pending] call {RESTART} incident.restart_service {{"service":"checkout"}} (mutating; {MODE_RULE}; expires "#
    );
    assert_eq!(watching.count(&shown), 1, "{}", watching.output());
    wait_held(&mut cb, &id, RESTART).await;
    assert!(watching.running(), "watch exited at the hold");

    let approved = inquest_on(&b, &["approve", &id, "--comment", "ok"]).await;
    assert!(
        approved.contains(&format!(
            "[approval approved by anonymous: ok] call {RESTART} incident.restart_service"
        )),
        "{approved}"
    );
    assert!(
        approved.contains(&format!("session {id} is ")),
        "{approved}"
    );

    // The approved call ran; the model's next reply is held in its turn.
    watching
        .wait_for(&format!("approve: inquest approve {id} {CACHE}"), 1)
        .await;
    wait_held(&mut cb, &id, CACHE).await;
    assert_eq!(
        world.config.executions(),
        1,
        "the approved restart ran once"
    );
    assert!(watching.running(), "watch exited at the second hold");
    assert_eq!(watching.count(RESTARTED), 1, "{}", watching.output());

    let denied = inquest_on(
        &b,
        &["deny", &id, CACHE, "--comment", "not during the sale"],
    )
    .await;
    assert!(
        denied.contains(&format!(
            "[approval denied by anonymous: not during the sale] call {CACHE} \
             incident.restart_service"
        )),
        "{denied}"
    );

    let status = watching.exit().await;
    assert!(status.success(), "{status}:\n{}", watching.output());
    assert_eq!(watching.count(FINAL_ANSWER), 1, "{}", watching.output());
    assert_eq!(
        watching.count("-- session completed"),
        1,
        "{}",
        watching.output()
    );
    assert_eq!(watching.count(DENIED), 1, "{}", watching.output());
    assert_eq!(watching.count("Restarting checkout."), 1, "each turn once");
    assert_eq!(watching.count("Now the cache."), 1, "each turn once");

    let done = settled(&mut cb, &id).await;
    assert_eq!(done.status(), pb::SessionStatus::Completed, "{done:?}");
    let last = turns(&mut cb, &id).await;
    assert_gapless(&last);
    assert_eq!(
        last.iter().map(role).collect::<Vec<_>>(),
        [
            pb::TurnRole::User,
            pb::TurnRole::Assistant,
            pb::TurnRole::Tool,
            pb::TurnRole::Assistant,
            pb::TurnRole::Tool,
            pb::TurnRole::Assistant
        ],
        "{last:#?}"
    );
    assert_eq!(
        (last[4].tool_call_id.as_str(), last[4].is_error),
        (CACHE, true)
    );
    assert_eq!(last[4].content, DENIED);
    let requests = world.fake.requests();
    assert_eq!(requests.len(), 4, "two holds, the answer, the report");
    assert_answer(&messages(&requests[1]), RESTART, RESTARTED);
    assert_answer(
        &messages(&requests[2]),
        CACHE,
        &format!("{}{DENIED}", inquest_agent::openai::TOOL_ERROR_PREFIX),
    );
    assert_eq!(world.config.executions(), 1, "the denied restart never ran");
    a.stop().await;
    b.stop().await;
}
