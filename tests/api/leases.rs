//! Leases and the cross-replica announcements at the store level, against
//! a real database: the fence refuses every write of a replaced worker, and
//! turns are announced only to replicas that registered a watcher.

use std::time::Duration;

use inquest_core::{
    ExitReason, IncidentText, Limits, NewTurn, SessionId, SessionStatus, TokenUsage, UserMessage,
};
use inquest_store::{
    Lease, NewReport, ReplicaId, Store, StoreConfig, StoreError, Transition, WriteId,
    listen::{ListenEvent, ListenerConfig, run_listener},
    notify::{CHANNEL, Notification},
};
use inquest_tests::spawn_app;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub(crate) fn store_as(url: &str, replica: &str) -> Store {
    let mut config = StoreConfig::new(url);
    config.max_connections = 2;
    config.replica_id = ReplicaId::parse(replica).unwrap();
    config.lease_ttl = Duration::from_secs(30);
    Store::connect(&config).unwrap()
}

async fn pending_session(store: &Store) -> SessionId {
    let limits = Limits::default();
    let incident = store
        .create_incident(
            &inquest_core::Tenant::default_tenant(),
            &IncidentText::parse("lease test".into(), String::new(), &limits).unwrap(),
        )
        .await
        .unwrap();
    store
        .start_session(
            &inquest_core::Tenant::default_tenant(),
            inquest_core::TenantQuota::UNLIMITED,
            incident.id,
            UserMessage::parse("what happened?".into(), &limits).unwrap(),
            None,
        )
        .await
        .unwrap()
        .session
        .id
}

fn says(text: &str) -> NewTurn {
    NewTurn::Assistant {
        text: text.into(),
        tool_calls: Vec::new(),
        usage: TokenUsage::default(),
    }
}

/// Expires the session's lease, as if its holder stopped renewing.
async fn expire(url: &str, session: SessionId) {
    inquest_tests::connect(url)
        .await
        .execute(
            "UPDATE sessions SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
            &[session.as_uuid()],
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_replaced_worker_cannot_append_report_or_close() {
    let app = spawn_app().await;
    let a = store_as(&app.db_url, "replica-a");
    let b = store_as(&app.db_url, "replica-b");
    let session = pending_session(&a).await;
    let stale: Lease = a.claim_pending(session).await.unwrap().expect("pending");
    a.append_turn_leased(&stale, WriteId::new(), says("before the takeover"))
        .await
        .unwrap();
    // A live lease is not an orphan.
    assert_eq!(b.claim_orphan(session).await.unwrap(), None);
    expire(&app.db_url, session).await;
    let fresh = b.claim_orphan(session).await.unwrap().expect("an orphan");
    assert_eq!(fresh.epoch(), stale.epoch() + 1);
    // Only one claimer wins an orphan.
    assert_eq!(a.claim_orphan(session).await.unwrap(), None);

    let refused = a
        .append_turn_leased(&stale, WriteId::new(), says("after the takeover"))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, StoreError::LeaseLost { held, current, .. } if held == stale.epoch() && current == fresh.epoch()),
        "{refused:?}"
    );
    let report = a
        .save_report(
            &stale,
            NewReport {
                burst: 1,
                exit_reason: ExitReason::Completed,
                summary: "stale".into(),
                counters: serde_json::json!({}),
                active_ms: 0,
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(report, StoreError::LeaseLost { .. }), "{report:?}");
    let closed = a.close_burst(&stale, ExitReason::Completed).await.unwrap();
    assert!(
        matches!(closed, Transition::Unchanged(ref row) if row.status == SessionStatus::Running)
    );
    assert!(matches!(
        a.renew_lease(&stale).await.unwrap(),
        inquest_store::Renewal::Lost
    ));

    // The new holder writes on; the stale write left no trace.
    let turn = b
        .append_turn_leased(&fresh, WriteId::new(), says("recovered"))
        .await
        .unwrap()
        .turn;
    assert_eq!(turn.seq.as_i64(), 3);
    let all = b.all_turns(session).await.unwrap();
    assert_eq!(
        all.iter().map(|t| t.content.as_str()).collect::<Vec<_>>(),
        ["what happened?", "before the takeover", "recovered"]
    );
    assert!(b.get_report(session, None).await.is_err());
    app.stop().await.unwrap();
}

/// A LISTEN on the announcements' channel, as another replica runs one,
/// started and heard `Listening` before it is returned.
pub(crate) struct Listening {
    pub(crate) rx: mpsc::UnboundedReceiver<ListenEvent>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Listening {
    pub(crate) async fn start(url: &str) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let task = tokio::spawn(run_listener(
            ListenerConfig::new(url.to_owned(), CHANNEL),
            stop.clone(),
            move |e| {
                let _ = tx.send(e);
            },
        ));
        assert_eq!(rx.recv().await, Some(ListenEvent::Listening));
        Self { rx, stop, task }
    }

    pub(crate) async fn stop(self) {
        self.stop.cancel();
        self.task.await.unwrap();
    }
}

/// Collects notifications until `marker` (sent after the writes under test:
/// NOTIFY is delivered in commit order, so everything before it arrived).
pub(crate) async fn until_marker(
    rx: &mut mpsc::UnboundedReceiver<ListenEvent>,
    marker: &str,
) -> Vec<Notification> {
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("the marker never arrived")
            .expect("listener ended");
        if let ListenEvent::Notification(payload) = event {
            if payload == marker {
                return seen;
            }
            seen.push(Notification::parse(&payload).unwrap());
        }
    }
}

