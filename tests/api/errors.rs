//! Bad input and faults map to the status codes a client can act on, and
//! none of them writes anything.

use inquest_proto::v1 as pb;
use inquest_tests::spawn_app_with;
use tonic::Code;

const UNKNOWN: &str = "01890a5d-ac96-774b-bcce-b302099a8057";

#[tokio::test]
async fn bad_input_gets_exact_codes_and_writes_nothing() {
    let app = spawn_app_with(|c| c.limits.max_message_bytes = 64).await;
    let mut client = app.client().await;
    let inc = client
        .create_incident(pb::CreateIncidentRequest {
            title: "t".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let session = client
        .start_session(pb::StartSessionRequest {
            incident_id: inc.id.clone(),
            message: "hello".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let before = (
        app.count("incidents").await,
        app.count("sessions").await,
        app.count("turns").await,
    );

    let start = |incident_id: &str, message: String| pb::StartSessionRequest {
        incident_id: incident_id.into(),
        message,
        idempotency_key: String::new(),
    };
    let cases: Vec<(&str, Code, Result<(), tonic::Status>)> = vec![
        (
            "empty title",
            Code::InvalidArgument,
            client
                .create_incident(pb::CreateIncidentRequest {
                    title: "  ".into(),
                    description: String::new(),
                })
                .await
                .map(drop),
        ),
        (
            "malformed incident id",
            Code::InvalidArgument,
            client
                .start_session(start("not-a-uuid", "hi".into()))
                .await
                .map(drop),
        ),
        (
            "missing incident id",
            Code::InvalidArgument,
            client.start_session(start("", "hi".into())).await.map(drop),
        ),
        (
            "unknown incident",
            Code::NotFound,
            client
                .start_session(start(UNKNOWN, "hi".into()))
                .await
                .map(drop),
        ),
        (
            "empty message",
            Code::InvalidArgument,
            client
                .start_session(start(&inc.id, "   ".into()))
                .await
                .map(drop),
        ),
        (
            "message over the configured limit",
            Code::InvalidArgument,
            client
                .start_session(start(&inc.id, "x".repeat(65)))
                .await
                .map(drop),
        ),
        (
            "malformed session id",
            Code::InvalidArgument,
            client
                .get_session(pb::GetSessionRequest {
                    session_id: "123".into(),
                })
                .await
                .map(drop),
        ),
        (
            "unknown session",
            Code::NotFound,
            client
                .get_session(pb::GetSessionRequest {
                    session_id: UNKNOWN.into(),
                })
                .await
                .map(drop),
        ),
        (
            "turns of an unknown session",
            Code::NotFound,
            client
                .list_turns(pb::ListTurnsRequest {
                    session_id: UNKNOWN.into(),
                    after_seq: 0,
                    before_seq: 0,
                    limit: 0,
                })
                .await
                .map(drop),
        ),
        (
            "negative after_seq",
            Code::InvalidArgument,
            client
                .list_turns(pb::ListTurnsRequest {
                    session_id: session.id.clone(),
                    after_seq: -1,
                    before_seq: 0,
                    limit: 0,
                })
                .await
                .map(drop),
        ),
        (
            "sessions of an unknown incident",
            Code::NotFound,
            client
                .list_sessions(pb::ListSessionsRequest {
                    incident_id: UNKNOWN.into(),
                    page_size: 0,
                    page_token: String::new(),
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
        (
            "garbage page token",
            Code::InvalidArgument,
            client
                .list_sessions(pb::ListSessionsRequest {
                    incident_id: inc.id.clone(),
                    page_size: 0,
                    page_token: "zzz".into(),
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
    ];
    for (what, code, result) in cases {
        match result {
            Ok(()) => panic!("{what}: expected {code:?}, got OK"),
            Err(status) => assert_eq!(status.code(), code, "{what}: {}", status.message()),
        }
    }
    let after = (
        app.count("incidents").await,
        app.count("sessions").await,
        app.count("turns").await,
    );
    assert_eq!(before, after, "bad input wrote something");

    // The message limit is exact: 64 bytes pass.
    client
        .start_session(start(&inc.id, "x".repeat(64)))
        .await
        .unwrap();
    app.stop().await.unwrap();
}

#[tokio::test]
async fn database_down_is_unavailable_and_writes_nothing() {
    let app =
        spawn_app_with(|c| c.store.connect_timeout = std::time::Duration::from_millis(500)).await;
    let mut client = app.client().await;
    let inc = client
        .create_incident(pb::CreateIncidentRequest {
            title: "t".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner();

    app.take_database_down().await;
    let create = client
        .create_incident(pb::CreateIncidentRequest {
            title: "lost?".into(),
            description: String::new(),
        })
        .await;
    assert_eq!(create.map(drop).unwrap_err().code(), Code::Unavailable);
    let start = client
        .start_session(pb::StartSessionRequest {
            incident_id: inc.id.clone(),
            message: "hi".into(),
            idempotency_key: String::new(),
        })
        .await;
    assert_eq!(start.map(drop).unwrap_err().code(), Code::Unavailable);
    let get = client
        .get_session(pb::GetSessionRequest {
            session_id: UNKNOWN.into(),
        })
        .await;
    assert_eq!(get.map(drop).unwrap_err().code(), Code::Unavailable);

    app.bring_database_up().await;
    assert_eq!(app.count("incidents").await, 1);
    assert_eq!(app.count("sessions").await, 0);
    // And the server recovers on its own once the database is back.
    client
        .create_incident(pb::CreateIncidentRequest {
            title: "back".into(),
            description: String::new(),
        })
        .await
        .unwrap();
    app.stop().await.unwrap();
}
