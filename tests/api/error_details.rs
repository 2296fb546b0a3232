//! Typed error details: every refusal carries a `google.rpc.ErrorInfo`
//! (domain `inquest.v1`) whose reason and metadata a client can branch on
//! without reading the message. Driven through the real API; the paths
//! that need heavier setups (a lagged watcher, a held session, a write
//! whose outcome is unknown, an undecodable request) assert their reason
//! in the tests that build them (`watch_lag.rs`, `resume.rs`, `faults.rs`,
//! `limits.rs`) with [`assert_reason`].

use std::time::Duration;

use inquest_proto::v1 as pb;
use inquest_server::reason::{ERROR_DOMAIN, ErrorReason, Reason};
use inquest_tests::{
    driver::{Driver, new_session},
    spawn_app, spawn_app_with,
    watching::{collect, next, watch},
};
use tonic::{Code, Status};
use tonic_types::StatusExt;

const UNKNOWN: &str = "01890a5d-ac96-774b-bcce-b302099a8057";

/// Asserts `status` has `code` and an Inquest ErrorInfo with `reason`
/// whose metadata holds (at least) every pair of `metadata`.
#[track_caller]
pub(crate) fn assert_reason(
    status: &Status,
    code: Code,
    reason: Reason,
    metadata: &[(&str, &str)],
) -> ErrorReason {
    assert_eq!(status.code(), code, "{status:?}");
    let info = status
        .get_details_error_info()
        .unwrap_or_else(|| panic!("no ErrorInfo detail on {status:?}"));
    assert_eq!(info.domain, ERROR_DOMAIN, "{status:?}");
    assert_eq!(info.reason, reason.as_str(), "{status:?}");
    for (k, v) in metadata {
        assert_eq!(
            info.metadata.get(*k).map(String::as_str),
            Some(*v),
            "metadata {k} of {status:?}: {:?}",
            info.metadata
        );
    }
    ErrorReason::of(status).expect("the reason parses back")
}

fn send(session: &str, message: &str, key: &str) -> pb::SendMessageRequest {
    pb::SendMessageRequest {
        session_id: session.into(),
        message: message.into(),
        idempotency_key: key.into(),
        if_running: 0,
    }
}

async fn cancel(
    client: &mut inquest_proto::v1::investigations_client::InvestigationsClient<
        tonic::transport::Channel,
    >,
    session: &str,
) -> Result<pb::Session, Status> {
    client
        .cancel_session(pb::CancelSessionRequest {
            session_id: session.into(),
        })
        .await
        .map(tonic::Response::into_inner)
}

async fn continue_session(
    client: &mut inquest_proto::v1::investigations_client::InvestigationsClient<
        tonic::transport::Channel,
    >,
    session: &str,
) -> Result<pb::Session, Status> {
    client
        .continue_session(pb::ContinueSessionRequest {
            session_id: session.into(),
        })
        .await
        .map(tonic::Response::into_inner)
}

/// Every FAILED_PRECONDITION a session's state gives, with its status.
#[tokio::test]
async fn failed_preconditions_name_their_reason_and_the_status() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;

    // Pending (no burst started yet), then running.
    let pending = client
        .send_message(send(&session, "more?", ""))
        .await
        .unwrap_err();
    assert_reason(
        &pending,
        Code::FailedPrecondition,
        Reason::SessionRunning,
        &[("status", "pending")],
    );
    let driver = Driver::claim(&app, &session).await;
    let running = client
        .send_message(send(&session, "more?", ""))
        .await
        .unwrap_err();
    assert_reason(
        &running,
        Code::FailedPrecondition,
        Reason::SessionRunning,
        &[("status", "running")],
    );
    let not_held = continue_session(&mut client, &session).await.unwrap_err();
    assert_reason(
        &not_held,
        Code::FailedPrecondition,
        Reason::NothingToConfirm,
        &[("status", "running")],
    );
    driver.finish().await;

    // Idle: nothing to confirm (cancelling it is allowed: see
    // `cancel_ends_an_idle_session_but_not_a_completed_one`).
    let idle_continue = continue_session(&mut client, &session).await.unwrap_err();
    assert_reason(
        &idle_continue,
        Code::FailedPrecondition,
        Reason::NothingToConfirm,
        &[("status", "idle")],
    );

    // Cancelled is final.
    client
        .send_message(send(&session, "again", ""))
        .await
        .unwrap();
    cancel(&mut client, &session).await.unwrap();
    let cancelled = client
        .send_message(send(&session, "still there?", ""))
        .await
        .unwrap_err();
    assert_reason(
        &cancelled,
        Code::FailedPrecondition,
        Reason::SessionCancelled,
        &[("status", "cancelled")],
    );
    let continue_cancelled = continue_session(&mut client, &session).await.unwrap_err();
    assert_reason(
        &continue_cancelled,
        Code::FailedPrecondition,
        Reason::NothingToConfirm,
        &[("status", "cancelled")],
    );
    app.stop().await.unwrap();
}