/// A plain NOTIFY of `text` on the channel, from its own connection.
pub(crate) async fn marker(url: &str, text: &str) {
    inquest_tests::connect(url)
        .await
        .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &text])
        .await
        .unwrap();
}

#[tokio::test]
async fn turns_are_announced_only_to_replicas_that_registered_a_watcher() {
    let app = spawn_app().await;
    let a = store_as(&app.db_url, "replica-a");
    let b = store_as(&app.db_url, "replica-b");
    let mut listening = Listening::start(&app.db_url).await;

    let session = pending_session(&a).await;
    let lease = a.claim_pending(session).await.unwrap().unwrap();
    // Nobody watches: no announcement (commits stay off the notify lock).
    let appended = a
        .append_turn_leased(&lease, WriteId::new(), says("unwatched"))
        .await
        .unwrap();
    assert!(!appended.watched_elsewhere);
    // The writer's own watcher does not count either.
    a.register_watcher(session).await.unwrap();
    let appended = a
        .append_turn_leased(&lease, WriteId::new(), says("watched by the writer only"))
        .await
        .unwrap();
    assert!(!appended.watched_elsewhere, "the writer's own registration");
    marker(&app.db_url, "m1").await;
    let seen = until_marker(&mut listening.rx, "m1").await;
    assert!(
        !seen.iter().any(|n| matches!(n, Notification::Turn { .. })),
        "{seen:?}"
    );

    // Another replica watches: every turn is announced, whole, by the writer.
    b.register_watcher(session).await.unwrap();
    b.register_watcher(session).await.unwrap(); // idempotent
    let appended = a
        .append_turn_leased(&lease, WriteId::new(), says("watched"))
        .await
        .unwrap();
    // What the burst reads to decide whether a tool start is announced.
    assert!(appended.watched_elsewhere);
    let turn = appended.turn;
    marker(&app.db_url, "m2").await;
    let seen = until_marker(&mut listening.rx, "m2").await;
    match seen.as_slice() {
        [
            Notification::Turn {
                origin,
                session: s,
                seq,
                turn: Some(t),
            },
        ] => {
            assert_eq!(origin, "replica-a");
            assert_eq!(*s, session);
            assert_eq!(*seq, turn.seq);
            assert_eq!(t.content, "watched");
            assert_eq!(t.created_at, turn.created_at);
        }
        other => panic!("expected one turn announcement, got {other:?}"),
    }

    // Too large for a notification: announced by seq, fetched by it.
    let big = a
        .append_turn_leased(&lease, WriteId::new(), says(&"x".repeat(10_000)))
        .await
        .unwrap()
        .turn;
    marker(&app.db_url, "m2b").await;
    let seen = until_marker(&mut listening.rx, "m2b").await;
    assert!(
        matches!(seen.as_slice(), [Notification::Turn { seq, turn: None, .. }] if *seq == big.seq),
        "{seen:?}"
    );
    let fetched = b.get_turn(session, big.seq).await.unwrap().unwrap();
    assert_eq!(fetched.content.len(), 10_000);

    // Ending the burst announces the status and forgets the watchers.
    a.close_burst(&lease, ExitReason::AwaitingUser)
        .await
        .unwrap();
    marker(&app.db_url, "m3").await;
    let seen = until_marker(&mut listening.rx, "m3").await;
    assert!(
        matches!(
            seen.as_slice(),
            [Notification::Status {
                status: SessionStatus::Idle,
                ..
            }]
        ),
        "{seen:?}"
    );
    listening.stop().await;
    app.stop().await.unwrap();
}

