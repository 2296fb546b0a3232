//! Streamed model text through the real API: the providers stream (SSE,
//! both flavours, from the fakes), the loop hands the text to the server,
//! and watchers get `TextDelta` events before the committed turn.
//!
//! What every test checks of a stream ([`check_text`]): the deltas of a
//! turn all arrive before the turn; within an attempt their offsets run
//! on from 0 with no gap and no overlap; and the deltas of the last
//! attempt join to exactly the committed turn's text.

use std::{collections::BTreeMap, time::Duration};

use inquest_proto::v1::{self as pb, watch_event::Event};
use inquest_testkit::fake::{Break, FakeProvider, FakeReply, Flavor};
use inquest_tests::{
    spawn_app_with,
    watching::{collect, next, watch},
};

use crate::agent_support::{
    Gate, eventually, evidence_tools, finished, provider, provider_at, start, turns,
};

const ASK: &str = "why is checkout slow?";
const FIRST: &str = "Looking at the log first: the p99 of checkout → 2.5 s since 14:06.";
const FINAL: &str = "Found it: the pool «db-main» is exhausted; raise max_connections.";

/// Per committed assistant turn (by seq): the attempts whose text was
/// streamed, in order. Panics where the stream breaks a rule (module docs).
fn check_text(events: &[Event]) -> BTreeMap<i64, Vec<u32>> {
    // (seq) -> (attempt -> text so far), attempts in arrival order.
    let mut streamed: BTreeMap<i64, Vec<(u32, String)>> = BTreeMap::new();
    let mut committed = BTreeMap::new();
    for event in events {
        match event {
            Event::TextDelta(d) => {
                assert!(
                    !committed.contains_key(&d.turn_seq),
                    "a delta for turn {} after the turn: {d:?}",
                    d.turn_seq
                );
                let attempts = streamed.entry(d.turn_seq).or_default();
                match attempts.last_mut() {
                    Some((attempt, text)) if *attempt == d.attempt => {
                        assert_eq!(d.offset, text.len() as u64, "a gap or overlap: {d:?}");
                        text.push_str(&d.text);
                    }
                    last => {
                        if let Some((attempt, _)) = last {
                            assert!(d.attempt > *attempt, "attempts go up: {d:?}");
                        }
                        assert_eq!(d.offset, 0, "an attempt starts at offset 0: {d:?}");
                        attempts.push((d.attempt, d.text.clone()));
                    }
                }
            }
            Event::Turn(t) if t.role() == pb::TurnRole::Assistant => {
                committed.insert(t.seq, t.content.clone());
            }
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    for (seq, attempts) in streamed {
        let text = committed
            .get(&seq)
            .unwrap_or_else(|| panic!("deltas for turn {seq}, which never came"));
        let (_, last) = attempts.last().expect("at least one attempt");
        assert_eq!(
            last, text,
            "the last attempt's deltas join to turn {seq}'s text"
        );
        out.insert(seq, attempts.iter().map(|(a, _)| *a).collect());
    }
    out
}

/// Starts a session whose providers are `entries`, attaches a watcher
/// while the first model call's answer is held by `gate`, then lets it
/// through; returns every event of the burst and the session id.
async fn watched_burst(
    entries: Vec<inquest_agent::ProviderConfig>,
    gate: &Gate,
    first_fake: &FakeProvider,
) -> (Vec<Event>, Vec<pb::SessionTurn>, inquest_tests::TestApp) {
    let app = spawn_app_with(|c| {
        c.providers = entries;
        evidence_tools(c);
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    let mut stream = watch(&mut client, &id, 0).await.unwrap();
    let first = next(&mut stream).await.unwrap();
    assert!(matches!(&first, Some(Event::Turn(t)) if t.seq == 1));
    eventually("the first model call", || first_fake.request_count() >= 1).await;
    gate.open();
    let (mut events, ending) = collect(stream).await;
    ending.expect("the stream ends cleanly with the burst");
    events.insert(0, first.unwrap());
    let _ = finished(&mut client, &id, 1).await;
    let stored = turns(&mut client, &id).await;
    (events, stored, app)
}

#[tokio::test]
async fn deltas_arrive_in_order_before_each_turn_and_join_to_its_text_for_both_providers() {
    for (flavor, delay) in [
        (Flavor::Anthropic, Duration::ZERO),
        (Flavor::OpenAi, Duration::from_millis(2)),
        (Flavor::Anthropic, Duration::from_millis(7)),
        (Flavor::OpenAi, Duration::ZERO),
    ] {
        let fake = FakeProvider::start(flavor).await.unwrap();
        fake.set_streaming(delay, 5);
        fake.reply(FakeReply::text(FIRST).call("c1", "list_files", "{}"))
            .reply(FakeReply::text(FINAL))
            .reply(FakeReply::text("summary"));
        let gate = Gate::in_front_of(&fake).await;
        let entry = provider_at(flavor, "streamed", gate.base_url(&fake));
        let (events, stored, app) = watched_burst(vec![entry], &gate, &fake).await;

        let attempts = check_text(&events);
        assert_eq!(
            attempts,
            BTreeMap::from([(2, vec![1]), (4, vec![1])]),
            "{flavor:?}: both assistant turns streamed, in one attempt each"
        );
        let deltas = events
            .iter()
            .filter(|e| matches!(e, Event::TextDelta(_)))
            .count();
        // Pieces queued behind each other are merged for a watcher that
        // is behind (`Watcher::merge_queued`), so without a delay between
        // chunks the text may come in as few as one delta per turn.
        let pieces = if delay.is_zero() { 2 } else { 4 };
        assert!(
            deltas >= pieces,
            "{flavor:?}: the text came in pieces ({deltas})"
        );
        assert_eq!(stored[1].content, FIRST);
        assert_eq!(stored[3].content, FINAL);
        // The deltas were not stored: only the turns are.
        assert_eq!(stored.len(), 4);
        app.stop().await.unwrap();
    }
}

#[tokio::test]
async fn a_watcher_joining_mid_turn_gets_the_text_so_far_then_the_rest() {
    for flavor in [Flavor::OpenAi, Flavor::Anthropic] {
        let fake = FakeProvider::start(flavor).await.unwrap();
        // 120 pieces, 25 ms apart: the watcher joins while they stream.
        let long: String = (0..60).map(|i| format!("w{i:02} ")).collect::<String>() + "end.";
        fake.set_streaming(Duration::from_millis(25), 2);
        fake.reply(FakeReply::text(&long))
            .reply(FakeReply::text("summary"));
        let app = spawn_app_with(|c| {
            c.providers = vec![provider(&fake, flavor, "slow")];
            evidence_tools(c);
        })
        .await;
        let mut client = app.client().await;
        let id = start(&mut client, ASK).await;
        eventually("part of the answer streamed", || fake.chunks().len() >= 12).await;
        let stream = watch(&mut client, &id, 0).await.unwrap();
        let (events, ending) = collect(stream).await;
        ending.expect("clean end");
        assert!(
            fake.chunks().len() >= 12,
            "{flavor:?}: the answer was still streaming"
        );
        let deltas: Vec<&pb::TextDelta> = events
            .iter()
            .filter_map(|e| match e {
                Event::TextDelta(d) => Some(d),
                _ => None,
            })
            .collect();
        let first = deltas.first().expect("a delta with the text so far");
        assert_eq!(first.offset, 0);
        assert!(
            first.text.len() >= 12,
            "{flavor:?}: the first delta holds the text so far: {first:?}"
        );
        assert!(deltas.len() >= 2, "{flavor:?}: the rest streamed after it");
        // The user turn, then the text so far, then the rest, then the turn.
        assert!(matches!(&events[0], Event::Turn(t) if t.seq == 1));
        assert!(matches!(&events[1], Event::TextDelta(d) if d.offset == 0));
        assert_eq!(check_text(&events), BTreeMap::from([(2, vec![1])]));
        let stored = turns(&mut client, &id).await;
        assert_eq!(stored[1].content, long);
        app.stop().await.unwrap();
    }
}

#[tokio::test]
async fn a_stream_broken_mid_answer_is_retried_and_only_the_whole_answer_is_stored() {
    for (flavor, how) in [
        (Flavor::Anthropic, Break::Close),
        (Flavor::OpenAi, Break::Error),
        (Flavor::OpenAi, Break::Close),
        (Flavor::Anthropic, Break::Error),
    ] {
        let fake = FakeProvider::start(flavor).await.unwrap();
        fake.set_streaming(Duration::from_millis(1), 4);
        fake.broken(
            FakeReply::text("Half an answer that must never be stored as if whole."),
            5,
            how,
        )
        .reply(FakeReply::text(FINAL))
        .reply(FakeReply::text("summary"));
        let gate = Gate::in_front_of(&fake).await;
        let mut entry = provider_at(flavor, "flaky", gate.base_url(&fake));
        entry.max_retries = Some(1);
        let (events, stored, app) = watched_burst(vec![entry], &gate, &fake).await;

        assert_eq!(
            check_text(&events),
            BTreeMap::from([(2, vec![1, 2])]),
            "{flavor:?} {how:?}: the broken attempt streamed, the retry restarted the text"
        );
        let broken: String = events
            .iter()
            .filter_map(|e| match e {
                Event::TextDelta(d) if d.attempt == 1 => Some(d.text.as_str()),
                _ => None,
            })
            .collect();
        assert!(broken.starts_with("Half "), "{broken:?}");
        assert_eq!(stored.len(), 2, "{flavor:?} {how:?}: one assistant turn");
        assert_eq!(stored[1].content, FINAL);
        assert!(stored.iter().all(|t| !t.content.contains("Half an answer")));
        assert_eq!(fake.request_count(), 3, "two attempts and the report");
        app.stop().await.unwrap();
    }
}

#[tokio::test]
async fn a_stream_broken_on_every_attempt_fails_over_to_the_next_provider() {
    let first = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let second = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    first.set_streaming(Duration::ZERO, 6);
    first
        .broken(
            FakeReply::text("First try, cut short here."),
            2,
            Break::Close,
        )
        .broken(
            FakeReply::text("Second try, overloaded now."),
            3,
            Break::Error,
        );
    second
        .reply(FakeReply::text(FINAL))
        .reply(FakeReply::text("summary"));
    let gate = Gate::in_front_of(&first).await;
    let mut flaky = provider_at(Flavor::Anthropic, "flaky", gate.base_url(&first));
    flaky.max_retries = Some(1);
    let steady = provider(&second, Flavor::OpenAi, "steady");
    let (events, stored, app) = watched_burst(vec![flaky, steady], &gate, &first).await;

    assert_eq!(
        check_text(&events),
        BTreeMap::from([(2, vec![1, 2, 3])]),
        "two broken attempts on the first provider, the answer from the second"
    );
    assert_eq!(first.request_count(), 2);
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[1].content, FINAL);
    app.stop().await.unwrap();
}

/// A watcher that reads nothing while a long answer streams: the burst
/// finishes regardless, deltas past what its queue may hold are dropped
/// (never lagging it), and once it reads it gets the text up to the first
/// gap and then the committed turn, with no `Lagged`.
#[tokio::test]
async fn a_watcher_that_reads_nothing_never_slows_the_burst_and_still_gets_the_turn() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    // 5,000 words of 4 bytes, one a piece, as fast as it goes: far more
    // deltas than the watcher's small queue (8 events), its outbox and its
    // 1 KiB HTTP/2 window hold.
    let long: String = (0..5_000).map(|i| format!("{:03} ", i % 1000)).collect();
    fake.set_streaming(Duration::ZERO, 4);
    fake.reply(FakeReply::text(&long))
        .reply(FakeReply::text("summary"));
    let gate = Gate::in_front_of(&fake).await;
    let app = spawn_app_with(|c| {
        c.providers = vec![provider_at(Flavor::OpenAi, "fast", gate.base_url(&fake))];
        c.watch.channel_capacity = 8;
        evidence_tools(c);
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    let channel = tonic::transport::Channel::from_shared(app.endpoint())
        .unwrap()
        .initial_stream_window_size(1024)
        .initial_connection_window_size(1024)
        .connect()
        .await
        .unwrap();
    let mut slow_client = pb::investigations_client::InvestigationsClient::new(channel);
    let mut slow = watch(&mut slow_client, &id, 0).await.unwrap();
    let first = next(&mut slow).await.unwrap();
    assert!(matches!(&first, Some(Event::Turn(t)) if t.seq == 1));
    eventually("the model call", || fake.request_count() >= 1).await;
    gate.open();

    // The burst ends while the watcher has read nothing more.
    let (report, _) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    assert!(
        app.broadcaster().dropped_text_deltas() > 0,
        "deltas were dropped for the watcher that did not read"
    );

    let (mut events, ending) = collect(slow).await;
    ending.expect("the slow watcher's stream ends cleanly, not lagged");
    events.insert(0, first.unwrap());
    assert!(events.iter().all(|e| !matches!(e, Event::Lagged(_))));
    let last = events.last().expect("events");
    assert!(
        matches!(last, Event::Turn(t) if t.seq == 2 && t.content == long),
        "the committed turn arrives last, whole"
    );
    // What text it got runs on from 0 with no overlap, and stops at a gap.
    let mut shown = 0u64;
    for e in &events {
        if let Event::TextDelta(d) = e {
            assert_eq!(d.offset, shown, "contiguous up to the first gap");
            shown += d.text.len() as u64;
        }
    }
    assert!(shown > 0, "some text streamed before the gap");
    assert!(
        shown < long.len() as u64,
        "the rest was dropped, not queued"
    );
    app.stop().await.unwrap();
}
