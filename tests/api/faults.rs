//! Faults, seen from outside: a watch ends OK only when its
//! session is settled, on one replica and across two; a turn write delayed
//! past its timeout is resolved (published once, never FAILED); terminated
//! connections and an exhausted pool slow a burst but never fail it; a
//! stale burst's close touches nothing of its successor's; a client-facing
//! write whose outcome is unknown says so.

use std::time::Duration;

use inquest_core::{ExitReason, NewTurn, SessionId, SessionStatus, TokenUsage, ToolArguments};
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use inquest_store::Transition;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use inquest_tests::{
    driver::{Driver, new_session},
    spawn_app, spawn_app_with,
    watching::{collect, turn_seqs, watch},
};
use tokio::{task::JoinSet, time::Instant};
use tokio_util::sync::CancellationToken;
use tonic::Code;

use crate::{
    agent_support::{
        Client, Gate, HANG_GUARD, app_with_fake, assert_ended, assistant, eventually,
        evidence_tools, finished, provider_at, session, shapes, start, user,
    },
    faults_support::{
        LogDump, Replica, Rng, RowLock, SlowLink, all_turns, assert_gapless, assert_requests_valid,
        assert_tool_calls_answered_once, channel, is_active, is_retryable,
        server_backends_waiting_on_a_lock, settled, settled_with_report, terminate_server_backends,
    },
};

const ASK: &str = "why is checkout slow?";

/// A turn as the comparisons see it: (seq, role, content).
fn brief(t: &pb::SessionTurn) -> (i64, i32, String) {
    (t.seq, t.role, t.content.clone())
}

/// Queues one burst's model answers: a final text at once, or one file
/// tool call and then the text; the author's summary last. Returns which.
fn script_burst(fake: &FakeProvider, rng: &mut Rng, round: u32) -> &'static str {
    let kind = if rng.below(2) == 0 {
        fake.reply(FakeReply::text(&format!("answer {round}")));
        "text"
    } else {
        fake.reply(FakeReply::text("Looking at the evidence.").call(
            &format!("r{round}"),
            "list_files",
            "{}",
        ))
        .reply(FakeReply::text(&format!("answer {round}")));
        "tool"
    };
    fake.reply(FakeReply::text(&format!("summary {round}")));
    kind
}

/// Either no pause at all or a random one of 0–20 ms, between the call
/// that opened a burst and the watch that follows it.
async fn pause(rng: &mut Rng) {
    if rng.below(3) != 0 {
        tokio::time::sleep(Duration::from_millis(rng.below(21))).await;
    }
}

fn follow_up(id: &str, round: u32) -> pb::SendMessageRequest {
    pb::SendMessageRequest {
        session_id: id.into(),
        message: format!("follow-up {round}"),
        idempotency_key: String::new(),
        if_running: 0,
    }
}

