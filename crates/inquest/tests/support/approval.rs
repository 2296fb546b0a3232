//! Shared by the approval process tests (`approval_replicas.rs`): the
//! world whose replicas hold mutating calls, and the checks every case
//! makes of a hold, a decision and the completed session.

use inquest_proto::v1 as pb;
use inquest_testkit::fake::FakeReply;

use super::{
    Client, Server, all_turns as turns, crash::*, create_incident, settled, start_session,
};

/// What every replica of these tests prints when a claim takes over a
/// dead replica's burst.
pub const CLAIMED_ORPHAN: &str = "claimed an orphaned session";

/// The rule `[approval] mode = "mutating"` holds a mutating call under.
pub const MODE_RULE: &str = r#"require (mode "mutating")"#;

/// What `restart_service` answers on its first real execution.
pub const RESTARTED: &str = "restarted checkout (execution 1)";

/// The model's first reply: restart checkout (mutating: held).
pub fn restart_reply() -> FakeReply {
    FakeReply::text("Restarting checkout.").call(
        RESTART,
        "restart_service",
        r#"{"service":"checkout"}"#,
    )
}

/// A world whose replicas hold mutating calls; `None` (the test skips,
/// loudly) when the MCP SDK is missing and `INQUEST_REQUIRE_MCP` is unset.
pub async fn world() -> Option<World> {
    World::with_approval("mutating").await
}

/// Replica A (with `failpoints`, if any) and B, killed if the test panics.
pub async fn two_replicas(
    world: &World,
    failpoints: Option<&str>,
) -> (Server, Server, KillOnPanic) {
    let (a, mut others) = world.start(failpoints, 1).await;
    let b = others.remove(0);
    let guard = KillOnPanic(vec![a.pid(), b.pid()]);
    (a, b, guard)
}

/// A session on `c`'s replica asking the question; its id.
pub async fn started(c: &mut Client) -> String {
    let incident = create_incident(c, "checkout down").await;
    start_session(c, &incident.id, QUESTION)
        .await
        .expect("StartSession")
        .id
}

pub async fn decide(
    c: &mut Client,
    id: &str,
    call_id: &str,
    verdict: pb::ToolCallVerdict,
    comment: &str,
) -> pb::Session {
    c.decide_tool_calls(pb::DecideToolCallsRequest {
        session_id: id.into(),
        decisions: vec![pb::ToolCallDecision {
            call_id: call_id.into(),
            verdict: verdict.into(),
            comment: comment.into(),
        }],
        idempotency_key: String::new(),
    })
    .await
    .expect("DecideToolCalls on a held call")
    .into_inner()
}

/// The session's hold is exactly `call_id` (restart_service on the
/// incident server, held by the mode), in `state`.
pub fn assert_hold(s: &pb::Session, call_id: &str, state: pb::ApprovalState) {
    assert_hold_of(s, call_id, "restart_service", state);
}

/// [`assert_hold`] of a call to `tool`.
pub fn assert_hold_of(s: &pb::Session, call_id: &str, tool: &str, state: pb::ApprovalState) {
    assert_eq!(s.approvals.len(), 1, "{s:?}");
    let a = &s.approvals[0];
    assert_eq!(
        (a.call_id.as_str(), a.tool.as_str(), a.server.as_str()),
        (call_id, tool, "incident"),
        "{a:?}"
    );
    assert_eq!(
        (a.side_effect.as_str(), a.rule.as_str()),
        ("mutating", MODE_RULE)
    );
    assert_eq!(a.state(), state, "{a:?}");
}

/// Held on `c`'s replica: `awaiting_approval`, no lease, the restart
/// `call_id` pending.
pub async fn wait_held(c: &mut Client, id: &str, call_id: &str) -> pb::Session {
    wait_held_of(c, id, call_id, "restart_service").await
}

/// [`wait_held`] for a call to `tool`.
pub async fn wait_held_of(c: &mut Client, id: &str, call_id: &str, tool: &str) -> pb::Session {
    let held = wait_status(c, id, pb::SessionStatus::AwaitingApproval).await;
    assert_eq!(held.exit_reason, "awaiting_approval", "{held:?}");
    assert!(
        held.lease_owner.is_empty(),
        "a hold keeps no lease: {held:?}"
    );
    assert_hold_of(&held, call_id, tool, pb::ApprovalState::Pending);
    held
}

/// `messages` answers `call_id` with exactly `content` (a tool message
/// right after the assistant message that asked for it).
pub fn assert_answer(messages: &[serde_json::Value], call_id: &str, content: &str) {
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
    assert_eq!(answer["content"], content, "{messages:#?}");
}

/// After the approved restart ran: the session completed with the real
/// result stored and sent to the model (the request at `index`), the
/// final answer and the report. Returns the stored turns.
pub async fn assert_completed_after_restart(
    world: &World,
    c: &mut Client,
    id: &str,
    index: usize,
) -> Vec<pb::SessionTurn> {
    let done = settled(c, id).await;
    assert_eq!(done.status(), pb::SessionStatus::Completed, "{done:?}");
    assert_eq!(done.exit_reason, "completed");
    assert_hold(&done, RESTART, pb::ApprovalState::Approved);
    let last = turns(c, id).await;
    assert_gapless(&last);
    assert_eq!(
        last.iter().map(role).collect::<Vec<_>>(),
        [
            pb::TurnRole::User,
            pb::TurnRole::Assistant,
            pb::TurnRole::Tool,
            pb::TurnRole::Assistant
        ],
        "{last:#?}"
    );
    assert_eq!(last[2].tool_call_id, RESTART);
    assert_eq!(last[2].content, RESTARTED, "{:?}", last[2]);
    assert!(!last[2].is_error);
    assert_eq!(last[3].content, FINAL_ANSWER);
    let requests = world.fake.requests();
    assert_eq!(
        requests.len(),
        index + 2,
        "one model call and the report author after the approval"
    );
    assert_answer(&messages(&requests[index]), RESTART, RESTARTED);
    assert_report(c, id).await;
    last
}
