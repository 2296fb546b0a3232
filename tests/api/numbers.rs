//! Every token figure a client shows names one of two things, and they add
//! up: the session's (its stored model turns, every burst: `Session`, and
//! a report's `tool_calls` / `input_tokens` / `output_tokens` as of that
//! burst's end) and a burst's (its model turns plus its report-writing
//! call: a report's `burst_*`, with the writing call in `author_*`).

use inquest_proto::v1::{self as pb, watch_event::Event};
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};

use crate::agent_support::{app_with_fake, finished, send, start, turns};

#[tokio::test]
async fn session_figures_are_the_sum_of_burst_figures_everywhere() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    // Burst 1: a tool call, an answer, the report; burst 2: an answer
    // without tools, the report; burst 3: the same.
    fake.reply(
        FakeReply::text("Listing the evidence.")
            .call("c1", "list_files", "{}")
            .usage(100, 10),
    )
    .reply(FakeReply::text("The DB pool is exhausted.").usage(200, 20))
    .reply(FakeReply::text("R1").usage(50, 5))
    .reply(FakeReply::text("Roll back.").usage(300, 30))
    .reply(FakeReply::text("R2").usage(60, 6))
    .reply(FakeReply::text("Nothing else.").usage(400, 40))
    .reply(FakeReply::text("R3").usage(70, 7));
    let app = app_with_fake(&fake, |_| {}).await;
    let mut client = app.client().await;
    let id = start(&mut client, "why is checkout slow?").await;
    let mut reports = vec![finished(&mut client, &id, 1).await.0];
    for (burst, message) in [(2, "and then?"), (3, "anything else?")] {
        send(&mut client, &id, message).await;
        reports.push(finished(&mut client, &id, burst).await.0);
    }
    let s = crate::agent_support::session(&mut client, &id).await;

    // The session's figures are its stored turns'.
    let stored = turns(&mut client, &id).await;
    let turn_in: i64 = stored.iter().map(|t| t.input_tokens).sum();
    let turn_out: i64 = stored.iter().map(|t| t.output_tokens).sum();
    let turn_calls: usize = stored.iter().map(|t| t.tool_calls.len()).sum();
    assert_eq!((s.input_tokens, s.output_tokens), (turn_in, turn_out));
    assert_eq!((s.input_tokens, s.output_tokens), (1000, 100));
    assert_eq!(s.tool_calls, turn_calls as i64);

    // A watch from the start sees the same turns, hence the same figures.
    let mut stream = client
        .watch_session(pb::WatchSessionRequest {
            session_id: id.clone(),
            after_seq: 0,
            after_committed_at: None,
        })
        .await
        .unwrap()
        .into_inner();
    let (mut seen_in, mut seen_out) = (0, 0);
    while let Some(event) = stream.message().await.unwrap() {
        if let Some(Event::Turn(t)) = event.event {
            seen_in += t.input_tokens;
            seen_out += t.output_tokens;
        }
    }
    assert_eq!((seen_in, seen_out), (s.input_tokens, s.output_tokens));

    // Each report's session figures are the session's as of its burst.
    let latest = reports.last().unwrap();
    assert_eq!(
        (latest.tool_calls, latest.input_tokens, latest.output_tokens),
        (s.tool_calls, s.input_tokens, s.output_tokens)
    );
    assert_eq!(
        (reports[0].input_tokens, reports[0].output_tokens),
        (300, 30)
    );

    // The bursts add up to the session, report writing set apart.
    let sum = |f: fn(&pb::Report) -> i64| reports.iter().map(f).sum::<i64>();
    assert_eq!(
        sum(|r| r.burst_input_tokens - r.author_input_tokens),
        s.input_tokens
    );
    assert_eq!(
        sum(|r| r.burst_output_tokens - r.author_output_tokens),
        s.output_tokens
    );
    assert_eq!(sum(|r| r.burst_tool_calls), s.tool_calls);
    // Model calls: every assistant turn and one report-writing call each.
    let assistant = stored
        .iter()
        .filter(|t| t.role() == pb::TurnRole::Assistant)
        .count() as i64;
    assert_eq!(sum(|r| r.burst_model_calls), assistant + 3);
    // A burst that made no tool call says so.
    assert_eq!(
        reports
            .iter()
            .map(|r| r.burst_tool_calls)
            .collect::<Vec<_>>(),
        [1, 0, 0]
    );
    assert_eq!(
        reports
            .iter()
            .map(|r| (r.author_input_tokens, r.author_output_tokens))
            .collect::<Vec<_>>(),
        [(50, 5), (60, 6), (70, 7)]
    );
    app.stop().await.unwrap();
}