/// `rounds` bursts of one session, each opened through `sender` and
/// watched to its end through `watcher` (the same server, or another
/// replica). Every watch must end OK; the session must then be settled on
/// every given replica, the stream must have carried exactly the stored
/// turns of its range, and the next follow-up must be accepted.
async fn watch_then_send_rounds(
    fake: &FakeProvider,
    sender: &mut Client,
    watcher: &mut Client,
    rounds: u32,
    seed: u64,
) {
    let mut rng = Rng::new(seed);
    let mut kind = script_burst(fake, &mut rng, 0);
    let id = start(sender, ASK).await;
    let mut after = 0;
    for round in 0..=rounds {
        if round > 0 {
            // The previous watch ended OK: a follow-up must be accepted.
            kind = script_burst(fake, &mut rng, round);
            let seq = match sender.send_message(follow_up(&id, round)).await {
                Ok(r) => r.into_inner().seq,
                Err(status) => panic!(
                    "round {round} (seed {seed}): a follow-up after a watch that ended OK was \
                     refused: {status:?}; session now {:?}",
                    session(sender, &id).await
                ),
            };
            if round == rounds {
                break;
            }
            after = if rng.below(8) == 0 { 0 } else { seq - 1 };
        }
        pause(&mut rng).await;
        let stream = watch(watcher, &id, after)
            .await
            .unwrap_or_else(|s| panic!("round {round}: WatchSession refused: {s:?}"));
        let (events, ending) = collect(stream).await;
        if let Err(status) = ending {
            panic!("round {round} ({kind}, seed {seed}): the watch ended {status:?}, not OK");
        }
        for client in [&mut *watcher, &mut *sender] {
            let s = session(client, &id).await;
            assert!(
                !is_active(s.status()),
                "round {round} ({kind}, seed {seed}): the watch ended OK but the session is \
                 {:?}: {s:?}",
                s.status()
            );
        }
        let stored = all_turns(sender, &id).await;
        assert_gapless(&stored);
        let want: Vec<_> = stored.iter().filter(|t| t.seq > after).map(brief).collect();
        let got: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                pb::watch_event::Event::Turn(t) => Some(brief(t)),
                _ => None,
            })
            .collect();
        assert_eq!(
            got, want,
            "round {round} ({kind}, seed {seed}): the watch from after_seq={after} did not carry \
             exactly the stored turns of its range"
        );
    }
    // The last follow-up's burst ends before the servers stop.
    let s = settled(sender, &id, HANG_GUARD).await;
    assert_ne!(s.status(), pb::SessionStatus::Failed, "{s:?}");
}

