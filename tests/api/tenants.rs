//! Tenants through the real API with `[auth] mode = "required"`: another
//! tenant's ids answer exactly as unknown ones (same code, reason and
//! message shape) for every RPC that takes one and write nothing; lists
//! show only the caller's tenant; the per-tenant burst limit and daily
//! token budget refuse new bursts with RESOURCE_EXHAUSTED and write
//! nothing; the audit trail records a session's life and is per tenant;
//! token management over the API stays within the tenant.

use inquest_auth::Role;
use inquest_core::Tenant;
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use inquest_server::config::tenants::LimitsEntry;
use inquest_server::edge::auth::AuthMode;
use inquest_server::reason::{ErrorReason, Reason};
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use inquest_tests::TestApp;
use tonic::{Code, Request, Status, metadata::MetadataValue, transport::Channel};

use crate::agent_support::{Gate, eventually, evidence_tools, provider, provider_at};

type Client = InvestigationsClient<Channel>;

const UNKNOWN: &str = "01890a5d-ac96-774b-bcce-b302099a8057";

fn req<T>(message: T, token: &str) -> Request<T> {
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

async fn incident(c: &mut Client, token: &str, title: &str) -> pb::Incident {
    c.create_incident(req(
        pb::CreateIncidentRequest {
            title: title.into(),
            description: String::new(),
        },
        token,
    ))
    .await
    .unwrap()
    .into_inner()
}

async fn start(c: &mut Client, token: &str, incident: &str) -> Result<pb::Session, Status> {
    c.start_session(req(
        pb::StartSessionRequest {
            incident_id: incident.into(),
            message: "what happened?".into(),
            idempotency_key: String::new(),
        },
        token,
    ))
    .await
    .map(|r| r.into_inner())
}

async fn get(c: &mut Client, token: &str, session: &str) -> pb::Session {
    c.get_session(req(
        pb::GetSessionRequest {
            session_id: session.into(),
        },
        token,
    ))
    .await
    .unwrap()
    .into_inner()
}

/// Calls `method` naming `id` (a session, incident or token id) and
/// returns its status (OK as `Code::Ok` with an empty message).
async fn call(c: &mut Client, token: &str, method: &str, id: &str) -> Status {
    let id = id.to_owned();
    let result: Result<(), Status> = match method {
        "GetIncident" => c
            .get_incident(req(pb::GetIncidentRequest { incident_id: id }, token))
            .await
            .map(drop),
        "StartSession" => start(c, token, &id).await.map(drop),
        "ListSessions" => c
            .list_sessions(req(
                pb::ListSessionsRequest {
                    incident_id: id,
                    ..Default::default()
                },
                token,
            ))
            .await
            .map(drop),
        "GetSession" => c
            .get_session(req(pb::GetSessionRequest { session_id: id }, token))
            .await
            .map(drop),
        "ListTurns" => c
            .list_turns(req(
                pb::ListTurnsRequest {
                    session_id: id,
                    ..Default::default()
                },
                token,
            ))
            .await
            .map(drop),
        "SendMessage" => c
            .send_message(req(
                pb::SendMessageRequest {
                    session_id: id,
                    message: "more".into(),
                    idempotency_key: "k1".into(),
                    if_running: 0,
                },
                token,
            ))
            .await
            .map(drop),
        "WatchSession" => match c
            .watch_session(req(
                pb::WatchSessionRequest {
                    session_id: id,
                    after_seq: 0,
                    after_committed_at: None,
                },
                token,
            ))
            .await
        {
            Ok(mut stream) => stream.get_mut().message().await.map(drop),
            Err(s) => Err(s),
        },
        "ForkSession" => c
            .fork_session(req(
                pb::ForkSessionRequest {
                    session_id: id,
                    at_seq: 1,
                    message: Some("what if?".into()),
                    idempotency_key: "f1".into(),
                },
                token,
            ))
            .await
            .map(drop),
        "CancelSession" => c
            .cancel_session(req(pb::CancelSessionRequest { session_id: id }, token))
            .await
            .map(drop),
        "GetReport" => c
            .get_report(req(
                pb::GetReportRequest {
                    session_id: id,
                    burst: 0,
                },
                token,
            ))
            .await
            .map(drop),
        "ContinueSession" => c
            .continue_session(req(pb::ContinueSessionRequest { session_id: id }, token))
            .await
            .map(drop),
        "GetRecoveryPlan" => c
            .get_recovery_plan(req(pb::GetRecoveryPlanRequest { session_id: id }, token))
            .await
            .map(drop),
        "RevokeToken" => c
            .revoke_token(req(pb::RevokeTokenRequest { token_id: id }, token))
            .await
            .map(drop),
        "ListAuditEvents" => c
            .list_audit_events(req(
                pb::ListAuditEventsRequest {
                    session_id: id,
                    ..Default::default()
                },
                token,
            ))
            .await
            .map(drop),
        "ListEvents" => c
            .list_events(req(
                pb::ListEventsRequest {
                    session_id: id,
                    ..Default::default()
                },
                token,
            ))
            .await
            .map(drop),
        other => panic!("no call for {other}"),
    };
    match result {
        Ok(()) => Status::new(Code::Ok, ""),
        Err(s) => s,
    }
}

/// The rows a refused call must not touch (the audit trail is written on
/// purpose and checked on its own).
async fn rows(app: &TestApp) -> Vec<i64> {
    let mut out = Vec::new();
    for table in [
        "incidents",
        "sessions",
        "turns",
        "reports",
        "idempotency_keys",
    ] {
        out.push(app.count(table).await);
    }
    let db = inquest_tests::connect(&app.db_url).await;
    let revoked: i64 = db
        .query_one(
            "SELECT count(*) FROM api_tokens WHERE revoked_at IS NOT NULL",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    out.push(revoked);
    out
}

/// What a call about `session` could have written while other sessions'
/// bursts still run: the global counts no burst changes, and that one
/// session's own turns, reports and head.
async fn rows_of(app: &TestApp, session: &str) -> Vec<i64> {
    let db = inquest_tests::connect(&app.db_url).await;
    let id: uuid::Uuid = session.parse().expect("a session id");
    let mut out = Vec::new();
    for table in ["incidents", "sessions", "idempotency_keys"] {
        out.push(app.count(table).await);
    }
    let revoked = "SELECT count(*) FROM api_tokens WHERE revoked_at IS NOT NULL";
    out.push(db.query_one(revoked, &[]).await.unwrap().get(0));
    for sql in [
        "SELECT count(*) FROM turns WHERE session_id = $1",
        "SELECT count(*) FROM reports WHERE session_id = $1",
        "SELECT head_seq FROM sessions WHERE id = $1",
    ] {
        out.push(db.query_one(sql, &[&id]).await.unwrap().get(0));
    }
    out
}

/// What a client can tell apart: code, reason, reason metadata and the
/// message, with the id itself taken out.
fn shape(status: &Status, id: &str) -> (Code, Option<Reason>, Vec<String>, String) {
    let info = ErrorReason::of(status);
    let mut keys: Vec<String> = info
        .as_ref()
        .map(|i| i.metadata.keys().cloned().collect())
        .unwrap_or_default();
    keys.sort();
    (
        status.code(),
        info.map(|i| i.reason),
        keys,
        status.message().replace(id, "<id>"),
    )
}

#[tokio::test]
async fn another_tenants_ids_answer_exactly_as_unknown_ones_and_write_nothing() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let app = inquest_tests::spawn_app_with(|c| {
        c.auth.mode = AuthMode::Required;
        c.providers = vec![provider(&fake, Flavor::OpenAi, "fake")];
        evidence_tools(c);
    })
    .await;
    let acme = token(&app, "acme", Role::Admin).await;
    let globex = token(&app, "globex", Role::Admin).await;
    let mut c = app.client().await;

    let inc = incident(&mut c, &acme, "acme's outage").await;
    let session = start(&mut c, &acme, &inc.id).await.unwrap();
    eventually_settled(&mut c, &acme, &session.id).await;
    let acme_token_id = app
        .store
        .list_tenant_tokens(&Tenant::parse("acme").unwrap(), 10)
        .await
        .unwrap()[0]
        .id
        .to_string();

    let by_incident = ["GetIncident", "StartSession", "ListSessions"];
    let by_session = [
        "GetSession",
        "ListTurns",
        "SendMessage",
        "ForkSession",
        "WatchSession",
        "CancelSession",
        "GetReport",
        "ContinueSession",
        "GetRecoveryPlan",
        "ListEvents",
    ];
    let cases = by_incident
        .iter()
        .map(|m| (*m, inc.id.clone()))
        .chain(by_session.iter().map(|m| (*m, session.id.clone())))
        .chain([("RevokeToken", acme_token_id.clone())]);
    for (method, foreign) in cases {
        let before = rows(&app).await;
        let theirs = call(&mut c, &globex, method, &foreign).await;
        assert_eq!(rows(&app).await, before, "{method} on acme's id wrote");
        let unknown = call(&mut c, &globex, method, UNKNOWN).await;
        assert_eq!(theirs.code(), Code::NotFound, "{method}: {theirs:?}");
        assert_eq!(
            shape(&theirs, &foreign),
            shape(&unknown, UNKNOWN),
            "{method}: a foreign id must look like an unknown one"
        );
        // The owner still sees it (not a broken id).
        if matches!(method, "GetIncident" | "GetSession" | "ListTurns") {
            let own = call(&mut c, &acme, method, &foreign).await;
            assert_eq!(own.code(), Code::Ok, "{method} as its owner: {own:?}");
        }
    }
    // ListAuditEvents of acme's session, as globex: only globex's own
    // refused attempts, nothing acme did.
    let audit = c
        .list_audit_events(req(
            pb::ListAuditEventsRequest {
                session_id: session.id.clone(),
                ..Default::default()
            },
            &globex,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(!audit.events.is_empty());
    assert!(
        audit
            .events
            .iter()
            .all(|e| e.tenant == "globex" && e.code == "NOT_FOUND"),
        "{:?}",
        audit.events
    );

    // Lists are the caller's tenant's only.
    let theirs = incident(&mut c, &globex, "globex's own").await;
    let listed = c
        .list_incidents(req(pb::ListIncidentsRequest::default(), &globex))
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<&str> = listed.incidents.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, [theirs.id.as_str()]);
    let sessions = c
        .list_sessions(req(pb::ListSessionsRequest::default(), &globex))
        .await
        .unwrap()
        .into_inner();
    assert!(sessions.sessions.is_empty());
    let filtered = c
        .list_sessions(req(
            pb::ListSessionsRequest {
                statuses: vec![pb::SessionStatus::Completed.into()],
                ..Default::default()
            },
            &globex,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(filtered.sessions.is_empty());
    let mine = c
        .list_sessions(req(pb::ListSessionsRequest::default(), &acme))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(mine.sessions.len(), 1);
    let tokens = c
        .list_tokens(req(pb::ListTokensRequest::default(), &globex))
        .await
        .unwrap()
        .into_inner();
    assert!(tokens.tokens.iter().all(|t| t.tenant == "globex"));
    assert_eq!(tokens.tokens.len(), 1);
    // acme's token still works: globex's revoke did nothing.
    get(&mut c, &acme, &session.id).await;
}

/// Waits until the session's burst ended (any status but pending/running).
async fn eventually_settled(c: &mut Client, token: &str, id: &str) -> pb::Session {
    for _ in 0..600 {
        let s = get(c, token, id).await;
        if !matches!(
            s.status(),
            pb::SessionStatus::Pending | pb::SessionStatus::Running
        ) {
            return s;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("session {id} never settled");
}

fn reason(status: &Status) -> Reason {
    ErrorReason::of(status).expect("an Inquest reason").reason
}

#[tokio::test]
async fn the_running_burst_limit_is_per_tenant_and_refusals_write_nothing() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let gate = Gate::in_front_of(&fake).await;
    let app = inquest_tests::spawn_app_with(|c| {
        c.auth.mode = AuthMode::Required;
        c.providers = vec![provider_at(Flavor::OpenAi, "held", gate.base_url(&fake))];
        evidence_tools(c);
        c.tenants.max_running_bursts = Some(3);
        c.tenants.overrides.insert(
            "acme".into(),
            LimitsEntry {
                max_running_bursts: Some(1),
                daily_token_budget: None,
                max_watch_streams: None,
                alerts_max_started_per_hour: None,
                approval: None,
                ..LimitsEntry::default()
            },
        );
    })
    .await;
    let acme = token(&app, "acme", Role::Operator).await;
    let globex = token(&app, "globex", Role::Operator).await;
    let mut c = app.client().await;
    let inc = incident(&mut c, &acme, "acme").await;
    let first = start(&mut c, &acme, &inc.id).await.unwrap();
    eventually("the first burst's model call", || fake.request_count() >= 1).await;

    let before = rows(&app).await;
    let refused = start(&mut c, &acme, &inc.id).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(reason(&refused), Reason::TenantBurstLimit);
    let info = ErrorReason::of(&refused).unwrap();
    assert_eq!(info.metadata["limit"], "tenants.max_running_bursts");
    assert_eq!(info.metadata["value"], "1");
    assert_eq!(rows(&app).await, before, "a refused start wrote");
    // A fork that would run a message is a burst too; one without a
    // message is not, and is made.
    let fork = |message: Option<&str>| {
        req(
            pb::ForkSessionRequest {
                session_id: first.id.clone(),
                at_seq: 1,
                message: message.map(str::to_owned),
                idempotency_key: String::new(),
            },
            &acme,
        )
    };
    let refused = c.fork_session(fork(Some("what if?"))).await.unwrap_err();
    assert_eq!(reason(&refused), Reason::TenantBurstLimit, "{refused:?}");
    assert_eq!(rows(&app).await, before, "a refused fork wrote");
    let idle = c.fork_session(fork(None)).await.unwrap().into_inner();
    assert_eq!(idle.status(), pb::SessionStatus::Idle);

    // Another tenant has its own limit (the default, 3).
    let other = incident(&mut c, &globex, "globex").await;
    for _ in 0..3 {
        start(&mut c, &globex, &other.id).await.unwrap();
    }
    let full = start(&mut c, &globex, &other.id).await.unwrap_err();
    assert_eq!(reason(&full), Reason::TenantBurstLimit);

    // The held bursts finish; acme may start again, and a follow-up to a
    // finished session is a new burst that counts too.
    gate.open();
    eventually_settled(&mut c, &acme, &first.id).await;
    let second = start(&mut c, &acme, &inc.id).await.unwrap();
    // The second burst and globex's three still write: only what the
    // follow-up could have written is compared.
    let before = rows_of(&app, &first.id).await;
    let busy = c
        .send_message(req(
            pb::SendMessageRequest {
                session_id: first.id.clone(),
                message: "and then?".into(),
                idempotency_key: String::new(),
                if_running: 0,
            },
            &acme,
        ))
        .await;
    match busy {
        // The second burst may already be done on a fast machine.
        Ok(_) => {}
        Err(s) => {
            assert_eq!(reason(&s), Reason::TenantBurstLimit, "{s:?}");
            assert_eq!(
                rows_of(&app, &first.id).await,
                before,
                "a refused follow-up wrote"
            );
            assert_eq!(
                get(&mut c, &acme, &first.id).await.status(),
                pb::SessionStatus::Completed,
                "a refused follow-up changed the session"
            );
        }
    }
    eventually_settled(&mut c, &acme, &second.id).await;
}

#[tokio::test]
async fn a_spent_daily_token_budget_stops_new_bursts_of_that_tenant_only() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    for _ in 0..4 {
        fake.reply(FakeReply::text("the pool is exhausted").usage(700, 200));
    }
    let app = inquest_tests::spawn_app_with(|c| {
        c.auth.mode = AuthMode::Required;
        c.providers = vec![provider(&fake, Flavor::OpenAi, "fake")];
        evidence_tools(c);
        c.tenants.overrides.insert(
            "acme".into(),
            LimitsEntry {
                max_running_bursts: None,
                daily_token_budget: Some(500),
                max_watch_streams: None,
                alerts_max_started_per_hour: None,
                approval: None,
                ..LimitsEntry::default()
            },
        );
    })
    .await;
    let acme = token(&app, "acme", Role::Operator).await;
    let globex = token(&app, "globex", Role::Operator).await;
    let mut c = app.client().await;
    let inc = incident(&mut c, &acme, "acme").await;
    let first = start(&mut c, &acme, &inc.id).await.unwrap();
    let settled = eventually_settled(&mut c, &acme, &first.id).await;
    assert!(settled.input_tokens + settled.output_tokens >= 500);
    let spent = app
        .store
        .tokens_spent_today(&Tenant::parse("acme").unwrap())
        .await
        .unwrap();
    assert_eq!(spent as i64, settled.input_tokens + settled.output_tokens);

    let before = rows(&app).await;
    let refused = start(&mut c, &acme, &inc.id).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert_eq!(reason(&refused), Reason::TokenBudgetExhausted);
    assert_eq!(
        ErrorReason::of(&refused).unwrap().metadata["spent"],
        spent.to_string()
    );
    let follow_up = c
        .send_message(req(
            pb::SendMessageRequest {
                session_id: first.id.clone(),
                message: "more".into(),
                idempotency_key: String::new(),
                if_running: 0,
            },
            &acme,
        ))
        .await
        .unwrap_err();
    assert_eq!(reason(&follow_up), Reason::TokenBudgetExhausted);
    assert_eq!(rows(&app).await, before, "a refused call wrote");

    // globex has no budget set: unaffected.
    let other = incident(&mut c, &globex, "globex").await;
    let theirs = start(&mut c, &globex, &other.id).await.unwrap();
    eventually_settled(&mut c, &globex, &theirs.id).await;
}

#[tokio::test]
async fn the_audit_trail_records_a_sessions_life_per_tenant() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let app = inquest_tests::spawn_app_with(|c| {
        c.auth.mode = AuthMode::Required;
        c.providers = vec![provider(&fake, Flavor::OpenAi, "fake")];
        evidence_tools(c);
    })
    .await;
    let admin = token(&app, "acme", Role::Admin).await;
    let operator = token(&app, "acme", Role::Operator).await;
    let viewer = token(&app, "acme", Role::Viewer).await;
    let mut c = app.client().await;
    // Another tenant's calls, before and between: acme's ids show no gap
    // for them.
    let other = token(&app, "beta", Role::Operator).await;
    incident(&mut c, &other, "beta's first").await;
    incident(&mut c, &other, "beta's second").await;
    let inc = incident(&mut c, &operator, "audited").await;
    incident(&mut c, &other, "beta's third").await;
    let s = start(&mut c, &operator, &inc.id).await.unwrap();
    eventually_settled(&mut c, &operator, &s.id).await;
    c.send_message(req(
        pb::SendMessageRequest {
            session_id: s.id.clone(),
            message: "go on".into(),
            idempotency_key: String::new(),
            if_running: 0,
        },
        &operator,
    ))
    .await
    .unwrap();
    eventually_settled(&mut c, &operator, &s.id).await;
    // A refused mutation is recorded with its code (nothing is held).
    let refused = call(&mut c, &operator, "ContinueSession", &s.id).await;
    assert_eq!(refused.code(), Code::FailedPrecondition);
    // Reads are not audited.
    call(&mut c, &viewer, "GetSession", &s.id).await;

    // Viewers and operators may not read the trail.
    for t in [&viewer, &operator] {
        let denied = call(&mut c, t, "ListAuditEvents", "").await;
        assert_eq!(denied.code(), Code::PermissionDenied);
    }
    let page = c
        .list_audit_events(req(
            pb::ListAuditEventsRequest {
                session_id: s.id.clone(),
                ..Default::default()
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    let got: Vec<(&str, &str)> = page
        .events
        .iter()
        .rev()
        .map(|e| (e.method.as_str(), e.code.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("StartSession", "OK"),
            ("SendMessage", "OK"),
            ("ContinueSession", "FAILED_PRECONDITION")
        ]
    );
    for e in &page.events {
        assert_eq!(e.tenant, "acme");
        assert_eq!(e.role, "operator");
        assert_eq!(e.actor_name, "acme-operator");
        assert_eq!(e.session_id, s.id);
        assert_eq!(
            e.incident_id,
            if e.method == "StartSession" {
                inc.id.as_str()
            } else {
                ""
            }
        );
        assert!(e.at.is_some());
    }
    // The whole trail, paged one at a time, newest first.
    let mut all = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = c
            .list_audit_events(req(
                pb::ListAuditEventsRequest {
                    page_size: 1,
                    page_token: page_token.clone(),
                    ..Default::default()
                },
                &admin,
            ))
            .await
            .unwrap()
            .into_inner();
        all.extend(page.events);
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    let methods: Vec<&str> = all.iter().rev().map(|e| e.method.as_str()).collect();
    assert_eq!(
        methods,
        [
            "CreateIncident",
            "StartSession",
            "SendMessage",
            "ContinueSession"
        ]
    );
    let ids: Vec<i64> = all.iter().map(|e| e.id).collect();
    assert_eq!(ids, [4, 3, 2, 1], "numbered within the tenant");

    // Append-only, by the database itself.
    let db = inquest_tests::connect(&app.db_url).await;
    for sql in [
        "UPDATE audit_events SET code = 'OK'",
        "DELETE FROM audit_events",
        "TRUNCATE audit_events",
    ] {
        let err = db.execute(sql, &[]).await.unwrap_err();
        assert!(format!("{err:?}").contains("append-only"), "{sql}: {err:?}");
    }
}

#[tokio::test]
async fn admins_manage_their_tenants_tokens_over_the_api() {
    let app = inquest_tests::spawn_app_with(|c| c.auth.mode = AuthMode::Required).await;
    let admin = token(&app, "acme", Role::Admin).await;
    let mut c = app.client().await;
    let made = c
        .create_token(req(
            pb::CreateTokenRequest {
                name: "ci-bot".into(),
                role: "viewer".into(),
                expires_in_seconds: 3600,
                tenant: String::new(),
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    let info = made.token.clone().unwrap();
    assert_eq!(
        (info.tenant.as_str(), info.role.as_str()),
        ("acme", "viewer")
    );
    assert!(info.expires_at.is_some() && info.revoked_at.is_none());
    assert!(made.secret.starts_with("inq_"));
    // The new token works, as a viewer of acme.
    let listed = c
        .list_incidents(req(pb::ListIncidentsRequest::default(), &made.secret))
        .await;
    assert!(listed.is_ok(), "{listed:?}");
    let denied = c
        .create_incident(req(
            pb::CreateIncidentRequest {
                title: "t".into(),
                description: String::new(),
            },
            &made.secret,
        ))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
    // Its secret is never listed.
    let tokens = c
        .list_tokens(req(pb::ListTokensRequest::default(), &admin))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(tokens.tokens.len(), 2);
    let db = inquest_tests::connect(&app.db_url).await;
    let stored: Vec<String> = db
        .query("SELECT encode(secret_hash, 'hex') FROM api_tokens", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let secret_part = made.secret.rsplit('_').next().unwrap();
    assert!(stored.iter().all(|h| h != secret_part));

    // Another tenant, a bad role: refused, nothing made.
    let before = app.count("api_tokens").await;
    let other = c
        .create_token(req(
            pb::CreateTokenRequest {
                role: "admin".into(),
                tenant: "globex".into(),
                ..Default::default()
            },
            &admin,
        ))
        .await
        .unwrap_err();
    assert_eq!(other.code(), Code::PermissionDenied);
    let bad = c
        .create_token(req(
            pb::CreateTokenRequest {
                role: "root".into(),
                ..Default::default()
            },
            &admin,
        ))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert_eq!(app.count("api_tokens").await, before);

    // Revoked over the API: refused within the verification cache's TTL.
    let revoked = c
        .revoke_token(req(
            pb::RevokeTokenRequest {
                token_id: info.id.clone(),
            },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(revoked.revoked_at.is_some());
    let deadline = std::time::Instant::now() + inquest_server::edge::auth::VERIFY_CACHE_TTL * 10;
    loop {
        match c
            .list_incidents(req(pb::ListIncidentsRequest::default(), &made.secret))
            .await
        {
            Err(s) if s.code() == Code::Unauthenticated => break,
            other => {
                assert!(other.is_ok(), "{other:?}");
                assert!(std::time::Instant::now() < deadline, "still accepted");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
    let audit = c
        .list_audit_events(req(pb::ListAuditEventsRequest::default(), &admin))
        .await
        .unwrap()
        .into_inner();
    let methods: Vec<(&str, &str, &str)> = audit
        .events
        .iter()
        .rev()
        .map(|e| (e.method.as_str(), e.code.as_str(), e.token_id.as_str()))
        .collect();
    assert_eq!(
        methods,
        [
            ("CreateToken", "OK", info.id.as_str()),
            ("CreateToken", "PERMISSION_DENIED", ""),
            ("CreateToken", "INVALID_ARGUMENT", ""),
            ("RevokeToken", "OK", info.id.as_str()),
        ]
    );
}

#[tokio::test]
async fn a_secret_pasted_as_a_token_id_is_refused_without_echoing_it() {
    let app = inquest_tests::spawn_app_with(|c| c.auth.mode = AuthMode::Required).await;
    let admin = token(&app, "acme", Role::Admin).await;
    let secret_half = admin.rsplit('_').next().unwrap().to_owned();
    assert!(secret_half.len() >= 32, "{admin}");
    let mut c = app.client().await;
    let refused = c
        .revoke_token(req(
            pb::RevokeTokenRequest {
                token_id: admin.clone(),
            },
            &admin,
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    // Not the whole secret, nor the part of it a 64-character excerpt
    // would have kept.
    assert!(
        !refused.message().contains(&secret_half[..16]),
        "{}",
        refused.message()
    );
    assert!(
        refused.message().contains("[redacted]"),
        "{}",
        refused.message()
    );
    let audit = c
        .list_audit_events(req(pb::ListAuditEventsRequest::default(), &admin))
        .await
        .unwrap()
        .into_inner();
    let last = &audit.events[0];
    assert_eq!(
        (last.method.as_str(), last.code.as_str()),
        ("RevokeToken", "INVALID_ARGUMENT")
    );
    assert!(!last.message.contains(&secret_half[..16]), "{last:?}");
}

#[tokio::test]
async fn v16_puts_existing_rows_in_the_default_tenant() {
    use inquest_store::{Store, StoreConfig};
    let database = inquest_tests::fresh_database().await;
    let (db_name, db_url) = (database.name.clone(), database.url.clone());
    let store = Store::connect(&StoreConfig::new(db_url.clone())).unwrap();
    assert_eq!(store.migrate_up_to(15).await.unwrap(), 15);
    let db = inquest_tests::connect(&db_url).await;
    let incident = inquest_core::IncidentId::new();
    let session = inquest_core::SessionId::new();
    db.execute(
        "INSERT INTO incidents (id, title) VALUES ($1, 'from before tenants')",
        &[incident.as_uuid()],
    )
    .await
    .unwrap();
    db.execute(
        "INSERT INTO sessions (id, incident_id, status, head_seq, turn_count) \
         VALUES ($1, $2, 'idle', 1, 1)",
        &[session.as_uuid(), incident.as_uuid()],
    )
    .await
    .unwrap();
    db.execute(
        "INSERT INTO turns (session_id, seq, role, content) VALUES ($1, 1, 'user', 'hi')",
        &[session.as_uuid()],
    )
    .await
    .unwrap();

    // Served with authentication off: the caller is the default tenant.
    let app = inquest_tests::spawn_app_on(db_name, db_url, |_| {}).await;
    let tenants: Vec<String> = db
        .query(
            "SELECT tenant FROM incidents UNION ALL SELECT tenant FROM sessions",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(tenants, ["default", "default"]);
    let mut c = app.client().await;
    let listed = c
        .list_incidents(pb::ListIncidentsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.incidents.len(), 1);
    let s = c
        .get_session(pb::GetSessionRequest {
            session_id: session.to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.head_seq, 1);
    drop(app);
    // Inserting without a tenant is refused now: the default is gone.
    let err = db
        .execute(
            "INSERT INTO incidents (id, title) VALUES ($1, 'no tenant')",
            &[inquest_core::IncidentId::new().as_uuid()],
        )
        .await
        .unwrap_err();
    assert!(format!("{err:?}").contains("tenant"), "{err:?}");
}

/// One tenant's watches take its own share of the replica, never another
/// tenant's: `[tenants] max_watch_streams` refuses the third watch of a
/// tenant whose share is 2, while another tenant still opens one, and the
/// refusal names the key.
#[tokio::test]
async fn a_tenants_watches_cannot_take_another_tenants_share() {
    let app = inquest_tests::spawn_app_with(|c| {
        c.auth.mode = AuthMode::Required;
        c.tenants.max_watch_streams = Some(2);
    })
    .await;
    let acme = token(&app, "acme", Role::Operator).await;
    let globex = token(&app, "globex", Role::Operator).await;
    let mut c = app.client().await;
    let open = async |c: &mut Client, token: &str, session: &str| {
        c.watch_session(req(
            pb::WatchSessionRequest {
                session_id: session.into(),
                after_seq: 0,
                after_committed_at: None,
            },
            token,
        ))
        .await
    };
    // Pending sessions (no agent): their streams stay open.
    let a = incident(&mut c, &acme, "acme's").await;
    let a = start(&mut c, &acme, &a.id).await.unwrap();
    let _a1 = open(&mut c, &acme, &a.id).await.unwrap();
    let _a2 = open(&mut c, &acme, &a.id).await.unwrap();
    let refused = open(&mut c, &acme, &a.id).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("tenants.max_watch_streams = 2"),
        "{}",
        refused.message()
    );
    let g = incident(&mut c, &globex, "globex's").await;
    let g = start(&mut c, &globex, &g.id).await.unwrap();
    let _g1 = open(&mut c, &globex, &g.id)
        .await
        .expect("another tenant's watch is not refused by acme's");
    app.stop().await.expect("stop");
}
