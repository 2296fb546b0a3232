//! Prompt caching and cost through the real API: cached-token counts and
//! cost per turn, per burst in the report and per session in GetSession,
//! over a start and a follow-up; unknown (never 0) without a price; the
//! price of the provider that answered; Anthropic cache breakpoints as the
//! fake (checking them as the real API does) accepted them; OpenAI's
//! `cached_tokens` read.

use inquest_core::{Cost, Price, TokenUsage};
use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use inquest_tests::spawn_app_with;

use crate::agent_support::{
    Client, evidence_tools, finished, provider, send, session, start, turns,
};

const ASK: &str = "why is checkout slow?";

const PRICE: Price = Price {
    input_per_mtok: 3.0,
    output_per_mtok: 15.0,
    cached_input_per_mtok: Some(0.3),
    cache_write_per_mtok: Some(3.75),
};

/// A scripted usage: (input, output, cache read, cache write).
type Usage = (u64, u64, u64, u64);

fn reply(text: &str, (input, output, read, write): Usage) -> FakeReply {
    FakeReply::text(text)
        .usage(input, output)
        .cached(read, write)
}

fn cost_of(price: &Price, (input, output, read, write): Usage) -> Cost {
    price.cost(&TokenUsage {
        cache_read_input_tokens: read,
        cache_creation_input_tokens: write,
        ..TokenUsage::new(input, output)
    })
}

fn sum(price: &Price, usages: &[Usage]) -> Cost {
    usages
        .iter()
        .fold(Cost::ZERO, |c, u| c.saturating_add(cost_of(price, *u)))
}

fn assistant_turns(all: &[pb::SessionTurn]) -> Vec<&pb::SessionTurn> {
    all.iter()
        .filter(|t| t.role() == pb::TurnRole::Assistant)
        .collect()
}

/// A priced app over a fake of `flavor`, two bursts through it: a start
/// whose loop asks for one tool call (`first[0]`), answers (`first[1]`)
/// and writes its report (`first[2]`), then a follow-up that answers
/// (`second[0]`) and writes its report (`second[1]`).
struct TwoBursts {
    fake: FakeProvider,
    client: Client,
    id: String,
    report1: pb::Report,
    report2: pb::Report,
    session: pb::Session,
    _app: inquest_tests::TestApp,
}

