//! A rolling restart of every replica while sessions run, with
//! real processes on one database: each SIGTERM hands the replica's bursts
//! over, and every session completes with a valid, gapless transcript and
//! a report.

mod support;

use std::{collections::HashSet, time::Duration};

use inquest_proto::v1 as pb;
use support::{
    Client, ReplicaConfig, all_turns, create_incident,
    fleet::{Fleet, python},
    get_session, settled, start_session,
};

/// Hang guard for polls: long, it only turns a hang into a failure.
const GUARD: Duration = Duration::from_secs(60);

/// Checks a stored transcript the way a provider would see it: seqs
/// exactly 1..=N; every tool result answers a call of an earlier assistant
/// turn, once; every call of an assistant turn is answered before the next
/// assistant turn, or else was cut off by a hand-over and is named in a
/// recovery notice's repaired calls in between (the rebuild gives it a
/// synthetic result). Returns how many calls a notice repaired.
fn check_transcript(id: &str, turns: &[pb::SessionTurn]) -> usize {
    let seqs: Vec<i64> = turns.iter().map(|t| t.seq).collect();
    let n = i64::try_from(turns.len()).unwrap();
    assert_eq!(seqs, (1..=n).collect::<Vec<_>>(), "{id}: seqs");
    // Calls of the last assistant turn not answered yet.
    let mut open: Vec<String> = Vec::new();
    let mut every_call = HashSet::new();
    let mut answered = HashSet::new();
    let mut repaired = 0;
    for t in turns {
        match t.role() {
            pb::TurnRole::Assistant => {
                assert!(
                    open.is_empty(),
                    "{id}: seq {}: an assistant turn while {open:?} have no result",
                    t.seq
                );
                for call in &t.tool_calls {
                    assert!(
                        every_call.insert(call.id.clone()),
                        "{id}: call id {} requested twice",
                        call.id
                    );
                    open.push(call.id.clone());
                }
            }
            pb::TurnRole::Tool => {
                assert!(
                    answered.insert(t.tool_call_id.clone()),
                    "{id}: seq {}: a second result for {}",
                    t.seq,
                    t.tool_call_id
                );
                let at = open
                    .iter()
                    .position(|c| *c == t.tool_call_id)
                    .unwrap_or_else(|| {
                        panic!(
                            "{id}: seq {}: result for {} answers no open call ({open:?})",
                            t.seq, t.tool_call_id
                        )
                    });
                open.remove(at);
            }
            pb::TurnRole::Notice => {
                assert!(
                    !t.content.contains("{\"recovery_plan\":"),
                    "{id}: seq {}: a notice's text holds its plan as JSON",
                    t.seq
                );
                if let Some(plan) = &t.recovery_plan {
                    for call in &plan.repaired_call_ids {
                        if let Some(at) = open.iter().position(|c| c == call) {
                            open.remove(at);
                            repaired += 1;
                        }
                    }
                }
            }
            pb::TurnRole::User => assert_eq!(t.seq, 1, "{id}: a second user turn"),
            pb::TurnRole::Compaction => {
                assert!(
                    open.is_empty(),
                    "{id}: a compaction while {open:?} are open"
                )
            }
            pb::TurnRole::Unspecified => panic!("{id}: a turn without a role: {t:?}"),
        }
    }
    assert!(
        open.is_empty(),
        "{id}: calls left without a result: {open:?}"
    );
    repaired
}

/// A client on any replica still running.
async fn any_client(fleet: &Fleet) -> Client {
    fleet
        .servers
        .first()
        .expect("no replica running")
        .client()
        .await
}

