//! `SendMessage` with `if_running = ENQUEUE` through the real server: a
//! message sent while a burst runs is stored at once, announced to
//! watchers, and opens the next burst, in order, when the running one
//! closes; the strict fake accepts the transcript that results. The queue
//! is bounded, idempotent by key, and dropped (with a notice) by a cancel;
//! REJECT (and the default) still refuse.

use inquest_proto::v1::{self as pb, watch_event::Event};
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use inquest_tests::watching::{collect, next, watch};
use tonic::Code;
use tonic_types::StatusExt;

use crate::agent_support::{
    Client, app_with_fake, assistant, eventually, finished, session, shapes, start, turns, user,
    without_notices,
};

const ASK: &str = "why is checkout slow?";
const FIRST: &str = "Checking the database first.";
const PRICING: &str = "It's not the DB, look at pricing-svc.";
const CACHE: &str = "And the cache hit rate.";
const SECOND: &str = "pricing-svc deployed at 14:05; its cache misses doubled.";

fn request(
    session: &str,
    message: &str,
    key: &str,
    if_running: pb::IfRunning,
) -> pb::SendMessageRequest {
    pb::SendMessageRequest {
        session_id: session.into(),
        message: message.into(),
        idempotency_key: key.into(),
        if_running: if_running.into(),
    }
}

async fn enqueue(
    client: &mut Client,
    session: &str,
    message: &str,
    key: &str,
) -> pb::SendMessageResponse {
    client
        .send_message(request(session, message, key, pb::IfRunning::Enqueue))
        .await
        .expect("enqueue")
        .into_inner()
}

