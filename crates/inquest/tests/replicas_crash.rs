//! Crash recovery across replicas, with real processes: several
//! `inquest serve` binaries share one PostgreSQL database, each spawning
//! the real Python MCP incident-tools server, all talking to one in-test
//! fake model provider. The replica running a session is killed (`kill -9`)
//! at each failpoint of a turn that calls a mutating tool, or in the middle
//! of a slow one; another replica must claim the orphan, write a recovery
//! notice and hold the session until `ContinueSession`, without losing or
//! duplicating a turn and without re-running the tool. (The model call in
//! flight and a paused worker: `replicas_recovery.rs`.)

mod support;

use inquest_proto::v1 as pb;
use inquest_testkit::fake::FakeReply;
use support::{Server, all_turns as turns, crash::*, create_incident, get_session, start_session};

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