/// INVALID_ARGUMENT names the field; a size refusal names its limit.
#[tokio::test]
async fn invalid_arguments_name_the_field_and_the_limit() {
    let app = spawn_app_with(|c| c.limits.max_request_bytes = 64 * 1024).await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;

    let bad_id = client
        .get_session(pb::GetSessionRequest {
            session_id: "not-a-uuid".into(),
        })
        .await
        .unwrap_err();
    assert_reason(
        &bad_id,
        Code::InvalidArgument,
        Reason::InvalidId,
        &[("field", "session_id")],
    );
    // An empty incident id lists across incidents; a malformed one is refused.
    let no_incident = client
        .list_sessions(pb::ListSessionsRequest {
            incident_id: "not-a-uuid".into(),
            page_size: 0,
            page_token: String::new(),
            statuses: Vec::new(),
            queued_only: false,
        })
        .await
        .unwrap_err();
    assert_reason(
        &no_incident,
        Code::InvalidArgument,
        Reason::InvalidId,
        &[("field", "incident_id")],
    );
    let empty = client
        .send_message(send(&session, "  ", ""))
        .await
        .unwrap_err();
    assert_reason(
        &empty,
        Code::InvalidArgument,
        Reason::InvalidInput,
        &[("field", "message")],
    );
    let long = client
        .send_message(send(&session, &"y".repeat(40 * 1024), ""))
        .await
        .unwrap_err();
    assert_reason(
        &long,
        Code::InvalidArgument,
        Reason::LimitExceeded,
        &[
            ("field", "message"),
            ("limit", "limits.max_message_bytes"),
            ("value", "32768"),
        ],
    );
    let oversized = client
        .send_message(send(&session, &"z".repeat(100 * 1024), ""))
        .await
        .unwrap_err();
    assert_reason(
        &oversized,
        Code::InvalidArgument,
        Reason::LimitExceeded,
        &[("limit", "limits.max_request_bytes"), ("value", "65536")],
    );
    let negative = watch(&mut client, &session, -1).await.unwrap_err();
    assert_reason(
        &negative,
        Code::InvalidArgument,
        Reason::InvalidCursor,
        &[("field", "after_seq")],
    );
    let incident = client
        .get_session(pb::GetSessionRequest {
            session_id: session.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .incident_id;
    let token = client
        .list_sessions(pb::ListSessionsRequest {
            incident_id: incident,
            page_size: 1,
            page_token: "forged".into(),
            statuses: Vec::new(),
            queued_only: false,
        })
        .await
        .unwrap_err();
    assert_reason(
        &token,
        Code::InvalidArgument,
        Reason::InvalidPageToken,
        &[("field", "page_token")],
    );
    app.stop().await.unwrap();
}

/// NOT_FOUND says what was not found, and its id.
#[tokio::test]
async fn not_found_names_what_and_its_id() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session = client
        .get_session(pb::GetSessionRequest {
            session_id: UNKNOWN.into(),
        })
        .await
        .unwrap_err();
    assert_reason(
        &session,
        Code::NotFound,
        Reason::SessionNotFound,
        &[("session_id", UNKNOWN)],
    );
    let incident = client
        .start_session(pb::StartSessionRequest {
            incident_id: UNKNOWN.into(),
            message: "hi".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap_err();
    assert_reason(
        &incident,
        Code::NotFound,
        Reason::IncidentNotFound,
        &[("incident_id", UNKNOWN)],
    );
    let existing = new_session(&mut client).await;
    let report = client
        .get_report(pb::GetReportRequest {
            session_id: existing.clone(),
            burst: 0,
        })
        .await
        .unwrap_err();
    assert_reason(
        &report,
        Code::NotFound,
        Reason::ReportNotFound,
        &[("session_id", existing.as_str())],
    );
    app.stop().await.unwrap();
}

/// A reused idempotency key is ALREADY_EXISTS / IDEMPOTENCY_KEY_REUSED.
#[tokio::test]
async fn a_reused_idempotency_key_is_named() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: "t".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .id;
    let start = |message: &str| pb::StartSessionRequest {
        incident_id: incident.clone(),
        message: message.into(),
        idempotency_key: "k1".into(),
    };
    client.start_session(start("first")).await.unwrap();
    let reused = client.start_session(start("second")).await.unwrap_err();
    assert_reason(
        &reused,
        Code::AlreadyExists,
        Reason::IdempotencyKeyReused,
        &[],
    );
    app.stop().await.unwrap();
}

/// OUT_OF_RANGE carries the head seq and the cursor sent, in the detail
/// and (for clients that read no details) the trailing metadata.
#[tokio::test]
async fn a_cursor_beyond_the_head_carries_the_head_seq() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    let beyond = watch(&mut client, &session, 5).await.unwrap_err();
    let r = assert_reason(
        &beyond,
        Code::OutOfRange,
        Reason::CursorBeyondHead,
        &[("head_seq", "1"), ("after_seq", "5")],
    );
    assert_eq!(r.number("head_seq"), Some(1));
    assert_eq!(
        beyond
            .metadata()
            .get("inquest-head-seq")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    // Reconnecting at the head the detail names works.
    let head = r.number("head_seq").unwrap();
    watch(&mut client, &session, head).await.unwrap();
    app.stop().await.unwrap();
}

/// RESOURCE_EXHAUSTED names the cap reached, per session and per replica.
#[tokio::test]
async fn watch_caps_name_the_limit() {
    let app = spawn_app_with(|c| {
        c.limits.max_watch_streams = 2;
        c.limits.max_watch_streams_per_session = 1;
    })
    .await;
    let mut client = app.client().await;
    let a = new_session(&mut client).await;
    let b = new_session(&mut client).await;
    let c = new_session(&mut client).await;
    let _a = watch(&mut client, &a, 0).await.unwrap();
    let per_session = watch(&mut client, &a, 0).await.unwrap_err();
    assert_reason(
        &per_session,
        Code::ResourceExhausted,
        Reason::LimitExceeded,
        &[
            ("limit", "limits.max_watch_streams_per_session"),
            ("value", "1"),
        ],
    );
    assert!(per_session.get_details_retry_info().is_some());
    let _b = watch(&mut client, &b, 0).await.unwrap();
    let total = watch(&mut client, &c, 0).await.unwrap_err();
    assert_reason(
        &total,
        Code::ResourceExhausted,
        Reason::LimitExceeded,
        &[("limit", "limits.max_watch_streams"), ("value", "2")],
    );
    app.stop().await.unwrap();
}

/// The database down: calls answer STORE_UNAVAILABLE, and a running watch
/// ends with the cursor to reconnect with.
#[tokio::test]
async fn database_down_is_store_unavailable_with_the_watch_cursor() {
    let app = spawn_app_with(|c| {
        c.store.connect_timeout = Duration::from_millis(500);
        c.watch.heartbeat = Duration::from_millis(200);
    })
    .await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    let _driver = Driver::claim(&app, &session).await;
    let mut stream = watch(&mut client, &session, 0).await.unwrap();
    assert!(matches!(
        next(&mut stream).await.unwrap(),
        Some(pb::watch_event::Event::Turn(t)) if t.seq == 1
    ));

    app.take_database_down().await;
    // A connection that was being opened while the database was taken
    // down may still serve a call or two; the outage shows on the next.
    let mut get = None;
    for _ in 0..50 {
        match client
            .get_session(pb::GetSessionRequest {
                session_id: session.clone(),
            })
            .await
        {
            Ok(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => {
                get = Some(e);
                break;
            }
        }
    }
    let get = get.expect("GetSession kept answering with the database down");
    assert_reason(&get, Code::Unavailable, Reason::StoreUnavailable, &[]);
    // The watch ends with the cursor to reconnect with, whichever comes
    // first: the cross-replica feed's connection is lost (every watcher is
    // lagged, so none misses a notification) or the quiet watch asks the
    // store at its heartbeat and cannot.
    let (_, ending) = collect(stream).await;
    let ending = ending.unwrap_err();
    let r = ErrorReason::of(&ending).unwrap_or_else(|| panic!("no ErrorInfo on {ending:?}"));
    match r.reason {
        Reason::WatcherLagged => assert_eq!(ending.code(), Code::Aborted),
        Reason::StoreUnavailable => assert_eq!(ending.code(), Code::Unavailable),
        other => panic!("a watch ended by an outage with {other}: {ending:?}"),
    }
    assert_eq!(r.number("after_seq"), Some(1), "{ending:?}");
    // Reconnecting while the store is down is refused as unavailable.
    let reconnect = watch(&mut client, &session, 1).await.unwrap_err();
    assert_reason(&reconnect, Code::Unavailable, Reason::StoreUnavailable, &[]);
    app.bring_database_up().await;
    app.stop().await.unwrap();
}

/// Server shutdown ends a running watch with SHUTTING_DOWN and the cursor.
#[tokio::test]
async fn shutdown_ends_a_watch_with_shutting_down_and_the_cursor() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    let driver = Driver::claim(&app, &session).await;
    driver.say("looking").await;
    let mut stream = watch(&mut client, &session, 0).await.unwrap();
    for seq in 1..=2 {
        assert!(matches!(
            next(&mut stream).await.unwrap(),
            Some(pb::watch_event::Event::Turn(t)) if t.seq == seq
        ));
    }
    let reader = tokio::spawn(collect(stream));
    app.stop().await.unwrap();
    let (_, ending) = reader.await.unwrap();
    let ending = ending.unwrap_err();
    let r = assert_reason(
        &ending,
        Code::Unavailable,
        Reason::ShuttingDown,
        &[("after_seq", "2")],
    );
    assert_eq!(r.number("after_seq"), Some(2));
}

/// ContinueSession of a held session whose plan needs no confirmation, or
/// whose history cannot be resumed: each refusal has its own reason.
#[tokio::test]
async fn continue_session_refusals_of_a_held_session_are_named() {
    use inquest_core::{SessionId, SideEffect, plan_resume};
    use inquest_tests::resume::{incident, insert_session};

    let app = spawn_app().await;
    let mut client = app.client().await;
    let db = inquest_tests::connect(&app.db_url).await;
    let incident = incident(&mut client).await;

    // Held, with no stored plan: nothing asks for confirmation.
    let no_plan = SessionId::new();
    insert_session(&db, incident, no_plan, "awaiting_confirmation", &[]).await;
    let refused = continue_session(&mut client, &no_plan.to_string())
        .await
        .unwrap_err();
    assert_reason(
        &refused,
        Code::FailedPrecondition,
        Reason::NothingToConfirm,
        &[("status", "awaiting_confirmation")],
    );

    // Held for a plan that requires confirmation, but no turn to resume.
    let empty = SessionId::new();
    insert_session(&db, incident, empty, "awaiting_confirmation", &[]).await;
    let mut plan = plan_resume(empty, &[], &|_: &str| SideEffect::ReadOnly);
    plan.requires_confirmation = true;
    db.execute(
        "UPDATE sessions SET last_recovery_plan = $2 WHERE id = $1",
        &[empty.as_uuid(), &serde_json::to_value(&plan).unwrap()],
    )
    .await
    .unwrap();
    let refused = continue_session(&mut client, &empty.to_string())
        .await
        .unwrap_err();
    assert_reason(
        &refused,
        Code::FailedPrecondition,
        Reason::HistoryNotResumable,
        &[],
    );
    app.stop().await.unwrap();
}