/// A session left `running` with no lease (its worker died before any
/// renewal): turns are `(seq, role, content)`, timestamps a minute ago.
async fn orphan(
    app: &inquest_tests::TestApp,
    client: &mut inquest_tests::resume::Client,
    turns: &[(i64, inquest_core::Role, &str)],
) -> SessionId {
    use inquest_tests::resume::{incident, insert_session, insert_turn};
    let db = inquest_tests::connect(&app.db_url).await;
    let incident = incident(client).await;
    let session = SessionId::new();
    let at = time::OffsetDateTime::now_utc() - time::Duration::seconds(60);
    let turns: Vec<inquest_core::Turn> = turns
        .iter()
        .map(|(seq, role, content)| inquest_core::Turn {
            session_id: session,
            seq: inquest_core::Seq::from_stored(*seq).unwrap(),
            role: *role,
            content: (*content).into(),
            tool_calls_raw: serde_json::json!([]),
            recovery_plan_raw: None,
            tool_call_id: None,
            tool_name: None,
            is_error: false,
            usage: TokenUsage::default(),
            created_at: at,
        })
        .collect();
    // Stored whole before it becomes running: a reaper must not claim a
    // half-written history.
    insert_session(&db, incident, session, "idle", &turns).await;
    for t in &turns {
        insert_turn(&db, t).await.unwrap();
    }
    db.execute(
        "UPDATE sessions SET status = 'running' WHERE id = $1",
        &[session.as_uuid()],
    )
    .await
    .unwrap();
    session
}

fn get(id: SessionId) -> inquest_proto::v1::GetSessionRequest {
    inquest_proto::v1::GetSessionRequest {
        session_id: id.to_string(),
    }
}