/// The user messages of a recorded OpenAI-flavour request, in order.
fn user_messages(body: &serde_json::Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "user")
                .filter_map(|m| m["content"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn queued_messages_are_stored_at_once_announced_and_open_the_next_burst_in_order() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text(FIRST))
        .reply(FakeReply::text("S1"))
        .reply(FakeReply::text(SECOND))
        .reply(FakeReply::text("S2"));
    fake.hold_answers();
    let app = app_with_fake(&fake, |_| {}).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    let mut stream = watch(&mut client, &id, 0).await.unwrap();
    let first = next(&mut stream).await.unwrap();
    assert!(
        matches!(&first, Some(Event::Turn(t)) if t.seq == 1),
        "{first:?}"
    );
    eventually("the first model call", || fake.request_count() == 1).await;

    // Stored at once, in order, while the model call is held.
    let a = enqueue(&mut client, &id, PRICING, "q-a").await;
    assert!(a.queued, "{a:?}");
    assert_eq!((a.seq, a.queue_position), (0, 1));
    let b = enqueue(&mut client, &id, CACHE, "q-b").await;
    assert!(b.queued && b.queue_position == 2, "{b:?}");
    assert_eq!(app.count("queued_messages").await, 2);
    assert_eq!(app.count("turns").await, 1, "nothing is a turn yet");

    // A retry with the key answers the same and stores nothing; the key
    // with another message is refused.
    let again = enqueue(&mut client, &id, PRICING, "q-a").await;
    assert_eq!(again, a);
    let reused = client
        .send_message(request(
            &id,
            "something else",
            "q-a",
            pb::IfRunning::Enqueue,
        ))
        .await
        .expect_err("a key names one message");
    assert_eq!(reused.code(), Code::AlreadyExists, "{reused:?}");
    assert_eq!(app.count("queued_messages").await, 2);

    // Watchers are told, in order.
    let mut queued = Vec::new();
    while queued.len() < 2 {
        match next(&mut stream).await.unwrap() {
            Some(Event::MessageQueued(q)) => queued.push((q.position, q.text, q.session_id)),
            Some(_) => {}
            None => panic!("the stream ended before the queued messages were announced"),
        }
    }
    assert_eq!(
        queued,
        [
            (1, PRICING.to_owned(), id.clone()),
            (2, CACHE.to_owned(), id.clone())
        ]
    );

    // The burst ends; the next one starts with both messages, in order.
    fake.release_answers();
    // A burst is numbered by the user turns so far: the one the two
    // queued messages open is burst 3 (there is no burst 2).
    let (report, s) = finished(&mut client, &id, 3).await;
    assert_eq!(report.exit_reason, "awaiting_user", "{report:?}");
    assert_eq!(s.status(), pb::SessionStatus::Idle);
    assert_eq!(app.count("queued_messages").await, 0);
    let all = turns(&mut client, &id).await;
    // The two messages are one follow-up of a burst that ended cleanly
    // (which needs no recovery notice), not an unanswered prompt followed
    // by another.
    let notices: Vec<&str> = all
        .iter()
        .filter(|t| t.role() == pb::TurnRole::Notice)
        .map(|t| t.content.as_str())
        .collect();
    assert!(notices.is_empty(), "{notices:?}");
    let stored = without_notices(all);
    assert_eq!(
        shapes(&stored),
        [
            user(ASK),
            assistant(FIRST, &[]),
            user(PRICING),
            user(CACHE),
            assistant(SECOND, &[]),
        ]
    );
    // The strict fake took the second burst's request (it answers an
    // invalid one with 400, which would fail the burst), and that request
    // carried the queued messages in order.
    let requests = fake.requests();
    let opened = requests
        .iter()
        .find(|r| user_messages(&r.body).len() == 3)
        .expect("a request of the second burst");
    assert_eq!(user_messages(&opened.body), [ASK, PRICING, CACHE]);

    // The watcher followed into the second burst and ended with it.
    let (events, ending) = collect(stream).await;
    ending.expect("the stream ends cleanly with the second burst");
    let users: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::Turn(t) if t.role() == pb::TurnRole::User => Some(t.content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(users, [PRICING, CACHE]);

    // After it became a turn, the key answers with that turn's seq and
    // stores nothing.
    let before = app.count("turns").await;
    let replay = enqueue(&mut client, &id, PRICING, "q-a").await;
    assert!(!replay.queued, "{replay:?}");
    assert_eq!(replay.seq, stored[2].seq);
    assert_eq!(app.count("turns").await, before);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn the_queue_is_bounded_reject_still_refuses_and_a_cancel_drops_the_queue() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text(FIRST))
        .reply(FakeReply::text("S1"));
    fake.hold_answers();
    let app = app_with_fake(&fake, |c| c.limits.max_queued_messages = 2).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    eventually("the first model call", || fake.request_count() == 1).await;

    for if_running in [pb::IfRunning::Unspecified, pb::IfRunning::Reject] {
        let refused = client
            .send_message(request(&id, PRICING, "", if_running))
            .await
            .expect_err("a running session refuses");
        assert_eq!(
            refused.code(),
            Code::FailedPrecondition,
            "{if_running:?}: {refused:?}"
        );
    }
    assert_eq!(app.count("queued_messages").await, 0);

    enqueue(&mut client, &id, PRICING, "").await;
    enqueue(&mut client, &id, CACHE, "").await;
    let full = client
        .send_message(request(&id, "a third", "k3", pb::IfRunning::Enqueue))
        .await
        .expect_err("over the bound");
    assert_eq!(full.code(), Code::ResourceExhausted, "{full:?}");
    let info = full.get_details_error_info().expect("an ErrorInfo detail");
    assert_eq!(info.reason, "LIMIT_EXCEEDED");
    assert_eq!(
        info.metadata.get("limit").map(String::as_str),
        Some("limits.max_queued_messages")
    );
    assert_eq!(app.count("queued_messages").await, 2, "nothing more stored");
    assert_eq!(
        app.count("idempotency_keys").await,
        0,
        "its key is not taken"
    );

    client
        .cancel_session(pb::CancelSessionRequest {
            session_id: id.clone(),
        })
        .await
        .expect("cancel");
    assert_eq!(
        app.count("queued_messages").await,
        0,
        "the cancel drops the queue"
    );
    fake.release_answers();
    let s = session(&mut client, &id).await;
    assert_eq!(s.status(), pb::SessionStatus::Cancelled);
    let stored = turns(&mut client, &id).await;
    let notices: Vec<&str> = stored
        .iter()
        .filter(|t| t.role() == pb::TurnRole::Notice)
        .map(|t| t.content.as_str())
        .collect();
    assert_eq!(
        notices,
        ["Session cancelled: 2 queued messages dropped without being run."]
    );
    assert!(
        !stored
            .iter()
            .any(|t| t.content == PRICING || t.content == CACHE),
        "no dropped message became a turn: {stored:?}"
    );
    // A cancelled session takes no more messages, queued or not.
    let after = client
        .send_message(request(&id, PRICING, "", pb::IfRunning::Enqueue))
        .await
        .expect_err("cancelled");
    assert_eq!(after.code(), Code::FailedPrecondition, "{after:?}");
    app.stop().await.unwrap();
}

