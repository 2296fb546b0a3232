use inquest_proto::v1 as pb;
use inquest_tests::spawn_app;

async fn incident(
    client: &mut pb::investigations_client::InvestigationsClient<tonic::transport::Channel>,
) -> pb::Incident {
    client
        .create_incident(pb::CreateIncidentRequest {
            title: "db-1 disk full".into(),
            description: "since 03:00".into(),
        })
        .await
        .expect("create incident")
        .into_inner()
}

fn start(incident_id: &str, key: &str) -> pb::StartSessionRequest {
    pb::StartSessionRequest {
        incident_id: incident_id.into(),
        message: "why is the disk full?".into(),
        idempotency_key: key.into(),
    }
}

#[tokio::test]
async fn start_session_stores_the_opening_user_turn() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let inc = incident(&mut client).await;
    assert!(uuid::Uuid::parse_str(&inc.id).is_ok());

    let s = client
        .start_session(start(&inc.id, ""))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.incident_id, inc.id);
    assert_eq!(s.status(), pb::SessionStatus::Pending);
    assert_eq!(s.head_seq, 1);
    assert_eq!(s.turn_count, 1);

    let got = client
        .get_session(pb::GetSessionRequest {
            session_id: s.id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got, s);

    let turns = client
        .list_turns(pb::ListTurnsRequest {
            session_id: s.id.clone(),
            after_seq: 0,
            before_seq: 0,
            limit: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(turns.turns.len(), 1);
    let t = &turns.turns[0];
    assert_eq!(
        (t.seq, t.role(), t.content.as_str()),
        (1, pb::TurnRole::User, "why is the disk full?")
    );
    assert_eq!(t.session_id, s.id);
    assert!(t.created_at.is_some());
    assert_eq!(turns.head_seq, 1);
    assert_eq!(turns.next_after_seq, 0);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn start_session_is_idempotent_by_key() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let inc = incident(&mut client).await;

    let first = client
        .start_session(start(&inc.id, "key-1"))
        .await
        .unwrap()
        .into_inner();
    let again = client
        .start_session(start(&inc.id, "key-1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.id, again.id);

    // Concurrent retries with one key still make one session.
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let mut c = client.clone();
        let id = inc.id.clone();
        tasks.push(tokio::spawn(async move {
            c.start_session(start(&id, "key-2"))
                .await
                .map(|r| r.into_inner().id)
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        ids.push(t.await.unwrap().unwrap());
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "one key, one session: {ids:?}");

    let other = client
        .start_session(start(&inc.id, "key-3"))
        .await
        .unwrap()
        .into_inner();
    assert_ne!(other.id, first.id);
    assert_eq!(app.count("sessions").await, 3);
    assert_eq!(app.count("turns").await, 3, "one user turn per session");
    app.stop().await.unwrap();
}

#[tokio::test]
async fn list_sessions_pages_newest_first() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let inc = incident(&mut client).await;
    let mut created = Vec::new();
    for _ in 0..5 {
        created.push(
            client
                .start_session(start(&inc.id, ""))
                .await
                .unwrap()
                .into_inner()
                .id,
        );
    }
    // A session of another incident never shows up.
    let other = incident(&mut client).await;
    client.start_session(start(&other.id, "")).await.unwrap();

    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = client
            .list_sessions(pb::ListSessionsRequest {
                incident_id: inc.id.clone(),
                page_size: 2,
                page_token: token,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.sessions.len() <= 2);
        seen.extend(page.sessions.into_iter().map(|s| s.id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    created.reverse();
    assert_eq!(seen, created);
    app.stop().await.unwrap();
}
