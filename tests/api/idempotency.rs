//! Idempotency keys bind their request: the same key with the
//! same request gets the first result, with another request ALREADY_EXISTS
//! and nothing written; keys expire after the retention.

use std::time::Duration;

use inquest_proto::v1 as pb;
use inquest_tests::{TestApp, connect, driver::Driver, spawn_app, spawn_app_with};
use tonic::{Code, transport::Channel};

type Client = pb::investigations_client::InvestigationsClient<Channel>;

async fn incident(client: &mut Client) -> String {
    client
        .create_incident(pb::CreateIncidentRequest {
            title: "db-1 disk full".into(),
            description: String::new(),
        })
        .await
        .expect("create incident")
        .into_inner()
        .id
}

fn start(incident: &str, message: &str, key: &str) -> pb::StartSessionRequest {
    pb::StartSessionRequest {
        incident_id: incident.into(),
        message: message.into(),
        idempotency_key: key.into(),
    }
}

fn send(session: &str, message: &str, key: &str) -> pb::SendMessageRequest {
    pb::SendMessageRequest {
        session_id: session.into(),
        message: message.into(),
        idempotency_key: key.into(),
        if_running: 0,
    }
}

async fn sessions_of(client: &mut Client, incident: &str) -> Vec<pb::Session> {
    client
        .list_sessions(pb::ListSessionsRequest {
            incident_id: incident.into(),
            page_size: 500,
            page_token: String::new(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .sessions
}

async fn turns_of(client: &mut Client, session: &str) -> Vec<pb::SessionTurn> {
    client
        .list_turns(pb::ListTurnsRequest {
            session_id: session.into(),
            after_seq: 0,
            before_seq: 0,
            limit: 1000,
        })
        .await
        .unwrap()
        .into_inner()
        .turns
}

async fn session(client: &mut Client, id: &str) -> pb::Session {
    client
        .get_session(pb::GetSessionRequest {
            session_id: id.into(),
        })
        .await
        .unwrap()
        .into_inner()
}

fn assert_conflict(status: &tonic::Status, key: &str) {
    assert_eq!(status.code(), Code::AlreadyExists, "{status:?}");
    assert!(
        status.message().contains(&format!(
            "idempotency key \"{key}\" was used for a different request"
        )),
        "{}",
        status.message()
    );
}

/// An idle session (its first burst played and finished by a driver).
async fn idle_session(app: &TestApp, client: &mut Client) -> String {
    let id = inquest_tests::driver::new_session(client).await;
    Driver::claim(app, &id).await.finish().await;
    id
}

/// Sets the `created_at` of a key's row `age` into the past.
async fn backdate(app: &TestApp, key: &str, age: &str) {
    let changed = connect(&app.db_url)
        .await
        .execute(
            &format!(
                "UPDATE idempotency_keys SET created_at = now() - interval '{age}' WHERE key = $1"
            ),
            &[&key],
        )
        .await
        .unwrap();
    assert_eq!(changed, 1, "one row for key {key}");
}

#[tokio::test]
async fn start_session_with_a_reused_key_and_another_request_is_refused() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let inc = incident(&mut client).await;

    let first = client
        .start_session(start(&inc, "why is the disk full?", "s-1"))
        .await
        .unwrap()
        .into_inner();
    // Same key, same request: the first session, nothing new stored.
    let again = client
        .start_session(start(&inc, "why is the disk full?", "s-1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.id, first.id);

    // Same key, another message: refused, and nothing written.
    let refused = client
        .start_session(start(&inc, "why is the CPU hot?", "s-1"))
        .await
        .unwrap_err();
    assert_conflict(&refused, "s-1");
    let listed = sessions_of(&mut client, &inc).await;
    assert_eq!(
        listed.iter().map(|s| &s.id).collect::<Vec<_>>(),
        [&first.id]
    );
    let turns = turns_of(&mut client, &first.id).await;
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].content, "why is the disk full?");
    assert_eq!(app.count("sessions").await, 1);
    assert_eq!(app.count("turns").await, 1);
    assert_eq!(app.count("idempotency_keys").await, 1);

    // A message differing only by a NUL is another request too, and the
    // NUL-carrying one replays as itself.
    let nul = client
        .start_session(start(&inc, "disk\0full", "s-nul"))
        .await
        .unwrap()
        .into_inner();
    let refused = client
        .start_session(start(&inc, "disk full", "s-nul"))
        .await
        .unwrap_err();
    assert_conflict(&refused, "s-nul");
    let replay = client
        .start_session(start(&inc, "disk\0full", "s-nul"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replay.id, nul.id);

    // The key is scoped to its incident: on another incident it is a new
    // key, whatever the message.
    let other_inc = incident(&mut client).await;
    let other = client
        .start_session(start(&other_inc, "why is the CPU hot?", "s-1"))
        .await
        .unwrap()
        .into_inner();
    assert_ne!(other.id, first.id);
    assert_eq!(app.count("sessions").await, 3);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn send_message_with_a_reused_key_and_another_message_is_refused() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let id = idle_session(&app, &mut client).await;

    let first = client
        .send_message(send(&id, "and the deploy?", "m-1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.seq, 2);
    // The session is pending now: the reused key with another message is
    // refused as a reused key, not as a busy session.
    let refused = client
        .send_message(send(&id, "and the config?", "m-1"))
        .await
        .unwrap_err();
    assert_conflict(&refused, "m-1");
    let again = client
        .send_message(send(&id, "and the deploy?", "m-1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.seq, first.seq);

    // Idle again: the reused key with another message is still refused,
    // and the session stays as it was (idle, head 2, one user turn more).
    Driver::claim(&app, &id).await.finish().await;
    let before = session(&mut client, &id).await;
    assert_eq!(before.status(), pb::SessionStatus::Idle);
    let refused = client
        .send_message(send(&id, "and the config?", "m-1"))
        .await
        .unwrap_err();
    assert_conflict(&refused, "m-1");
    let after = session(&mut client, &id).await;
    assert_eq!(after.status(), pb::SessionStatus::Idle);
    assert_eq!(after.head_seq, before.head_seq);
    assert_eq!(after.turn_count, before.turn_count);
    let user_turns: Vec<String> = turns_of(&mut client, &id)
        .await
        .into_iter()
        .filter(|t| t.role() == pb::TurnRole::User)
        .map(|t| t.content)
        .collect();
    assert_eq!(user_turns, ["what happened?", "and the deploy?"]);

    // The same message with the same key on an idle session is the first
    // call's seq again, and opens nothing.
    let replay = client
        .send_message(send(&id, "and the deploy?", "m-1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replay.seq, 2);
    assert_eq!(session(&mut client, &id).await.head_seq, before.head_seq);
    app.stop().await.unwrap();
}

/// Two SendMessage calls with one key and different messages, at once, on
/// an idle session: exactly one is stored, the other is refused with
/// ALREADY_EXISTS; with the same message both get the one seq. Many rounds
/// with varied head starts, since the refusal comes from three places
/// (the first lookup, the lookup after a lost status race, the key insert).
#[tokio::test]
async fn concurrent_send_messages_with_one_key_store_one_message() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let id = idle_session(&app, &mut client).await;
    let mut stored = 0;
    let mut head = 1;
    for round in 0..24u64 {
        let key = format!("race-{round}");
        let same = round % 4 == 3;
        let messages = if same {
            [format!("same {round}"), format!("same {round}")]
        } else {
            [format!("first {round}"), format!("second {round}")]
        };
        let mut calls = Vec::new();
        for (i, message) in messages.iter().enumerate() {
            let (mut c, id, key, message) =
                (client.clone(), id.clone(), key.clone(), message.clone());
            // Vary which one starts first, and by how much.
            let delay = Duration::from_micros(((round * 7 + i as u64 * 13) % 5) * 400);
            calls.push(tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                c.send_message(send(&id, &message, &key)).await
            }));
        }
        let mut ok = Vec::new();
        let mut refused = 0;
        for call in calls {
            match call.await.unwrap() {
                Ok(r) => ok.push(r.into_inner().seq),
                Err(status) => {
                    assert_conflict(&status, &key);
                    refused += 1;
                }
            }
        }
        head += 1;
        if same {
            assert_eq!(ok, [head, head], "round {round}: one seq for one request");
        } else {
            assert_eq!(
                (ok.as_slice(), refused),
                ([head].as_slice(), 1),
                "round {round}"
            );
        }
        stored += 1;
        let turns = turns_of(&mut client, &id).await;
        let users: Vec<&pb::SessionTurn> = turns
            .iter()
            .filter(|t| t.role() == pb::TurnRole::User)
            .collect();
        assert_eq!(users.len(), stored + 1, "round {round}: one message stored");
        let last = users.last().unwrap();
        assert_eq!(last.seq, head);
        assert!(messages.contains(&last.content), "round {round}");
        // The winner's message is the key's: a replay of it gets its seq.
        let replay = client
            .send_message(send(&id, &last.content, &key))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(replay.seq, head);
        Driver::claim(&app, &id).await.finish().await;
    }
    app.stop().await.unwrap();
}

/// Two StartSession calls with one key and different messages, at once:
/// one session, and the other call refused.
#[tokio::test]
async fn concurrent_start_sessions_with_one_key_make_one_session() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let inc = incident(&mut client).await;
    for round in 0..16u64 {
        let key = format!("start-race-{round}");
        let mut calls = Vec::new();
        for i in 0..2u64 {
            let (mut c, inc, key) = (client.clone(), inc.clone(), key.clone());
            let delay = Duration::from_micros(((round * 3 + i * 11) % 5) * 400);
            calls.push(tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                c.start_session(start(&inc, &format!("question {i}"), &key))
                    .await
            }));
        }
        let mut ok = 0;
        for call in calls {
            match call.await.unwrap() {
                Ok(_) => ok += 1,
                Err(status) => assert_conflict(&status, &key),
            }
        }
        assert_eq!(ok, 1, "round {round}");
    }
    assert_eq!(app.count("sessions").await, 16);
    assert_eq!(app.count("turns").await, 16);
    assert_eq!(app.count("idempotency_keys").await, 16);
    assert_eq!(sessions_of(&mut client, &inc).await.len(), 16);
    app.stop().await.unwrap();
}

/// A key written before migration V9 has no request hash: it matches any
/// request, as every key did then, and answers with the first result.
#[tokio::test]
async fn a_key_without_a_request_hash_matches_any_request() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let inc = incident(&mut client).await;
    let first = client
        .start_session(start(&inc, "why is the disk full?", "old"))
        .await
        .unwrap()
        .into_inner();
    connect(&app.db_url)
        .await
        .execute(
            "UPDATE idempotency_keys SET request_hash = NULL WHERE key = 'old'",
            &[],
        )
        .await
        .unwrap();
    let replay = client
        .start_session(start(&inc, "another question", "old"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replay.id, first.id);
    assert_eq!(app.count("sessions").await, 1);
    app.stop().await.unwrap();
}

/// After the retention, the cleanup deletes a key and the key is free: a
/// different request with it is a new request. Younger keys survive and
/// stay bound.
#[tokio::test]
async fn an_expired_key_is_free_and_a_young_one_is_kept() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let inc = incident(&mut client).await;
    let retention = app.config.limits.idempotency_key_retention;
    assert_eq!(retention, Duration::from_secs(24 * 3600), "the default");

    let old = client
        .start_session(start(&inc, "why is the disk full?", "old"))
        .await
        .unwrap()
        .into_inner();
    let young = client
        .start_session(start(&inc, "why is the CPU hot?", "young"))
        .await
        .unwrap()
        .into_inner();
    let idle = idle_session(&app, &mut client).await;
    client
        .send_message(send(&idle, "and the deploy?", "old-msg"))
        .await
        .unwrap();
    backdate(&app, "old", "25 hours").await;
    backdate(&app, "old-msg", "25 hours").await;
    backdate(&app, "young", "23 hours").await;

    // Before the cleanup the old key is still bound.
    let refused = client
        .start_session(start(&inc, "another question", "old"))
        .await
        .unwrap_err();
    assert_conflict(&refused, "old");

    assert_eq!(
        app.store.expire_idempotency_keys(retention).await.unwrap(),
        2
    );
    assert_eq!(app.count("idempotency_keys").await, 1);
    assert_eq!(
        app.store.expire_idempotency_keys(retention).await.unwrap(),
        0
    );

    // The expired key takes a new request (a new session)…
    let fresh = client
        .start_session(start(&inc, "another question", "old"))
        .await
        .unwrap()
        .into_inner();
    assert_ne!(fresh.id, old.id);
    // …and is bound to it from now on.
    let refused = client
        .start_session(start(&inc, "why is the disk full?", "old"))
        .await
        .unwrap_err();
    assert_conflict(&refused, "old");
    // The expired follow-up key takes a new message.
    Driver::claim(&app, &idle).await.finish().await;
    let seq = client
        .send_message(send(&idle, "and the config?", "old-msg"))
        .await
        .unwrap()
        .into_inner()
        .seq;
    assert_eq!(seq, 3);
    // The young key is still bound.
    let refused = client
        .start_session(start(&inc, "another question", "young"))
        .await
        .unwrap_err();
    assert_conflict(&refused, "young");
    let replay = client
        .start_session(start(&inc, "why is the CPU hot?", "young"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replay.id, young.id);
    app.stop().await.unwrap();
}

/// The cleanup walks expired keys in bounded batches until none is left.
#[tokio::test]
async fn expiry_deletes_in_batches_until_none_is_left() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let inc = incident(&mut client).await;
    for i in 0..7 {
        client
            .start_session(start(&inc, "why?", &format!("k-{i}")))
            .await
            .unwrap();
    }
    connect(&app.db_url)
        .await
        .execute(
            "UPDATE idempotency_keys SET created_at = now() - interval '2 hours' \
             WHERE key <> 'k-6'",
            &[],
        )
        .await
        .unwrap();
    let deleted = app
        .store
        .expire_idempotency_keys_in_batches(Duration::from_secs(3600), 2)
        .await
        .unwrap();
    assert_eq!(deleted, 6);
    assert_eq!(app.count("idempotency_keys").await, 1);
    app.stop().await.unwrap();
}

/// The server's own periodic cleanup runs: with a short retention, a key
/// older than it disappears without anyone calling the store.
#[tokio::test]
async fn the_server_expires_keys_by_itself() {
    let app = spawn_app_with(|c| c.limits.idempotency_key_retention = Duration::from_secs(5)).await;
    assert_eq!(
        app.config.limits.idempotency_cleanup_interval(),
        Duration::from_millis(1250)
    );
    let mut client = app.client().await;
    let inc = incident(&mut client).await;
    client
        .start_session(start(&inc, "why?", "short-lived"))
        .await
        .unwrap();
    // Not asserted to change a row: a stalled test may find the key
    // already expired by the server, which is what this test is after.
    connect(&app.db_url)
        .await
        .execute(
            "UPDATE idempotency_keys SET created_at = now() - interval '1 hour'",
            &[],
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while app.count("idempotency_keys").await > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never expired the key"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client
        .start_session(start(&inc, "another question", "short-lived"))
        .await
        .unwrap();
    app.stop().await.unwrap();
}
