//! Approval through the real server: a strict fake model asks for tool
//! calls of a real MCP server (`incident_tools.py`, which counts every real
//! execution of `restart_service` in a file), `[approval]` holds the ones
//! it should, and a human decides over gRPC.
//!
//! Skipped loudly when the MCP SDK is not importable, unless
//! `INQUEST_REQUIRE_MCP` is set (then a missing SDK fails the test).

use std::{path::PathBuf, time::Duration};

use inquest_agent::McpSection;
use inquest_auth::Role;
use inquest_core::{SessionId, Tenant, approval::Action, tool_idempotency_key};
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use inquest_server::{
    config::approval::{ApprovalSection, RuleEntry},
    edge::auth::AuthMode,
    reason::{ErrorReason, Reason},
};
use inquest_testkit::{
    fake::{FakeProvider, FakeReply, Flavor},
    mcp,
};
use inquest_tests::TestApp;
use tokio_stream::StreamExt;
use tonic::{Code, Request, metadata::MetadataValue, transport::Channel};

use crate::agent_support::{
    HANG_GUARD, app_with_fake, finished, provider, send, session, start, tool_result_of, turns,
};

type Client = InvestigationsClient<Channel>;

/// An `mcpServers` file starting the incident tools as `incident`, with
/// `restart_service` counting its executions in `count`.
struct Tools {
    dir: PathBuf,
    file: PathBuf,
    count: PathBuf,
}