#[tokio::test]
async fn a_watch_that_ends_ok_leaves_a_settled_session() {
    let logs = LogDump::install();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    // The budget is the session's: 200 bursts need more than the default.
    let app = app_with_fake(&fake, |c| c.agent.iteration_budget = 10_000).await;
    let mut sender = app.client().await;
    let mut watcher = app.client().await;
    watch_then_send_rounds(&fake, &mut sender, &mut watcher, 200, 0x5eed_0001).await;
    drop(logs);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_watch_on_another_replica_ends_ok_only_when_settled() {
    let logs = LogDump::install();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let app = app_with_fake(&fake, |c| {
        c.agent.iteration_budget = 10_000;
        c.replica_id = Some("replica-a".into());
    })
    .await;
    let b = Replica::beside(&app, "replica-b").await;
    let mut on_a = app.client().await;
    let mut on_b = b.client().await;
    watch_then_send_rounds(&fake, &mut on_a, &mut on_b, 50, 0x5eed_0002).await;
    drop(logs);
    b.stop().await.unwrap();
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_write_delayed_past_its_timeout_is_published_once() {
    const ANSWER: &str = "The DB pool is exhausted.";
    let logs = LogDump::install();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text(ANSWER))
        .reply(FakeReply::text("SUMMARY: pool exhausted"));
    let gate = Gate::in_front_of(&fake).await;
    let timeout = Duration::from_millis(300);
    let app = spawn_app_with(|c| {
        c.providers = vec![provider_at(Flavor::OpenAi, "fake", gate.base_url(&fake))];
        evidence_tools(c);
        c.store.turn_write_timeout = timeout;
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    let sid = SessionId::parse(&id).unwrap();
    let stream = watch(&mut client, &id, 0).await.unwrap();
    let reader = tokio::spawn(collect(stream));
    eventually("the model call is in flight", || fake.request_count() == 1).await;

    // The answer comes while the session row is locked elsewhere: the
    // assistant turn's write waits on the lock past its timeout.
    let lock = RowLock::take(&app.db_url, sid).await;
    gate.open();
    logs.wait_for("store write did not land", HANG_GUARD).await;
    let deadline = Instant::now() + HANG_GUARD;
    while server_backends_waiting_on_a_lock(&app.db_name).await == 0 {
        assert!(
            Instant::now() < deadline,
            "no server write waits on the lock"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(timeout * 3).await;
    lock.release().await;

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed", "{report:?}");
    assert_ended(&s, pb::SessionStatus::Completed, "completed");
    let stored = all_turns(&mut client, &id).await;
    assert_gapless(&stored);
    assert_eq!(shapes(&stored), [user(ASK), assistant(ANSWER, &[])]);
    assert_eq!((s.head_seq, s.turn_count), (2, 2), "{s:?}");

    let (events, ending) = reader.await.unwrap();
    ending.unwrap();
    assert_eq!(turn_seqs(&events), [1, 2], "each turn once, in order");
    // The write was resolved by asking the store again, not guessed.
    assert!(
        logs.text().contains("store answered again"),
        "the delayed write was never resolved by a retry"
    );
    app.stop().await.unwrap();
    drop(logs);
}

/// `n` tool rounds (call ids `{prefix}1..n`), then a final answer and the
/// author's summary.
fn script_tool_rounds(fake: &FakeProvider, prefix: &str, n: usize) {
    for i in 1..=n {
        fake.reply(FakeReply::text(&format!("step {i}")).call(
            &format!("{prefix}{i}"),
            "list_files",
            "{}",
        ));
    }
    fake.reply(FakeReply::text("The DB pool is exhausted."))
        .reply(FakeReply::text("SUMMARY: pool exhausted"));
}

/// What a burst that met a transient fault must still be: ended well (not
/// FAILED), reported, with a gapless, provider-valid transcript in which
/// no tool call of the script is repeated or lost.
async fn assert_ended_well(
    fake: &FakeProvider,
    client: &mut Client,
    id: &str,
    prefix: &str,
    n: usize,
) {
    let (report, s) = settled_with_report(client, id, Duration::from_secs(120)).await;
    assert!(
        matches!(
            s.status(),
            pb::SessionStatus::Completed | pb::SessionStatus::Idle
        ),
        "the session did not end well: {s:?}; report {report:?}"
    );
    assert!(
        ["completed", "awaiting_user"].contains(&report.exit_reason.as_str()),
        "report {report:?}"
    );
    let stored = all_turns(client, id).await;
    assert_gapless(&stored);
    let calls = assert_tool_calls_answered_once(&stored);
    assert_requests_valid(&fake.requests());
    let ids: Vec<String> = stored
        .iter()
        .flat_map(|t| t.tool_calls.iter().map(|c| c.id.clone()))
        .collect();
    let want: Vec<String> = (1..=n).map(|i| format!("{prefix}{i}")).collect();
    assert_eq!(ids, want, "every scripted tool call once, in order");
    assert_eq!(calls, n);
    let last = stored
        .iter()
        .rev()
        .find(|t| t.role() == pb::TurnRole::Assistant)
        .expect("an assistant turn");
    assert_eq!(last.content, "The DB pool is exhausted.");
}

#[tokio::test]
async fn terminated_connections_do_not_fail_a_burst() {
    const ROUNDS: usize = 20;
    let logs = LogDump::install();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    script_tool_rounds(&fake, "k", ROUNDS);
    let link = SlowLink::in_front_of(&fake, Duration::from_millis(50)).await;
    let app = spawn_app_with(|c| {
        c.providers = vec![provider_at(Flavor::OpenAi, "fake", link.base_url(&fake))];
        evidence_tools(c);
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    eventually("the burst's first model call", || fake.request_count() >= 1).await;

    // Cut every pooled connection of the server, again and again, while
    // the burst writes its turns: first so often that hardly a write can
    // land (an outage), then every 50 ms (a flapping link), so writes both
    // fail and land.
    let admin = inquest_tests::connect(&inquest_tests::admin_url()).await;
    let calls_before = fake.request_count();
    let mut terminated = 0;
    let storm_starts = Instant::now();
    let storm_ends = storm_starts + Duration::from_millis(3000);
    while Instant::now() < storm_ends {
        terminated += terminate_server_backends(&admin, &app.db_name).await;
        let pace = if Instant::now() < storm_starts + Duration::from_millis(1500) {
            5
        } else {
            50
        };
        tokio::time::sleep(Duration::from_millis(pace)).await;
    }
    let calls_during = fake.request_count() - calls_before;
    let retries = logs.text().matches("store write did not land").count();
    eprintln!(
        "storm: {terminated} backends terminated; {calls_during} model calls during it; \
         {retries} burst writes retried"
    );
    assert!(terminated > 0, "no server connection was terminated");
    assert!(
        retries > 0,
        "no write of the burst met a terminated connection: the storm missed the burst"
    );
    assert_ended_well(&fake, &mut client, &id, "k", ROUNDS).await;
    app.stop().await.unwrap();
    drop(logs);
}

#[derive(Default, Debug)]
struct Tally {
    ok: u64,
    unavailable: u64,
    other: Vec<tonic::Status>,
}

#[tokio::test]
async fn an_exhausted_pool_slows_but_never_fails_a_burst() {
    const ROUNDS: usize = 20;
    const CLIENTS: usize = 50;
    let logs = LogDump::install();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    script_tool_rounds(&fake, "p", ROUNDS);
    let link = SlowLink::in_front_of(&fake, Duration::from_millis(50)).await;
    let app = spawn_app_with(|c| {
        c.providers = vec![provider_at(Flavor::OpenAi, "fake", link.base_url(&fake))];
        evidence_tools(c);
        c.store.max_connections = 2;
        c.store.connect_timeout = Duration::from_millis(100);
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    eventually("the burst's first model call", || fake.request_count() >= 1).await;

    // Flood the two connections with reads while the burst runs.
    let calls_before = fake.request_count();
    let stop = CancellationToken::new();
    let mut flood = JoinSet::new();
    for i in 0..CLIENTS {
        let mut c = InvestigationsClient::new(channel(app.addr).await);
        let (id, stop) = (id.clone(), stop.clone());
        flood.spawn(async move {
            let mut tally = Tally::default();
            while !stop.is_cancelled() {
                let answer = if i % 2 == 0 {
                    c.list_turns(pb::ListTurnsRequest {
                        session_id: id.clone(),
                        after_seq: 0,
                        before_seq: 0,
                        limit: 1000,
                    })
                    .await
                    .map(|_| ())
                } else {
                    c.get_session(pb::GetSessionRequest {
                        session_id: id.clone(),
                    })
                    .await
                    .map(|_| ())
                };
                match answer {
                    Ok(()) => tally.ok += 1,
                    Err(s) if is_retryable(s.code()) => tally.unavailable += 1,
                    Err(s) => tally.other.push(s),
                }
            }
            tally
        });
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.cancel();
    let mut total = Tally::default();
    while let Some(t) = flood.join_next().await {
        let t = t.unwrap();
        total.ok += t.ok;
        total.unavailable += t.unavailable;
        total.other.extend(t.other);
    }
    let calls_during = fake.request_count() - calls_before;
    let retries = logs.text().matches("store write did not land").count();
    eprintln!(
        "flood: {} ok, {} unavailable, {} other; {calls_during} model calls during it; \
         {retries} burst writes retried",
        total.ok,
        total.unavailable,
        total.other.len(),
    );
    assert!(total.ok + total.unavailable > 0, "the flood made no call");
    assert!(
        total.other.is_empty(),
        "reads of an exhausted pool answered other than OK/UNAVAILABLE: {:?}",
        &total.other[..total.other.len().min(5)]
    );
    // The flood met the burst: it either wrote on (and called the model
    // again) or had a write wait for the pool and retry.
    assert!(
        calls_during > 0 || retries > 0,
        "the burst neither progressed nor retried during the flood: it did not overlap it"
    );
    assert_ended_well(&fake, &mut client, &id, "p", ROUNDS).await;
    app.stop().await.unwrap();
    drop(logs);
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

/// Reads the stream for `window`: it must stay open all that time.
async fn stays_open(
    stream: &mut tonic::Streaming<pb::WatchEvent>,
    window: Duration,
    what: &str,
) -> Vec<pb::watch_event::Event> {
    let until = Instant::now() + window;
    let mut events = Vec::new();
    loop {
        match tokio::time::timeout_at(until, stream.message()).await {
            Err(_) => return events,
            Ok(Ok(Some(e))) => events.extend(e.event),
            Ok(Ok(None)) => panic!("the watch ended OK {what}"),
            Ok(Err(status)) => panic!("the watch ended with {status:?} {what}"),
        }
    }
}

#[tokio::test]
async fn a_stale_bursts_close_does_not_end_its_successors_watchers() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session_text = new_session(&mut client).await;
    let id = SessionId::parse(&session_text).unwrap();
    let a = Driver::claim(&app, &session_text).await;
    a.say("from the first worker").await;
    // A stops renewing; its lease runs out and the session is claimed again.
    expire(&app.db_url, id).await;
    let lease_b = app
        .store
        .claim_orphan(id)
        .await
        .unwrap()
        .expect("an orphan to claim");
    assert_eq!(lease_b.epoch(), a.burst.lease().epoch() + 1);
    let (b, _cancel_b) = app.turn_log.adopt(lease_b);

    let mut stream = watch(&mut client, &session_text, 0).await.unwrap();
    let drained = stays_open(&mut stream, Duration::from_millis(300), "before any close").await;
    assert_eq!(turn_seqs(&drained), [1, 2]);
    // B announces a tool call it is running.
    let call = b
        .append(NewTurn::Assistant {
            text: String::new(),
            tool_calls: vec![inquest_core::ToolCall {
                id: "b-1".into(),
                name: "grep".into(),
                arguments: ToolArguments::from_model("{}"),
            }],
            usage: TokenUsage::default(),
        })
        .await
        .unwrap();
    b.live()
        .publish_tool_call_start(inquest_broadcast::ToolCallStart {
            session_id: id,
            assistant_seq: call.seq,
            call_id: "b-1".into(),
            tool_name: "grep".into(),
            started_at: time::OffsetDateTime::now_utc(),
        });

    // A's late close is refused, and ends nothing of B's.
    let closed = a.burst.close(ExitReason::AwaitingUser).await.unwrap();
    assert!(
        matches!(closed, Transition::Unchanged(ref row) if row.status == SessionStatus::Running),
        "{closed:?}"
    );
    assert!(
        !app.broadcaster().is_latched(id),
        "the stale close latched the session"
    );
    assert_eq!(
        app.turn_log
            .live()
            .running_calls(id)
            .iter()
            .map(|c| c.call_id.as_str())
            .collect::<Vec<_>>(),
        ["b-1"],
        "the stale close forgot the successor's running call"
    );
    let live = stays_open(
        &mut stream,
        Duration::from_millis(500),
        "after the stale burst's refused close, while its successor runs",
    )
    .await;
    assert_eq!(turn_seqs(&live), [3]);

    // B writes on, then closes: now the watch ends OK.
    b.append(NewTurn::Tool {
        call_id: "b-1".into(),
        tool_name: "grep".into(),
        content: "ok".into(),
        is_error: false,
    })
    .await
    .unwrap();
    b.append(NewTurn::Assistant {
        text: "recovered".into(),
        tool_calls: Vec::new(),
        usage: TokenUsage::default(),
    })
    .await
    .unwrap();
    let closed = b.close(ExitReason::AwaitingUser).await.unwrap();
    assert!(matches!(closed, Transition::Changed(_)), "{closed:?}");
    let (rest, ending) = collect(stream).await;
    ending.unwrap();
    assert_eq!(turn_seqs(&rest), [4, 5]);
    let s = session(&mut client, &session_text).await;
    assert_eq!(s.status(), pb::SessionStatus::Idle, "{s:?}");
    assert_eq!(s.lease_epoch, b.lease().epoch(), "{s:?}");
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_write_whose_outcome_is_unknown_answers_deadline_exceeded() {
    let logs = LogDump::install();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let app = app_with_fake(&fake, |c| {
        c.store.turn_write_timeout = Duration::from_millis(300);
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    finished(&mut client, &id, 1).await;
    let sid = SessionId::parse(&id).unwrap();
    let request = || pb::SendMessageRequest {
        session_id: id.clone(),
        message: "and the deploy?".into(),
        idempotency_key: "k-unknown".into(),
        if_running: 0,
    };

    let lock = RowLock::take(&app.db_url, sid).await;
    let unknown = client.send_message(request()).await.unwrap_err();
    assert_eq!(unknown.code(), Code::DeadlineExceeded, "{unknown:?}");
    assert!(
        unknown.message().contains("may have committed")
            && unknown.message().contains("idempotency key"),
        "{}",
        unknown.message()
    );
    crate::error_details::assert_reason(
        &unknown,
        Code::DeadlineExceeded,
        inquest_server::reason::Reason::WriteOutcomeUnknown,
        &[],
    );
    lock.release().await;

    let retried = client.send_message(request()).await.unwrap().into_inner();
    let again = client.send_message(request()).await.unwrap().into_inner();
    assert_eq!(retried.seq, again.seq);
    assert_eq!(retried.seq, 3);
    finished(&mut client, &id, 2).await;
    let stored = all_turns(&mut client, &id).await;
    assert_gapless(&stored);
    let copies: Vec<i64> = stored
        .iter()
        .filter(|t| t.role() == pb::TurnRole::User && t.content == "and the deploy?")
        .map(|t| t.seq)
        .collect();
    assert_eq!(copies, [retried.seq], "the follow-up is stored once");
    app.stop().await.unwrap();
    drop(logs);
}

/// A watcher on another replica that attaches after the writer announced
/// a tool call (so its replica never heard the announcement) is still
/// told the call is running: the first unanswered call of the latest
/// assistant turn it drained. Found by the suite's cross-replica watch
/// test, which missed `s1`'s start about once in twenty runs.
#[tokio::test]
async fn a_late_watcher_on_another_replica_is_told_the_running_call() {
    let app = spawn_app_with(|c| c.replica_id = Some("replica-a".into())).await;
    let b = Replica::beside(&app, "replica-b").await;
    let mut on_a = app.client().await;
    let mut on_b = b.client().await;
    let session = new_session(&mut on_a).await;
    let driver = Driver::claim(&app, &session).await;
    let call = driver.call("c1", "slow_tool").await;
    driver.start(call.seq, "c1", "slow_tool");
    // B attaches only now: the start went out before B watched.
    let mut stream = watch(&mut on_b, &session, 0).await.expect("watch on B");
    // Before the call answers: the stored turns, then the running call.
    let mut shape = Vec::new();
    for _ in 0..3 {
        match inquest_tests::watching::next(&mut stream).await {
            Ok(Some(pb::watch_event::Event::Turn(t))) => shape.push(format!("turn {}", t.seq)),
            Ok(Some(pb::watch_event::Event::ToolCallStart(s))) => {
                shape.push(format!("start {}", s.call_id))
            }
            other => panic!("B's stream: {other:?} after {shape:?}"),
        }
    }
    assert_eq!(shape, ["turn 1", "turn 2", "start c1"]);
    // B registered as a watcher before its handler returned, so it hears
    // the result from A, then the end.
    driver.result("c1", "slow_tool", "done").await;
    driver.finish().await;
    let (events, ending) = collect(stream).await;
    ending.expect("B's stream ends OK once the burst closed");
    assert_eq!(turn_seqs(&events), [3], "{events:?}");
    b.stop().await.unwrap();
    app.stop().await.unwrap();
}