#[tokio::test]
async fn enqueue_on_a_finished_session_is_a_plain_send() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text(FIRST))
        .reply(FakeReply::text("S1"))
        .reply(FakeReply::text(SECOND))
        .reply(FakeReply::text("S2"));
    let app = app_with_fake(&fake, |_| {}).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    finished(&mut client, &id, 1).await;
    let sent = enqueue(&mut client, &id, PRICING, "k").await;
    assert!(!sent.queued && sent.seq == 3, "{sent:?}");
    let (report, _) = finished(&mut client, &id, 2).await;
    assert_eq!(report.exit_reason, "awaiting_user");
    assert_eq!(app.count("queued_messages").await, 0);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_message_queued_on_one_replica_reaches_watchers_on_another_and_runs_after_the_burst() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text(FIRST))
        .reply(FakeReply::text("S1"))
        .reply(FakeReply::text(SECOND))
        .reply(FakeReply::text("S2"));
    fake.hold_answers();
    let a = app_with_fake(&fake, |_| {}).await;
    let entry = crate::agent_support::provider(&fake, Flavor::OpenAi, "fake");
    let b = inquest_tests::spawn_app_on(a.db_name.clone(), a.db_url.clone(), |c| {
        c.providers = vec![entry];
        crate::agent_support::evidence_tools(c);
    })
    .await;
    let (mut on_a, mut on_b) = (a.client().await, b.client().await);
    let id = start(&mut on_a, ASK).await;
    eventually("the first model call", || fake.request_count() == 1).await;
    // A runs the burst (it stored the first message and claimed at once);
    // the watcher is on B: the first message queued on A reaches it
    // through the store's notification, the second is queued on B itself.
    let mut stream = watch(&mut on_b, &id, 0).await.unwrap();
    let first = next(&mut stream).await.unwrap();
    assert!(
        matches!(&first, Some(Event::Turn(t)) if t.seq == 1),
        "{first:?}"
    );
    let sent = enqueue(&mut on_a, &id, PRICING, "x-a").await;
    assert!(sent.queued && sent.queue_position == 1, "{sent:?}");
    let sent = enqueue(&mut on_b, &id, CACHE, "x-b").await;
    assert!(sent.queued && sent.queue_position == 2, "{sent:?}");
    let mut queued = Vec::new();
    while queued.len() < 2 {
        match next(&mut stream).await.unwrap() {
            Some(Event::MessageQueued(q)) => queued.push((q.position, q.text)),
            Some(_) => {}
            None => panic!("the stream ended before the queued messages were announced"),
        }
    }
    assert_eq!(queued, [(1, PRICING.to_owned()), (2, CACHE.to_owned())]);

    fake.release_answers();
    let (report, _) = finished(&mut on_b, &id, 3).await;
    assert_eq!(report.exit_reason, "awaiting_user", "{report:?}");
    let stored = without_notices(turns(&mut on_b, &id).await);
    assert_eq!(
        shapes(&stored),
        [
            user(ASK),
            assistant(FIRST, &[]),
            user(PRICING),
            user(CACHE),
            assistant(SECOND, &[]),
        ]
    );
    assert_eq!(fake.request_count(), 4, "each burst ran once");
    b.stop().await.unwrap();
    a.stop().await.unwrap();
}

