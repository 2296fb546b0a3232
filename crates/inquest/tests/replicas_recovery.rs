//! Crash recovery across replicas, continued: the replica
//! running a session is killed while its model call is in flight (the
//! recovery continues on its own), or paused with SIGSTOP past its lease
//! (once thawed, the epoch fence refuses its writes). Setup and checks are
//! shared with `replicas_crash.rs` (`support/crash.rs`).

mod support;

use std::time::Duration;

use inquest_proto::v1 as pb;
use inquest_testkit::fake::{Behaviour, FakeReply};
use support::{all_turns as turns, crash::*, create_incident, get_session, settled, start_session};

// ---------------------------------------------------------------------
// 3. kill -9 while the model call is in flight.
// ---------------------------------------------------------------------

/// A is killed while its model call is in flight; the recovering replica
/// continues on its own ("interrupted_prompt"), sending the model exactly
/// the request A had sent. `first`: a reply A got before the call that
/// hangs (a tool call whose result A stored), or none (the very first call
/// hangs); `before`: the roles stored when A dies.
async fn kill9_while_the_model_answers(first: Option<FakeReply>, before_roles: &[pb::TurnRole]) {
    let _permit = GATE.acquire().await.unwrap();
    let Some(world) = World::new().await else {
        return;
    };
    let (a, others) = world.start(None, 1).await;
    let _guard = KillOnPanic(vec![a.pid(), others[0].pid()]);
    // Index of the request that hangs.
    let hung = usize::from(first.is_some());
    if let Some(reply) = first {
        world.fake.reply(reply);
    }
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
    eventually("A's model call is in flight", || async {
        (world.fake.request_count() == hung + 1).then_some(())
    })
    .await;
    let running = get_session(&mut cb, &id).await;
    assert_eq!(running.lease_owner, "replica-a", "{running:?}");
    let before = turns(&mut cb, &id).await;
    assert_eq!(
        before.iter().map(role).collect::<Vec<_>>(),
        before_roles,
        "{before:#?}"
    );
    assert!(!before.iter().any(|t| t.is_error), "{before:#?}");
    a.kill9().await;

    let done = settled(&mut cb, &id).await;
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
    let mut roles = before_roles.to_vec();
    roles.extend([pb::TurnRole::Notice, pb::TurnRole::Assistant]);
    assert_eq!(
        last.iter().map(role).collect::<Vec<_>>(),
        roles,
        "{last:#?}"
    );
    assert_eq!(last[0].content, QUESTION);
    let notice = &last[before.len()];
    assert!(
        notice.content.starts_with("Recovery: interrupted_prompt."),
        "{:?}",
        notice.content
    );
    assert_eq!(last[before.len() + 1].content, FINAL_ANSWER);
    let requests = world.fake.requests();
    assert_eq!(
        requests.len(),
        hung + 3,
        "earlier, hung, recovered, report author"
    );
    assert_eq!(
        messages(&requests[hung + 1]),
        messages(&requests[hung]),
        "recovery resends the interrupted prompt"
    );
    assert_report(&mut cb, &id).await;
    for s in others {
        s.stop().await;
    }
}

/// (a) The tail is a complete set of tool results: A read a log (read-only)
/// and is waiting for the model when it dies.
#[tokio::test]
async fn kill9_while_the_model_answers_tool_results_continues_automatically() {
    kill9_while_the_model_answers(
        Some(FakeReply::text("Reading the logs.").call(
            "call-read",
            "read_log",
            r#"{"service":"checkout"}"#,
        )),
        &[
            pb::TurnRole::User,
            pb::TurnRole::Assistant,
            pb::TurnRole::Tool,
        ],
    )
    .await;
}

/// (b) The tail is the user's first message: the very first model call
/// hangs when A dies.
#[tokio::test]
async fn kill9_while_the_model_answers_the_first_message_continues_automatically() {
    kill9_while_the_model_answers(None, &[pb::TurnRole::User]).await;
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