async fn two_bursts(
    flavor: Flavor,
    name: &str,
    first: [Usage; 3],
    second: [Usage; 2],
) -> TwoBursts {
    let fake = FakeProvider::start(flavor).await.unwrap();
    fake.reply(reply("Listing.", first[0]).call("c1", "list_files", "{}"))
        .reply(reply("Pool exhaustion.", first[1]))
        .reply(reply("S1", first[2]));
    let mut entry = provider(&fake, flavor, name);
    entry.price = Some(PRICE);
    let app = spawn_app_with(|config| {
        config.providers = vec![entry];
        evidence_tools(config);
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    let (report1, _) = finished(&mut client, &id, 1).await;
    assert_eq!(report1.exit_reason, "completed", "{flavor:?}: {report1:?}");

    fake.reply(reply("Nothing else.", second[0]))
        .reply(reply("S2", second[1]));
    send(&mut client, &id, "anything else?").await;
    let (report2, session) = finished(&mut client, &id, 2).await;
    assert_eq!(
        report2.exit_reason, "awaiting_user",
        "{flavor:?}: {report2:?}"
    );
    TwoBursts {
        fake,
        client,
        id,
        report1,
        report2,
        session,
        _app: app,
    }
}

#[tokio::test]
async fn cost_and_cached_tokens_add_up_over_two_bursts_in_turns_reports_and_the_session() {
    let (a, b, author1): (Usage, Usage, Usage) = (
        (1000, 50, 600, 300),
        (1500, 40, 900, 500),
        (2000, 100, 0, 1200),
    );
    let (c, author2): (Usage, Usage) = ((2600, 60, 2000, 400), (3000, 80, 2500, 0));
    let TwoBursts {
        fake,
        mut client,
        id,
        report1,
        report2,
        session: s,
        _app,
    } = two_bursts(Flavor::Anthropic, "claude", [a, b, author1], [c, author2]).await;

    // Per turn: the counts as the provider reported them (input counts
    // the whole prompt), the cost at the answering provider's price.
    let all = turns(&mut client, &id).await;
    let assistants = assistant_turns(&all);
    assert_eq!(assistants.len(), 3);
    for (turn, usage) in assistants.iter().zip([a, b, c]) {
        let (input, output, read, write) = usage;
        assert_eq!(
            (
                turn.input_tokens,
                turn.output_tokens,
                turn.cache_read_input_tokens,
                turn.cache_creation_input_tokens
            ),
            (input as i64, output as i64, read as i64, write as i64),
            "turn {}",
            turn.seq
        );
        assert_eq!(turn.cost_usd, Some(cost_of(&PRICE, usage).usd()));
    }
    for other in all.iter().filter(|t| t.role() != pb::TurnRole::Assistant) {
        assert_eq!(
            other.cost_usd, None,
            "turn {} made no model call",
            other.seq
        );
    }

    // Per burst: its turns and its author call.
    for (report, calls) in [
        (&report1, vec![a, b, author1]),
        (&report2, vec![c, author2]),
    ] {
        assert_eq!(report.cost_usd, sum(&PRICE, &calls).usd(), "{report:?}");
        assert!(report.cost_complete);
        assert_eq!(report.cost_unknown_calls, 0);
        assert_eq!(report.burst_model_calls, calls.len() as i64);
        let total = |pick: fn(&Usage) -> u64| calls.iter().map(pick).sum::<u64>() as i64;
        assert_eq!(report.burst_input_tokens, total(|u| u.0));
        assert_eq!(report.burst_output_tokens, total(|u| u.1));
        assert_eq!(report.burst_cache_read_input_tokens, total(|u| u.2));
        assert_eq!(report.burst_cache_creation_input_tokens, total(|u| u.3));
    }

    // Per session: the sum over its turns (author calls are in their
    // reports only, like input_tokens).
    let turn_cost = assistants.iter().map(|t| t.cost_usd.unwrap()).sum::<f64>();
    assert_eq!(s.cost_usd, sum(&PRICE, &[a, b, c]).usd());
    assert!((s.cost_usd - turn_cost).abs() < 1e-12);
    let authors = sum(&PRICE, &[author1, author2]).usd();
    assert!((report1.cost_usd + report2.cost_usd - authors - s.cost_usd).abs() < 1e-12);
    assert!(s.cost_complete);
    assert_eq!(s.cost_unknown_turns, 0);
    assert_eq!(s.cache_read_input_tokens, (600 + 900 + 2000) as i64);
    assert_eq!(s.cache_creation_input_tokens, (300 + 500 + 400) as i64);
    assert_eq!(s.input_tokens, (1000 + 1500 + 2600) as i64);
    // GetSession reads the same as the session the report's poll saw.
    assert_eq!(session(&mut client, &id).await.cost_usd, s.cost_usd);

    // Every request carried its cache breakpoints, and the fake, which
    // checks them as the real API does, answered every one.
    let requests = fake.requests();
    assert_eq!(requests.len(), 5);
    for (i, r) in requests.iter().enumerate() {
        assert!(r.usage.is_some(), "request {i} was refused: {:?}", r.body);
        let messages = r.body["messages"].as_array().unwrap();
        let last = messages.len() - 1;
        let last_block = messages[last]["content"].as_array().unwrap().len() - 1;
        let newest = format!("messages.{last}.content.{last_block}");
        let author = r.body.get("tools").is_none();
        let mut expected = Vec::new();
        if !author {
            let tools = r.body["tools"].as_array().unwrap().len();
            expected.push(format!("tools.{}", tools - 1));
        }
        expected.extend(["system.0".to_owned(), newest]);
        assert_eq!(r.cache_breakpoints, expected, "request {i}");
        assert_eq!(r.body["system"][0]["cache_control"]["type"], "ephemeral");
    }
    // The follow-up's request, rebuilt from PostgreSQL, repeats the first
    // burst's last loop request byte for byte before its new turns.
    let (before, resumed) = (&requests[1].prompt, &requests[3].prompt);
    assert_eq!(resumed.shared_prefix(before), before.text.len());
}

#[tokio::test]
async fn a_model_without_a_price_reports_unknown_cost_not_zero_and_openai_cached_tokens_are_read() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(reply("Listing.", (1500, 30, 1024, 0)).call("c1", "list_files", "{}"))
        .reply(reply("Done.", (1800, 20, 1408, 0)))
        .reply(reply("S1", (2000, 90, 0, 0)));
    let entry = provider(&fake, Flavor::OpenAi, "unpriced");
    assert!(entry.price.is_none());
    let app = spawn_app_with(|config| {
        config.providers = vec![entry];
        evidence_tools(config);
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    // The wire carried `prompt_tokens_details.cached_tokens`.
    assert_eq!(
        fake.requests()[0].usage.map(|u| u.cache_read_input_tokens),
        Some(1024)
    );

    let all = turns(&mut client, &id).await;
    let assistants = assistant_turns(&all);
    assert_eq!(
        assistants
            .iter()
            .map(|t| (t.cache_read_input_tokens, t.cost_usd))
            .collect::<Vec<_>>(),
        [(1024, None), (1408, None)]
    );
    assert!(!report.cost_complete);
    assert_eq!(
        report.cost_unknown_calls, 3,
        "two turns and the author call"
    );
    assert_eq!(report.cost_usd, 0.0, "no known part");
    assert_eq!(report.burst_cache_read_input_tokens, 1024 + 1408);
    assert!(!s.cost_complete);
    assert_eq!(s.cost_unknown_turns, 2);
    assert_eq!(s.cache_read_input_tokens, 1024 + 1408);
    assert_eq!(s.cache_creation_input_tokens, 0);
}

#[tokio::test]
async fn a_turn_is_priced_at_the_provider_that_answered_it() {
    let down = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let up = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    down.fail(1, 500);
    let usage: Usage = (1000, 100, 0, 0);
    up.reply(reply("Answered by the second.", usage))
        .reply(reply("S1", usage));
    let mut first = provider(&down, Flavor::OpenAi, "expensive");
    first.price = Some(Price {
        input_per_mtok: 100.0,
        output_per_mtok: 100.0,
        cached_input_per_mtok: None,
        cache_write_per_mtok: None,
    });
    let cheap = Price {
        input_per_mtok: 0.5,
        output_per_mtok: 1.5,
        cached_input_per_mtok: None,
        cache_write_per_mtok: None,
    };
    let mut second = provider(&up, Flavor::OpenAi, "cheap");
    second.price = Some(cheap);
    let app = spawn_app_with(|config| {
        config.providers = vec![first, second];
        evidence_tools(config);
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    assert_eq!(down.request_count(), 1);
    let all = turns(&mut client, &id).await;
    let assistants = assistant_turns(&all);
    assert_eq!(assistants.len(), 1);
    assert_eq!(assistants[0].cost_usd, Some(cost_of(&cheap, usage).usd()));
    assert_eq!(s.cost_usd, cost_of(&cheap, usage).usd());
    assert_eq!(report.cost_usd, sum(&cheap, &[usage, usage]).usd());
}

/// A provider (or a proxy in front of one) that reports `u64::MAX` tokens
/// must not make its turns unstorable: every count is clamped to
/// `MAX_TOKENS_PER_CALL`, the session's and the tenant's sums stay inside
/// a bigint, and the session finishes and reopens as any other.
#[tokio::test]
async fn absurd_token_counts_from_a_provider_are_clamped_and_the_session_goes_on() {
    const MAX: i64 = inquest_core::MAX_TOKENS_PER_CALL as i64;
    for flavor in [Flavor::Anthropic, Flavor::OpenAi] {
        let huge: Usage = (u64::MAX, u64::MAX, u64::MAX, u64::MAX);
        let TwoBursts {
            mut client,
            id,
            report2,
            session: s,
            // Held to the end: the app (and its database) serves the reads.
            _app,
            ..
        } = two_bursts(flavor, "hostile", [huge; 3], [huge; 2]).await;

        let all = turns(&mut client, &id).await;
        let assistants = assistant_turns(&all);
        assert_eq!(assistants.len(), 3, "{flavor:?}");
        for turn in &assistants {
            assert_eq!(
                (turn.input_tokens, turn.output_tokens),
                (MAX, MAX),
                "{flavor:?} turn {}",
                turn.seq
            );
            assert!(turn.cache_read_input_tokens <= MAX, "{flavor:?}");
            assert!(turn.cost_usd.is_some_and(f64::is_finite), "{flavor:?}");
        }
        assert_eq!(
            (s.input_tokens, s.output_tokens),
            (3 * MAX, 3 * MAX),
            "{flavor:?}"
        );
        assert!(s.cost_complete, "{flavor:?}");
        assert_eq!(report2.burst_input_tokens, 2 * MAX, "{flavor:?}");
    }
}
