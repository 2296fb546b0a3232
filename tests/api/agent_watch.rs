//! A watcher of a session the real loop works: the example investigation
//! (script provider, built-in file tools over its evidence).

use inquest_agent::{ProviderConfig, ProviderKind};
use inquest_proto::v1::{self as pb, watch_event::Event};
use inquest_testkit::fake::{FakeProvider, Flavor};
use inquest_tests::{
    spawn_app_with,
    watching::{collect, next, watch},
};

use crate::agent_support::{
    Gate, eventually, evidence_tools, example_dir, finished, provider_at, start, turns,
};

/// Every tool result the loop produces is announced first: the watcher
/// sees its `ToolCallStart` (with the requesting turn's seq) before the
/// result turn.
///
/// The watcher must be attached before the burst gets going, or early
/// starts would be (rightly) gone by the time it attaches. So the chain's
/// first provider is a fake whose answer, a 500, is held back by a gate
/// until the watcher has caught up; then the burst fails over to the
/// script provider, which runs the whole investigation.
#[tokio::test]
async fn a_watcher_sees_each_tool_start_before_its_result_from_the_real_loop() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.fail(1, 500);
    let gate = Gate::in_front_of(&fake).await;
    let held = provider_at(Flavor::OpenAi, "held", gate.base_url(&fake));
    let mut script = ProviderConfig::new(ProviderKind::Script);
    script.name = Some("demo-script".into());
    script.script = Some(example_dir().join("script.json"));
    let app = spawn_app_with(|c| {
        c.providers = vec![held, script];
        evidence_tools(c);
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, "checkout p99 is 2.5s since 14:06").await;

    let mut stream = watch(&mut client, &id, 0).await.unwrap();
    let first = next(&mut stream).await.unwrap();
    assert!(matches!(&first, Some(Event::Turn(t)) if t.seq == 1));
    eventually("the first model call", || fake.request_count() == 1).await;
    gate.open();
    let (mut events, ending) = collect(stream).await;
    ending.expect("the stream ends cleanly with the burst");
    events.insert(0, first.unwrap());

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    assert_eq!(s.status(), pb::SessionStatus::Completed);
    assert_eq!(report.servers_used, ["evidence"]);

    // Every stored turn was delivered, once, in order.
    let stored = turns(&mut client, &id).await;
    let delivered: Vec<&pb::SessionTurn> = events
        .iter()
        .filter_map(|e| match e {
            Event::Turn(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(delivered.len(), stored.len());
    for (got, want) in delivered.iter().zip(&stored) {
        assert_eq!(*got, want);
    }

    let results: Vec<&pb::SessionTurn> = stored
        .iter()
        .filter(|t| t.role() == pb::TurnRole::Tool)
        .collect();
    assert_eq!(results.len() as i64, report.tool_calls);
    assert!(results.len() >= 3, "the example calls several tools");
    let starts = events
        .iter()
        .filter(|e| matches!(e, Event::ToolCallStart(_)))
        .count();
    assert_eq!(starts, results.len(), "one start per call");
    for result in results {
        let at = |f: &dyn Fn(&Event) -> bool| events.iter().position(f);
        let start_at =
            at(&|e| matches!(e, Event::ToolCallStart(s) if s.call_id == result.tool_call_id))
                .unwrap_or_else(|| panic!("no start for {}", result.tool_call_id));
        let result_at = at(&|e| matches!(e, Event::Turn(t) if t.seq == result.seq)).unwrap();
        assert!(
            start_at < result_at,
            "start of {} after its result",
            result.tool_call_id
        );
        // The start names the assistant turn that requested the call.
        let Event::ToolCallStart(start) = &events[start_at] else {
            unreachable!()
        };
        assert_eq!(start.tool_name, result.tool_name);
        let requester = stored
            .iter()
            .find(|t| t.seq == start.assistant_seq)
            .expect("the requesting turn is stored");
        assert!(
            requester
                .tool_calls
                .iter()
                .any(|c| c.id == result.tool_call_id),
            "turn {} did not request {}",
            start.assistant_seq,
            result.tool_call_id
        );
    }
    app.stop().await.unwrap();
}