/// The close that drains the queue and the start of the next burst are
/// two steps; the first is one transaction. Here the replica that closed
/// the burst never starts the next one (it has no agent, as if it died
/// right after the commit): the session is `pending` with the queued
/// messages as turns, and a replica that starts later runs that burst
/// once, with both messages.
#[tokio::test]
async fn a_drained_queue_survives_the_closer_and_runs_once_elsewhere() {
    let closer = inquest_tests::spawn_app().await;
    let mut client = closer.client().await;
    let id = inquest_tests::driver::new_session(&mut client).await;
    let driver = inquest_tests::driver::Driver::claim(&closer, &id).await;
    enqueue(&mut client, &id, PRICING, "c-a").await;
    enqueue(&mut client, &id, CACHE, "").await;
    driver.say(FIRST).await;
    driver.finish().await;

    let s = session(&mut client, &id).await;
    assert_eq!(s.status(), pb::SessionStatus::Pending, "{s:?}");
    assert_eq!(closer.count("queued_messages").await, 0);
    let stored = turns(&mut client, &id).await;
    let users: Vec<&str> = stored
        .iter()
        .filter(|t| t.role() == pb::TurnRole::User)
        .map(|t| t.content.as_str())
        .collect();
    assert_eq!(users[1..], [PRICING, CACHE]);
    // The key now names the turn.
    let replay = enqueue(&mut client, &id, PRICING, "c-a").await;
    assert!(!replay.queued && replay.seq == stored[2].seq, "{replay:?}");

    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text(SECOND))
        .reply(FakeReply::text("S"));
    let entry = crate::agent_support::provider(&fake, Flavor::OpenAi, "fake");
    let runner = inquest_tests::spawn_app_on(closer.db_name.clone(), closer.db_url.clone(), |c| {
        c.providers = vec![entry];
        crate::agent_support::evidence_tools(c);
    })
    .await;
    let mut on_runner = runner.client().await;
    let (report, _) = finished(&mut on_runner, &id, 3).await;
    assert_eq!(report.exit_reason, "awaiting_user", "{report:?}");
    assert_eq!(
        fake.request_count(),
        2,
        "one answer and one report: run once"
    );
    let sent = fake.requests();
    assert_eq!(user_messages(&sent[0].body)[1..], [PRICING, CACHE]);
    runner.stop().await.unwrap();
    closer.stop().await.unwrap();
}

/// The queue is visible without a watch: GetSession and ListSessions carry
/// each session's queued messages (a long one cut with a marker), and
/// ListSessions' queued_only lists just the sessions with one; once the
/// burst closes and the queue drains, they are gone from both.
#[tokio::test]
async fn get_and_list_sessions_show_the_queue_and_list_only_sessions_with_one() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text(FIRST))
        .reply(FakeReply::text("S1"))
        .reply(FakeReply::text(SECOND))
        .reply(FakeReply::text("S2"));
    fake.hold_answers();
    let app = app_with_fake(&fake, |_| {}).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    eventually("the first model call", || fake.request_count() == 1).await;
    // Another session, idle, with no queue.
    let incident = session(&mut client, &id).await.incident_id;
    let other = inquest_core::SessionId::new();
    inquest_tests::resume::insert_session(
        &inquest_tests::connect(&app.db_url).await,
        inquest_core::IncidentId::parse(&incident).unwrap(),
        other,
        "idle",
        &[],
    )
    .await;

    let long = "x".repeat(5_000);
    enqueue(&mut client, &id, PRICING, "v-a").await;
    enqueue(&mut client, &id, &long, "v-b").await;
    let q = session(&mut client, &id).await.queued_messages;
    assert_eq!(q.len(), 2, "{q:?}");
    assert_eq!(
        (q[0].text.as_str(), q[0].position, q[0].interrupt),
        (PRICING, 1, false)
    );
    assert_eq!(q[1].position, 2);
    assert!(
        q[1].text.starts_with(&"x".repeat(2_000)) && q[1].text.contains("cut by inquest"),
        "{}",
        &q[1].text[1990..]
    );
    assert!(q[1].text.len() < 2_200);
    assert!(q[0].queued_at.is_some());

    let listed = |queued_only: bool| pb::ListSessionsRequest {
        queued_only,
        ..Default::default()
    };
    let only = client
        .list_sessions(listed(true))
        .await
        .unwrap()
        .into_inner()
        .sessions;
    assert_eq!(only.len(), 1, "{only:?}");
    assert_eq!(only[0].id, id);
    assert_eq!(only[0].queued_messages.len(), 2);
    let all = client
        .list_sessions(listed(false))
        .await
        .unwrap()
        .into_inner()
        .sessions;
    assert_eq!(all.len(), 2);
    let quiet = all
        .iter()
        .find(|s| s.id == other.to_string())
        .expect("the quiet one");
    assert!(quiet.queued_messages.is_empty());

    // The burst closes; its close drains the queue into turns (the burst
    // they open is numbered by the user turns so far: 3).
    fake.release_answers();
    finished(&mut client, &id, 3).await;
    assert!(session(&mut client, &id).await.queued_messages.is_empty());
    let only = client
        .list_sessions(listed(true))
        .await
        .unwrap()
        .into_inner()
        .sessions;
    assert!(only.is_empty(), "{only:?}");
    app.stop().await.unwrap();
}