#[tokio::test]
async fn get_watch_and_send_claim_an_orphan_on_the_spot() {
    use inquest_core::Role;
    use inquest_proto::v1 as pb;
    use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
    use inquest_tests::{resume::settled, watching::collect};

    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    // Three recoveries may run at once and share the fake's queue: every
    // reply (answer or report) is the same text.
    for _ in 0..6 {
        fake.reply(FakeReply::text("The pool is exhausted."));
    }
    let app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![inquest_tests::resume::fake_provider(&fake, "fake")];
        // Only the calls below can claim these orphans: the reaper's next
        // pass is an hour away (its first ran at startup, before them).
        c.lease.reap_interval = Duration::from_secs(3600);
    })
    .await;
    let mut client = app.client().await;
    let asked = [(1, Role::User, "why is checkout slow?")];
    let by_get = orphan(&app, &mut client, &asked).await;
    let by_watch = orphan(&app, &mut client, &asked).await;
    let by_send = orphan(&app, &mut client, &asked).await;
    // Nobody has claimed them yet (so the claims below are the calls').
    let db = inquest_tests::connect(&app.db_url).await;
    for id in [by_get, by_watch, by_send] {
        let row = db
            .query_one(
                "SELECT lease_epoch FROM sessions WHERE id = $1",
                &[id.as_uuid()],
            )
            .await
            .unwrap();
        assert_eq!(row.get::<_, i64>(0), 0);
    }

    // GetSession answers with the claim it just made.
    let claimed = client.get_session(get(by_get)).await.unwrap().into_inner();
    assert_eq!(claimed.lease_epoch, 1, "{claimed:?}");
    assert!(
        !claimed.lease_owner.is_empty() || claimed.status() != pb::SessionStatus::Running,
        "{claimed:?}"
    );

    // WatchSession claims it and follows the recovery to its end.
    let stream = inquest_tests::watching::watch(&mut client, &by_watch.to_string(), 0)
        .await
        .unwrap();
    let (events, ending) = collect(stream).await;
    ending.unwrap();
    let turns: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            pb::watch_event::Event::Turn(t) => Some((t.role(), t.content.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(turns.len(), 3, "{turns:?}");
    assert_eq!(turns[1].0, pb::TurnRole::Notice);
    assert!(
        turns[1].1.starts_with("Recovery: interrupted_prompt."),
        "{turns:?}"
    );
    assert_eq!(
        turns[2],
        (pb::TurnRole::Assistant, "The pool is exhausted.".into())
    );

    // SendMessage is refused (the session is running) but claims it.
    let refused = inquest_tests::resume::send(&mut client, by_send, "hello?")
        .await
        .unwrap_err();
    crate::error_details::assert_reason(
        &refused,
        tonic::Code::FailedPrecondition,
        inquest_server::reason::Reason::SessionRunning,
        &[("status", "running")],
    );
    assert!(
        refused.message().contains("recovering"),
        "{}",
        refused.message()
    );

    for id in [by_get, by_watch, by_send] {
        let done = settled(&mut client, id).await;
        assert_eq!(done.status(), pb::SessionStatus::Completed, "{done:?}");
        assert_eq!(done.lease_epoch, 1);
    }
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_degraded_orphan_is_never_continued() {
    use inquest_core::Role;
    use inquest_proto::v1 as pb;
    use inquest_testkit::fake::{FakeProvider, Flavor};
    use inquest_tests::resume::settled;

    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![inquest_tests::resume::fake_provider(&fake, "fake")];
        c.lease.reap_interval = Duration::from_millis(50);
    })
    .await;
    let mut client = app.client().await;
    // A gap (no seq 2) and an unanswered question: needs a human.
    let owes = orphan(
        &app,
        &mut client,
        &[(1, Role::User, "why?"), (3, Role::User, "and now?")],
    )
    .await;
    // A gap and a final answer: nothing owed, still never continued.
    let answered = orphan(
        &app,
        &mut client,
        &[(1, Role::User, "why?"), (3, Role::Assistant, "the pool")],
    )
    .await;
    let held = settled(&mut client, owes).await;
    assert_eq!(
        held.status(),
        pb::SessionStatus::AwaitingConfirmation,
        "{held:?}"
    );
    assert_eq!(held.last_recovery_plan.unwrap().kind, "degraded_history");
    let idle = settled(&mut client, answered).await;
    assert_eq!(idle.status(), pb::SessionStatus::Idle, "{idle:?}");
    assert_eq!(idle.exit_reason, "degraded_history");
    assert_eq!(idle.last_recovery_plan.unwrap().kind, "degraded_history");
    assert_eq!(fake.request_count(), 0, "nothing was sent to the model");
    let _ = client.get_session(get(owes)).await.unwrap();
    app.stop().await.unwrap();
}

/// The trace id of a session's latest burst: the claim statement stores
/// it (a claim without one clears it), and a burst claimed before its
/// trace existed records it fenced by its lease, so a replaced worker
/// cannot overwrite its successor's.
#[tokio::test]
async fn the_trace_id_is_written_by_the_claim_and_fenced_after_it() {
    let app = spawn_app().await;
    let a = store_as(&app.db_url, "replica-a");
    let b = store_as(&app.db_url, "replica-b");
    let session = pending_session(&a).await;
    assert_eq!(a.get_session(session).await.unwrap().trace_id, None);
    let first = "0af7651916cd43dd8448eb211c80319c".to_owned();
    let stale = a
        .claim_pending_traced(session, Some(first.clone()))
        .await
        .unwrap()
        .expect("pending");
    assert_eq!(
        a.get_session(session).await.unwrap().trace_id.as_deref(),
        Some(first.as_str())
    );

    expire(&app.db_url, session).await;
    let fresh = b.claim_orphan(session).await.unwrap().expect("an orphan");
    let second = "4bf92f3577b34da6a3ce929d0e0e4736".to_owned();
    assert!(b.record_trace_id(&fresh, second.clone()).await.unwrap());
    // The replaced worker's write matches no row.
    assert!(!a.record_trace_id(&stale, first.clone()).await.unwrap());
    assert_eq!(
        b.get_session(session).await.unwrap().trace_id.as_deref(),
        Some(second.as_str())
    );
}