impl Tools {
    fn new(python: &str) -> Tools {
        let dir = std::env::temp_dir().join(format!(
            "inquest-approval-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("mcp.json");
        let count = dir.join("executions.txt");
        let servers = serde_json::json!({"mcpServers": {"incident": {
            "command": python,
            "args": [mcp::incident_tools_script().display().to_string()],
            "env": {"INQUEST_MCP_COUNT_FILE": count.display().to_string()},
        }}});
        std::fs::write(&file, servers.to_string()).unwrap();
        Tools { dir, file, count }
    }

    /// How often `restart_service` really ran.
    fn executions(&self) -> usize {
        std::fs::read_to_string(&self.count)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

impl Drop for Tools {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The server with the incident tools and `approval` as its policy.
async fn app(fake: &FakeProvider, tools: &Tools, approval: ApprovalSection) -> TestApp {
    let section = McpSection::new(&tools.file);
    app_with_fake(fake, |c| {
        c.mcp = Some(section);
        c.approval = approval;
        c.lease.reap_interval = Duration::from_millis(200);
    })
    .await
}

/// Polls until the session is in `status`.
async fn until_status(client: &mut Client, id: &str, status: pb::SessionStatus) -> pb::Session {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let s = session(client, id).await;
        if s.status() == status {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "session {id} never became {status:?}: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn decision(call_id: &str, verdict: pb::ToolCallVerdict, comment: &str) -> pb::ToolCallDecision {
    pb::ToolCallDecision {
        call_id: call_id.into(),
        verdict: verdict.into(),
        comment: comment.into(),
    }
}

async fn decide(
    client: &mut Client,
    id: &str,
    decisions: Vec<pb::ToolCallDecision>,
    key: &str,
) -> Result<pb::Session, tonic::Status> {
    client
        .decide_tool_calls(pb::DecideToolCallsRequest {
            session_id: id.into(),
            decisions,
            idempotency_key: key.into(),
        })
        .await
        .map(tonic::Response::into_inner)
}

/// Every event of a watch from the start, until it ends OK.
async fn watch_all(client: &mut Client, id: &str) -> Vec<pb::watch_event::Event> {
    let mut stream = client
        .watch_session(pb::WatchSessionRequest {
            session_id: id.into(),
            after_seq: 0,
            after_committed_at: None,
        })
        .await
        .unwrap()
        .into_inner();
    let mut events = Vec::new();
    let read = async {
        while let Some(item) = stream.next().await {
            events.push(item.expect("the watch ends OK").event.expect("an event"));
        }
    };
    tokio::time::timeout(HANG_GUARD, read)
        .await
        .expect("the watch ended");
    events
}

fn state(a: &pb::Approval) -> pb::ApprovalState {
    pb::ApprovalState::try_from(a.state).unwrap()
}

#[tokio::test]
async fn a_mutating_call_waits_for_a_human_and_runs_once_when_approved() {
    let Some(python) = mcp::python() else {
        return;
    };
    let tools = Tools::new(&python);
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(
        FakeReply::text("Reading the log, then restarting.")
            .call("c1", "read_log", r#"{"service":"api"}"#)
            .call("c2", "restart_service", r#"{"service":"api"}"#),
    )
    .reply(FakeReply::text("Restarted; the errors stopped."))
    .reply(FakeReply::text("S: restarted api"));
    let app = app(&fake, &tools, ApprovalSection::default()).await;
    let mut client = app.client().await;
    let id = start(&mut client, "api is failing").await;

    let held = until_status(&mut client, &id, pb::SessionStatus::AwaitingApproval).await;
    assert_eq!(held.exit_reason, "awaiting_approval");
    assert!(held.lease_owner.is_empty(), "no lease is held: {held:?}");
    assert_eq!(held.approvals.len(), 1, "{held:?}");
    let a = &held.approvals[0];
    assert_eq!(
        (a.call_id.as_str(), a.tool.as_str(), a.server.as_str()),
        ("c2", "restart_service", "incident")
    );
    assert_eq!(a.side_effect, "mutating");
    assert_eq!(a.rule, r#"require (mode "mutating")"#);
    assert_eq!(a.arguments_json, r#"{"service":"api"}"#);
    assert_eq!(state(a), pb::ApprovalState::Pending);
    assert!(a.expires_at.is_some() && a.decided_by.is_empty());
    // The read-only call of the same reply ran; the mutating one did not.
    let stored = turns(&mut client, &id).await;
    assert_eq!(stored.len(), 3, "user, assistant, read_log's result");
    assert_eq!(
        tool_result_of(&stored[2]),
        ("c1".into(), "read_log".into(), false)
    );
    assert_eq!(tools.executions(), 0);
    // No summary was asked of the model for the hold.
    assert_eq!(fake.request_count(), 1);

    // A late watcher gets the turns, then the request, then OK.
    let events = watch_all(&mut client, &id).await;
    match events.last() {
        Some(pb::watch_event::Event::ApprovalRequested(r)) => {
            assert_eq!(
                (r.call_id.as_str(), r.tool.as_str()),
                ("c2", "restart_service")
            );
            assert_eq!(state(r), pb::ApprovalState::Pending);
        }
        other => panic!("the watch should end with the request: {other:?}"),
    }

    let approve = vec![decision("c2", pb::ToolCallVerdict::Approve, "go")];
    let decided = decide(&mut client, &id, approve.clone(), "k1")
        .await
        .unwrap();
    assert_eq!(state(&decided.approvals[0]), pb::ApprovalState::Approved);
    assert!(!decided.approvals[0].decided_by.is_empty());
    // The decision continues the same round: its report is burst 1's,
    // rewritten when the round ends.
    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed", "{s:?}");
    assert_eq!(s.status(), pb::SessionStatus::Completed);
    assert_eq!(tools.executions(), 1, "the approved call ran exactly once");

    let stored = turns(&mut client, &id).await;
    let result = stored
        .iter()
        .find(|t| t.tool_call_id == "c2")
        .expect("the approved call's result");
    assert!(
        result.content.contains("restarted api (execution 1)"),
        "{result:?}"
    );
    // The model's next request carried both real results, in call order.
    let next = fake.requests()[1].body["messages"].to_string();
    let (r1, r2) = (
        next.find("connection refused").expect("read_log's result"),
        next.find("restarted api")
            .expect("restart_service's result"),
    );
    assert!(r1 < r2);
    assert!(
        !next.contains("interrupted"),
        "no placeholder result: {next}"
    );
    // The MCP call carried the key it would have had.
    let key = tool_idempotency_key(SessionId::parse(&id).unwrap(), "c2");
    assert!(!key.is_empty());

    // A retry with the key writes nothing; the key with other decisions
    // is refused; deciding again is FAILED_PRECONDITION.
    let again = decide(&mut client, &id, approve, "k1").await.unwrap();
    assert_eq!(state(&again.approvals[0]), pb::ApprovalState::Approved);
    let other = vec![decision("c2", pb::ToolCallVerdict::Deny, "")];
    let reused = decide(&mut client, &id, other.clone(), "k1")
        .await
        .unwrap_err();
    assert_eq!(reused.code(), Code::AlreadyExists, "{reused:?}");
    let late = decide(&mut client, &id, other, "").await.unwrap_err();
    assert_eq!(late.code(), Code::FailedPrecondition, "{late:?}");
    assert_eq!(
        ErrorReason::of(&late).map(|r| r.reason),
        Some(Reason::ApprovalNotPending)
    );
    assert_eq!(tools.executions(), 1);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_partial_denial_waits_and_a_follow_up_supersedes_the_rest() {
    let Some(python) = mcp::python() else {
        return;
    };
    let tools = Tools::new(&python);
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(
        FakeReply::text("Restarting, paging and scaling.")
            .call("c1", "restart_service", r#"{"service":"db"}"#)
            .call("c2", "page_oncall", r#"{"message":"db down"}"#)
            .call("c3", "scale_service", r#"{"service":"db","replicas":3}"#),
    )
    .reply(FakeReply::text("Looking at pricing-svc instead."))
    .reply(FakeReply::text("S: pricing"));
    let app = app(&fake, &tools, ApprovalSection::default()).await;
    let mut client = app.client().await;
    let id = start(&mut client, "db is slow").await;
    let held = until_status(&mut client, &id, pb::SessionStatus::AwaitingApproval).await;
    assert_eq!(held.approvals.len(), 3);
    assert_eq!(held.approvals[2].side_effect, "idempotent");

    // Deny one and approve another: c2 is still pending, so nothing runs.
    let partial = vec![
        decision("c1", pb::ToolCallVerdict::Deny, "not during business hours"),
        decision("c3", pb::ToolCallVerdict::Approve, ""),
    ];
    let partial = decide(&mut client, &id, partial, "").await.unwrap();
    assert_eq!(partial.status(), pb::SessionStatus::AwaitingApproval);
    let states: Vec<_> = partial.approvals.iter().map(state).collect();
    assert_eq!(
        states,
        [
            pb::ApprovalState::Denied,
            pb::ApprovalState::Pending,
            pb::ApprovalState::Approved
        ]
    );
    let stored = turns(&mut client, &id).await;
    let denied = stored.last().unwrap();
    assert_eq!(
        tool_result_of(denied),
        ("c1".into(), "restart_service".into(), true)
    );
    assert!(
        denied.content.starts_with("denied by ")
            && denied.content.ends_with(": not during business hours"),
        "{}",
        denied.content
    );

    // A follow-up answers what is left before the message: the pending
    // call is superseded, the approved one that never started is not run.
    send(&mut client, &id, "it's not the DB, look at pricing-svc").await;
    let (report, _) = finished(&mut client, &id, 2).await;
    assert_eq!(report.exit_reason, "awaiting_user");
    let s = session(&mut client, &id).await;
    assert_eq!(state(&s.approvals[1]), pb::ApprovalState::Superseded);
    assert_eq!(s.approvals[1].decided_by, "system");
    let stored = turns(&mut client, &id).await;
    let roles: Vec<_> = stored.iter().map(|t| t.role()).collect();
    assert_eq!(
        roles[..6],
        [
            pb::TurnRole::User,
            pb::TurnRole::Assistant,
            pb::TurnRole::Tool,
            pb::TurnRole::Tool,
            pb::TurnRole::Tool,
            pb::TurnRole::User
        ],
        "every call is answered before the message"
    );
    let c2 = stored.iter().find(|t| t.tool_call_id == "c2").unwrap();
    assert!(c2.content.contains("superseded by a new message"), "{c2:?}");
    let c3 = stored.iter().find(|t| t.tool_call_id == "c3").unwrap();
    assert!(
        c3.content.starts_with("not run: a new message arrived"),
        "{c3:?}"
    );
    // Nothing was held for a human: the model was asked again at once (a
    // notice may say its results were never shown to it).
    for t in stored.iter().filter(|t| t.role() == pb::TurnRole::Notice) {
        let plan = t.recovery_plan.as_ref().expect("a notice's plan");
        assert!(
            plan.can_auto_continue && plan.interrupted_calls.is_empty(),
            "{t:?}"
        );
    }
    assert_eq!(tools.executions(), 0, "nothing denied ran");
    app.stop().await.unwrap();
}

fn rule(name: &str, tool: &str, action: Action) -> RuleEntry {
    RuleEntry {
        name: Some(name.into()),
        server: None,
        tool: tool.into(),
        arguments: Vec::new(),
        action,
    }
}

#[tokio::test]
async fn rules_deny_and_allow_at_once_and_an_unanswered_call_expires() {
    let Some(python) = mcp::python() else {
        return;
    };
    let tools = Tools::new(&python);
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(
        FakeReply::text("Trying everything.")
            .call("c1", "restart_service", r#"{"service":"api"}"#)
            .call("c2", "page_oncall", r#"{"message":"hi"}"#)
            .call("c3", "read_log", r#"{"service":"api"}"#),
    )
    .reply(FakeReply::text("Nobody answered; reporting."))
    .reply(FakeReply::text("S: expired"));
    let approval = ApprovalSection {
        mode: inquest_core::approval::Mode::All,
        timeout: Duration::from_secs(1),
        rules: vec![
            rule("no restarts", "restart_*", Action::Deny),
            rule("paging is fine", "page_oncall", Action::Allow),
        ],
    };
    let app = app(&fake, &tools, approval).await;
    let mut client = app.client().await;
    let id = start(&mut client, "api is failing").await;
    let held = until_status(&mut client, &id, pb::SessionStatus::AwaitingApproval).await;
    assert_eq!(held.approvals.len(), 1);
    assert_eq!(held.approvals[0].call_id, "c3");
    assert_eq!(held.approvals[0].rule, r#"require (mode "all")"#);
    let stored = turns(&mut client, &id).await;
    let c1 = stored.iter().find(|t| t.tool_call_id == "c1").unwrap();
    assert!(c1.is_error);
    assert!(
        c1.content.contains(r#"deny (rule "no restarts")"#),
        "{}",
        c1.content
    );
    let c2 = stored.iter().find(|t| t.tool_call_id == "c2").unwrap();
    assert_eq!(c2.content, "paged: hi");
    assert_eq!(tools.executions(), 0);

    // Past the timeout the reaper denies it as expired, and the model goes on.
    let s = until_status(&mut client, &id, pb::SessionStatus::Completed).await;
    assert_eq!(s.exit_reason, "completed");
    assert_eq!(state(&s.approvals[0]), pb::ApprovalState::Expired);
    let stored = turns(&mut client, &id).await;
    let c3 = stored.iter().find(|t| t.tool_call_id == "c3").unwrap();
    assert!(c3.is_error && c3.content.contains("expired"), "{c3:?}");
    app.stop().await.unwrap();
}

fn authed<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    let value: MetadataValue<_> = format!("Bearer {token}").parse().unwrap();
    request.metadata_mut().insert("authorization", value);
    request
}

async fn token(app: &TestApp, tenant: &str, role: Role) -> String {
    app.store
        .create_token(
            &format!("{tenant}-{role}"),
            &Tenant::parse(tenant).unwrap(),
            role,
            None,
        )
        .await
        .unwrap()
        .secret
}

#[tokio::test]
async fn only_an_operator_of_the_tenant_decides_and_a_cancel_ends_the_hold() {
    let Some(python) = mcp::python() else {
        return;
    };
    let tools = Tools::new(&python);
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Restarting.").call(
        "c1",
        "restart_service",
        r#"{"service":"api"}"#,
    ));
    let section = McpSection::new(&tools.file);
    let entry = provider(&fake, Flavor::OpenAi, "fake");
    let app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![entry];
        c.mcp = Some(section);
        c.approval = ApprovalSection::default();
        c.auth.mode = AuthMode::Required;
    })
    .await;
    let operator = token(&app, "acme", Role::Operator).await;
    let viewer = token(&app, "acme", Role::Viewer).await;
    let stranger = token(&app, "globex", Role::Admin).await;
    let mut client = app.client().await;
    let incident = client
        .create_incident(authed(
            pb::CreateIncidentRequest {
                title: "t".into(),
                description: "d".into(),
            },
            &operator,
        ))
        .await
        .unwrap()
        .into_inner();
    let id = client
        .start_session(authed(
            pb::StartSessionRequest {
                incident_id: incident.id,
                message: "restart it".into(),
                idempotency_key: String::new(),
            },
            &operator,
        ))
        .await
        .unwrap()
        .into_inner()
        .id;
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let s = client
            .get_session(authed(
                pb::GetSessionRequest {
                    session_id: id.clone(),
                },
                &viewer,
            ))
            .await
            .unwrap()
            .into_inner();
        if s.status() == pb::SessionStatus::AwaitingApproval {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never held: {s:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let request = |token: &str| {
        authed(
            pb::DecideToolCallsRequest {
                session_id: id.clone(),
                decisions: vec![decision("c1", pb::ToolCallVerdict::Approve, "")],
                idempotency_key: String::new(),
            },
            token,
        )
    };
    let refused = client
        .decide_tool_calls(request(&viewer))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let refused = client
        .decide_tool_calls(request(&stranger))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::NotFound, "{refused:?}");
    // Malformed decisions are refused before anything is read.
    let empty = client
        .decide_tool_calls(authed(
            pb::DecideToolCallsRequest {
                session_id: id.clone(),
                decisions: vec![],
                idempotency_key: String::new(),
            },
            &operator,
        ))
        .await
        .unwrap_err();
    assert_eq!(empty.code(), Code::InvalidArgument);

    let cancelled = client
        .cancel_session(authed(
            pb::CancelSessionRequest {
                session_id: id.clone(),
            },
            &operator,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(cancelled.status(), pb::SessionStatus::Cancelled);
    let after = client
        .decide_tool_calls(request(&operator))
        .await
        .unwrap_err();
    assert_eq!(after.code(), Code::FailedPrecondition, "{after:?}");
    let s = client
        .get_session(authed(
            pb::GetSessionRequest {
                session_id: id.clone(),
            },
            &operator,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state(&s.approvals[0]), pb::ApprovalState::Cancelled);
    assert_eq!(tools.executions(), 0);
    // The audit trail records the refused decision with its principal.
    let audit = app
        .store
        .list_audit(&Tenant::parse("acme").unwrap(), None, None, 100)
        .await
        .unwrap();
    let decide = audit
        .events
        .iter()
        .find(|e| e.entry.method == "DecideToolCalls")
        .expect("DecideToolCalls is audited");
    assert_eq!(decide.entry.code, "FAILED_PRECONDITION");
    assert_eq!(decide.entry.actor_name, "acme-operator");
    app.stop().await.unwrap();
}

/// A follow-up answers only the hold it supersedes: an approved call of
/// an earlier hold left without a result (a recovery notice repaired it,
/// as after a crash while its sibling ran) is not answered again, long
/// after its turn, where the result would answer no open call.
#[tokio::test]
async fn a_follow_up_leaves_earlier_holds_alone() {
    let Some(python) = mcp::python() else {
        return;
    };
    let tools = Tools::new(&python);
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Restarting.").call(
        "c1",
        "restart_service",
        r#"{"service":"api"}"#,
    ))
    .reply(FakeReply::text("Restarted."))
    .reply(FakeReply::text("S: restarted"))
    .reply(FakeReply::text("Still fine."))
    .reply(FakeReply::text("S: fine"));
    let app = app(&fake, &tools, ApprovalSection::default()).await;
    let mut client = app.client().await;
    let id = start(&mut client, "api is failing").await;
    until_status(&mut client, &id, pb::SessionStatus::AwaitingApproval).await;
    let approve = vec![decision("c1", pb::ToolCallVerdict::Approve, "")];
    decide(&mut client, &id, approve, "").await.unwrap();
    until_status(&mut client, &id, pb::SessionStatus::Completed).await;
    // What a crash mid-hold leaves: a sibling call of that hold approved,
    // never started, never answered.
    let db = inquest_tests::connect(&app.db_url).await;
    db.execute(
        "INSERT INTO approvals (session_id, call_id, tenant, assistant_seq, position, tool, \
           server, arguments, side_effect, rule, state, expires_at, decided_by, decided_at) \
         VALUES ($1, 'c-old', 'default', 2, 1, 'restart_service', 'incident', '{}', \
           'mutating', 'require (mode \"mutating\")', 'approved', now() + interval '1 hour', \
           'someone', now())",
        &[&uuid::Uuid::parse_str(&id).unwrap()],
    )
    .await
    .unwrap();
    let before = turns(&mut client, &id).await.len();
    send(&mut client, &id, "is it stable?").await;
    let (report, _) = finished(&mut client, &id, 2).await;
    assert_eq!(report.exit_reason, "awaiting_user");
    let stored = turns(&mut client, &id).await;
    assert_eq!(
        stored[before].role(),
        pb::TurnRole::User,
        "{:?}",
        &stored[before..]
    );
    assert!(stored.iter().all(|t| t.tool_call_id != "c-old"));
    assert_eq!(tools.executions(), 1);
    app.stop().await.unwrap();
}