/// Twenty sessions run (each several seconds of a stateless scripted model
/// calling a slow read-only MCP tool) while all three replicas are
/// restarted one by one: each is stopped with SIGTERM (it hands its
/// bursts over and exits 0) and replaced by a new replica before the next
/// goes. Every session completes, with a report, a gapless transcript and
/// no tool call left without exactly one result; some were handed over.
#[tokio::test]
async fn a_rolling_restart_hands_running_sessions_over_and_completes_them_all() {
    const SESSIONS: usize = 20;
    const STEPS: usize = 10;
    const FINAL: &str = "The checkout pool is exhausted.";
    let python = python();
    let scripts = tempfile::Builder::new()
        .prefix("inquest-rolling-")
        .tempdir_in("/tmp")
        .unwrap();
    let replies: Vec<serde_json::Value> = (1..=STEPS)
        .map(|i| {
            serde_json::json!({
                "text": format!("Reading the status, step {i}."),
                "tool_calls": [{"name": "slow_read", "arguments": {"service": "checkout", "seconds": 1.0}}],
            })
        })
        .collect();
    let script = scripts.path().join("script.json");
    std::fs::write(
        &script,
        serde_json::json!({"replies": replies, "final": FINAL}).to_string(),
    )
    .unwrap();
    let providers = format!(
        "[[providers]]\nkind = \"script\"\nname = \"script\"\nscript = \"{}\"\n",
        script.display()
    );
    let config = ReplicaConfig::new(&providers, Some(&python));
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    let mut fleet = Fleet::new();
    let first = ["replica-a", "replica-b", "replica-c"];
    fleet.start(&first, &config, &url).await;

    let mut clients = Vec::new();
    for name in first {
        clients.push(fleet.client(name).await);
    }
    let incident = create_incident(&mut clients[0], "checkout latency").await;
    let mut ids = Vec::new();
    for i in 0..SESSIONS {
        let session = start_session(
            &mut clients[i % first.len()],
            &incident.id,
            &format!("why is checkout slow? ({i})"),
        )
        .await
        .unwrap();
        ids.push(session.id);
    }
    drop(clients);

    for (old, new) in [
        ("replica-a", "replica-a2"),
        ("replica-b", "replica-b2"),
        ("replica-c", "replica-c2"),
    ] {
        // Each replica goes while it runs bursts (the sessions outlast the
        // restarts), so each hands some over; the first surely does.
        let mut c = any_client(&fleet).await;
        let deadline = tokio::time::Instant::now() + GUARD;
        let held = loop {
            let mut held = 0;
            let mut running = 0;
            for id in &ids {
                let s = get_session(&mut c, id).await;
                if matches!(
                    s.status(),
                    pb::SessionStatus::Pending | pb::SessionStatus::Running
                ) {
                    running += 1;
                    if s.lease_owner == old {
                        held += 1;
                    }
                }
            }
            if held > 0 || (running == 0 && old != "replica-a") {
                break held;
            }
            assert!(tokio::time::Instant::now() < deadline, "{old} runs nothing");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        eprintln!("stopping {old}, which holds {held} running session(s)");
        fleet.stop(old).await;
        fleet.start(&[new], &config, &url).await;
    }

    let mut c = any_client(&fleet).await;
    let mut handed_over = 0;
    let mut handed_over_again = 0;
    let mut repaired = 0;
    for id in &ids {
        let s = settled(&mut c, id).await;
        assert_eq!(s.status(), pb::SessionStatus::Completed, "{s:?}");
        assert_eq!(s.exit_reason, "completed", "{s:?}");
        let report = c
            .get_report(pb::GetReportRequest {
                session_id: id.clone(),
                burst: 0,
            })
            .await
            .unwrap_or_else(|e| panic!("{id}: no report: {e:?}"))
            .into_inner();
        assert_eq!(report.exit_reason, "completed", "{report:?}");
        // A handed-over burst is still the session's one burst.
        assert_eq!(report.burst, 1, "{report:?}");
        assert!(!report.summary.is_empty(), "{report:?}");
        let same = c
            .get_report(pb::GetReportRequest {
                session_id: id.clone(),
                burst: report.burst,
            })
            .await
            .unwrap_or_else(|e| panic!("{id}: no report for burst {}: {e:?}", report.burst))
            .into_inner();
        assert_eq!(same, report);

        let turns = all_turns(&mut c, id).await;
        assert_eq!(i64::try_from(turns.len()).unwrap(), s.head_seq, "{s:?}");
        repaired += check_transcript(id, &turns);
        // The stateless script went through each step once: no assistant
        // turn was written twice by two workers.
        let assistant: Vec<&pb::SessionTurn> = turns
            .iter()
            .filter(|t| t.role() == pb::TurnRole::Assistant)
            .collect();
        assert_eq!(assistant.len(), STEPS + 1, "{id}: {turns:#?}");
        assert_eq!(assistant.last().unwrap().content, FINAL, "{id}");
        assert!(assistant[..STEPS].iter().all(|t| t.tool_calls.len() == 1));
        let noticed = turns
            .iter()
            .any(|t| t.role() == pb::TurnRole::Notice && t.content.starts_with("Recovery:"));
        if noticed || s.lease_epoch >= 2 {
            handed_over += 1;
        }
        if s.lease_epoch >= 3 {
            handed_over_again += 1;
        }
    }
    eprintln!(
        "{handed_over} of {SESSIONS} sessions were handed over ({handed_over_again} more than \
         once); {repaired} cut-off call(s) repaired by a notice"
    );
    assert!(
        handed_over >= 1,
        "no session was handed over: the test proved nothing"
    );
    fleet.stop_all().await;
}
